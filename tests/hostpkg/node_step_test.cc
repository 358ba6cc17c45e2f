// decide_node_step (controller/node_step.h), without an API server: one table, each row a
// node in progress as the drive loop sees it and the transition it must take — cordon, wait
// for protected pods (and when to say so), drain, fail (blocked, timed out, a failed step, a
// failed reboot), finish, remember the boot, record a finished step, create the stage pod,
// or wait; and, once the plan is empty, validation by certify per spec.validation (ask, create
// the request, wait, finish on Passed, fail naming the request on Failed or Expired).
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

// The plan is empty after an interrupt; the set validates interrupting changes (the default).
NodeStepFacts validation_due() {
  NodeStepFacts f = ready_for_apply();
  f.plan.steps.clear();
  f.validate_when = ValidateWhen::Interrupting;
  f.interrupted = true;
  f.validation_name = "hostpkg-drivers-gpu-1-g7";
  return f;
}

// ... and its request was named in the record and created; certify has not answered.
NodeStepFacts validation_waiting() {
  NodeStepFacts f = validation_due();
  f.validation = "hostpkg-drivers-gpu-1-g5";
  f.validation_exists = true;
  f.validation_state.phase = "Running";
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
             "interrupt/reboot: boot ID still boot-1 after the interrupt timeout", "failed"},
        // Validation by certify before the uncordon (spec.validation).
        Case{"InterruptingChangeAsksForValidation", nullptr, validation_due, Kind::AskValidation},
        Case{"ChangeWithoutAnInterruptIsNotValidatedByDefault",
             [](NodeStepFacts& f) { f.interrupted = false; }, validation_due, Kind::Finish},
        Case{"NeverFinishesAnInterruptingChange",
             [](NodeStepFacts& f) { f.validate_when = ValidateWhen::Never; }, validation_due,
             Kind::Finish},
        Case{"AlwaysValidatesAChangeWithoutAnInterrupt",
             [](NodeStepFacts& f) {
               f.validate_when = ValidateWhen::Always;
               f.interrupted = false;
             },
             validation_due, Kind::AskValidation},
        Case{"StepsLeftComeBeforeValidation",
             [](NodeStepFacts& f) { f.plan.steps.push_back(step("sysctl", Stage::Apply)); },
             validation_due, Kind::CreatePod},
        Case{"TheCordonComesBeforeValidation", [](NodeStepFacts& f) { f.cordoned = false; },
             validation_waiting, Kind::Cordon},
        Case{"NamedRequestMissingIsCreated", [](NodeStepFacts& f) { f.validation_exists = false; },
             validation_waiting, Kind::CreateValidation},
        Case{"RequestWithoutAVerdictWaits", nullptr, validation_waiting, Kind::Wait},
        Case{"RequestWithoutAStatusWaits", [](NodeStepFacts& f) { f.validation_state = {}; },
             validation_waiting, Kind::Wait},
        Case{"PassedFinishes", [](NodeStepFacts& f) { f.validation_state.phase = "Passed"; },
             validation_waiting, Kind::Finish},
        Case{"FailedFailsNamingTheRequestAndWhy",
             [](NodeStepFacts& f) {
               f.validation_state = {"Failed", "diagnostics/dcgm-r1: HardwareFailure: XID 79"};
             },
             validation_waiting, Kind::Fail,
             "validation: ValidationRequest hostpkg-drivers-gpu-1-g5 Failed: diagnostics/dcgm-r1: "
             "HardwareFailure: XID 79"},
        Case{"ExpiredFailsNamingTheRequest",
             [](NodeStepFacts& f) {
               f.validation_state = {"Expired", ""};
             },
             validation_waiting, Kind::Fail,
             "validation: ValidationRequest hostpkg-drivers-gpu-1-g5 Expired"},
        // A policy switched to Never while the node waits: the uncordon is no longer held.
        Case{"NeverWhileWaitingFinishes",
             [](NodeStepFacts& f) { f.validate_when = ValidateWhen::Never; }, validation_waiting,
             Kind::Finish}),
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

TEST(NodeStep, AskingNamesTheRequestAndWaitingSaysValidating) {
  NodeStep ask = decide_node_step(validation_due());
  EXPECT_EQ(ask.validation, "hostpkg-drivers-gpu-1-g7");
  EXPECT_FALSE(ask.validating);
  EXPECT_TRUE(decide_node_step(validation_waiting()).validating);
  NodeStepFacts gone = validation_waiting();
  gone.validation_exists = false;
  EXPECT_TRUE(decide_node_step(gone).validating);
  // The record's request is the one waited on, even where the name to ask with changed since
  // (the record's generation moved with the write that named it).
  EXPECT_EQ(decide_node_step(gone).validation, "");
}

TEST(NodeStep, ValidationRequestNameIsStablePerGenerationAndAValidName) {
  EXPECT_EQ(validation_request_name("drivers", "gpu-1", 5), "hostpkg-drivers-gpu-1-g5");
  EXPECT_EQ(validation_request_name("drivers", "gpu-1", 5),
            validation_request_name("drivers", "gpu-1", 5));
  EXPECT_NE(validation_request_name("drivers", "gpu-1", 5),
            validation_request_name("drivers", "gpu-1", 6));
  const std::string long_node(240, 'n');
  const std::string a = validation_request_name("drivers", long_node + "a", 5);
  const std::string b = validation_request_name("drivers", long_node + "b", 5);
  EXPECT_LE(a.size(), 253U);
  EXPECT_NE(a, b);
  EXPECT_NE(a.back(), '-');
}

core::Value request(std::string phase) {
  core::Value v;
  v["status"]["phase"] = std::move(phase);
  v["status"]["message"] = "1 of 2 nodes failed";
  return v;
}

TEST(NodeStep, ValidationSeenTakesTheNodesFailedResult) {
  EXPECT_EQ(validation_seen(core::Value::map(), "gpu-1").phase, "");
  core::Value running = request("Running");
  EXPECT_EQ(validation_seen(running, "gpu-1").phase, "Running");
  EXPECT_EQ(validation_seen(running, "gpu-1").why, "");
  core::Value failed = request("Failed");
  // No result for the node: the request's message.
  EXPECT_EQ(validation_seen(failed, "gpu-1").why, "1 of 2 nodes failed");
  core::Value other;
  other["node"] = "gpu-2";
  other["verdict"] = "Failed";
  other["reason"] = "Infrastructure";
  core::Value mine;
  mine["node"] = "gpu-1";
  mine["verdict"] = "Failed";
  mine["category"] = "diagnostics/dcgm-r1";
  mine["reason"] = "HardwareFailure";
  mine["message"] = "XID 79 on GPU 3";
  failed["status"]["results"].push_back(other);
  failed["status"]["results"].push_back(mine);
  ValidationSeen seen = validation_seen(failed, "gpu-1");
  EXPECT_EQ(seen.phase, "Failed");
  EXPECT_EQ(seen.why, "diagnostics/dcgm-r1: HardwareFailure: XID 79 on GPU 3");
  EXPECT_EQ(validation_seen(failed, "gpu-2").why, "Infrastructure");
  core::Value expired = request("Expired");
  EXPECT_EQ(validation_seen(expired, "gpu-1").phase, "Expired");
  EXPECT_EQ(validation_seen(expired, "gpu-1").why, "1 of 2 nodes failed");
}

}  // namespace
}  // namespace gpufleet::hostpkg
