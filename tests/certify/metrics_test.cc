// gpufleet_certify_*: the series each transition adds, node verdicts from an ended category's
// state, durations from its stored times, and label values that stay bounded.
#include "certify/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace gpufleet::certify {
namespace {

bool has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(CertifyMetrics, RunsByKindAndPhaseWithDurations) {
  core::metrics::Registry r;
  CertifyMetrics m(r);
  m.run_started("Certification");
  m.run_started("Certification");
  m.run_ended("Certification", "Passed", 90);
  m.run_ended("Certification", "Failed", -1);  // creation unknown: counted, not timed
  m.run_ended("WorkloadRun", "Failed", 20);
  const std::string t = r.render();
  EXPECT_TRUE(has(t, "gpufleet_certify_runs_started_total{kind=\"Certification\"} 2")) << t;
  EXPECT_TRUE(has(t, "gpufleet_certify_runs_total{kind=\"Certification\",phase=\"Passed\"} 1"));
  EXPECT_TRUE(has(t, "gpufleet_certify_runs_total{kind=\"Certification\",phase=\"Failed\"} 1"));
  EXPECT_TRUE(has(t, "gpufleet_certify_runs_total{kind=\"WorkloadRun\",phase=\"Failed\"} 1"));
  EXPECT_TRUE(has(t,
                  "gpufleet_certify_run_duration_seconds_bucket{kind=\"Certification\","
                  "phase=\"Passed\",le=\"60\"} 0"));
  EXPECT_TRUE(has(t,
                  "gpufleet_certify_run_duration_seconds_bucket{kind=\"Certification\","
                  "phase=\"Passed\",le=\"120\"} 1"));
  EXPECT_TRUE(has(t,
                  "gpufleet_certify_run_duration_seconds_count{kind=\"WorkloadRun\","
                  "phase=\"Failed\"} 1"));
  EXPECT_EQ(t.find("gpufleet_certify_run_duration_seconds_count{kind=\"Certification\","
                   "phase=\"Failed\"}"),
            std::string::npos)
      << "a run without a creation time was timed";
}

CategoryState ended_category() {
  CategoryState st;
  st.name = "nccl-allreduce";
  st.phase = "Failed";
  st.start_time = "2026-01-01T10:00:00Z";
  st.completion_time = "2026-01-01T10:05:00Z";
  GroupState a;
  a.nodes = {"n1", "n2"};
  GroupState b;
  b.nodes = {"n2", "n3", "n4"};  // n2 again: a padding member counts once
  st.groups = {a, b};
  st.failed = {{"n3", "ThresholdViolated", "busbw 80 < 100"},
               {"n5", "HardwareFailure", "failed at the start"}};
  return st;
}

TEST(CertifyMetrics, NodeVerdictsAndTestDurationOfAnEndedCategory) {
  core::metrics::Registry r;
  CertifyMetrics m(r);
  m.category_ended(ended_category());
  const std::string t = r.render();
  // n1 n2 n4 passed; n3 missed a threshold; n5 failed before any group.
  EXPECT_TRUE(has(t,
                  "gpufleet_certify_test_verdicts_total{category=\"nccl-allreduce\","
                  "verdict=\"Passed\"} 3"))
      << t;
  EXPECT_TRUE(has(t,
                  "gpufleet_certify_test_verdicts_total{category=\"nccl-allreduce\","
                  "verdict=\"ThresholdViolated\"} 1"));
  EXPECT_TRUE(has(t,
                  "gpufleet_certify_test_verdicts_total{category=\"nccl-allreduce\","
                  "verdict=\"HardwareFailure\"} 1"));
  EXPECT_TRUE(has(t,
                  "gpufleet_certify_test_duration_seconds_sum{category=\"nccl-allreduce\","
                  "phase=\"Failed\"} 300"));
  // No node name in any label.
  for (const char* node : {"\"n1\"", "\"n3\"", "\"n5\""})
    EXPECT_EQ(t.find(node), std::string::npos) << node << " in\n" << t;
}

TEST(CertifyMetrics, UnreadableTimesAreNotObservedAndRoundsAdd) {
  core::metrics::Registry r;
  CertifyMetrics m(r);
  CategoryState st = ended_category();
  st.completion_time = "";
  m.category_ended(st);
  m.isolation_rounds("nccl-allreduce", 1);
  m.isolation_rounds("nccl-allreduce", 2);
  m.isolation_rounds("nccl-allreduce", 0);
  const std::string t = r.render();
  EXPECT_EQ(t.find("gpufleet_certify_test_duration_seconds_count{"), std::string::npos) << t;
  EXPECT_TRUE(has(t, "gpufleet_certify_isolation_rounds_total{category=\"nccl-allreduce\"} 3"));
  // Every family is rendered (HELP and TYPE) before anything was counted in it.
  core::metrics::Registry fresh;
  CertifyMetrics none(fresh);
  const std::string f = fresh.render();
  for (const char* name :
       {"gpufleet_certify_runs_started_total counter", "gpufleet_certify_runs_total counter",
        "gpufleet_certify_run_duration_seconds histogram",
        "gpufleet_certify_test_verdicts_total counter",
        "gpufleet_certify_test_duration_seconds histogram",
        "gpufleet_certify_isolation_rounds_total counter"})
    EXPECT_NE(f.find(std::string("# TYPE ") + name + "\n"), std::string::npos) << name;
}

}  // namespace
}  // namespace gpufleet::certify
