// Training metrics: the per-interval log lines of Megatron-style trainers (NeMo, Megatron-LM,
// and the synthetic training/llm-* workloads of the catalog):
//   [2026-01-01 00:00:10] iteration       20/     100 | consumed samples: 2560 |
//   elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 412.3 |
//   ... | number of skipped iterations:   0 | number of nan iterations:   0 |
// Other lines are ignored, except those that show the trainer broke (a Python traceback, a
// CUDA or NCCL error): those make the output unreadable as a result (OutputError).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "certify/verdict.h"

namespace gpufleet::certify {

struct TrainingInterval {
  std::int64_t iteration = 0;
  std::int64_t total = 0;
  double step_time_sec = 0;
  std::optional<double> tflops_per_gpu;
  std::int64_t skipped = 0;
  std::int64_t nan = 0;
};

struct TrainingMetrics {
  std::vector<TrainingInterval> intervals;
  std::int64_t last_iteration = 0;
  std::int64_t total_iterations = 0;
  [[nodiscard]] bool completed() const noexcept {
    return total_iterations > 0 && last_iteration >= total_iterations;
  }
  // Means over intervals after the first `warmup` (all when there are no more); the first
  // interval carries compilation and data-loader start-up.
  [[nodiscard]] double avg_step_time_sec(std::size_t warmup = 1) const;
  [[nodiscard]] std::optional<double> avg_tflops_per_gpu(std::size_t warmup = 1) const;
  // Iterations that updated the model / iterations run: skipped and NaN steps did no work.
  [[nodiscard]] double goodput_ratio() const;
};

// Throws OutputError: an iteration line that does not read (the line), a failure line, no
// iteration line at all, or output over kMaxOutputBytes.
TrainingMetrics parse_training(std::string_view text);

}  // namespace gpufleet::certify
