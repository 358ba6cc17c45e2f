// The certify controller's metrics (gpufleet_certify_*), on the Manager's /metrics:
//
//   gpufleet_certify_runs_started_total{kind}           runs accepted (nodes selected)
//   gpufleet_certify_runs_total{kind,phase}             runs ended, Passed or Failed
//   gpufleet_certify_run_duration_seconds{kind,phase}   creation to end (histogram)
//   gpufleet_certify_test_verdicts_total{category,verdict}
//                                                       node verdicts when a category ends:
//                                                       Passed, or the failure's Reason
//   gpufleet_certify_test_duration_seconds{category,phase}
//                                                       a category's start to end (histogram)
//   gpufleet_certify_isolation_rounds_total{category}   diagnose rounds planned
//
// Every label is bounded: kind is Certification or WorkloadRun, phase Passed or Failed,
// category a catalog id (or "workload"), verdict Passed or a certify Reason. No node or run
// names: a fleet has thousands of nodes and runs accumulate without end, so they would grow
// the series without bound; which nodes failed is in each run's status and Events.
//
// Counted at the transition, after the status write that makes it (a write that fails is
// retried and counted then); a controller killed between the two misses that one count.
// Thread-safe (the metrics are atomic; any number of workers may call).
#pragma once

#include <string_view>

#include "certify/run_state.h"
#include "core/metrics.h"

namespace gpufleet::certify {

class CertifyMetrics {
 public:
  explicit CertifyMetrics(core::metrics::Registry& registry);

  void run_started(std::string_view kind);
  // `seconds`: from the run's creation; negative when unknown (not observed).
  void run_ended(std::string_view kind, std::string_view phase, double seconds);
  // A category that just ended (st.done()): one verdict per node it tested, and its duration
  // from st.start_time to st.completion_time when both are readable.
  void category_ended(const CategoryState& st);
  void isolation_rounds(std::string_view category, int rounds);

 private:
  core::metrics::Counter& started_;
  core::metrics::Counter& ended_;
  core::metrics::Histogram& run_duration_;
  core::metrics::Counter& verdicts_;
  core::metrics::Histogram& test_duration_;
  core::metrics::Counter& rounds_;
};

}  // namespace gpufleet::certify
