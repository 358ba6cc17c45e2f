#include "certify/metrics.h"

#include <chrono>
#include <set>
#include <string>

#include "core/time.h"

namespace gpufleet::certify {

namespace m = core::metrics;

CertifyMetrics::CertifyMetrics(m::Registry& r)
    : started_(r.counter("gpufleet_certify_runs_started_total",
                         "Certify runs accepted (their nodes selected), by kind", {"kind"})),
      ended_(r.counter("gpufleet_certify_runs_total",
                       "Certify runs ended, by kind and phase (Passed, Failed)",
                       {"kind", "phase"})),
      // 30 s to 17 h: a single-node check to a fleet-wide run with diagnose rounds.
      run_duration_(r.histogram("gpufleet_certify_run_duration_seconds",
                                "Certify runs from creation to end, by kind and phase",
                                m::exponential_buckets(30, 2, 12), {"kind", "phase"})),
      verdicts_(r.counter("gpufleet_certify_test_verdicts_total",
                          "Node verdicts of ended categories, by category and verdict (Passed "
                          "or the failure's reason)",
                          {"category", "verdict"})),
      // 10 s to 5.7 h.
      test_duration_(r.histogram("gpufleet_certify_test_duration_seconds",
                                 "Certify categories from start to end, by category and phase",
                                 m::exponential_buckets(10, 2, 12), {"category", "phase"})),
      rounds_(r.counter("gpufleet_certify_isolation_rounds_total",
                        "Diagnose (isolation) rounds planned, by category", {"category"})) {}

void CertifyMetrics::run_started(std::string_view kind) { started_.with({kind}).inc(); }

void CertifyMetrics::run_ended(std::string_view kind, std::string_view phase, double seconds) {
  ended_.with({kind, phase}).inc();
  if (seconds >= 0) run_duration_.with({kind, phase}).observe(seconds);
}

void CertifyMetrics::category_ended(const CategoryState& st) {
  // The tested nodes: every group member (padding is a tested node too) and every failed one
  // (a node failed at the start never joined a group).
  std::set<std::string_view> tested;
  for (const GroupState& g : st.groups)
    for (const std::string& n : g.nodes) tested.insert(n);
  std::set<std::string_view> failed;
  for (const NodeFailure& f : st.failed) {
    tested.insert(f.node);
    if (failed.insert(f.node).second) verdicts_.with({st.name, f.reason}).inc();
  }
  const double passed = static_cast<double>(tested.size() - failed.size());
  if (passed > 0) verdicts_.with({st.name, "Passed"}).inc(passed);
  const auto from = core::Timestamp::try_parse_rfc3339(st.start_time);
  const auto to = core::Timestamp::try_parse_rfc3339(st.completion_time);
  if (from && to) {
    if (auto d = to->try_since(*from); d && d->count() >= 0)
      test_duration_.with({st.name, st.phase}).observe(std::chrono::duration<double>(*d).count());
  }
}

void CertifyMetrics::isolation_rounds(std::string_view category, int rounds) {
  if (rounds > 0) rounds_.with({category}).inc(rounds);
}

}  // namespace gpufleet::certify
