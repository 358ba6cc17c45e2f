#include "hostpkg/controller/node_step.h"

#include "hostpkg/controller/text_fields.h"

namespace gpufleet::hostpkg {

namespace {

using Kind = NodeStep::Kind;

NodeStep step_of(Kind kind) {
  NodeStep s;
  s.kind = kind;
  return s;
}

NodeStep fail(std::string why, std::string result = "") {
  NodeStep s = step_of(Kind::Fail);
  s.why = std::move(why);
  s.result = std::move(result);
  return s;
}

// The cordon, protected pods and the drain; nullopt once the node is ready for its step.
std::optional<NodeStep> before_step(const NodeStepFacts& f) {
  if (!f.cordoned) return step_of(Kind::Cordon);
  if (!f.protected_running.empty()) {
    NodeStep s = step_of(Kind::WaitProtected);
    const std::int64_t now_s =
        std::chrono::duration_cast<std::chrono::seconds>(f.now.time_since_epoch()).count();
    const std::int64_t waited = f.started > 0 ? now_s - f.started : 0;
    if (waited >= f.protected_wait.count()) {
      s.report = true;
      s.why = "ProtectedPods: still running after " + std::to_string(waited) +
              "s: " + detail::join_first(f.protected_running, ", ", 5);
    }
    return s;
  }
  if (f.evictions_left) return step_of(Kind::Drain);
  return std::nullopt;
}

// A reboot: the runner asks for it and the pod dies with the node, so only the boot ID says
// whether it happened. A step the runner itself reported failed is a failure.
NodeStep reboot_pod(const NodeStepFacts& f, bool overdue) {
  const std::optional<StageOutcome>& out = f.outcome;
  const bool runner_failed = out && !out->ok && out->status != "pod-failed";
  if (!runner_failed && !overdue) return step_of(Kind::Wait);
  NodeStep s = fail("interrupt/reboot: " + (runner_failed ? out->message
                                                          : std::string("boot ID still ") + f.boot +
                                                                " after the interrupt timeout"),
                    "failed");
  s.count_after_write = true;
  return s;
}

// The plan is empty: certify's verdict, when the set asks for one, before the uncordon.
NodeStep validation_step(const NodeStepFacts& f) {
  Validation policy;
  policy.when = f.validate_when;
  if (!policy.required(f.interrupted)) return step_of(Kind::Finish);
  if (f.validation.empty()) {
    NodeStep s = step_of(Kind::AskValidation);
    s.validation = f.validation_name;
    return s;
  }
  const ValidationSeen& v = f.validation_state;
  if (f.validation_exists && v.phase == "Passed") return step_of(Kind::Finish);
  if (f.validation_exists && (v.phase == "Failed" || v.phase == "Expired")) {
    return fail("validation: ValidationRequest " + f.validation + " " + v.phase +
                (v.why.empty() ? std::string() : ": " + v.why));
  }
  NodeStep s = step_of(f.validation_exists ? Kind::Wait : Kind::CreateValidation);
  s.validating = true;
  return s;
}

}  // namespace

std::string validation_request_name(const std::string& set, const std::string& node,
                                    std::int64_t generation) {
  std::string name = "hostpkg-" + set + "-" + node + "-g" + std::to_string(generation);
  if (name.size() <= 253) return name;
  // Too long for a name: keep a readable prefix and make it unique with a hash of the whole.
  std::string prefix = name.substr(0, 253 - 17);
  while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '.')) prefix.pop_back();
  return prefix + "-" + short_hash(name);
}

ValidationSeen validation_seen(const core::Value& request, const std::string& node) {
  ValidationSeen out;
  out.phase = std::string(request.get_string({"status", "phase"}));
  if (out.phase != "Failed" && out.phase != "Expired") return out;
  out.why = std::string(request.get_string({"status", "message"}));
  if (const core::Value* results = request.get({"status", "results"});
      results && results->is_list()) {
    for (const auto& r : results->as_list()) {
      if (r.get_string({"node"}) != node || r.get_string({"verdict"}) != "Failed") continue;
      std::string why(r.get_string({"category"}));
      for (std::string_view part : {r.get_string({"reason"}), r.get_string({"message"})}) {
        if (part.empty()) continue;
        if (!why.empty()) why += ": ";
        why += part;
      }
      if (!why.empty()) out.why = std::move(why);
    }
  }
  return out;
}

NodeStep decide_node_step(const NodeStepFacts& f) {
  if (std::optional<NodeStep> gate = before_step(f)) return *gate;
  if (!f.plan.blocked.empty()) return fail("blocked: " + detail::join_first(f.plan.blocked, "; "));
  if (f.plan.steps.empty()) return validation_step(f);
  const PlannedStep& step = f.plan.steps.front();
  const std::string stage(stage_name(step.stage));
  const bool reboot =
      step.stage == Stage::Interrupt && step.interrupt.kind == InterruptKind::Reboot;
  if (reboot) {
    if (f.recorded_boot.empty()) {
      // Remember the boot before asking for the reboot: after a restart, a changed boot ID
      // is the proof it happened, and the reboot is never asked for twice.
      NodeStep s = step_of(Kind::RememberBoot);
      s.boot_id = f.boot.empty() ? "unknown" : f.boot;
      return s;
    }
    if (f.boot != f.recorded_boot && !f.boot.empty() && f.ready) {
      NodeStep s = step_of(Kind::StepDone);
      s.reboot = true;
      s.result = "succeeded";
      s.interrupt = "reboot";
      return s;
    }
  }
  if (!f.pod_exists) return step_of(Kind::CreatePod);
  const bool overdue = f.pod_created && f.now > *f.pod_created + step.timeout + kStagePodGrace;
  if (reboot) return reboot_pod(f, overdue);
  if (!f.outcome) {
    if (overdue)
      return fail(step.package + "/" + stage + ": stage pod " + f.pod_name +
                  " did not finish within its timeout");
    return step_of(Kind::Wait);
  }
  if (!f.outcome->ok)
    return fail((step.package.empty() ? std::string("interrupt") : step.package) + "/" + stage +
                    ": " + f.outcome->status + ": " + f.outcome->message,
                f.outcome->status);
  NodeStep s = step_of(Kind::StepDone);
  s.result = f.outcome->status;
  if (step.stage == Stage::Interrupt)
    s.interrupt = std::string(interrupt_name(step.interrupt.kind));
  return s;
}

}  // namespace gpufleet::hostpkg
