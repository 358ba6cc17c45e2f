// decide_node_step (controller/node_step.h), without an API server: one table, each row a
// node in progress as the drive loop sees it and the transition it must take — cordon, wait
// for protected pods (and when to say so), drain, fail (blocked, timed out, a failed step, a
// failed reboot), finish, remember the boot, record a finished step, create the stage pod,
// or wait.
#include "hostpkg/controller/node_step.h"

#include <gtest/gtest.h>

#include <functional>
#include <ostream>

namespace gpufleet::hostpkg {
namespace {

using Clock = std::chrono::system_clock;
using Kind = NodeStep::Kind;

const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1'700'000'000));

PlannedStep step(std::string package, Stage stage, InterruptKind interrupt = InterruptKind::None) {
  PlannedStep s;
  s.package = std::move(package);
  s.stage = stage;
  s.interrupt.kind = interrupt;
  s.timeout = std::chrono::seconds(600);
  return s;
}

// Cordoned, nothing to wait for or evict, an apply step whose pod is not there yet.
NodeStepFacts ready_for_apply() {
  NodeStepFacts f;
  f.cordoned = true;
  f.now = kNow;
  f.plan.steps.push_back(step("sysctl", Stage::Apply));
  f.pod_name = "hp-0123456789abcdef";
  f.boot = "boot-1";
  f.ready = true;
  return f;
}

NodeStepFacts reboot_next() {
  NodeStepFacts f = ready_for_apply();
  f.plan.steps = {step("", Stage::Interrupt, InterruptKind::Reboot)};
  f.recorded_boot = "boot-1";
  return f;
}

StageOutcome outcome(bool ok, std::string status, std::string message = "") {
  return StageOutcome{ok, std::move(status), std::move(message)};
}

struct Case {
  const char* name;
  std::function<void(NodeStepFacts&)> edit;
  NodeStepFacts (*base)() = ready_for_apply;
  Kind kind;
  std::string why = "";  // Fail / WaitProtected: the exact text
  std::string result = "";
  std::string interrupt = "";
  bool report = false;
};

// gtest names the row instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class NodeStepTable : public ::testing::TestWithParam<Case> {};

TEST_P(NodeStepTable, Decides) {
  const Case& c = GetParam();
  NodeStepFacts f = c.base();
  if (c.edit) c.edit(f);
  NodeStep s = decide_node_step(f);
  EXPECT_EQ(s.kind, c.kind);
  EXPECT_EQ(s.why, c.why);
  EXPECT_EQ(s.result, c.result);
  EXPECT_EQ(s.interrupt, c.interrupt);
  EXPECT_EQ(s.report, c.report);
}

const auto kStarted = std::chrono::duration_cast<std::chrono::seconds>(kNow.time_since_epoch());

INSTANTIATE_TEST_SUITE_P(
    NodeStep, NodeStepTable,
    ::testing::Values(
        // The gate before any step, in order.
        Case{"UncordonedIsCordonedFirst",
             [](NodeStepFacts& f) {
               f.cordoned = false;
               f.evictions_left = true;
             },
             ready_for_apply, Kind::Cordon},
        Case{"ProtectedPodsWaitQuietlyWithinTheWait",
             [](NodeStepFacts& f) {
               f.protected_running = {"ml/train-0"};
               f.started = kStarted.count() - 59;
               f.protected_wait = std::chrono::seconds(60);
               f.evictions_left = true;
             },
             ready_for_apply, Kind::WaitProtected},
        Case{"ProtectedPodsPastTheWaitAreNamed",
             [](NodeStepFacts& f) {
               f.protected_running = {"ml/a", "ml/b", "ml/c", "ml/d", "ml/e", "ml/f"};
               f.started = kStarted.count() - 60;
               f.protected_wait = std::chrono::seconds(60);
             },
             ready_for_apply, Kind::WaitProtected,
             "ProtectedPods: still running after 60s: ml/a, ml/b, ml/c, ml/d, ml/e, ... (6 in all)",
             "", "", true},
        Case{"ProtectedPodsWithoutAStartTimeWaitedZero",
             [](NodeStepFacts& f) {
               f.protected_running = {"ml/a"};
               f.started = 0;
               f.protected_wait = std::chrono::seconds(0);
             },
             ready_for_apply, Kind::WaitProtected, "ProtectedPods: still running after 0s: ml/a",
             "", "", true},
        Case{"PodsLeftToEvictDrain", [](NodeStepFacts& f) { f.evictions_left = true; },
             ready_for_apply, Kind::Drain},
        // The plan.
        Case{"BlockedPlanFailsNamingWhy",
             [](NodeStepFacts& f) {
               f.plan.steps.clear();
               f.plan.blocked = {"sysctl: downgrade refused", "x: y"};
             },
             ready_for_apply, Kind::Fail, "blocked: sysctl: downgrade refused; x: y"},
        Case{"EmptyPlanFinishes", [](NodeStepFacts& f) { f.plan.steps.clear(); }, ready_for_apply,
             Kind::Finish},
        Case{"MissingStagePodIsCreated", nullptr, ready_for_apply, Kind::CreatePod},
        Case{"RunningStagePodWaits",
             [](NodeStepFacts& f) {
               f.pod_exists = true;
               f.pod_created = kNow - std::chrono::seconds(600 + 180);  // at the grace's end
             },
             ready_for_apply, Kind::Wait},
        Case{"StagePodPastTimeoutAndGraceFails",
             [](NodeStepFacts& f) {
               f.pod_exists = true;
               f.pod_created = kNow - std::chrono::seconds(600 + 181);
             },
             ready_for_apply, Kind::Fail,
             "sysctl/apply: stage pod hp-0123456789abcdef did not finish within its timeout"},
        Case{"StagePodWithoutCreationTimeNeverTimesOut",
             [](NodeStepFacts& f) { f.pod_exists = true; }, ready_for_apply, Kind::Wait},
        Case{"FailedStepFailsTheNodeAndCountsItsResult",
             [](NodeStepFacts& f) {
               f.pod_exists = true;
               f.outcome = outcome(false, "check-failed", "vm.max_map_count is 65530");
             },
             ready_for_apply, Kind::Fail, "sysctl/apply: check-failed: vm.max_map_count is 65530",
             "check-failed"},
        Case{"SucceededStepIsRecorded",
             [](NodeStepFacts& f) {
               f.pod_exists = true;
               f.outcome = outcome(true, "succeeded");
             },
             ready_for_apply, Kind::StepDone, "", "succeeded"},
        Case{"RestartStepCountsItsInterrupt",
             [](NodeStepFacts& f) {
               f.plan.steps = {step("", Stage::Interrupt, InterruptKind::RestartServices)};
               f.pod_exists = true;
               f.outcome = outcome(true, "succeeded");
             },
             ready_for_apply, Kind::StepDone, "", "succeeded", "restartServices"},
        Case{"FailedInterruptStepIsNamedInterrupt",
             [](NodeStepFacts& f) {
               f.plan.steps = {step("", Stage::Interrupt, InterruptKind::RestartAllServices)};
               f.pod_exists = true;
               f.outcome = outcome(false, "failed", "systemctl exited 1");
             },
             ready_for_apply, Kind::Fail, "interrupt/interrupt: failed: systemctl exited 1",
             "failed"},
        // A reboot: the boot ID is the proof.
        Case{"RebootRemembersTheBootFirst", [](NodeStepFacts& f) { f.recorded_boot.clear(); },
             reboot_next, Kind::RememberBoot},
        Case{"RebootWithTheSameBootCreatesItsPod", nullptr, reboot_next, Kind::CreatePod},
        Case{"ChangedBootOnAReadyNodeIsTheRebootDone",
             [](NodeStepFacts& f) {
               f.boot = "boot-2";
               f.pod_exists = true;
               f.outcome = outcome(false, "pod-failed");  // the pod died with the node
             },
             reboot_next, Kind::StepDone, "", "succeeded", "reboot"},
        Case{"ChangedBootOnANotReadyNodeWaits",
             [](NodeStepFacts& f) {
               f.boot = "boot-2";
               f.ready = false;
               f.pod_exists = true;
             },
             reboot_next, Kind::Wait},
        Case{"RebootPodThatDiedWithTheNodeWaitsForTheBoot",
             [](NodeStepFacts& f) {
               f.pod_exists = true;
               f.outcome = outcome(false, "pod-failed");
             },
             reboot_next, Kind::Wait},
        Case{"RebootTheRunnerReportedFailedFails",
             [](NodeStepFacts& f) {
               f.pod_exists = true;
               f.outcome = outcome(false, "failed", "reboot refused");
             },
             reboot_next, Kind::Fail, "interrupt/reboot: reboot refused", "failed"},
        Case{"RebootPastTheInterruptTimeoutFails",
             [](NodeStepFacts& f) {
               f.pod_exists = true;
               f.pod_created = kNow - std::chrono::seconds(600 + 181);
             },
             reboot_next, Kind::Fail,
             "interrupt/reboot: boot ID still boot-1 after the interrupt timeout", "failed"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(NodeStep, RememberedBootIsTheNodesOrUnknown) {
  NodeStepFacts f = reboot_next();
  f.recorded_boot.clear();
  EXPECT_EQ(decide_node_step(f).boot_id, "boot-1");
  f.boot.clear();
  EXPECT_EQ(decide_node_step(f).boot_id, "unknown");
  // No boot ID at all never counts as the reboot done.
  f.recorded_boot = "unknown";
  EXPECT_EQ(decide_node_step(f).kind, Kind::CreatePod);
}

TEST(NodeStep, OnlyAConfirmedRebootClearsTheBootAndAFailedOneCountsAfterItsWrite) {
  NodeStepFacts f = reboot_next();
  f.boot = "boot-2";
  EXPECT_TRUE(decide_node_step(f).reboot);
  NodeStepFacts g = ready_for_apply();
  g.pod_exists = true;
  g.outcome = outcome(true, "succeeded");
  EXPECT_FALSE(decide_node_step(g).reboot);
  EXPECT_FALSE(decide_node_step(g).count_after_write);
  NodeStepFacts h = reboot_next();
  h.pod_exists = true;
  h.outcome = outcome(false, "failed", "no");
  EXPECT_TRUE(decide_node_step(h).count_after_write);
  h = ready_for_apply();
  h.pod_exists = true;
  h.outcome = outcome(false, "failed", "no");
  EXPECT_FALSE(decide_node_step(h).count_after_write);
}

}  // namespace
}  // namespace gpufleet::hostpkg
