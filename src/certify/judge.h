// Turning one workload's output into a verdict: parse it, check what signals a hardware
// fault, measure the metrics, and hold them against the thresholds.
//
// Precedence when several apply: HardwareFailure (a DCGM Fail, #wrong > 0) over
// WorkloadFailed (crash, failure lines, unreadable output, incomplete run, non-zero exit)
// over MeasurementTimeout (a thresholded metric never arrived) over ThresholdViolated (a
// wrong NCCL transport before a missed threshold: it says why the bandwidth is low).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certify/nccl_parser.h"
#include "certify/thresholds.h"
#include "certify/verdict.h"

namespace gpufleet::certify {

enum class OutputKind {
  Nccl,      // nccl-tests text or -J JSON
  Dcgm,      // dcgmi diag -j
  Training,  // Megatron-style iteration lines
  Result,    // the WorkloadRun result contract (JSON metrics)
};
std::string_view output_kind_name(OutputKind k) noexcept;

struct JudgeOptions {
  NcclStatistic statistic = NcclStatistic::LargestSize;
  // nccl: what a run across nodes must have used between them (nccl_transport.h); a run
  // over another one fails with ThresholdViolated naming the hosts, what they used, the
  // bandwidth and the fix. Unknown (no NCCL_DEBUG=INFO lines) is not a failure.
  TransportExpectation transport = TransportExpectation::Rdma;
  std::map<std::string, std::string> host_nodes;  // a pod's hostname -> its node, for messages
  std::size_t training_warmup_intervals = 1;
};

struct Judgement {
  bool passed = false;
  std::optional<Reason> reason;  // set when !passed
  std::string message;
  std::map<std::string, double> metrics;
  std::vector<ThresholdOutcome> thresholds;
  std::vector<int> failed_gpus;  // DCGM: GPU ids with a failed result
  // nccl: per host, what NCCL used between nodes (empty: the output had no INFO lines).
  std::vector<NcclHostTransport> transports;
};

// `exit_code`: the container's; 0 when unknown. Never throws on bad output: that is a
// WorkloadFailed judgement quoting the line that broke.
Judgement judge_output(OutputKind kind, std::string_view output, int exit_code,
                       const ThresholdSet& thresholds, const ThresholdContext& context,
                       const JudgeOptions& options = {});

// A measurement that never came (the workload timed out before reporting): every threshold
// fails with MeasurementTimeout.
Judgement judge_timeout(const ThresholdSet& thresholds, std::string_view what);

// The WorkloadRun result contract, read from the termination message or the result file:
//   {"metrics": {"<known metric>": <number>, ...},
//    "status": "Succeeded" | "Failed",          (optional, default Succeeded)
//    "message": "<text>"}                        (optional)
// Unknown keys and unknown metric names are errors (OutputError naming them).
struct WorkloadResult {
  std::map<std::string, double> metrics;
  bool succeeded = true;
  std::string message;
};
WorkloadResult parse_workload_result(std::string_view text);

}  // namespace gpufleet::certify
