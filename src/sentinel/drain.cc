#include "sentinel/drain.h"

#include <algorithm>

#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::sentinel {

std::string_view pod_action_name(PodAction a) noexcept {
  switch (a) {
    case PodAction::Wait: return "Wait";
    case PodAction::Evict: return "Evict";
    case PodAction::Delete: return "Delete";
    case PodAction::ForceDelete: return "ForceDelete";
  }
  return "Wait";
}

DrainPlan plan_drain(const std::vector<const core::Value*>& pods, const DrainPolicy& policy,
                     std::int64_t started_ms, std::int64_t now_ms) {
  DrainPlan plan;
  const std::int64_t elapsed_s = (now_ms - started_ms) / 1000;
  for (const core::Value* p : pods) {
    const core::Value& pod = *p;
    const std::string_view ns = kube::namespace_of(pod);
    const bool system = std::find(policy.system_namespaces.begin(), policy.system_namespaces.end(),
                                  ns) != policy.system_namespaces.end();
    if (system || kube::pod::owned_by_daemon_set(pod) || kube::pod::mirror(pod) ||
        kube::pod::terminal(pod)) {
      ++plan.skipped;
      continue;
    }
    PodStep step;
    step.namespace_ = std::string(ns);
    step.name = std::string(kube::name_of(pod));
    step.uid = std::string(kube::uid_of(pod));
    const DrainRule* rule = nullptr;
    for (const auto& r : policy.modes) {
      if (r.matches(pod)) {
        rule = &r;
        break;
      }
    }
    step.mode = rule != nullptr ? rule->mode : policy.default_mode;
    const std::int64_t timeout_s =
        rule != nullptr && rule->timeout_s > 0 ? rule->timeout_s : policy.deadline_s;

    const std::string_view deleting = pod.get_string({"metadata", "deletionTimestamp"});
    if (!deleting.empty()) {
      // Already going: wait, unless it has been Terminating for too long.
      auto since = kube::parse_rfc3339(deleting);
      const std::int64_t since_ms =
          since ? std::chrono::duration_cast<std::chrono::milliseconds>(since->time_since_epoch())
                      .count()
                : now_ms;
      // deletionTimestamp is when the grace period ENDS; the timeout counts from there.
      step.action = now_ms - since_ms > policy.terminating_timeout_s * 1000 ? PodAction::ForceDelete
                                                                            : PodAction::Wait;
      plan.steps.push_back(std::move(step));
      continue;
    }
    switch (step.mode) {
      case DrainMode::Evict:
        step.action = elapsed_s >= policy.deadline_s ? PodAction::Delete : PodAction::Evict;
        break;
      case DrainMode::AllowCompletion:
        if (elapsed_s < timeout_s) {
          step.action = PodAction::Wait;
        } else {
          step.action = elapsed_s >= std::max(timeout_s, policy.deadline_s) + policy.deadline_s
                            ? PodAction::Delete
                            : PodAction::Evict;
        }
        break;
      case DrainMode::Delete:
        step.action = elapsed_s >= timeout_s ? PodAction::Delete : PodAction::Evict;
        break;
    }
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

}  // namespace gpufleet::sentinel
