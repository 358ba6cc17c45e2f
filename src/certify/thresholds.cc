#include "certify/thresholds.h"

#include <algorithm>
#include <cstdio>

#include "cel/cost.h"

namespace gpufleet::certify {
namespace {

constexpr std::uint64_t kThresholdCostLimit = 10000;

const cel::Env& threshold_env() {
  static const cel::Env env = [] {
    cel::Env e;
    e.variable("value", "double");
    e.variable("groupSize", "int");
    e.variable("gpuProduct", "string");
    // A threshold is a comparison or a few: a small budget keeps a bad one cheap.
    e.cost_limit(kThresholdCostLimit);
    return e;
  }();
  return env;
}

// gpuProduct is the node label nvidia.com/gpu.product: a label value, at most 63 bytes.
const cel::Sizes& threshold_sizes() {
  static const cel::Sizes sizes = cel::Sizes()
                                      .variable("gpuProduct", cel::Shape::string(63))
                                      .variable("value", cel::Shape::scalar())
                                      .variable("groupSize", cel::Shape::scalar());
  return sizes;
}

std::string format_value(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

const std::vector<MetricInfo>& known_metrics() {
  static const std::vector<MetricInfo> metrics = {
      {"algBandwidthGBps", "GB/s", "nccl-tests algbw (statistic per the category)"},
      {"avgStepTimeSec", "s", "training: mean step time after the first interval"},
      {"avgTFLOPsPerGPU", "TFLOP/s", "training: mean throughput per GPU after the first interval"},
      {"busBandwidthGBps", "GB/s", "nccl-tests busbw (statistic per the category)"},
      {"dcgmFailedResults", "count", "DCGM diagnostic: per-GPU results with status Fail"},
      {"dcgmWarnResults", "count", "DCGM diagnostic: per-GPU results with status Warn"},
      {"goodputRatio", "ratio", "training: iterations that updated the model / iterations run"},
      {"ncclWrongElements", "count", "nccl-tests #wrong summed over rows and placements"},
  };
  return metrics;
}

bool is_known_metric(std::string_view name) noexcept {
  const auto& m = known_metrics();
  return std::any_of(m.begin(), m.end(), [&](const MetricInfo& i) { return i.name == name; });
}

ThresholdSet ThresholdSet::compile(const std::map<std::string, std::string>& thresholds) {
  ThresholdSet set;
  for (const auto& [metric, expression] : thresholds) {
    if (!is_known_metric(metric)) {
      std::string known;
      for (const MetricInfo& m : known_metrics())
        known += (known.empty() ? "" : ", ") + std::string(m.name);
      throw core::InvalidInput("threshold metric \"" + metric +
                               "\" is not a known metric (use one of " + known + ")");
    }
    if (expression.size() > 1024) {
      throw core::InvalidInput("threshold " + metric + ": expression of " +
                               std::to_string(expression.size()) + " bytes exceeds 1024");
    }
    cel::Program program;
    try {
      program = cel::compile(expression, threshold_env());
    } catch (const cel::CompileError& e) {
      throw core::InvalidInput("threshold " + metric + ": expression \"" + expression +
                               "\" does not compile: " + e.what());
    }
    const cel::CostEstimate cost = cel::estimate_cost(program, threshold_sizes());
    if (cost.max > kThresholdCostLimit) {
      const std::string where = cost.describe_costliest();
      throw core::InvalidInput("threshold " + metric + ": expression \"" + expression +
                               "\" may cost up to " + std::to_string(cost.max) +
                               " units, over the limit of " + std::to_string(kThresholdCostLimit) +
                               (where.empty() ? "" : " (" + where + ")") +
                               "; a threshold compares the measured value: write a comparison "
                               "such as value >= 350, without iterating over lists");
    }
    std::string type = program.result_type();
    if (type != "bool" && type != "dyn") {
      throw core::InvalidInput("threshold " + metric + ": expression \"" + expression + "\" is a " +
                               type + ", not a bool (write a comparison such as value >= 350)");
    }
    set.entries_.push_back({metric, std::move(program)});
  }
  return set;
}

std::vector<ThresholdOutcome> ThresholdSet::evaluate(const std::map<std::string, double>& measured,
                                                     const ThresholdContext& context) const {
  std::vector<ThresholdOutcome> out;
  const core::Value group_size = static_cast<std::int64_t>(context.group_size);
  const core::Value gpu_product = context.gpu_product;
  for (const Entry& e : entries_) {
    ThresholdOutcome o;
    o.metric = e.metric;
    o.expression = e.program.source();
    auto it = measured.find(e.metric);
    if (it == measured.end()) {
      o.message = e.metric + " was never measured";
      out.push_back(std::move(o));
      continue;
    }
    o.value = it->second;
    const core::Value value = it->second;
    try {
      o.passed = e.program.evaluate_bool(cel::Activation()
                                             .bind("value", value)
                                             .bind("groupSize", group_size)
                                             .bind("gpuProduct", gpu_product));
      o.message = e.metric + " = " + format_value(it->second) +
                  (o.passed ? " meets " : " violates ") + o.expression;
    } catch (const cel::EvalError& err) {
      o.passed = false;
      o.message = e.metric + " = " + format_value(it->second) + ": " + o.expression +
                  " could not be evaluated: " + err.what();
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace gpufleet::certify
