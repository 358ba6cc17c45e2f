// decide_remediation: the Remediating phase's decision, with the clock as an argument.
#include "sentinel/remediation_step.h"

#include <gtest/gtest.h>

namespace gpufleet::sentinel {
namespace {

using Kind = RemediationStep::Kind;
constexpr std::int64_t kT0 = 1'800'000'000'000;  // a fixed "now" in ms since the epoch

RemediationFacts pending(const std::string& action, std::int64_t attempt) {
  RemediationFacts f;
  f.action = action;
  f.attempt = attempt;
  f.requested_ms = kT0;
  f.boot_before = "boot-1";
  f.boot_now = "boot-1";
  f.uid_before = "uid-1";
  f.uid_now = "uid-1";
  f.node_ready = true;
  f.still_faulty = {"xid/GPU-a"};
  return f;
}

RemediationLimits limits() {
  RemediationLimits l;
  l.max_attempts = 2;
  l.timeout_s = 900;
  l.settle_s = 60;
  return l;
}

TEST(RemediationStep, NoActionOrDisabledSkipsToValidation) {
  EXPECT_EQ(decide_remediation(pending("none", 0), limits(), kT0).kind, Kind::Skip);
  EXPECT_EQ(decide_remediation(pending("", 0), limits(), kT0).kind, Kind::Skip);
  RemediationLimits off = limits();
  off.enabled = false;
  EXPECT_EQ(decide_remediation(pending("reboot", 1), off, kT0).kind, Kind::Skip);
}

TEST(RemediationStep, TheFirstRequestClaimsTheBudget) {
  const RemediationStep s = decide_remediation(pending("reboot", 0), limits(), kT0);
  EXPECT_EQ(s.kind, Kind::Request);
  EXPECT_EQ(s.action, "reboot");
  EXPECT_EQ(s.attempt, 1);
  EXPECT_TRUE(s.claims_budget);
  EXPECT_TRUE(s.why.empty());
}

TEST(RemediationStep, ARebootIsDoneOnANewBootWhenReady) {
  RemediationFacts f = pending("reboot", 1);
  EXPECT_EQ(decide_remediation(f, limits(), kT0 + 1000).kind, Kind::AskAgain);
  f.boot_now = "boot-2";
  f.node_ready = false;  // booted, not Ready yet
  EXPECT_EQ(decide_remediation(f, limits(), kT0 + 1000).kind, Kind::AskAgain);
  f.node_ready = true;
  const RemediationStep s = decide_remediation(f, limits(), kT0 + 1000);
  EXPECT_EQ(s.kind, Kind::Done);
  EXPECT_EQ(s.message, "done after attempt 1");
}

TEST(RemediationStep, ATimedOutAttemptIsRetriedThenFails) {
  RemediationFacts f = pending("reboot", 1);
  // At the timeout exactly it may still work; a millisecond later it has failed.
  EXPECT_EQ(decide_remediation(f, limits(), kT0 + 900'000).kind, Kind::AskAgain);
  RemediationStep s = decide_remediation(f, limits(), kT0 + 900'001);
  EXPECT_EQ(s.kind, Kind::Request);
  EXPECT_EQ(s.attempt, 2);
  EXPECT_FALSE(s.claims_budget);  // the node holds its claim already
  EXPECT_EQ(s.reason, "TimedOut");
  EXPECT_EQ(s.why, "reboot attempt 1: not done within timeoutSeconds 900");
  f.attempt = 2;
  s = decide_remediation(f, limits(), kT0 + 900'001);
  EXPECT_EQ(s.kind, Kind::Fail);
  EXPECT_EQ(s.message,
            "reboot did not complete in 2 attempts (reboot attempt 2: not done within "
            "timeoutSeconds 900); the node stays out");
}

TEST(RemediationStep, AFailedRebootEscalatesToReplaceOnlyWithAKnownProvider) {
  RemediationFacts f = pending("reboot", 2);
  f.agent_state = "Failed";
  f.agent_detail = "systemctl reboot: exit 1";
  RemediationLimits l = limits();
  l.replace_when_reboot_fails = true;
  l.provider = "simulator";
  EXPECT_EQ(decide_remediation(f, l, kT0 + 1).kind, Kind::Fail);  // the provider is unknown
  l.provider_known = true;
  const RemediationStep s = decide_remediation(f, l, kT0 + 1);
  EXPECT_EQ(s.kind, Kind::Escalate);
  EXPECT_EQ(s.action, "replace");
  EXPECT_EQ(s.from, "reboot");
  EXPECT_EQ(s.reason, "ActionFailed");
  EXPECT_EQ(s.why, "reboot attempt 2: the agent reported Failed: systemctl reboot: exit 1");
  EXPECT_FALSE(s.claims_budget);
}

TEST(RemediationStep, AResetSettlesThenEscalatesToARebootThatClaimsTheBudget) {
  RemediationFacts f = pending("gpu-reset", 2);
  f.agent_state = "Succeeded";
  RemediationStep s = decide_remediation(f, limits(), kT0 + 5000);
  EXPECT_EQ(s.kind, Kind::MarkSettled);  // first seen: recorded, then 60 s to settle
  EXPECT_EQ(s.wait_ms, 60'000);
  f.finished_ms = kT0 + 5000;
  s = decide_remediation(f, limits(), kT0 + 25'000);
  EXPECT_EQ(s.kind, Kind::Settle);
  EXPECT_EQ(s.wait_ms, 40'000);
  s = decide_remediation(f, limits(), kT0 + 65'000);
  EXPECT_EQ(s.kind, Kind::Escalate);
  EXPECT_EQ(s.action, "reboot");
  EXPECT_EQ(s.from, "gpu-reset");
  EXPECT_EQ(s.reason, "FaultPersisted");
  EXPECT_EQ(s.why,
            "gpu-reset attempt 2: xid/GPU-a still faulty 60 s after the agent reported the reset "
            "done");
  EXPECT_TRUE(s.claims_budget);
  f.recovered = true;  // the GPU came back meanwhile: done, whatever the agent said
  EXPECT_EQ(decide_remediation(f, limits(), kT0 + 65'000).kind, Kind::Done);
}

TEST(RemediationStep, AnAgentReportOnARebootThatSucceededDoesNotEndIt) {
  RemediationFacts f = pending("reboot", 1);
  f.agent_state = "Succeeded";  // the command ran; the node has not come back yet
  EXPECT_EQ(decide_remediation(f, limits(), kT0 + 1).kind, Kind::AskAgain);
}

TEST(RemediationStep, AReplacementIsDoneOnlyAsANewReadyNodeThatBooted) {
  RemediationFacts f = pending("replace", 1);
  f.replacement = ReplacementStatus{ReplacementStatus::State::Done, "machine m-7"};
  EXPECT_EQ(decide_remediation(f, limits(), kT0 + 1).kind, Kind::AskAgain);  // the old Node
  f.uid_now = "uid-2";
  EXPECT_EQ(decide_remediation(f, limits(), kT0 + 1).kind, Kind::AskAgain);  // not booted
  f.boot_now = "boot-9";
  const RemediationStep s = decide_remediation(f, limits(), kT0 + 1);
  EXPECT_EQ(s.kind, Kind::Done);
  EXPECT_EQ(s.message, "done after attempt 1: machine m-7");
}

TEST(RemediationStep, AReplacementWithoutItsProviderFails) {
  RemediationFacts f = pending("replace", 1);
  RemediationLimits l = limits();
  l.max_attempts = 1;
  l.provider = "cloud-x";
  const RemediationStep s = decide_remediation(f, l, kT0 + 1);
  EXPECT_EQ(s.kind, Kind::Fail);
  EXPECT_EQ(s.reason, "ActionFailed");
  EXPECT_EQ(s.why, "replace attempt 1: the provider failed: no provider \"cloud-x\"");
}

}  // namespace
}  // namespace gpufleet::sentinel
