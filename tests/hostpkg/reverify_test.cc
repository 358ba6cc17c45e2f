// Re-verification (spec.reverify): the spec block, the due time and its per-node jitter, the
// record transitions (drift set, kept, cleared; Reapply back through the stage planner and the
// rollout planner), and the step runner's verify mode.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/errors.h"
#include "core/json.h"
#include "hostpkg/node_record.h"
#include "hostpkg/reverify.h"
#include "hostpkg/rollout.h"
#include "hostpkg/stage_plan.h"
#include "test_util.h"

namespace gpufleet::hostpkg {
namespace {

using testing::set_from_yaml;
using namespace std::chrono_literals;

const char* kPackages =
    "  packages:\n"
    "    sysctl:\n"
    "      version: 1.0.0\n"
    "      image: r/sysctl\n"
    "      configMap: {a.conf: \"x = 1\\n\"}\n"
    "      configInterrupts: {\"*.conf\": {type: restartServices, services: [s.service]}}\n"
    "    agent:\n"
    "      version: 2.0.0\n"
    "      image: r/agent\n";

std::string error_of(const std::string& yaml) {
  try {
    set_from_yaml(yaml + kPackages);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(Reverify, SpecDefaultsOffAndParses) {
  HostPackageSet off = set_from_yaml(kPackages);
  EXPECT_FALSE(off.reverify.enabled());
  EXPECT_EQ(off.reverify.on_drift, DriftAction::Report);

  HostPackageSet s =
      set_from_yaml("  reverify: {interval: 6h, onDrift: Reapply}\n" + std::string(kPackages));
  EXPECT_TRUE(s.reverify.enabled());
  EXPECT_EQ(s.reverify.interval, 6h);
  EXPECT_EQ(s.reverify.on_drift, DriftAction::Reapply);

  HostPackageSet report = set_from_yaml("  reverify: {interval: 90m}\n" + std::string(kPackages));
  EXPECT_EQ(report.reverify.interval, 90min);
  EXPECT_EQ(report.reverify.on_drift, DriftAction::Report);

  HostPackageSet zero = set_from_yaml("  reverify: {interval: \"0\"}\n" + std::string(kPackages));
  EXPECT_FALSE(zero.reverify.enabled());
}

TEST(Reverify, SpecErrorsNameFieldValueAndFix) {
  std::string e = error_of("  reverify: {interval: 30s}\n");
  EXPECT_NE(e.find("spec.reverify.interval: \"30s\" is outside 1m0s"), std::string::npos) << e;
  EXPECT_NE(e.find("0 turns it off"), std::string::npos) << e;
  e = error_of("  reverify: {interval: 1000h}\n");
  EXPECT_NE(e.find("spec.reverify.interval: \"1000h\" is outside"), std::string::npos) << e;
  e = error_of("  reverify: {interval: soon}\n");
  EXPECT_NE(e.find("spec.reverify.interval: \"soon\" is not a duration"), std::string::npos) << e;
  e = error_of("  reverify: {interval: 1h, onDrift: Fix}\n");
  EXPECT_NE(e.find("spec.reverify.onDrift: \"Fix\" is not a drift action; use Report"),
            std::string::npos)
      << e;
  e = error_of("  reverify: {interval: 1h, every: 2h}\n");
  EXPECT_NE(e.find("spec.reverify"), std::string::npos) << e;
  EXPECT_NE(e.find("every"), std::string::npos) << e;
  e = error_of("  reverify: 6h\n");
  EXPECT_NE(e.find("spec.reverify"), std::string::npos) << e;
}

TEST(Reverify, JitterIsDeterministicBoundedAndSpread) {
  const auto interval = std::chrono::seconds(6 * 3600);
  std::set<std::int64_t> distinct;
  std::map<std::int64_t, int> buckets;  // tenths of the jitter span
  for (int i = 0; i < 5000; ++i) {
    std::string node = "gpu-" + std::to_string(i);
    std::int64_t j = reverify_jitter("gpu-sysctl", node, interval);
    EXPECT_EQ(j, reverify_jitter("gpu-sysctl", node, interval)) << "not deterministic";
    ASSERT_GE(j, 0);
    ASSERT_LE(j, interval.count() / 10);
    distinct.insert(j);
    ++buckets[j * 10 / (interval.count() / 10 + 1)];
  }
  // 5,000 nodes that finished together are spread over the 36 minutes, not on one second.
  EXPECT_GT(distinct.size(), 1500u);  // of 2,161 possible seconds
  ASSERT_EQ(buckets.size(), 10u);
  for (const auto& [b, n] : buckets) EXPECT_GT(n, 350) << "bucket " << b;
  // Another set spreads differently (its checks do not line up with this one's).
  int same = 0;
  for (int i = 0; i < 100; ++i) {
    std::string node = "gpu-" + std::to_string(i);
    same += reverify_jitter("a", node, interval) == reverify_jitter("b", node, interval);
  }
  EXPECT_LT(same, 10);
  EXPECT_EQ(reverify_jitter("s", "n", std::chrono::seconds(5)), 0) << "no span below 10s";
}

TEST(Reverify, DueTimeFollowsTheRecord) {
  const auto interval = std::chrono::seconds(3600);
  NodeRecord r;
  r.set = "s";
  EXPECT_EQ(reverify_due(r, "s", "n", interval), 0) << "never verified: due at once";
  r.verified = 1'000'000;
  std::int64_t due = reverify_due(r, "s", "n", interval);
  EXPECT_EQ(due, 1'000'000 + 3600 + reverify_jitter("s", "n", interval));
  EXPECT_LE(due, 1'000'000 + 3600 + 360);
  // A restarted controller computes the same from the same record.
  NodeRecord copy = record_from_value(record_to_value(r)).record.value();
  EXPECT_EQ(reverify_due(copy, "s", "n", interval), due);
}

TEST(Reverify, EligibleOnlyWhenDoneAtTargetWithNothingToReapply) {
  HostPackageSet set = set_from_yaml(kPackages);
  DesiredState d = digest(set);
  NodeRecord r;
  r.state = NodeState::Done;
  r.rollout = d.target;
  EXPECT_TRUE(reverify_eligible(r, d));
  r.rollout = "older";
  EXPECT_FALSE(reverify_eligible(r, d)) << "a node that still has a change to make";
  r.rollout = d.target;
  r.state = NodeState::InProgress;
  EXPECT_FALSE(reverify_eligible(r, d)) << "a change verifies itself";
  r.state = NodeState::Failed;
  EXPECT_FALSE(reverify_eligible(r, d));
  r.state = NodeState::Done;
  r.reapply = {"agent"};
  EXPECT_FALSE(reverify_eligible(r, d));
}

TEST(Reverify, VerifyStagesAndKeys) {
  HostPackageSet set = set_from_yaml(kPackages);
  DesiredState d = digest(set);
  const Package& sysctl = *set.find("sysctl");
  const Package& agent = *set.find("agent");
  EXPECT_EQ(verify_stages(sysctl),
            (std::vector<Stage>{Stage::Apply, Stage::Config, Stage::PostInterrupt}));
  EXPECT_EQ(verify_stages(agent), (std::vector<Stage>{Stage::Apply}));
  std::string k = verify_key(agent, d, 42);
  EXPECT_TRUE(k.starts_with("agent/verify/2.0.0/")) << k;
  EXPECT_TRUE(k.ends_with("/r42")) << k;
  EXPECT_NE(verify_key(agent, d, 43), k) << "each round is a new key";
}

NodeRecord done_record(const DesiredState& d) {
  NodeRecord r;
  r.set = "test";
  for (const Package& p : d.set->packages) {
    PlannedStep s;
    s.package = p.name;
    s.stage = Stage::Apply;
    s.version = p.version_text;
    s.image = p.image;
    record_step_done(r, d, s);
  }
  for (std::size_t i = 0; i < d.set->packages.size(); ++i)
    r.installed[d.set->packages[i].name].config_hashes = d.config_hashes[i];
  r.pending_interrupt = {};
  r.pending_post.clear();
  mark_node_done(r, d);
  r.verified = 1000;
  return r;
}

TEST(Reverify, RecordTransitionsReportKeepSinceAndClear) {
  HostPackageSet set = set_from_yaml(kPackages);
  DesiredState d = digest(set);
  NodeRecord r = done_record(d);
  ASSERT_EQ(plan_node(d, r).steps.size(), 0u);

  record_verification(r, 2000, {false, "sysctl", "vm.max_map_count is 65530"}, DriftAction::Report);
  EXPECT_EQ(r.verified, 2000);
  ASSERT_TRUE(r.drift);
  EXPECT_EQ(r.drift->package, "sysctl");
  EXPECT_EQ(r.drift->since, 2000);
  EXPECT_TRUE(r.reapply.empty()) << "Report only reports";
  EXPECT_TRUE(reverify_eligible(r, d)) << "a reported node keeps being verified";
  EXPECT_TRUE(plan_node(d, r).steps.empty()) << "Report changes nothing on the node";

  // Still failing: the drift keeps its start; the record round-trips with it.
  record_verification(r, 3000, {false, "sysctl", "still 65530"}, DriftAction::Report);
  EXPECT_EQ(r.drift->since, 2000);
  EXPECT_EQ(r.drift->message, "still 65530");
  RecordRead back = record_from_value(core::parse_json(core::to_json(record_to_value(r))));
  ASSERT_TRUE(back.record) << back.error;
  EXPECT_EQ(*back.record, r);

  // A passing check clears it.
  record_verification(r, 4000, {true, "", ""}, DriftAction::Report);
  EXPECT_FALSE(r.drift);
  EXPECT_EQ(r.verified, 4000);
  // Absent fields stay absent (records of sets without reverify read as before).
  NodeRecord plain;
  plain.set = "x";
  core::Value v = record_to_value(plain);
  EXPECT_EQ(v.find("verified"), nullptr);
  EXPECT_EQ(v.find("drift"), nullptr);
  EXPECT_EQ(v.find("reapply"), nullptr);
}

TEST(Reverify, ReapplySendsThePackageBackThroughTheRollout) {
  HostPackageSet set = set_from_yaml(kPackages);
  DesiredState d = digest(set);
  NodeRecord r = done_record(d);
  record_verification(r, 2000, {false, "sysctl", "vm.max_map_count is 65530"},
                      DriftAction::Reapply);
  EXPECT_EQ(r.reapply, (std::set<std::string>{"sysctl"}));
  EXPECT_FALSE(reverify_eligible(r, d)) << "the rollout has it now";
  EXPECT_EQ(node_need(d, r, nullptr), NodeNeed::Work);

  // The rollout planner takes it as pending and starts it within the budget.
  NodeInput in;
  in.facts.name = "n1";
  in.record = &r;
  NodeInput other;
  other.facts.name = "n2";
  NodeRecord other_rec = done_record(d);
  other.record = &other_rec;
  other_rec.batch = 0;
  r.batch = 1;  // the last batch of the first rollout
  std::vector<NodeInput> nodes{in, other};
  DeploymentPolicy strict = testing::policy_from_yaml(
      "  default:\n    budget: {count: 1}\n"
      "    strategy: {fixed: {initialBatch: 1, failureThreshold: 1, safetyLimit: 0}}\n");
  RolloutInput ri;
  ri.set = &set;
  ri.policy = &strict;
  ri.nodes = nodes;
  RolloutPlan plan = plan_rollout(ri);
  EXPECT_FALSE(plan.stopped) << "leaving its batch is not a failed batch";
  ASSERT_EQ(plan.start.size(), 1u);
  EXPECT_EQ(plan.start[0].node, "n1");
  EXPECT_EQ(plan.start[0].batch, 1) << "the batch after the last closed one (n1 left batch 1)";
  EXPECT_FALSE(plan.complete);

  // Only the drifted package is applied again (its config and interrupt with it, then its
  // post-interrupt check); the other package is left alone.
  r.state = NodeState::InProgress;
  NodePlan np = plan_node(d, r);
  std::vector<std::string> steps;
  for (const auto& s : np.steps)
    steps.push_back(s.package + "/" + std::string(stage_name(s.stage)));
  EXPECT_EQ(steps, (std::vector<std::string>{"sysctl/apply", "sysctl/config", "/interrupt",
                                             "sysctl/post-interrupt"}));
  // Completing the apply clears the drift and the re-apply mark; the rest runs as usual.
  for (const auto& s : np.steps) record_step_done(r, d, s);
  EXPECT_FALSE(r.drift);
  EXPECT_TRUE(r.reapply.empty());
  EXPECT_TRUE(plan_node(d, r).steps.empty());
  mark_node_done(r, d);
  EXPECT_TRUE(reverify_eligible(r, d));
}

TEST(Reverify, PolicySwitchToReapplyTakesAnAlreadyDriftedNode) {
  HostPackageSet report = set_from_yaml("  reverify: {interval: 1h}\n" + std::string(kPackages));
  HostPackageSet reapply =
      set_from_yaml("  reverify: {interval: 1h, onDrift: Reapply}\n" + std::string(kPackages));
  NodeRecord r = done_record(digest(report));
  record_verification(r, 2000, {false, "agent", "gone"}, DriftAction::Report);
  EXPECT_FALSE(reapply_drifted(r, report));
  EXPECT_TRUE(reapply_drifted(r, reapply));
  EXPECT_EQ(r.reapply, (std::set<std::string>{"agent"}));
  EXPECT_FALSE(reapply_drifted(r, reapply)) << "written once";
}

}  // namespace
}  // namespace gpufleet::hostpkg
