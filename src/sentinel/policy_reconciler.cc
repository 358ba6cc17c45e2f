#include "sentinel/policy_reconciler.h"

#include <algorithm>
#include <chrono>
#include <unordered_set>

#include "controller/cache.h"
#include "controller/controller.h"
#include "controller/manager.h"
#include "controller/reconciler.h"
#include "controller/status.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "core/time.h"
#include "kube/api/conditions.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/api/selector.h"
#include "kube/client.h"
#include "kube/events.h"
#include "sentinel/controller.h"
#include "sentinel/quarantine.h"

namespace gpufleet::sentinel::detail {
namespace {

using namespace std::chrono_literals;
using controller::Request;
using controller::Result;

constexpr const char* kFieldManager = "gpufleet-sentinel";
constexpr const char* kPhases[] = {"Detected",   "Quarantined", "Draining", "Remediating",
                                   "Validating", "Released",    "Failed",   "Cancelled"};

// True when every field of `want` already has that value (nothing to write).
bool same_status(const core::Value& obj, const core::Value& want) {
  const core::Value* have = obj.get({"status"});
  if (have == nullptr || !have->is_map()) return false;
  for (const auto& e : want.as_map()) {
    if (e.key == "conditions") {
      const core::Value* hc = have->find("conditions");
      if (hc == nullptr || hc->size() != e.value.size()) return false;
      for (std::size_t i = 0; i < e.value.size(); ++i) {
        const core::Value& w = e.value[i];
        bool found = false;
        for (const auto& h : hc->as_list()) {
          found |= h.get_string({"type"}) == w.get_string({"type"}) &&
                   h.get_string({"status"}) == w.get_string({"status"}) &&
                   h.get_string({"reason"}) == w.get_string({"reason"}) &&
                   h.get_string({"message"}) == w.get_string({"message"});
        }
        if (!found) return false;
      }
      continue;
    }
    const core::Value* h = have->find(e.key);
    if (h == nullptr) return false;
    if (e.key == "breaker") {
      for (const auto& b : e.value.as_map()) {
        const core::Value* hb = h->find(b.key);
        if (hb == nullptr || !(*hb == b.value)) return false;
      }
      continue;
    }
    if (!(*h == e.value)) return false;
  }
  return true;
}

// Conditions as status values (kube::set_condition), each keeping its lastTransitionTime
// while its status holds; conditions not in `conds` go.
core::Value conditions_value(const core::Value& obj, const std::vector<kube::Condition>& conds,
                             std::int64_t generation) {
  core::Value out = core::Value::list();
  const core::Value* old = obj.get({"status", "conditions"});
  const auto now = std::chrono::system_clock::now();
  for (kube::Condition c : conds) {
    c.observed_generation = generation;
    if (old != nullptr && old->is_list())
      for (const auto& o : old->as_list())
        if (o.get_string({"type"}) == c.type) {
          out.push_back(o);
          break;
        }
    kube::set_condition(out, c, now);
  }
  return out;
}

class PolicyReconciler final : public controller::Reconciler {
 public:
  PolicyReconciler(controller::Manager& m, std::shared_ptr<State> state, Metrics& metrics,
                   const controller::Cache& policies, const controller::Cache& nodes,
                   const controller::Cache& remediations)
      : events_(m.event_recorder("sentinel")),
        state_(std::move(state)),
        metrics_(metrics),
        policies_(policies),
        nodes_(nodes),
        remediations_(remediations),
        status_(m.client(), api::sentinel_policies(), "SentinelPolicy", kFieldManager) {}

  Result reconcile(const Request& req, std::stop_token) override {
    if (!state_->follows(req.name)) return {};
    kube::ObjectPtr pol = policies_.get(req.key());
    count_incidents();
    if (pol == nullptr) {
      forget(req.name);
      return {};
    }
    const core::Value& obj = *pol;
    const std::int64_t generation =
        obj.get({"metadata", "generation"}) ? obj.get({"metadata", "generation"})->as_int() : 0;
    const auto [ps, changed, error] = load(obj, req.name, generation);
    // A policy loaded, edited or made invalid changes which policy governs which node.
    if (changed) {
      count_nodes(*state_, nodes_, remediations_);
    } else {
      recount_if_due();
    }
    core::Value status = core::Value::map();
    std::vector<kube::Condition> conditions;
    {
      std::lock_guard lock(state_->mu);
      if (ps->loaded) breaker_step(*ps, obj, status, conditions);
      status["gpuNodes"] = static_cast<std::int64_t>(ps->gpu_nodes);
      status["overlappingNodes"] = static_cast<std::int64_t>(ps->overlapping);
      status["quarantinedNodes"] = ps->open_incidents;
      conditions.push_back(overlap_condition(*ps));
    }
    if (!error.empty()) {
      conditions.push_back({"Ready", "False", "InvalidPolicy", error.substr(0, 30000), 0, {}});
      core::log::warn("sentinel: policy not loaded", {{"policy", req.name}, {"error", error}});
    }
    status["observedGeneration"] = generation;
    status["conditions"] = conditions_value(obj, conditions, generation);
    if (!same_status(obj, status)) status_.apply("", req.name, status);
    if (changed) enqueue_all();
    // Window expiry and the quiet-period reset are time-driven: look again.
    return {.requeue_after = 5s};
  }

 private:
  struct Loaded {
    PolicyPtr ps;
    bool changed = false;  // compiled anew, or made invalid
    std::string error;
  };

  // Compiles the policy when its uid or generation changed; the breaker keeps its durable
  // state across edits and restarts.
  Loaded load(const core::Value& obj, const std::string& name, std::int64_t generation) {
    // Restoring the breaker from the saved status (a start, or the policy re-created)? Then the
    // quarantines recorded on the Nodes and the Remediations are counted too, read before
    // taking the state lock.
    bool restoring = true;
    {
      std::lock_guard lock(state_->mu);
      auto it = state_->policies.find(name);
      if (it != state_->policies.end() && it->second->uid == kube::uid_of(obj)) {
        if (it->second->generation == generation) return {it->second, false, ""};
        restoring = !it->second->breaker.has_value();
      }
    }
    const std::vector<std::pair<std::string, std::int64_t>> recorded =
        restoring ? recorded_admissions(name) : std::vector<std::pair<std::string, std::int64_t>>{};
    std::lock_guard lock(state_->mu);
    PolicyPtr& ps = state_->policies[name];
    if (ps == nullptr) {
      ps = std::make_shared<PolicyState>();
      ps->name = name;
    }
    if (ps->uid == kube::uid_of(obj) && ps->generation == generation) return {ps, false, ""};
    const bool was_loaded = ps->loaded;
    ps->seen_uid = std::string(kube::uid_of(obj));
    ps->seen_generation = generation;
    try {
      Policy p = Policy::from_spec(obj.get({"spec"}) ? *obj.get({"spec"}) : core::Value());
      p.check_providers(state_->provider_names);
      RuleSet rules = RuleSet::compile(p.rules, p.cost_limit);
      core::Value saved;
      if (ps->breaker && ps->uid == kube::uid_of(obj)) {
        saved = ps->breaker->to_value();
      } else if (auto text = obj.get_string({"status", "breaker", "saved"}); !text.empty()) {
        saved = core::parse_json(text, "status.breaker.saved");
      }
      ps->breaker = CircuitBreaker::from_value(p.breaker, saved);
      const std::int64_t now = now_ms();
      for (const auto& [node, at] : recorded) ps->breaker->remember(node, at, now);
      ps->policy = std::move(p);
      ps->rules = std::move(rules);
      ps->problems.clear();
      ps->loaded = true;
      ps->uid = std::string(kube::uid_of(obj));
      ps->generation = generation;
      ps->created_ms = ms_of(obj.get_string({"metadata", "creationTimestamp"}));
      ++state_->policies_version;
      return {ps, true, ""};
    } catch (const core::InvalidInput& e) {
      ps->loaded = false;
      ps->generation = -1;
      ps->gpu_nodes = ps->overlapping = 0;  // an invalid policy governs nothing
      ps->overlapped_by.clear();
      ps->open_incidents = 0;
      if (was_loaded) ++state_->policies_version;
      return {ps, was_loaded, e.what()};
    }
  }

  // The quarantines this policy's breaker admitted, as the cluster records them: the Nodes'
  // quarantine records (written with the cordon, so even one whose Remediation and breaker
  // save a crash lost) and the Remediations opened under it for a fault.
  std::vector<std::pair<std::string, std::int64_t>> recorded_admissions(const std::string& name) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto& n : nodes_.list()) {
      if (kube::annotation_of(*n, kQuarantineAnnotation).empty()) continue;
      try {
        const QuarantineRecord rec = QuarantineRecord::from_node(*n);
        if (rec.admission.policy == name && rec.admission.at_ms > 0)
          out.emplace_back(std::string(kube::name_of(*n)), rec.admission.at_ms);
      } catch (const core::InvalidInput&) {
        // A damaged record is reported by the node reconciler; it admits nothing here.
      }
    }
    for (const auto& r : remediations_.list()) {
      if (kube::annotation_of(*r, kPolicyLabel) != name) continue;
      if (r->get_string({"spec", "reason"}) != "Fault") continue;
      const std::int64_t at = ms_of(r->get_string({"metadata", "creationTimestamp"}));
      if (at > 0) out.emplace_back(std::string(r->get_string({"spec", "nodeName"})), at);
    }
    return out;
  }

  // A deleted policy: its nodes go to the policy that governs them now (or none).
  void forget(const std::string& name) {
    {
      std::lock_guard lock(state_->mu);
      if (state_->policies.erase(name) == 0) return;
      ++state_->policies_version;
    }
    // Its series leave /metrics: a zeroed gauge would read as a policy with no nodes.
    for (auto* g : {&metrics_.breaker_tripped, &metrics_.breaker_nodes, &metrics_.breaker_threshold,
                    &metrics_.policy_nodes})
      g->remove({name});
    metrics_.refused.remove({name});
    count_nodes(*state_, nodes_, remediations_);
    enqueue_all();
  }

  void recount_if_due() {
    {
      std::lock_guard lock(state_->mu);
      if (state_->counted_version == state_->policies_version &&
          now_ms() - state_->counted_at_ms < 4000)
        return;
    }
    count_nodes(*state_, nodes_, remediations_);
  }

  void count_incidents() {
    std::map<std::string, std::int64_t> phases;
    std::int64_t active = 0;
    for (const auto& r : remediations_.list()) {
      std::string p = phase_of(*r);
      ++phases[p];
      if (!final_phase(p)) ++active;
    }
    for (const char* p : kPhases) metrics_.incidents.with({p}).set(static_cast<double>(phases[p]));
    metrics_.quarantined.set(static_cast<double>(active));
  }

  // The reset verb, the breaker's clock, its events, metrics, status and conditions (mu held).
  void breaker_step(PolicyState& ps, const core::Value& obj, core::Value& status,
                    std::vector<kube::Condition>& conditions) {
    const std::int64_t now = now_ms();
    CircuitBreaker& b = *ps.breaker;
    const core::Value subject = regarding(obj, "gpufleet.io/v1alpha1", "SentinelPolicy");
    // The reset verb: `gpufleet sentinel reset-breaker` writes a new token.
    const std::string token(obj.get_string({"metadata", "annotations", kResetBreakerAnnotation}));
    std::string last(obj.get_string({"status", "breaker", "lastResetToken"}));
    if (!token.empty() && token != last) {
      b.reset(now, "annotation " + std::string(kResetBreakerAnnotation) + "=" + token);
      events_.record(
          subject, kube::EventType::Normal, "BreakerReset", "Reset",
          "circuit breaker reset by " + std::string(kResetBreakerAnnotation) + "=" + token);
      last = token;
    }
    b.tick(now);
    const core::Value bs = b.status(ps.gpu_nodes);
    const bool tripped = b.tripped();
    const std::string message(bs.get_string({"message"}));
    if (tripped && !ps.was_tripped) {
      events_.record(subject, kube::EventType::Warning, "BreakerTripped", "Trip", message);
    } else if (!tripped && ps.was_tripped) {
      events_.record(subject, kube::EventType::Normal, "BreakerClosed", "Close", message);
      enqueue_all();  // nodes refused while it was open are looked at again now
    }
    ps.was_tripped = tripped;
    metrics_.breaker_tripped.with({ps.name}).set(tripped ? 1 : 0);
    metrics_.breaker_nodes.with({ps.name}).set(static_cast<double>(b.unique_nodes()));
    metrics_.breaker_threshold.with({ps.name}).set(static_cast<double>(b.threshold(ps.gpu_nodes)));
    metrics_.policy_nodes.with({ps.name}).set(static_cast<double>(ps.gpu_nodes));
    core::Value breaker = core::Value::map();
    breaker["state"] = tripped ? "Tripped" : "Closed";
    breaker["uniqueNodes"] = static_cast<std::int64_t>(b.unique_nodes());
    breaker["threshold"] = static_cast<std::int64_t>(b.threshold(ps.gpu_nodes));
    if (const core::Value* r = bs.find("refused")) breaker["refused"] = *r;
    breaker["message"] = message.substr(0, 1000);
    if (!last.empty()) breaker["lastResetToken"] = last;
    status["breaker"] = std::move(breaker);
    status["ruleCount"] = static_cast<std::int64_t>(ps.rules->size());
    core::Value problems = core::Value::list();
    for (const auto& p : ps.problems) problems.push_back(p.substr(0, 500));
    status["ruleProblems"] = std::move(problems);
    core::Value dry = core::Value::map();
    for (const auto& [rule, n] : ps.dry_run) dry[rule] = n;
    status["dryRunMatches"] = std::move(dry);
    conditions.push_back({"BreakerTripped",
                          tripped ? "True" : "False",
                          tripped ? "Tripped" : "Closed",
                          message.substr(0, 1000),
                          0,
                          {}});
    conditions.push_back({"Ready",
                          "True",
                          "PolicyLoaded",
                          std::to_string(ps.rules->size()) + " rules compiled",
                          0,
                          {}});
  }

  // Overlapping=True names the policies above this one that govern nodes it selects.
  static kube::Condition overlap_condition(const PolicyState& ps) {
    if (ps.overlapping == 0)
      return {"Overlapping", "False", "NoOverlap", "governs every GPU node it selects", 0, {}};
    std::string msg = std::to_string(ps.overlapping) +
                      " selected GPU nodes are governed by a policy of higher spec.priority (or "
                      "the same priority and an earlier name):";
    for (const auto& [other, n] : ps.overlapped_by)
      msg += " " + other + " (" + std::to_string(n) + ")";
    msg += "; narrow spec.nodeSelector or set spec.priority to choose";
    return {"Overlapping", "True", "GovernedByOtherPolicy", msg.substr(0, 2000), 0, {}};
  }

  void enqueue_all() {
    if (state_->nodes_controller == nullptr) return;
    for (const auto& n : nodes_.list())
      state_->nodes_controller->enqueue({"", std::string(kube::name_of(*n))});
  }

  kube::EventRecorder& events_;
  std::shared_ptr<State> state_;
  Metrics& metrics_;
  const controller::Cache& policies_;
  const controller::Cache& nodes_;
  const controller::Cache& remediations_;
  controller::StatusWriter status_;
};

}  // namespace

std::shared_ptr<controller::Reconciler> make_policy_reconciler(
    controller::Manager& manager, std::shared_ptr<State> state, Metrics& metrics,
    const controller::Cache& policies, const controller::Cache& nodes,
    const controller::Cache& remediations) {
  return std::make_shared<PolicyReconciler>(manager, std::move(state), metrics, policies, nodes,
                                            remediations);
}

void count_nodes(State& state, const controller::Cache& nodes,
                 const controller::Cache& remediations) {
  struct Candidate {
    PolicyPtr ps;
    core::Value selector;
    std::int64_t priority;
  };
  std::vector<Candidate> loaded;
  std::uint64_t version = 0;
  {
    std::lock_guard lock(state.mu);
    version = state.policies_version;
    for (const auto& [name, p] : state.policies)
      if (p->loaded) loaded.push_back({p, p->policy.node_selector, p->policy.priority});
  }
  // In governing order, so the first that selects a node governs it.
  std::sort(loaded.begin(), loaded.end(), [](const Candidate& a, const Candidate& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.ps->name < b.ps->name;
  });
  std::unordered_set<std::string> open;
  for (const auto& r : remediations.list())
    if (!final_phase(phase_of(*r))) open.emplace(r->get_string({"spec", "nodeName"}));
  std::vector<std::size_t> governed(loaded.size()), overlapped(loaded.size());
  std::vector<std::int64_t> incidents(loaded.size());
  std::vector<std::map<std::string, std::size_t>> by(loaded.size());
  const core::Value none;
  for (const auto& n : nodes.list()) {
    const core::Value* labels = n->get({"metadata", "labels"});
    const bool gpu = is_gpu_node(*n);
    std::size_t gov = loaded.size();
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      if (!kube::selector_matches(loaded[i].selector, labels ? *labels : none)) continue;
      if (gov == loaded.size()) {
        gov = i;
        if (gpu) ++governed[i];
        if (open.contains(std::string(kube::name_of(*n)))) ++incidents[i];
      } else if (gpu) {
        ++overlapped[i];
        ++by[i][loaded[gov].ps->name];
      }
    }
  }
  std::lock_guard lock(state.mu);
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    PolicyState& p = *loaded[i].ps;
    p.gpu_nodes = governed[i];
    p.overlapping = overlapped[i];
    p.overlapped_by = std::move(by[i]);
    p.open_incidents = incidents[i];
  }
  state.counted_version = std::max(state.counted_version, version);
  state.counted_at_ms = now_ms();
}

}  // namespace gpufleet::sentinel::detail
