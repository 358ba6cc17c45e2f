// Training metrics lines of a synthetic NeMo/Megatron-style run over a group of simulated
// nodes: what the certify categories training/llm-8b and llm-56b read.
//
// Model: a step does 6 x parameters x tokens FLOPs; each GPU reaches its family's dense BF16
// peak times a model FLOPs utilisation (45 % for 8B, 40 % for 56B), slowed by the worst
// member's compute factor (thermal slowdown) and, for the share of the step spent in
// gradient all-reduce, by the group's bus bandwidth relative to a healthy group (the
// bandwidth model). The first interval is slower (compilation, data loader start-up);
// intervals jitter by +-1 %. A broken member makes the run die with an NCCL error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/bandwidth_model.h"

namespace gpufleet::sim {

struct TrainingRunConfig {
  std::string model = "llm-8b";  // llm-8b or llm-56b
  int iterations = 50;
  int log_interval = 10;
  std::uint64_t seed = 1;
};

struct TrainingRunResult {
  std::string output;
  int exit_code = 0;
  double seconds = 0;
  double tflops_per_gpu = 0;  // the model's figure before jitter (for tests)
  double step_time_sec = 0;
};

// Throws core::InvalidInput on an unknown model, iterations or interval < 1, or an empty group.
TrainingRunResult run_training(const std::vector<GroupMember>& members,
                               const TrainingRunConfig& config);

}  // namespace gpufleet::sim
