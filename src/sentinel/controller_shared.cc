#include "sentinel/controller_shared.h"

#include <chrono>

#include "core/time.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/api/selector.h"

namespace gpufleet::sentinel::detail {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string rfc3339(std::int64_t ms) {
  return core::Timestamp::from_unix_nanos(ms * 1'000'000)
      .to_rfc3339(core::TimestampPrecision::Micros);
}

std::int64_t ms_of(std::string_view text) {
  auto t = kube::parse_rfc3339(text);
  if (!t) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count();
}

bool final_phase(std::string_view p) {
  return p == "Released" || p == "Failed" || p == "Cancelled";
}

std::string phase_of(const core::Value& rem) {
  std::string p(rem.get_string({"status", "phase"}));
  return p.empty() ? "Detected" : p;
}

core::Value regarding(const core::Value& obj, std::string_view api_version, std::string_view kind) {
  core::Value r = core::Value::map();
  r["apiVersion"] = api_version;
  r["kind"] = kind;
  r["metadata"]["name"] = kube::name_of(obj);
  r["metadata"]["uid"] = kube::uid_of(obj);
  return r;
}

core::Value node_ref(const core::Value& node) { return regarding(node, "v1", "Node"); }

bool is_gpu_node(const core::Value& node) { return kube::label_of(node, kGpuLabel) == "true"; }

Metrics::Metrics(core::metrics::Registry& r)
    : quarantines(r.counter("gpufleet_sentinel_quarantines_total",
                            "Nodes quarantined (new incidents for faults)")),
      refused(r.counter("gpufleet_sentinel_quarantines_refused_total",
                        "New quarantines the tripped circuit breaker refused", {"policy"})),
      incidents_ended(r.counter("gpufleet_sentinel_incidents_ended_total",
                                "Incidents that ended, by final phase", {"phase"})),
      pod_actions(r.counter("gpufleet_sentinel_drain_pod_actions_total", "Drain actions on pods",
                            {"action"})),
      remediation_requests(r.counter("gpufleet_sentinel_remediation_requests_total",
                                     "Remediation actions requested", {"action"})),
      job_decisions(r.counter("gpufleet_sentinel_job_decisions_total",
                              "Training jobs' drain decisions recorded: RequestCheckpoint (the "
                              "job asked to checkpoint), DrainGang (its gang evicted together)",
                              {"action"})),
      jobs_disrupted(r.counter("gpufleet_sentinel_jobs_disrupted_total",
                               "Training jobs whose gang the drain evicted, by why it went then "
                               "(Acknowledged, DeadlineExceeded, NoContract, NoWait)",
                               {"reason"})),
      rule_problems(r.counter("gpufleet_sentinel_rule_problems_total",
                              "Rule evaluation failures reported (each distinct once)")),
      breaker_tripped(r.gauge("gpufleet_sentinel_breaker_tripped",
                              "1 while the policy's circuit breaker refuses new quarantines",
                              {"policy"})),
      breaker_nodes(r.gauge("gpufleet_sentinel_breaker_window_nodes",
                            "Unique nodes quarantined within the policy's breaker window",
                            {"policy"})),
      breaker_threshold(r.gauge("gpufleet_sentinel_breaker_threshold",
                                "Unique nodes at which the policy's breaker trips", {"policy"})),
      policy_nodes(r.gauge("gpufleet_sentinel_policy_gpu_nodes",
                           "GPU nodes the policy governs (its breaker's denominator)", {"policy"})),
      incidents(r.gauge("gpufleet_sentinel_incidents", "Incidents by phase", {"phase"})),
      quarantined(r.gauge("gpufleet_sentinel_quarantined_nodes",
                          "Nodes with an incident that is not over")),
      cordon_latency(r.histogram("gpufleet_sentinel_fault_to_cordon_seconds",
                                 "From the fault's transition in NodeHealth to sentinel's cordon",
                                 {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})) {}

void GangWaits::set(const std::string& node, std::set<std::string> gangs) {
  std::lock_guard lock(mu_);
  auto it = by_node_.find(node);
  if (it == by_node_.end() && gangs.empty()) return;
  if (it != by_node_.end()) {
    for (const auto& g : it->second) {
      auto b = by_gang_.find(g);
      if (b == by_gang_.end()) continue;
      b->second.erase(node);
      if (b->second.empty()) by_gang_.erase(b);
    }
  }
  for (const auto& g : gangs) by_gang_[g].insert(node);
  if (gangs.empty()) {
    by_node_.erase(node);
  } else {
    by_node_[node] = std::move(gangs);
  }
}

std::vector<std::string> GangWaits::nodes(const std::string& gang) const {
  std::lock_guard lock(mu_);
  auto it = by_gang_.find(gang);
  if (it == by_gang_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

bool outranks(const PolicyState& a, const PolicyState& b) {
  if (a.policy.priority != b.policy.priority) return a.policy.priority > b.policy.priority;
  return a.name < b.name;
}

PolicyPtr governing_policy(const std::map<std::string, PolicyPtr>& policies,
                           const core::Value& node) {
  PolicyPtr best;
  const core::Value* labels = node.get({"metadata", "labels"});
  for (const auto& [name, p] : policies) {
    if (!p->loaded) continue;
    if (best != nullptr && !outranks(*p, *best)) continue;
    if (!kube::selector_matches(p->policy.node_selector, labels ? *labels : core::Value()))
      continue;
    best = p;
  }
  return best;
}

}  // namespace gpufleet::sentinel::detail
