#include "sentinel/remediation_step.h"

#include "core/text.h"

namespace gpufleet::sentinel {

namespace {

using Kind = RemediationStep::Kind;

std::string joined(const std::vector<std::string>& items) {
  std::string out = core::join(items, ",");
  return out.size() > 400 ? out.substr(0, 400) + "..." : out;
}

// Whether the attempt in flight worked, and (for a replacement) the provider's failure.
bool attempt_done(const RemediationFacts& f, const RemediationLimits& l, std::string& failure,
                  std::string& provider_message) {
  if (f.action == "replace") {
    // The provider's word and the API's: the Node under this name is a new object that booted
    // since (a new boot id: a Node re-registered before its machine came up is not the
    // replacement yet), Ready.
    const ReplacementStatus st = f.replacement
                                     ? *f.replacement
                                     : ReplacementStatus{ReplacementStatus::State::Failed,
                                                         "no provider \"" + l.provider + "\""};
    provider_message = st.message;
    if (st.state == ReplacementStatus::State::Failed)
      failure = "the provider failed" + (st.message.empty() ? "" : ": " + st.message);
    return st.state == ReplacementStatus::State::Done && !f.uid_before.empty() &&
           f.uid_now != f.uid_before && !f.boot_now.empty() && f.boot_now != f.boot_before &&
           f.node_ready;
  }
  if (f.action == "reboot")
    return !f.boot_now.empty() && f.boot_now != f.boot_before && f.node_ready;
  return f.recovered;  // gpu-reset: the GPUs report healthy
}

}  // namespace

RemediationStep decide_remediation(const RemediationFacts& f, const RemediationLimits& l,
                                   std::int64_t now) {
  RemediationStep step;
  if (!l.enabled || f.action.empty() || f.action == "none") {
    step.kind = Kind::Skip;
    return step;
  }
  if (f.attempt == 0) {
    // The node is out already (it adds nothing to the count), but a reboot or reset disturbs
    // its NVLink / rack domain: it waits while the domain is full without it.
    step.kind = Kind::Request;
    step.action = f.action;
    step.attempt = 1;
    step.claims_budget = true;
    return step;
  }
  std::string failure;  // why this attempt counts as failed ("" while it may still work)
  std::string provider_message;
  const bool done = attempt_done(f, l, failure, provider_message);
  std::string reason = failure.empty() ? "" : "ActionFailed";
  if (done) {
    step.kind = Kind::Done;
    step.message = "done after attempt " + std::to_string(f.attempt) +
                   (provider_message.empty() ? "" : ": " + provider_message.substr(0, 400));
    return step;
  }
  // The agent's word on this request: a failed command is a failed attempt now, not at the
  // timeout; a reset it finished whose GPU is still faulty after the settle time is one too.
  if (failure.empty() && (f.action == "gpu-reset" || f.action == "reboot")) {
    if (f.agent_state == "Failed" || f.agent_state == "Rejected") {
      reason = "ActionFailed";
      failure = "the agent reported " + f.agent_state +
                (f.agent_detail.empty() ? "" : ": " + f.agent_detail);
      if (failure.size() > 400) failure = failure.substr(0, 400) + "...";
    } else if (f.agent_state == "Succeeded" && f.action == "gpu-reset") {
      const std::int64_t settle_ms = l.settle_s * 1000;
      if (f.finished_ms == 0) {
        // Recorded when first seen, so the settle time survives a restart and does not lean
        // on the node's clock.
        step.kind = Kind::MarkSettled;
        step.wait_ms = settle_ms;
        return step;
      }
      if (now - f.finished_ms < settle_ms) {
        step.kind = Kind::Settle;
        step.wait_ms = settle_ms - (now - f.finished_ms);
        return step;
      }
      reason = "FaultPersisted";
      failure = joined(f.still_faulty) + " still faulty " + std::to_string(l.settle_s) +
                " s after the agent reported the reset done";
    }
  }
  if (failure.empty() && now - f.requested_ms > l.timeout_s * 1000) {
    reason = "TimedOut";
    failure = "not done within timeoutSeconds " + std::to_string(l.timeout_s);
  }
  if (failure.empty()) {
    step.kind = Kind::AskAgain;  // idempotent per (incident, request)
    return step;
  }
  step.reason = reason;
  step.why = f.action + " attempt " + std::to_string(f.attempt) + ": " + failure;
  if (f.attempt < l.max_attempts) {
    step.kind = Kind::Request;
    step.action = f.action;
    step.attempt = f.attempt + 1;
    return step;
  }
  if (f.action == "gpu-reset") {
    // A GPU the reset did not repair: a reboot, the next stronger action. It disturbs the
    // node's domain like any reboot, so it claims its room in the budget first.
    step.kind = Kind::Escalate;
    step.action = "reboot";
    step.from = "gpu-reset";
    step.attempt = 1;
    step.claims_budget = true;
    return step;
  }
  if (f.action == "reboot" && l.replace_when_reboot_fails && l.provider_known) {
    step.kind = Kind::Escalate;
    step.action = "replace";
    step.from = "reboot";
    step.attempt = 1;
    return step;
  }
  step.kind = Kind::Fail;
  step.message = f.action + " did not complete in " + std::to_string(f.attempt) + " attempts (" +
                 step.why + "); the node stays out";
  return step;
}

}  // namespace gpufleet::sentinel
