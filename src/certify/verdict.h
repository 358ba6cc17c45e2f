// What a certification step concludes about a node or a group, and the error a parser
// raises on output it cannot read.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/errors.h"

namespace gpufleet::certify {

// Why a node or group did not pass. Distinct on purpose: a workload that ran and missed a
// threshold (ThresholdViolated) is not a workload that broke (WorkloadFailed) nor a part
// that reported a fault (HardwareFailure).
enum class Reason {
  HardwareFailure,     // a diagnostic failed, data came back corrupted (#wrong > 0)
  ThresholdViolated,   // measured, and the measurement missed a threshold
  WorkloadFailed,      // the workload crashed, or its output could not be read
  MeasurementTimeout,  // a threshold's measurement never arrived
  Infrastructure,      // the fault lies between nodes (a link or switch), not in one
};
std::string_view reason_name(Reason r) noexcept;
std::optional<Reason> reason_from_name(std::string_view name) noexcept;

// Retries (the template's `retries`, 0..5): WorkloadFailed, MeasurementTimeout and
// Infrastructure say the run did not produce a trustworthy measurement (a crashed or evicted
// pod, a slow pull that ate the deadline, a flaky path), so the group is run again.
// ThresholdViolated and HardwareFailure are evidence about the hardware: re-running until a
// marginal node happens to pass would launder it, so they are never retried.
[[nodiscard]] bool retryable(std::string_view reason) noexcept;
// Whether attempt `attempt` (1-based) that failed with `reason` is followed by another one.
[[nodiscard]] bool should_retry(std::string_view reason, int attempt, int retries) noexcept;

// Output of a workload that cannot be read: names the 1-based line and quotes it (cut to
// 200 bytes), so that the verdict shows what broke. A WorkloadFailed verdict carries it.
class OutputError : public core::InvalidInput {
 public:
  OutputError(std::string_view format, std::size_t line_number, std::string_view line,
              const std::string& reason);
  std::size_t line_number() const noexcept { return line_number_; }
  const std::string& line() const noexcept { return line_; }

 private:
  std::size_t line_number_;
  std::string line_;
};

// Workload output larger than this is refused (a result that size is a runaway log, and
// parsing it unbounded would let one pod exhaust the controller's memory).
inline constexpr std::size_t kMaxOutputBytes = 16u << 20;

// The OutputError for a JSON syntax error in `text`: the line the parser names, or the last
// line when it names none (a truncated document breaks at its end). `line_offset` counts
// lines skipped before `text`.
OutputError json_output_error(std::string_view format, std::string_view text,
                              const core::ParseError& e, std::size_t line_offset = 0);

// Throws OutputError when `text` exceeds kMaxOutputBytes.
void check_output_size(std::string_view format, std::string_view text);

}  // namespace gpufleet::certify
