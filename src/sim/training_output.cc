#include "sim/training_output.h"

#include <algorithm>
#include <cstdio>

#include "core/errors.h"
#include "sim/rng.h"

namespace gpufleet::sim {
namespace {

struct ModelDef {
  const char* name;
  double parameters;
  double mfu;                 // model FLOPs utilisation on a healthy group
  double comm_share;          // share of a step in gradient all-reduce
  std::int64_t global_batch;  // sequences
  std::int64_t sequence;      // tokens per sequence
};

constexpr ModelDef kModels[] = {
    {"llm-8b", 8e9, 0.45, 0.10, 128, 8192},
    {"llm-56b", 56e9, 0.40, 0.18, 256, 8192},
};

// Dense BF16 peak TFLOP/s per GPU by family (nvidia.com/gpu.family).
double peak_tflops(std::string_view family) {
  if (family == "blackwell") return 2250;
  if (family == "hopper") return 989;
  if (family == "ampere") return 312;
  return 500;
}

}  // namespace

TrainingRunResult run_training(const std::vector<GroupMember>& members,
                               const TrainingRunConfig& config) {
  const ModelDef* model = nullptr;
  for (const ModelDef& m : kModels) {
    if (config.model == m.name) model = &m;
  }
  if (model == nullptr) {
    throw core::InvalidInput("training model \"" + config.model +
                             "\" is not known (use llm-8b or llm-56b)");
  }
  if (config.iterations < 1 || config.log_interval < 1) {
    throw core::InvalidInput("training iterations and log interval must be at least 1");
  }
  if (members.empty()) throw core::InvalidInput("a training run needs at least one node");
  BandwidthEstimate est = estimate_allreduce(members);
  TrainingRunResult r;
  std::string& out = r.output;
  Rng rng(derive_seed(config.seed, "training/" + members.front().host));
  char line[640];
  std::snprintf(
      line, sizeof line,
      "[NeMo I] synthetic pretraining %s on %d ranks (%d nodes), global batch %lld x %lld tokens\n",
      model->name, est.ranks, est.nodes, static_cast<long long>(model->global_batch),
      static_cast<long long>(model->sequence));
  out += line;
  if (est.failed) {
    std::snprintf(line, sizeof line,
                  "[rank0]: torch.distributed.DistBackendError: NCCL error in: %s: %s\n",
                  est.failed_host.c_str(), est.failure.c_str());
    out += "Traceback (most recent call last):\n";
    out += "  File \"pretrain.py\", line 212, in train_step\n";
    out += line;
    r.exit_code = 1;
    r.seconds = 30;
    return r;
  }
  // Healthy reference: the same group with every member healthy.
  std::vector<GroupMember> healthy = members;
  for (GroupMember& m : healthy) m.health = LinkHealth{};
  double bw_ratio = std::min(1.0, est.peak_busbw_gbs / estimate_allreduce(healthy).peak_busbw_gbs);
  double compute = 1.0;
  for (const GroupMember& m : members) compute = std::min(compute, m.health.compute_factor);
  const double slowdown = (1.0 - model->comm_share) / compute + model->comm_share / bw_ratio;
  const double tflops = peak_tflops(members.front().pool->gpu->family) * model->mfu / slowdown;
  const double step_flops =
      6.0 * model->parameters * static_cast<double>(model->global_batch * model->sequence);
  const double step = step_flops / (tflops * 1e12 * est.ranks);
  r.tflops_per_gpu = tflops;
  r.step_time_sec = step;
  double clock = 20;  // start-up
  for (int it = std::min(config.log_interval, config.iterations); it <= config.iterations;
       it += config.log_interval) {
    double warm = it == config.log_interval ? 1.6 : 1.0;
    double s = step * warm * rng.between(0.99, 1.01);
    clock += s * config.log_interval;
    double loss = 10.5 * std::max(0.3, 1.0 - 0.004 * it) * rng.between(0.995, 1.005);
    int secs = static_cast<int>(clock);
    std::snprintf(
        line, sizeof line,
        " [2026-01-01 %02d:%02d:%02d] iteration %8d/%8d | consumed samples: %12lld | "
        "elapsed time per iteration (ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.1f | "
        "learning rate: %.6E | global batch size: %5lld | lm loss: %.6E | loss scale: 1.0 | "
        "grad norm: %.3f | number of skipped iterations: %3d | number of nan iterations: %3d |\n",
        (secs / 3600) % 24, (secs / 60) % 60, secs % 60, it, config.iterations,
        static_cast<long long>(it) * model->global_batch, s * 1000.0, tflops / warm,
        3e-4 * std::min(1.0, it / 100.0), static_cast<long long>(model->global_batch), loss,
        1.0 + rng.between(0.0, 0.5), 0, 0);
    out += line;
    if (it + config.log_interval > config.iterations && it != config.iterations) {
      // The last partial interval is still logged, as trainers log at the end.
      it = config.iterations - config.log_interval;
    }
  }
  out += "[NeMo I] training finished\n";
  r.seconds = clock;
  return r;
}

}  // namespace gpufleet::sim
