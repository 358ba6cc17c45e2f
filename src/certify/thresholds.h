// Thresholds: one CEL expression per metric, compiled once when a Certification or
// WorkloadRun is admitted and evaluated per measurement. An expression sees
//   value       double  the measured metric
//   groupSize   int     nodes in the tested group (bandwidth legitimately depends on it)
//   gpuProduct  string  the GPU product label, e.g. "NVIDIA-H100-80GB-HBM3"
// and must be a bool: `value >= 350`, `value >= 300 && value <= 500`,
// `value >= (groupSize > 8 ? 340.0 : 360.0)`, `gpuProduct.startsWith('NVIDIA-H200') ? value >= 400
// : value >= 350`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cel/cel.h"

namespace gpufleet::certify {

struct MetricInfo {
  std::string_view name;
  std::string_view unit;
  std::string_view source;  // which workload output produces it
};
// Every metric a threshold may name.
const std::vector<MetricInfo>& known_metrics();
bool is_known_metric(std::string_view name) noexcept;

struct ThresholdContext {
  std::int64_t group_size = 1;
  std::string gpu_product;
};

struct ThresholdOutcome {
  std::string metric;
  std::string expression;
  std::optional<double> value;  // absent: the measurement never arrived
  bool passed = false;
  std::string message;
};

class ThresholdSet {
 public:
  ThresholdSet() = default;
  // `thresholds`: metric name -> expression. Throws core::InvalidInput naming the metric for
  // an unknown metric (listing the known ones), an expression that does not compile (with
  // the compiler's message) or one that is not a bool.
  static ThresholdSet compile(const std::map<std::string, std::string>& thresholds);

  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  // One outcome per threshold, in metric-name order. A metric absent from `measured` fails
  // (the caller reports MeasurementTimeout); an evaluation error fails with its message.
  [[nodiscard]] std::vector<ThresholdOutcome> evaluate(
      const std::map<std::string, double>& measured, const ThresholdContext& context) const;

 private:
  struct Entry {
    std::string metric;
    cel::Program program;
  };
  std::vector<Entry> entries_;
};

}  // namespace gpufleet::certify
