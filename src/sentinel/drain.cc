#include "sentinel/drain.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::sentinel {

namespace {

bool never_drained(const core::Value& pod, const DrainPolicy& policy) {
  const std::string_view ns = kube::namespace_of(pod);
  const bool system = std::find(policy.system_namespaces.begin(), policy.system_namespaces.end(),
                                ns) != policy.system_namespaces.end();
  return system || kube::pod::owned_by_daemon_set(pod) || kube::pod::mirror(pod) ||
         kube::pod::terminal(pod);
}

PodStep step_of(const core::Value& pod) {
  PodStep step;
  step.namespace_ = std::string(kube::namespace_of(pod));
  step.name = std::string(kube::name_of(pod));
  step.uid = std::string(kube::uid_of(pod));
  return step;
}

// Already going: wait, unless it has been Terminating for too long. nullopt: not Terminating.
std::optional<PodAction> terminating_action(const core::Value& pod, const DrainPolicy& policy,
                                            std::int64_t now_ms) {
  const std::string_view deleting = pod.get_string({"metadata", "deletionTimestamp"});
  if (deleting.empty()) return std::nullopt;
  auto since = kube::parse_rfc3339(deleting);
  const std::int64_t since_ms =
      since
          ? std::chrono::duration_cast<std::chrono::milliseconds>(since->time_since_epoch()).count()
          : now_ms;
  // deletionTimestamp is when the grace period ENDS; the timeout counts from there.
  return now_ms - since_ms > policy.terminating_timeout_s * 1000 ? PodAction::ForceDelete
                                                                 : PodAction::Wait;
}

// One pod that is drained (never_drained is false), its deadlines counted from `started_ms`.
PodStep plan_pod(const core::Value& pod, const DrainPolicy& policy, std::int64_t started_ms,
                 std::int64_t now_ms) {
  PodStep step = step_of(pod);
  const std::int64_t elapsed_s = (now_ms - started_ms) / 1000;
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

  if (auto a = terminating_action(pod, policy, now_ms)) {
    step.action = *a;
    return step;
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
  return step;
}

}  // namespace

std::string_view pod_action_name(PodAction a) noexcept {
  switch (a) {
    case PodAction::Wait: return "Wait";
    case PodAction::Evict: return "Evict";
    case PodAction::Delete: return "Delete";
    case PodAction::ForceDelete: return "ForceDelete";
  }
  return "Wait";
}

std::size_t DrainPlan::held() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(steps.begin(), steps.end(), [](const PodStep& s) { return s.held; }));
}

DrainPlan plan_drain(const std::vector<const core::Value*>& pods, const DrainPolicy& policy,
                     std::int64_t started_ms, std::int64_t now_ms) {
  DrainPlan plan;
  for (const core::Value* p : pods) {
    if (never_drained(*p, policy)) {
      ++plan.skipped;
      continue;
    }
    plan.steps.push_back(plan_pod(*p, policy, started_ms, now_ms));
  }
  return plan;
}

DrainPlan plan_drain(const std::vector<const core::Value*>& pods, const DrainPolicy& policy,
                     std::int64_t started_ms, std::int64_t now_ms, const JobDrain& jobs) {
  std::set<std::string> held;
  for (const auto& d : jobs.decisions) held.insert(d.held_uids.begin(), d.held_uids.end());
  std::map<kube::GangKey, std::int64_t> disrupted;
  for (const auto& r : jobs.records)
    if (r.disrupted_ms > 0) disrupted[r.key] = r.disrupted_ms;
  // Deadlines of a disrupted job's pods count from its disruption (never before the drain's).
  auto start_of = [&](const core::Value& pod) {
    auto key = kube::gang_key_of(pod);
    auto it = key ? disrupted.find(*key) : disrupted.end();
    return it != disrupted.end() ? std::max(started_ms, it->second) : started_ms;
  };

  DrainPlan plan;
  for (const core::Value* p : pods) {
    const core::Value& pod = *p;
    if (never_drained(pod, policy)) {
      ++plan.skipped;
      continue;
    }
    if (held.contains(std::string(kube::uid_of(pod)))) {
      PodStep step = step_of(pod);
      step.held = true;
      if (auto a = terminating_action(pod, policy, now_ms)) step.action = *a;
      plan.steps.push_back(std::move(step));
      continue;
    }
    plan.steps.push_back(plan_pod(pod, policy, start_of(pod), now_ms));
  }

  std::map<std::string, const core::Value*> by_uid;
  for (const core::Value* p : jobs.pods)
    if (p != nullptr) by_uid.emplace(std::string(kube::uid_of(*p)), p);
  std::set<std::string> planned;
  for (const auto& s : plan.steps) planned.insert(s.uid);
  for (const auto& d : jobs.decisions) {
    if (d.action != kube::JobAction::DrainGang && d.action != kube::JobAction::Disrupted) continue;
    for (const kube::PodRef& r : d.evict) {
      if (!planned.insert(r.uid).second) continue;
      auto it = by_uid.find(r.uid);
      PodStep step;
      if (it != by_uid.end()) {
        if (never_drained(*it->second, policy)) continue;
        step = plan_pod(*it->second, policy, start_of(*it->second), now_ms);
      } else {
        step.namespace_ = r.ns;
        step.name = r.name;
        step.uid = r.uid;
        step.action = PodAction::Evict;
      }
      step.node = r.node;
      plan.steps.push_back(std::move(step));
    }
  }
  return plan;
}

}  // namespace gpufleet::sentinel
