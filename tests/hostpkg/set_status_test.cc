// What a pass concludes about its set (controller/set_status.h), without an API server: the
// phase and its message (Complete / Paused / Stopped / Blocked / Deleting / Progressing),
// the status's counts and conditions, which planned starts go ahead after the cluster
// budget's claims, and when the set is looked at again.
#include "hostpkg/controller/set_status.h"

#include <gtest/gtest.h>

#include <functional>
#include <ostream>

#include "kube/api/conditions.h"

namespace gpufleet::hostpkg {
namespace {

using Clock = std::chrono::system_clock;
const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1'700'000'000));

CompartmentStatus compartment(std::string name, std::int64_t nodes, std::int64_t done,
                              std::int64_t in_progress = 0) {
  CompartmentStatus c;
  c.name = std::move(name);
  c.nodes = nodes;
  c.done = done;
  c.in_progress = in_progress;
  c.pending = nodes - done - in_progress;
  return c;
}

RolloutPlan plan_with(std::vector<CompartmentStatus> comps) {
  RolloutPlan p;
  p.target = "t-1";
  p.compartments = std::move(comps);
  return p;
}

CompartmentStatus stopped(std::string name) {
  CompartmentStatus c = compartment(std::move(name), 4, 1);
  c.failed = 2;
  c.pending = 1;
  c.stopped = true;
  c.stop_reason = "2 consecutive failed batches";
  c.failing_nodes = {"n2", "n3"};
  return c;
}

// ---- rollout_phase ----

struct PhaseCase {
  const char* name;
  std::function<void(RolloutPlan&, PhaseFacts&)> edit;
  std::string phase;
  std::string message = "";
};

// gtest names the row instead of dumping its bytes.
void PrintTo(const PhaseCase& c, std::ostream* os) { *os << c.name; }

class PhaseTable : public ::testing::TestWithParam<PhaseCase> {};

TEST_P(PhaseTable, Decides) {
  const PhaseCase& c = GetParam();
  RolloutPlan plan = plan_with({compartment("default", 4, 2, 1)});
  PhaseFacts f;
  c.edit(plan, f);
  SetPhase got = rollout_phase(plan, f);
  EXPECT_EQ(got.phase, c.phase);
  EXPECT_EQ(got.message, c.message);
}

INSTANTIATE_TEST_SUITE_P(
    SetPhase, PhaseTable,
    ::testing::Values(
        PhaseCase{"NodesToGoIsProgressing", [](RolloutPlan&, PhaseFacts&) {}, "Progressing"},
        PhaseCase{"CompleteIsComplete", [](RolloutPlan& p, PhaseFacts&) { p.complete = true; },
                  "Complete"},
        PhaseCase{"PauseWinsOverComplete",
                  [](RolloutPlan& p, PhaseFacts& f) {
                    p.complete = true;
                    f.pause = true;
                  },
                  "Paused", "spec.pause is true: started nodes finish, no new node starts"},
        PhaseCase{
            "StoppedWinsOverPauseAndNamesTheCompartment",
            [](RolloutPlan& p, PhaseFacts& f) {
              p.compartments.push_back(stopped("rack-a"));
              f.pause = true;
            },
            "Stopped",
            "compartment rack-a stopped: 2 consecutive failed batches; failing nodes: n2, n3"},
        PhaseCase{
            "DeletingWinsOverAll",
            [](RolloutPlan& p, PhaseFacts& f) {
              p.compartments.push_back(stopped("rack-a"));
              f.deleting = true;
            },
            "Deleting",
            "compartment rack-a stopped: 2 consecutive failed batches; failing nodes: n2, n3"},
        PhaseCase{"BlockedNodesWithNothingMovingIsBlocked",
                  [](RolloutPlan& p, PhaseFacts&) { p.blocked_count = 1; }, "Blocked"},
        PhaseCase{"MalformedRecordWithNothingMovingIsBlocked",
                  [](RolloutPlan& p, PhaseFacts&) { p.malformed_count = 1; }, "Blocked"},
        PhaseCase{"DrainBlockedWithNothingMovingIsBlocked",
                  [](RolloutPlan&, PhaseFacts& f) { f.drain_blocked = 1; }, "Blocked"},
        PhaseCase{"ProtectedWaitWithNothingMovingIsBlocked",
                  [](RolloutPlan&, PhaseFacts& f) { f.protected_wait = 1; }, "Blocked"},
        PhaseCase{"BlockedButANodeInProgressIsProgressing",
                  [](RolloutPlan&, PhaseFacts& f) {
                    f.drain_blocked = 1;
                    f.in_progress = true;
                  },
                  "Progressing"},
        PhaseCase{"BlockedButANodeStartingIsProgressing",
                  [](RolloutPlan& p, PhaseFacts&) {
                    p.blocked_count = 1;
                    p.start.push_back({"n4", "default", 1, 0, "t-1"});
                  },
                  "Progressing"},
        PhaseCase{"HeldByTheClusterBudgetSaysSo",
                  [](RolloutPlan& p, PhaseFacts&) { p.waiting_on_cluster_budget = 3; },
                  "Progressing", "3 node(s) wait for the cluster disruption budget"}),
    [](const ::testing::TestParamInfo<PhaseCase>& info) { return std::string(info.param.name); });

// ---- set_status ----

SetStatusFacts facts(const RolloutPlan* plan, std::string phase, std::string message = "") {
  SetStatusFacts f;
  f.generation = 7;
  f.phase = std::move(phase);
  f.message = std::move(message);
  f.plan = plan;
  f.now = kNow;
  return f;
}

kube::Condition condition(const SetStatus& s, std::string_view type) {
  std::optional<kube::Condition> c = kube::get_condition(*s.status.get({"conditions"}), type);
  EXPECT_TRUE(c.has_value()) << type;
  return c.value_or(kube::Condition{});
}

TEST(SetStatus, ProgressingCountsOverCompartments) {
  RolloutPlan plan = plan_with({compartment("a", 4, 2, 1), compartment("b", 3, 1)});
  plan.malformed_count = 1;
  SetStatusFacts f = facts(&plan, "Progressing");
  f.drain_blocked = 1;
  f.reset_epoch = 2;
  SetStatus s = set_status(f);
  EXPECT_EQ(s.done, 3);
  EXPECT_EQ(s.in_progress, 1);
  EXPECT_EQ(s.pending, 3);
  EXPECT_EQ(s.blocked, 2);  // the malformed record and the refused drain
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.status.get_string({"progress"}), "3/7");
  EXPECT_EQ(s.status.get_string({"target"}), "t-1");
  EXPECT_EQ(s.status.get({"observedGeneration"})->as_int(), 7);
  EXPECT_EQ(s.status.get({"resetEpoch"})->as_int(), 2);
  EXPECT_EQ(s.status.get({"compartments"})->as_list().size(), 2u);
  EXPECT_EQ(condition(s, "Ready").status, "False");
  EXPECT_EQ(condition(s, "Ready").reason, "Progressing");
  EXPECT_EQ(condition(s, "Progressing").status, "True");
  EXPECT_EQ(condition(s, "Progressing").reason, "NodesUpdating");
  EXPECT_EQ(condition(s, "Progressing").message, "3/7 nodes done, 1 in progress");
  EXPECT_EQ(condition(s, "Blocked").status, "True");
  EXPECT_EQ(condition(s, "Blocked").reason, "DrainBlocked");
  EXPECT_EQ(condition(s, "Stopped").status, "False");
  EXPECT_EQ(condition(s, "Drifted").reason, "ReverifyDisabled");
  EXPECT_EQ(condition(s, "Ready").observed_generation, 7);
}

TEST(SetStatus, CompleteOnlyWithNothingInProgress) {
  RolloutPlan plan = plan_with({compartment("a", 2, 2)});
  plan.complete = true;
  SetStatus s = set_status(facts(&plan, "Complete"));
  EXPECT_EQ(condition(s, "Ready").status, "True");
  EXPECT_EQ(condition(s, "Ready").reason, "RolloutComplete");
  EXPECT_EQ(condition(s, "Ready").message, "every selected node is at target t-1");
  EXPECT_EQ(condition(s, "Progressing").status, "False");
  EXPECT_EQ(condition(s, "Progressing").reason, "Complete");
  EXPECT_EQ(condition(s, "Blocked").reason, "NotBlocked");

  plan.compartments = {compartment("a", 2, 1, 1)};  // the plan says complete, a node runs
  SetStatus busy = set_status(facts(&plan, "Complete"));
  EXPECT_EQ(condition(busy, "Ready").status, "False");
  EXPECT_EQ(condition(busy, "Progressing").status, "True");
}

TEST(SetStatus, StoppedNamesTheCompartmentFailingNodesAndTheReset) {
  RolloutPlan plan = plan_with({compartment("a", 2, 2), stopped("rack-b")});
  SetStatus s = set_status(facts(&plan, "Stopped"));
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(condition(s, "Stopped").status, "True");
  EXPECT_EQ(condition(s, "Stopped").reason, "FailureThreshold");
  EXPECT_EQ(condition(s, "Stopped").message,
            "rack-b: 2 consecutive failed batches; failing nodes: n2, n3; raise "
            "hostpkg.gpufleet.io/reset-epoch to resume");
  EXPECT_EQ(condition(s, "Progressing").status, "False");
  EXPECT_EQ(condition(s, "Progressing").reason, "Stopped");
  const core::Value& rack_b = s.status.get({"compartments"})->as_list()[1];
  EXPECT_EQ(rack_b.get_string({"stopReason"}), "2 consecutive failed batches");
  EXPECT_EQ(rack_b.get({"failingNodes"})->as_list().size(), 2u);
}

TEST(SetStatus, PausedAndInvalidAndDisabled) {
  RolloutPlan plan = plan_with({compartment("a", 2, 1)});
  SetStatusFacts f = facts(&plan, "Paused", "spec.pause is true");
  f.pause = true;
  SetStatus paused = set_status(f);
  EXPECT_EQ(condition(paused, "Paused").status, "True");
  EXPECT_EQ(condition(paused, "Paused").reason, "SpecPause");
  EXPECT_EQ(condition(paused, "Progressing").status, "False");
  EXPECT_EQ(condition(paused, "Progressing").reason, "Paused");

  SetStatus invalid = set_status(facts(nullptr, "Invalid", "spec.packages: required"));
  EXPECT_EQ(condition(invalid, "Ready").reason, "InvalidSpec");
  EXPECT_EQ(condition(invalid, "Blocked").status, "True");
  EXPECT_EQ(condition(invalid, "Blocked").reason, "InvalidSpec");
  EXPECT_EQ(condition(invalid, "Blocked").message, "spec.packages: required");
  EXPECT_EQ(condition(invalid, "Progressing").status, "False");
  EXPECT_EQ(invalid.status.get({"nodes"})->as_int(), 0);
  EXPECT_EQ(invalid.status.find("compartments"), nullptr);

  SetStatus disabled = set_status(facts(nullptr, "Disabled", "spec.disable is true"));
  EXPECT_EQ(condition(disabled, "Blocked").status, "False");
  EXPECT_EQ(condition(disabled, "Progressing").reason, "Disabled");
  EXPECT_EQ(condition(disabled, "Ready").reason, "Disabled");
}

TEST(SetStatus, BlockedReasonAndNodeMessages) {
  RolloutPlan plan = plan_with({compartment("a", 3, 0)});
  plan.blocked_count = 1;
  plan.blocked = {"n3: downgrade refused"};
  plan.malformed = {"n4: record unreadable"};
  SetStatusFacts f = facts(&plan, "Blocked");
  f.protected_wait = 1;
  f.node_messages = {"n1: ProtectedPods: still running after 60s: ml/a"};
  f.drifted = 1;
  f.drift_messages = {"n2: sysctl: vm.max_map_count is 65530"};
  SetStatus s = set_status(f);
  EXPECT_EQ(condition(s, "Blocked").reason, "ProtectedPods");
  const auto& nm = s.status.get({"nodeMessages"})->as_list();
  ASSERT_EQ(nm.size(), 4u);
  EXPECT_EQ(nm[0].as_string(), "n1: ProtectedPods: still running after 60s: ml/a");
  EXPECT_EQ(nm[1].as_string(), "n2: Drifted: sysctl: vm.max_map_count is 65530");
  EXPECT_EQ(nm[2].as_string(), "n4: record unreadable");
  EXPECT_EQ(nm[3].as_string(), "n3: downgrade refused");

  plan.blocked_count = 0;
  plan.blocked.clear();
  plan.malformed.clear();
  f = facts(&plan, "Blocked", "DeploymentPolicy p not found");
  EXPECT_EQ(condition(set_status(f), "Blocked").reason, "NodesBlocked");
  EXPECT_EQ(condition(set_status(f), "Blocked").message, "DeploymentPolicy p not found");
}

TEST(SetStatus, DriftedConditionFollowsReverify) {
  RolloutPlan plan = plan_with({compartment("a", 2, 2)});
  SetStatusFacts f = facts(&plan, "Complete");
  f.reverify = true;
  EXPECT_EQ(condition(set_status(f), "Drifted").reason, "NoDrift");
  f.drifted = 1;
  f.on_drift = DriftAction::Reapply;
  f.drift_messages = {"n2: sysctl: bad"};
  kube::Condition d = condition(set_status(f), "Drifted");
  EXPECT_EQ(d.status, "True");
  EXPECT_EQ(d.reason, "ChecksFailed");
  EXPECT_EQ(d.message,
            "1 node(s) failed re-verification (onDrift: Reapply, re-applying): n2: sysctl: bad");
}

TEST(SetStatus, TransitionTimeMovesOnlyWithTheStatus) {
  RolloutPlan plan = plan_with({compartment("a", 2, 1)});
  SetStatus first = set_status(facts(&plan, "Progressing"));
  SetStatusFacts later = facts(&plan, "Progressing");
  later.now = kNow + std::chrono::hours(1);
  later.conditions = *first.status.get({"conditions"});
  later.message = "other words";
  SetStatus same = set_status(later);
  EXPECT_EQ(condition(same, "Progressing").last_transition_time, kNow);
  plan.complete = true;
  plan.compartments = {compartment("a", 2, 2)};
  later.plan = &plan;
  SetStatus done = set_status(later);
  EXPECT_EQ(condition(done, "Progressing").last_transition_time, kNow + std::chrono::hours(1));
  EXPECT_EQ(condition(done, "Paused").last_transition_time, kNow);
}

// ---- starts_after_claims ----

TEST(SetStatus, StartsGoAheadOnlyWhereClaimed) {
  std::vector<NodeStart> starts = {
      {"n1", "a", 1, 0, "t"}, {"n2", "a", 1, 0, "t"}, {"n3", "a", 1, 0, "t"}};
  StartDecision free = starts_after_claims(starts, false, {{"n2", "9"}});
  ASSERT_EQ(free.go.size(), 3u);
  EXPECT_EQ(free.refused, 0);
  EXPECT_EQ(free.go[1].index, 1u);
  EXPECT_EQ(free.go[1].rv, "");  // no budget: no version to hold the start to

  StartDecision budgeted = starts_after_claims(starts, true, {{"n3", "12"}, {"n1", "10"}});
  ASSERT_EQ(budgeted.go.size(), 2u);
  EXPECT_EQ(budgeted.go[0].index, 0u);
  EXPECT_EQ(budgeted.go[0].rv, "10");
  EXPECT_EQ(budgeted.go[1].index, 2u);
  EXPECT_EQ(budgeted.go[1].rv, "12");
  EXPECT_EQ(budgeted.refused, 1);

  EXPECT_EQ(starts_after_claims(starts, true, {}).refused, 3);
}

// ---- pass_requeue ----

TEST(SetStatus, RequeueWhileMovingHeldOrDue) {
  RequeueFacts f;
  f.poll = std::chrono::milliseconds(2000);
  f.now_s = 1000;
  EXPECT_EQ(pass_requeue(f).requeue_after.count(), 0);  // nothing moves: events wake it
  f.next_verify = 1030;
  EXPECT_EQ(pass_requeue(f).requeue_after, std::chrono::seconds(31));
  f.next_verify = 900;  // overdue: a second from now, never a busy loop
  EXPECT_EQ(pass_requeue(f).requeue_after, std::chrono::seconds(1));
  f.waiting_on_cluster_budget = 2;
  EXPECT_EQ(pass_requeue(f).requeue_after, std::chrono::seconds(5));
  f.poll = std::chrono::seconds(9);
  EXPECT_EQ(pass_requeue(f).requeue_after, std::chrono::seconds(9));
  f.poll = std::chrono::milliseconds(2000);
  for (auto set : {&RequeueFacts::waiting, &RequeueFacts::starting, &RequeueFacts::verifying}) {
    RequeueFacts g = f;
    g.*set = true;
    EXPECT_EQ(pass_requeue(g).requeue_after, std::chrono::milliseconds(2000));
    EXPECT_FALSE(pass_requeue(g).requeue);
  }
}

}  // namespace
}  // namespace gpufleet::hostpkg
