#include "sentinel/controller.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "controller/budget.h"
#include "controller/disruption_reservation.h"
#include "controller/manager.h"
#include "controller/status.h"
#include "controller/work_pool.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/time.h"
#include "kube/api/conditions.h"
#include "kube/api/cordon.h"
#include "kube/api/disruption.h"
#include "kube/api/meta.h"
#include "kube/api/names.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kube/events.h"
#include "sentinel/drain.h"
#include "sentinel/policy.h"
#include "sentinel/policy_reconciler.h"
#include "sentinel/quarantine.h"

namespace gpufleet::sentinel {

namespace api {
kube::ResourceId sentinel_policies() {
  return {"gpufleet.io", "v1alpha1", "sentinelpolicies", false};
}
kube::ResourceId remediations() { return {"gpufleet.io", "v1alpha1", "remediations", false}; }
kube::ResourceId node_healths() { return {"gpufleet.io", "v1alpha1", "nodehealths", false}; }
kube::ResourceId validation_requests() {
  return {"gpufleet.io", "v1alpha1", "validationrequests", false};
}
}  // namespace api

namespace {

using namespace std::chrono_literals;
using namespace detail;
using controller::Request;
using controller::Result;

constexpr const char* kBreakerFieldManager = "gpufleet-sentinel-breaker";
constexpr std::string_view kRequestAnnotation = "sentinel.gpufleet.io/remediation-request";

std::set<std::string> string_set(const core::Value* list) {
  std::set<std::string> out;
  if (list == nullptr || !list->is_list()) return out;
  for (const auto& s : list->as_list())
    if (s.is_string()) out.insert(s.as_string());
  return out;
}

// NodeHealth's status.history for the rules, each entry with ageSeconds (now - time), so a
// pattern can say "within 24 h" (rules.h). An entry without a readable time has no age.
core::Value history_with_age(const core::Value* history, std::int64_t now) {
  if (history == nullptr || !history->is_list()) return core::Value::list();
  core::Value out = *history;
  for (auto& h : out.as_list()) {
    if (!h.is_map()) continue;
    if (const std::int64_t at = ms_of(h.get_string({"time"})); at > 0)
      h["ageSeconds"] = std::max<std::int64_t>(0, (now - at) / 1000);
  }
  return out;
}

// Incident names: "<node>-<milliseconds since the epoch, base 36>", unique per node (one
// incident per node at a time), at most 253 characters.
std::string incident_name(std::string_view node, std::int64_t ms) {
  std::string digits;
  std::int64_t s = ms;
  do {
    digits.insert(digits.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[s % 36]);
    s /= 36;
  } while (s > 0);
  std::string base(node.substr(0, 253 - digits.size() - 1));
  return base + "-" + digits;
}

// ---- the annotation remediator ----

class AnnotationRemediator final : public Remediator {
 public:
  explicit AnnotationRemediator(kube::Client& client) : client_(client) {}
  void request(const RemediationRequest& r) override {
    core::Value req = core::Value::map();
    req["incident"] = r.incident;
    req["attempt"] = r.attempt;
    req["action"] = r.action;
    if (!r.gpus.empty()) {
      core::Value g = core::Value::list();
      for (const auto& u : r.gpus) g.push_back(u);
      req["gpus"] = std::move(g);
    }
    core::Value patch;
    patch["metadata"]["annotations"][kRequestAnnotation] = core::to_json(req);
    client_.patch(kube::resources::nodes(), "", r.node, kube::PatchType::Merge, patch);
  }

 private:
  kube::Client& client_;
};

// ---- the node reconciler ----

class NodeReconciler final : public controller::Reconciler {
 public:
  NodeReconciler(controller::Manager& m, std::shared_ptr<State> state, Metrics& metrics,
                 std::shared_ptr<Remediator> remediator,
                 std::map<std::string, std::shared_ptr<ReplacementProvider>> providers,
                 const controller::Cache& nodes, const controller::Cache& healths,
                 const controller::Cache& remediations, const controller::Cache& pods,
                 const controller::Cache& vreqs, const controller::Cache& policies,
                 std::size_t follow_up_threads)
      : client_(m.client()),
        events_(m.event_recorder("sentinel")),
        state_(std::move(state)),
        metrics_(metrics),
        remediator_(std::move(remediator)),
        providers_(std::move(providers)),
        nodes_(nodes),
        healths_(healths),
        remediations_(remediations),
        pods_(pods),
        vreqs_(vreqs),
        policies_(policies),
        breaker_status_(m.client(), api::sentinel_policies(), "SentinelPolicy",
                        kBreakerFieldManager),
        budget_(m.client()),
        claims_(m.client(), {.namespace_ = m.options().lease_namespace}),
        follow_ups_(
            follow_up_threads, nullptr,
            [](const std::string& node, const std::string& what) {
              // The next look of the node finishes it (a record without its Remediation).
              core::log::warn("sentinel: quarantine follow-up failed",
                              {{"node", node}, {"error", what}});
            }) {}

  Result reconcile(const Request& req, std::stop_token) override {
    // A quarantine's follow-up is still writing: look again shortly (its writes are events
    // for the node too).
    if (follow_ups_.busy(req.name)) return {.requeue_after = 100ms};
    kube::ObjectPtr node = nodes_.get(req.key());
    kube::ObjectPtr active;
    // Every fault is acted on once: entities of ended incidents (released after certify, a
    // manual uncordon, a Failed one handed back by a person) are not quarantined again for
    // the same fault, only for a newer transition in NodeHealth.
    std::map<std::string, std::int64_t> overridden;
    for (const auto& r : remediations_.by_index("node", req.name)) {
      const std::string p = phase_of(*r);
      if (final_phase(p)) {
        const std::int64_t done = ms_of(r->get_string({"status", "completedAt"}));
        for (const auto& e : string_set(r->get({"spec", "entities"})))
          overridden[e] = std::max(overridden[e], done);
      }
      if (final_phase(p)) continue;
      if (active == nullptr || kube::name_of(*r) < kube::name_of(*active)) active = r;
    }
    // At start, and just after a policy is created or deleted, the policy that governs the
    // node is not known yet: acting under a lower-ranked one would be acting wrongly.
    if (!policies_settled()) return {.requeue_after = 200ms};
    const PolicyPtr ps = policy_for(node.get(), active.get());
    if (ps == nullptr) return {};  // no (valid) policy governs the node: monitor-only
    Policy policy;
    std::int64_t policy_created = 0;
    {
      std::lock_guard lock(state_->mu);
      policy = ps->policy;
      policy_created = ps->created_ms;
    }
    if (node == nullptr) {
      if (active == nullptr) return {};
      // A replacement deletes the Node; the new machine registers under the same name.
      const core::Value* a = active->get({"status", "action"});
      if (phase_of(*active) == "Remediating" && a != nullptr &&
          a->get_string({"type"}) == "replace") {
        const std::int64_t requested = ms_of(a->get_string({"requestedAt"}));
        if (now_ms() - requested <= policy.remediation.timeout_s * 1000)
          return {.requeue_after = 2s};
        finish(*active, "Failed", "the replacement node did not register in time", nullptr);
        return {};
      }
      finish(*active, "Failed", "the node was deleted", nullptr);
      return {};
    }
    QuarantineRecord rec;
    try {
      rec = QuarantineRecord::from_node(*node);
    } catch (const core::InvalidInput& e) {
      events_.record(node_ref(*node), kube::EventType::Warning, "QuarantineRecordDamaged", "Read",
                     e.what());
      return {};
    }
    kube::ObjectPtr health = healths_.get(req.key());
    const std::set<std::string> faulty =
        health != nullptr ? faulty_entities(*health) : std::set<std::string>{};

    if (active != nullptr) return drive(policy, *node, *active, rec, faulty, health.get());

    bool take_over = false;  // the node is held by a Failed incident
    if (!rec.incident.empty()) {
      kube::ObjectPtr named = remediations_.get(rec.incident);
      if (named == nullptr) {
        // Quarantined, then killed before the Remediation existed: create it now, with the
        // rules that match the recorded entities now and their action (without them the
        // incident would skip its remediation and go straight to Validating).
        Decision d;
        std::string action;
        if (!rec.entities.empty()) {
          std::set<std::string> still, matched;
          for (const auto& e : rec.entities)
            if (faulty.contains(e)) still.insert(e);
          std::int64_t since = 0;
          if (health != nullptr && !still.empty())
            evaluate(*ps, *health, *node, still, overridden, d, matched, since);
          action = d.remediate.empty() ? policy.remediation.default_action : d.remediate;
        }
        create_incident(*node, ps->name, rec.incident,
                        rec.entities.empty() ? "NewNode" : "Fault", rec.entities, d.matched,
                        rec.cordoned, rec.taints, action);
        return {.requeue = true};
      }
      if (phase_of(*named) != "Failed") {
        // A finished incident whose release was interrupted: finish it.
        patch_node(*node, plan_release_all(*node));
        return {.requeue = true};
      }
      // A Failed incident keeps the node out until a person hands it back (uncordons it, or
      // removes a taint-only quarantine's taints): then sentinel's marks go and the node is
      // watched like any other. While it is out, a new fault opens a new incident that takes
      // the quarantine over (below), so no fault on the node is ever ignored.
      if (handed_back(*node, rec)) {
        patch_node(*node, plan_release_all(*node));
        events_.record(node_ref(*node), kube::EventType::Normal, "HandedBack", "Release",
                       "the node was made schedulable after incident " + rec.incident +
                           " failed; sentinel's marks removed");
        return {.requeue = true};
      }
      take_over = true;
    }

    // A new incident? Evaluate the rules over every faulty entity.
    Decision decision;
    std::set<std::string> entities;
    std::int64_t fault_since = 0;
    if (health != nullptr && !faulty.empty())
      evaluate(*ps, *health, *node, faulty, overridden, decision, entities, fault_since);
    if (!decision.cordon && decision.taints.empty()) {
      return take_over ? Result{} : gate_new_node(ps->name, policy, policy_created, *node);
    }
    const std::int64_t now = now_ms();
    std::string refused;
    std::uint64_t version = 0;
    {
      std::lock_guard lock(state_->mu);
      if (!ps->loaded) return {.requeue = true};  // edited meanwhile: look again under it
      ps->breaker->tick(now);
      // Admitted before (its quarantine write failed and is retried): it already counts.
      BreakerDecision b = ps->breaker->tripped() && ps->breaker->counts(req.name)
                              ? BreakerDecision{true, ""}
                              : ps->breaker->admit(req.name, now, ps->gpu_nodes);
      if (b.admitted) {
        version = ++ps->breaker_version;
      } else {
        refused = b.reason.empty() ? "refused" : b.reason;
      }
    }
    if (!refused.empty()) {
      metrics_.refused.with({ps->name}).inc();
      events_.record(node_ref(*node), kube::EventType::Warning, "QuarantineRefused", "Quarantine",
                     "circuit breaker of SentinelPolicy " + ps->name + ": " + refused);
      return {.requeue_after = 15s};
    }
    // The cordon is the only write between the fault and the node being out: the breaker's
    // admission is recorded in the same patch (the quarantine record), so the breaker's own
    // save, the Remediation, its status and the Event follow on the follow-up pool, and a
    // crash in between loses nothing (the breaker is rebuilt from the records; a record
    // without its Remediation gets it on the next look).
    const std::string name = incident_name(req.name, now);
    std::optional<core::Value> patched = patch_node(
        *node, plan_quarantine(*node, decision, entities, name, take_over, {ps->name, now}));
    const std::int64_t cordoned = now_ms();
    metrics_.quarantines.inc();
    if (fault_since > 0 && cordoned >= fault_since) {
      metrics_.cordon_latency.observe(static_cast<double>(cordoned - fault_since) / 1000.0);
    }
    std::string action =
        decision.remediate.empty() ? policy.remediation.default_action : decision.remediate;
    std::optional<core::Value> escalation = rule_escalation(policy, decision, action);
    const std::int64_t latency = fault_since > 0 ? cordoned - fault_since : -1;
    follow_ups_.submit(req.name, [this, ps, version, policy = std::move(policy),
                                  out = patched ? std::move(*patched) : *node,
                                  decision = std::move(decision), entities = std::move(entities),
                                  name, action = std::move(action),
                                  escalation = std::move(escalation), cordoned, latency] {
      after_cordon(ps, version, policy, out, decision, entities, name, action, escalation,
                   cordoned, latency);
    });
    return {};
  }

 private:
  // What follows a quarantine's cordon, off the worker: the incident, its Events and status,
  // and the breaker's durable form.
  void after_cordon(const PolicyPtr& ps, std::uint64_t version, const Policy& policy,
                    const core::Value& node, const Decision& decision,
                    const std::set<std::string>& entities, const std::string& name,
                    const std::string& action, const std::optional<core::Value>& escalation,
                    std::int64_t cordoned, std::int64_t latency) {
    std::optional<core::Value> rem =
        create_incident(node, ps->name, name, "Fault", entities, decision.matched, decision.cordon,
                        decision.taints, action, escalation ? &*escalation : nullptr);
    events_.record(node_ref(node), kube::EventType::Warning, "Quarantined", "Quarantine",
                   "rules " + join(decision.matched) + " matched " + join(entities));
    if (escalation) {
      const bool applied = escalation->find("applied")->as_bool();
      events_.record(node_ref(node), kube::EventType::Warning,
                     applied ? "RemediationEscalated" : "EscalationNotApplied", "Remediate",
                     std::string(escalation->get_string({"message"})));
    }
    if (rem) {
      // The quarantine is known to be on the Node (the patch answered, or there was nothing
      // to change): the incident's status goes now, from the objects as written, instead of
      // on a later look whose Node copy may still predate the patch (409, backoff).
      after_quarantine(policy, node, *rem, false, now_ms(), [&](core::Value& s) {
        s["quarantinedAt"] = rfc3339(cordoned);
        if (latency >= 0) s["cordonLatencyMs"] = latency;
      });
      std::lock_guard lock(latency_mu_);
      if (status_written_.size() < 100'000) status_written_.insert(name);
    } else {
      // Created before (a retried look): its status is written on the next look.
      std::lock_guard lock(latency_mu_);
      if (cordon_latency_.size() < 100'000) cordon_latency_[name] = latency;
    }
    save_breaker(ps, version);
  }

  static std::string join(const auto& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ",") + std::string(i);
    return out.size() > 400 ? out.substr(0, 400) + "..." : out;
  }

  // A rule's `escalate` (rules.h) over the action the matching rules asked for: applied when
  // it is stronger and the policy can carry it out (a replacement needs a provider), else
  // recorded with the reason and the fix. nullopt when no rule escalates above `action`.
  // Recorded in the incident's spec.escalation (what was decided at detection).
  static std::optional<core::Value> rule_escalation(const Policy& policy, const Decision& d,
                                                    std::string& action) {
    if (d.escalate.empty() || action_strength(d.escalate) <= action_strength(action))
      return std::nullopt;
    core::Value e = core::Value::map();
    e["rule"] = d.escalate_rule;
    e["from"] = action;
    e["to"] = d.escalate;
    std::string why;
    if (!policy.remediation.enabled) {
      why = "spec.remediation.enabled is false; set it to true for sentinel to act";
    } else if (d.escalate == "replace" && policy.remediation.provider.empty()) {
      why =
          "spec.remediation.replacement.provider is not set; name the provider that replaces "
          "nodes, e.g. replacement: {provider: simulator}";
    }
    e["applied"] = why.empty();
    e["message"] = "rule '" + d.escalate_rule + "' escalates " + action + " to " + d.escalate +
                   (why.empty() ? "" : "; not applied: " + why);
    if (why.empty()) action = d.escalate;
    return e;
  }

  void evaluate(PolicyState& ps, const core::Value& health, const core::Value& node,
                const std::set<std::string>& faulty,
                const std::map<std::string, std::int64_t>& overridden, Decision& decision,
                std::set<std::string>& entities, std::int64_t& fault_since) {
    const core::Value* checks = health.get({"status", "checks"});
    const core::Value hist = history_with_age(health.get({"status", "history"}), now_ms());
    std::lock_guard lock(state_->mu);
    if (!ps.loaded) return;
    for (const auto& c : checks->as_list()) {
      const std::string check(c.get_string({"name"}));
      auto consider = [&](const core::Value& src, const std::string& key, std::string_view id) {
        if (!faulty.contains(key)) return;
        if (auto o = overridden.find(key);
            o != overridden.end() && ms_of(src.get_string({"lastTransitionTime"})) <= o->second)
          return;
        core::Value event = core::Value::map();
        event["check"] = check;
        if (!id.empty()) event["entity"] = std::string(id);
        for (std::string_view f : {"kind", "state", "reason", "message"})
          if (const core::Value* v = src.find(f)) event[f] = *v;
        std::vector<std::string> problems;
        Decision d = ps.rules->evaluate(event, health, node, hist, &problems);
        for (auto& p : problems) {
          metrics_.rule_problems.inc();
          core::log::warn("sentinel: rule problem", {{"problem", p}});
          if (ps.problems.size() < 32) ps.problems.push_back(p);
        }
        for (const auto& r : d.dry_run) ++ps.dry_run[r];
        if (!d.acts()) return;
        entities.insert(key);
        decision.cordon = decision.cordon || d.cordon;
        for (const auto& t : d.taints) {
          bool have = false;
          for (const auto& o : decision.taints) have |= o.key == t.key && o.effect == t.effect;
          if (!have) decision.taints.push_back(t);
        }
        auto strength = [](std::string_view a) { return action_strength(a); };
        if (strength(d.remediate) > strength(decision.remediate)) decision.remediate = d.remediate;
        if (strength(d.escalate) > strength(decision.escalate)) {
          decision.escalate = d.escalate;
          decision.escalate_rule = d.escalate_rule;
        }
        for (const auto& m : d.matched)
          if (std::find(decision.matched.begin(), decision.matched.end(), m) ==
              decision.matched.end())
            decision.matched.push_back(m);
        const std::int64_t since = ms_of(src.get_string({"lastTransitionTime"}));
        if (since > 0 && (fault_since == 0 || since < fault_since)) fault_since = since;
      };
      const core::Value* list = c.find("entities");
      if (list != nullptr && list->is_list() && list->size() > 0) {
        for (const auto& e : list->as_list()) {
          const std::string id(e.get_string({"id"}));
          consider(e, check + "/" + id, id);
        }
      } else {
        consider(c, check, "");
      }
    }
  }

  // The breaker's durable form into the policy's status before the quarantine it admitted
  // happens (a crash in between over-counts one node, never under-counts). Group commit: the
  // first waiter writes the state as it is then (covering every admission so far); the others
  // wait for a write that covers theirs, so a storm costs one write per round trip, not one per
  // node.
  void save_breaker(const PolicyPtr& ps, std::uint64_t version) {
    std::unique_lock lock(state_->mu);
    while (ps->saved_version < version) {
      if (ps->saving) {
        state_->saved_cv.wait(lock);
        continue;
      }
      ps->saving = true;
      const std::uint64_t covers = ps->breaker_version;
      core::Value status;
      status["breaker"]["saved"] = core::to_json(ps->breaker->to_value());
      lock.unlock();
      std::exception_ptr error;
      try {
        breaker_status_.apply("", ps->name, status);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      ps->saving = false;
      if (!error) ps->saved_version = std::max(ps->saved_version, covers);
      state_->saved_cv.notify_all();
      if (error) std::rethrow_exception(error);
    }
  }

  // Every followed SentinelPolicy in the cache has been looked at by the policy reconciler at
  // its current uid and generation, and no deleted one is still followed.
  bool policies_settled() {
    const std::vector<kube::ObjectPtr> cached = policies_.list();
    std::lock_guard lock(state_->mu);
    std::size_t followed = 0;
    for (const auto& obj : cached) {
      const std::string name(kube::name_of(*obj));
      if (!state_->follows(name)) continue;
      ++followed;
      auto it = state_->policies.find(name);
      if (it == state_->policies.end()) return false;
      const core::Value* g = obj->get({"metadata", "generation"});
      if (it->second->seen_uid != kube::uid_of(*obj) ||
          it->second->seen_generation != (g != nullptr && g->is_int() ? g->as_int() : 0))
        return false;
    }
    return followed == state_->policies.size();
  }

  // The policy a node is reconciled under: the one governing it now; for an incident on a node
  // no policy governs any more (deleted, or its labels changed), the one it was opened under
  // while that still exists. nullptr: monitor-only.
  PolicyPtr policy_for(const core::Value* node, const core::Value* incident) {
    std::lock_guard lock(state_->mu);
    if (node != nullptr)
      if (PolicyPtr p = governing_policy(state_->policies, *node)) return p;
    if (incident == nullptr) return nullptr;
    auto it = state_->policies.find(std::string(kube::annotation_of(*incident, kPolicyLabel)));
    return it != state_->policies.end() && it->second->loaded ? it->second : nullptr;
  }

  Result gate_new_node(const std::string& policy_name, const Policy& policy,
                       std::int64_t policy_created, const core::Value& node) {
    if (!policy.validation.enabled || !policy.validation.new_nodes) return {};
    if (!is_gpu_node(node) || !kube::annotation_of(node, kValidatedAnnotation).empty()) return {};
    // Only nodes that joined after the policy: installing sentinel must not cordon a fleet.
    const std::int64_t created = ms_of(node.get_string({"metadata", "creationTimestamp"}));
    if (created == 0 || created <= policy_created) return {};
    const std::string name = incident_name(kube::name_of(node), now_ms());
    Decision d;
    d.cordon = true;
    patch_node(node, plan_quarantine(node, d, {}, name));
    create_incident(node, policy_name, name, "NewNode", {}, {}, true, {}, "none");
    events_.record(node_ref(node), kube::EventType::Normal, "ValidationRequired", "Quarantine",
                   "new node held out of scheduling until certify passes it");
    return {};
  }

  // The Node as patched, or nullopt when there was nothing to change.
  std::optional<core::Value> patch_node(const core::Value& node, const NodeChange& change) {
    auto patch = node_patch(node, change);
    if (!patch) return std::nullopt;
    // 409 Conflict (the Node changed since the cache's copy) throws: retried with backoff
    // from the newer copy.
    return client_.patch(kube::resources::nodes(), "", kube::name_of(node), kube::PatchType::Merge,
                         *patch);
  }

  // The Remediation as created, or nullopt when it existed already.
  std::optional<core::Value> create_incident(const core::Value& node,
                                             const std::string& policy_name,
                                             const std::string& name,
                                             const std::string& reason,
                                             const std::set<std::string>& entities,
                                             const std::vector<std::string>& rules, bool cordon,
                                             const std::vector<Taint>& taints,
                                             const std::string& action,
                                             const core::Value* escalation = nullptr) {
    core::Value rem;
    rem["apiVersion"] = "gpufleet.io/v1alpha1";
    rem["kind"] = "Remediation";
    rem["metadata"]["name"] = name;
    rem["metadata"]["labels"][kNodeLabel] = std::string(kube::name_of(node));
    // The annotation is what sentinel reads; the label (when the name fits one) lets a person
    // list a policy's incidents (kubectl get remediations -l sentinel.gpufleet.io/policy=P).
    rem["metadata"]["annotations"][kPolicyLabel] = policy_name;
    if (kube::check_label_value(policy_name).empty())
      rem["metadata"]["labels"][kPolicyLabel] = policy_name;
    rem["spec"]["nodeName"] = std::string(kube::name_of(node));
    rem["spec"]["reason"] = reason;
    core::Value e = core::Value::list();
    for (const auto& x : entities) e.push_back(x);
    rem["spec"]["entities"] = std::move(e);
    core::Value r = core::Value::list();
    for (const auto& x : rules) r.push_back(x);
    rem["spec"]["rules"] = std::move(r);
    rem["spec"]["cordon"] = cordon;
    core::Value t = core::Value::list();
    for (const auto& x : taints) t.push_back(x.to_string());
    rem["spec"]["taints"] = std::move(t);
    if (!action.empty()) rem["spec"]["action"] = action;
    if (escalation != nullptr) rem["spec"]["escalation"] = *escalation;
    rem["spec"]["detectedAt"] = rfc3339(now_ms());
    try {
      return client_.create(api::remediations(), rem);
    } catch (const kube::ApiError& err) {
      if (!err.is(kube::Reason::AlreadyExists)) throw;
    }
    return std::nullopt;
  }

  // Writes the Remediation's status with a compare-and-swap on its resourceVersion: a stale
  // cache copy gets 409 and the key is looked at again from the newer copy, so a step is never
  // taken twice on an outdated view.
  void write_status(const core::Value& rem, core::Value status) {
    core::Value obj = rem;
    obj["status"] = std::move(status);
    client_.update_status(api::remediations(), obj);
  }

  core::Value status_of(const core::Value& rem) {
    const core::Value* s = rem.get({"status"});
    return s != nullptr && s->is_map() ? *s : core::Value::map();
  }

  void set_phase(const core::Value& rem, const std::string& phase, const std::string& message,
                 const std::function<void(core::Value&)>& extra = nullptr) {
    core::Value s = status_of(rem);
    s["phase"] = phase;
    s["message"] = message.substr(0, 1000);
    s["phaseStartedAt"] = rfc3339(now_ms());
    if (final_phase(phase)) s["completedAt"] = rfc3339(now_ms());
    if (extra) extra(s);
    write_status(rem, std::move(s));
    if (final_phase(phase)) metrics_.incidents_ended.with({phase}).inc();
    core::log::info("sentinel: incident phase",
                    {{"incident", std::string(kube::name_of(rem))},
                     {"node", std::string(rem.get_string({"spec", "nodeName"}))},
                     {"phase", phase},
                     {"message", message}});
  }

  // Ends the incident: sentinel's marks off the node first (when it is there and the phase
  // lets it back), then the final phase.
  void finish(const core::Value& rem, const std::string& phase, const std::string& message,
              const core::Value* node, bool validated = false,
              const std::function<void(core::Value&)>& extra = nullptr) {
    if (node != nullptr && phase != "Failed") {
      NodeChange c = plan_release_all(*node);
      auto patch = node_patch(*node, c);
      if (validated) {
        if (!patch) patch = core::Value::map();
        (*patch)["metadata"]["annotations"][kValidatedAnnotation] = rfc3339(now_ms());
        (*patch)["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(*node));
      }
      if (patch) {
        client_.patch(kube::resources::nodes(), "", kube::name_of(*node), kube::PatchType::Merge,
                      *patch);
      }
    }
    set_phase(rem, phase, message, extra);
    if (node != nullptr) {
      events_.record(node_ref(*node),
                     phase == "Failed" ? kube::EventType::Warning : kube::EventType::Normal,
                     "Incident" + phase, "Release", message);
    }
  }

  std::vector<const core::Value*> pods_on(const std::string& node,
                                          std::vector<kube::ObjectPtr>& keep) {
    keep = pods_.by_index("node", node);
    std::vector<const core::Value*> out;
    for (const auto& p : keep) out.push_back(p.get());
    return out;
  }

  // The phase after Quarantined: Draining, Remediating, or Validating (a new node, or nothing
  // to drain or do).
  void after_quarantine(const Policy& policy, const core::Value& node, const core::Value& rem,
                        bool new_node, std::int64_t now,
                        const std::function<void(core::Value&)>& extra) {
    const std::string action(rem.get_string({"spec", "action"}));
    if (new_node) {
      // Validation of a new node is not forced by a fault: while the node's domain is at its
      // DisruptionBudget limit it stays Quarantined (the Quarantined step holds it for budget).
      if (budget_wait(node, rem)) {
        set_phase(rem, "Quarantined", "new node held out; waiting for room in its domain", extra);
        return;
      }
      enter_validating(policy, node, rem, "new node held out until certify passes it",
                       [&](core::Value& s) {
                         if (extra) extra(s);
                         clear_budget_wait(s);
                       });
    } else if (policy.drain.enabled) {
      set_phase(rem, "Draining", "draining the node's pods", [&](core::Value& s) {
        if (extra) extra(s);
        s["drainStartedAt"] = rfc3339(now);
      });
    } else if (!policy.remediation.enabled || action.empty() || action == "none") {
      enter_validating(policy, node, rem, "drain disabled by policy; no remediation action", extra);
    } else {
      set_phase(rem, "Remediating", "drain disabled by policy", extra);
    }
  }

  // Validating: the ValidationRequest (fixed name: creating it again is a no-op) is created
  // first and named in the same status write as the phase.
  void enter_validating(const Policy& policy, const core::Value& node, const core::Value& rem,
                        const std::string& message,
                        const std::function<void(core::Value&)>& extra) {
    const std::string name(kube::name_of(rem));
    if (!policy.validation.enabled) {
      finish(rem, "Released", "validation disabled by policy", &node, false, extra);
      return;
    }
    create_validation_request(policy, std::string(kube::name_of(node)), name, now_ms());
    set_phase(rem, "Validating", message + "; waiting for certify", [&](core::Value& s) {
      if (extra) extra(s);
      s["validationRequest"] = name;
    });
  }

  void create_validation_request(const Policy& policy, const std::string& node_name,
                                 const std::string& name, std::int64_t now) {
    core::Value v;
    v["apiVersion"] = "gpufleet.io/v1alpha1";
    v["kind"] = "ValidationRequest";
    v["metadata"]["name"] = name;
    v["metadata"]["labels"][kNodeLabel] = node_name;
    v["spec"]["nodeNames"].push_back(node_name);
    core::Value cats = core::Value::list();
    for (const auto& c : policy.validation.categories) cats.push_back(c);
    v["spec"]["categories"] = std::move(cats);
    v["spec"]["requester"] = "sentinel";
    v["spec"]["reason"] = "remediation " + name;
    v["spec"]["deadline"] = rfc3339(now + policy.validation.deadline_s * 1000);
    try {
      client_.create(api::validation_requests(), v);
    } catch (const kube::ApiError& err) {
      if (!err.is(kube::Reason::AlreadyExists)) throw;
    }
  }

  Result drive(const Policy& policy, const core::Value& node, const core::Value& rem,
               const QuarantineRecord& rec, const std::set<std::string>& faulty,
               const core::Value* health) {
    const std::string phase = phase_of(rem);
    const std::string name(kube::name_of(rem));
    if (phase != "Detected") {
      std::lock_guard lock(latency_mu_);
      status_written_.erase(name);
    }
    const std::string node_name(kube::name_of(node));
    const std::set<std::string> entities = string_set(rem.get({"spec", "entities"}));
    const bool new_node = rem.get_string({"spec", "reason"}) == "NewNode";
    bool recovered = true;
    for (const auto& e : entities) recovered = recovered && !faulty.contains(e);
    if (new_node) recovered = false;
    const std::int64_t now = now_ms();

    // Someone gave the node back (a manual uncordon, whoever cordoned it first; a taint-only
    // quarantine's taints removed): the person's decision wins, the incident is cancelled.
    // Only once the quarantine is on the node (its record names this incident).
    if (rec.incident == name && handed_back(node, rec)) {
      finish(rem, "Cancelled",
             rec.cordoned || rec.foreign_cordon
                 ? "the node was uncordoned by someone else; incident cancelled"
                 : "sentinel's taints were removed by someone else; incident cancelled",
             &node);
      return {};
    }
    // Entities that recovered leave the record at once (the node stays held by the rest, or
    // by the incident until certify passed it).
    if (rec.incident == name && phase != "Detected") {
      if (auto annotation = forget_recovered(rec, faulty)) {
        NodeChange c;
        c.annotation = std::move(*annotation);
        patch_node(node, c);
        return {.requeue = true};
      }
    }

    // The agent's log bundle of this incident (NodeHealth status.remediationBundle) is named
    // in the incident once, whenever the journal delivers it (often after the reboot).
    if ((phase == "Remediating" || phase == "Validating") && health != nullptr &&
        rem.get({"status", "logBundle"}) == nullptr) {
      const core::Value* b = health->get({"status", "remediationBundle"});
      if (b != nullptr && b->get_string({"incident"}) == name) {
        core::Value lb = core::Value::map();
        for (const char* k : {"state", "path", "sha256", "error"})
          if (auto v = b->get_string({k}); !v.empty()) lb[k] = std::string(v);
        if (const core::Value* n = b->find("bytes"); n != nullptr && n->is_int()) lb["bytes"] = *n;
        core::Value s = status_of(rem);
        s["logBundle"] = std::move(lb);
        write_status(rem, std::move(s));
        return {.requeue = true};
      }
    }

    if (phase == "Detected") {
      {
        // This process wrote its status already: the cache has not caught up (acting on the
        // copy would meet 409). Look again shortly.
        std::lock_guard lock(latency_mu_);
        if (status_written_.contains(name)) return {.requeue_after = 200ms};
      }
      Decision d;
      d.cordon = rem.get({"spec", "cordon"}) != nullptr && rem.get({"spec", "cordon"})->as_bool();
      for (const auto& t : string_set(rem.get({"spec", "taints"})))
        d.taints.push_back(Taint::parse(t, "spec.taints"));
      patch_node(node, plan_quarantine(node, d, entities, name));
      std::int64_t latency = -1;
      {
        std::lock_guard lock(latency_mu_);
        if (auto it = cordon_latency_.find(name); it != cordon_latency_.end()) {
          latency = it->second;
          cordon_latency_.erase(it);
        }
      }
      auto quarantined = [&](core::Value& s) {
        s["quarantinedAt"] = rfc3339(now);
        if (latency >= 0) s["cordonLatencyMs"] = latency;
      };
      if (recovered) {
        set_phase(rem, "Quarantined", "quarantined for " + join(entities), quarantined);
        return {.requeue = true};
      }
      // The quarantine is confirmed: the step after Quarantined is recorded in the same status
      // write (quarantinedAt marks the passage), one write per incident less; the API server is
      // what bounds quarantines per second.
      after_quarantine(policy, node, rem, new_node, now, quarantined);
      return {};
    }
    if (phase == "Quarantined") {
      if (new_node) {
        // Not forced by a fault: waits for room in the node's domain like a reboot.
        if (auto why = budget_wait(node, rem)) return hold_for_budget(rem, *why);
      } else if (recovered) {
        finish(rem, "Released", "every faulty entity recovered before remediation", &node);
        return {};
      }
      after_quarantine(policy, node, rem, new_node, now, nullptr);
      return {};
    }
    if (phase == "Draining") {
      if (recovered) {
        finish(rem, "Released", "every faulty entity recovered during the drain; drain cancelled",
               &node);
        return {};
      }
      std::vector<kube::ObjectPtr> keep;
      const std::int64_t started = ms_of(rem.get_string({"status", "drainStartedAt"}));
      DrainPlan plan =
          plan_drain(pods_on(node_name, keep), policy.drain, started > 0 ? started : now, now);
      if (plan.done()) {
        set_phase(rem, "Remediating", "drained");
        return {};
      }
      core::Value s = status_of(rem);
      core::Value counts = s.find("drain") ? *s.find("drain") : core::Value::map();
      auto bump = [&](const char* k) {
        const core::Value* v = counts.find(k);
        counts[k] = (v != nullptr ? v->as_int() : 0) + 1;
      };
      std::int64_t blocked = 0;
      for (const auto& step : plan.steps) {
        kube::DeleteOptions o;
        o.precondition_uid = step.uid;
        try {
          switch (step.action) {
            case PodAction::Wait: continue;
            case PodAction::Evict:
              client_.evict(step.namespace_, step.name, o);
              bump("evicted");
              break;
            case PodAction::Delete:
              client_.remove(kube::resources::pods(), step.namespace_, step.name, o);
              bump("deleted");
              break;
            case PodAction::ForceDelete:
              o.grace_period_seconds = 0;
              client_.remove(kube::resources::pods(), step.namespace_, step.name, o);
              bump("forced");
              break;
          }
          metrics_.pod_actions.with({pod_action_name(step.action)}).inc();
        } catch (const kube::ApiError& err) {
          if (err.is(kube::Reason::EvictionBlocked) || err.code() == 429) {
            ++blocked;  // a PodDisruptionBudget says not now: next look
          } else if (!err.is(kube::Reason::NotFound) && !err.is(kube::Reason::Conflict)) {
            throw;
          }
        }
      }
      counts["pending"] = static_cast<std::int64_t>(plan.steps.size());
      counts["blockedByPDB"] = blocked;
      const core::Value* old = s.find("drain");
      if (old == nullptr || !(*old == counts)) {
        s["drain"] = std::move(counts);
        write_status(rem, std::move(s));
      }
      return {.requeue_after = 1s};
    }
    if (phase == "Remediating") {
      const core::Value* a = rem.get({"status", "action"});
      // The spec's action, or a stronger one once an action's attempts were used up
      // (gpu-reset → reboot → replace; the spec is immutable; status.escalatedFrom says so).
      const std::string spec_action(rem.get_string({"spec", "action"}));
      const std::string recorded(a != nullptr ? a->get_string({"type"}) : "");
      const std::string action =
          action_strength(recorded) > action_strength(spec_action) ? recorded : spec_action;
      if (!policy.remediation.enabled || action.empty() || action == "none") {
        enter_validating(policy, node, rem, "no remediation action; validating", nullptr);
        return {};
      }
      const std::string boot(node.get_string({"status", "nodeInfo", "bootID"}));
      const std::string uid(kube::uid_of(node));
      const std::int64_t attempt =
          a != nullptr && a->find("attempt") ? a->find("attempt")->as_int() : 0;
      // The number the remediator's request carries: the agent takes each (incident, number)
      // once and never a lower one, so it rises over the incident's actions (a reboot after
      // two resets is request 3, attempt 1). An incident recorded before it existed: attempt.
      const core::Value* rn = a != nullptr ? a->find("request") : nullptr;
      const std::int64_t request_no = rn != nullptr && rn->is_int() ? rn->as_int() : attempt;
      ReplacementProvider* provider = nullptr;
      if (auto it = providers_.find(policy.remediation.provider); it != providers_.end())
        provider = it->second.get();
      auto replacement = [&](std::int64_t n, std::string old_uid) {
        return ReplacementRequest{node_name, name, static_cast<int>(n), std::move(old_uid)};
      };
      // A gpu-reset names the GPUs of the incident that are still faulty (a GPU that
      // recovered meanwhile is not reset); each attempt decides again and records its list.
      auto ask = [&](const std::string& type, std::int64_t n, std::int64_t seq,
                     const std::vector<std::string>& gpus, const std::string& old_uid) {
        if (type == "wait") return;
        if (type == "replace") {
          if (provider != nullptr) provider->request(replacement(n, old_uid));
        } else {
          remediator_->request({node_name, name, static_cast<int>(seq), type,
                                type == "gpu-reset" ? gpus : std::vector<std::string>{}});
        }
      };
      // Records attempt `n` of `type` and asks for it. `from` (the action whose attempts were
      // used up), `reason` and `why` say why it escalated; `why` alone, why a new attempt.
      auto request = [&](const std::string& type, std::int64_t n, const std::string& from,
                         const std::string& reason, const std::string& why) {
        core::Value s = status_of(rem);
        core::Value act = core::Value::map();
        act["type"] = type;
        act["attempt"] = n;
        act["request"] = request_no + 1;
        act["requestedAt"] = rfc3339(now);
        act["bootID"] = boot;
        if (type == "replace") {
          act["nodeUID"] = uid;
          act["provider"] = policy.remediation.provider;
        }
        const std::vector<std::string> gpus =
            type == "gpu-reset" ? faulty_gpus(entities, faulty) : std::vector<std::string>{};
        if (!gpus.empty()) {
          core::Value g = core::Value::list();
          for (const auto& u : gpus) g.push_back(u);
          act["gpus"] = std::move(g);
        }
        s["action"] = std::move(act);
        std::string message = type + " requested (attempt " + std::to_string(n) + ")" +
                              (gpus.empty() ? "" : " for " + join(gpus));
        if (!from.empty()) {
          message = from + " attempts used up (" + why + "); " + message;
          s["escalatedFrom"] = from;
          record_escalation(s, from, type, reason, why, now);
        } else if (!why.empty()) {
          message = why + "; " + message;
        }
        s["message"] = message.substr(0, 1000);
        clear_budget_wait(s);
        write_status(rem, std::move(s));  // recorded first: a crash never loses an attempt
        ask(type, n, request_no + 1, gpus, uid);
        metrics_.remediation_requests.with({type}).inc();
        if (!from.empty()) {
          events_.record(node_ref(node), kube::EventType::Warning, "RemediationEscalated",
                         "Remediate", message.substr(0, 1000));
        }
      };
      if (attempt == 0) {
        // The node is out already (it adds nothing to the count), but a reboot or reset
        // disturbs its NVLink / rack domain: it waits while the domain is full without it.
        if (auto why = budget_wait(node, rem)) return hold_for_budget(rem, *why);
        request(action, 1, "", "", "");
        return {.requeue_after = 2s};
      }
      const std::string old_uid(a->get_string({"nodeUID"}));
      bool done = false;
      std::string failure;         // why this attempt counts as failed ("" while it may still work)
      std::string failure_reason;  // ActionFailed | FaultPersisted | TimedOut
      std::string provider_message;
      if (action == "replace") {
        // The provider's word and the API's: the Node under this name is a new object that
        // booted since (a new boot id: a Node re-registered before its machine came up is not
        // the replacement yet), Ready.
        ReplacementStatus st =
            provider != nullptr
                ? provider->poll(replacement(attempt, old_uid))
                : ReplacementStatus{ReplacementStatus::State::Failed,
                                    "no provider \"" + policy.remediation.provider + "\""};
        provider_message = st.message;
        if (st.state == ReplacementStatus::State::Failed) {
          failure_reason = "ActionFailed";
          failure = "the provider failed" + (st.message.empty() ? "" : ": " + st.message);
        }
        const std::string before(a->get_string({"bootID"}));
        done = st.state == ReplacementStatus::State::Done && !old_uid.empty() && uid != old_uid &&
               !boot.empty() && boot != before && kube::node::ready(node);
      } else if (action == "reboot") {
        const std::string before(a->get_string({"bootID"}));
        done = !boot.empty() && boot != before && kube::node::ready(node);
      } else {
        done = recovered;
      }
      if (done) {
        if (action == "replace") {
          // A new machine: nothing takes work on it before certify passed it. Cordoned (no
          // fault taints: they were the old machine's) under this incident, then validated.
          Decision d;
          d.cordon = true;
          patch_node(node, plan_quarantine(node, d, {}, name));
        }
        enter_validating(policy, node, rem, action + " done", [&](core::Value& s) {
          s["action"]["result"] =
              "done after attempt " + std::to_string(attempt) +
              (provider_message.empty() ? "" : ": " + provider_message.substr(0, 400));
        });
        return {};
      }
      // The agent's word on this request (NodeHealth status.remediation, journalled by the
      // agent that took it): a failed command is a failed attempt now, not at the timeout; a
      // reset it finished whose GPU is still faulty after the settle time is one too.
      const core::Value* said =
          health != nullptr ? health->get({"status", "remediation"}) : nullptr;
      if (failure.empty() && said != nullptr && (action == "gpu-reset" || action == "reboot") &&
          said->get_string({"incident"}) == name && said->get_string({"action"}) == action &&
          said->find("attempt") != nullptr && said->find("attempt")->is_int() &&
          said->find("attempt")->as_int() == request_no) {
        const std::string state(said->get_string({"state"}));
        if (state == "Failed" || state == "Rejected") {
          std::string detail(said->get_string({"error"}));
          if (detail.empty()) detail = said->get_string({"message"});
          failure_reason = "ActionFailed";
          failure = "the agent reported " + state + (detail.empty() ? "" : ": " + detail);
          if (failure.size() > 400) failure = failure.substr(0, 400) + "...";
        } else if (state == "Succeeded" && action == "gpu-reset") {
          const std::int64_t finished = ms_of(a->get_string({"finishedAt"}));
          const std::int64_t settle_ms = policy.remediation.settle_s * 1000;
          if (finished == 0) {
            // Recorded when first seen, so the settle time survives a restart (level-
            // triggered from the incident) and does not lean on the node's clock.
            core::Value s = status_of(rem);
            s["action"]["finishedAt"] = rfc3339(now);
            s["message"] = "gpu-reset done by the agent (attempt " + std::to_string(attempt) +
                           "); waiting up to " + std::to_string(policy.remediation.settle_s) +
                           " s for the GPU(s) to report healthy";
            write_status(rem, std::move(s));
            return {.requeue_after = std::chrono::milliseconds(settle_ms)};
          }
          if (now - finished < settle_ms)
            return {.requeue_after = std::chrono::milliseconds(settle_ms - (now - finished))};
          std::vector<std::string> still;
          for (const auto& e : entities)
            if (faulty.contains(e)) still.push_back(e);
          failure_reason = "FaultPersisted";
          failure = join(still) + " still faulty " + std::to_string(policy.remediation.settle_s) +
                    " s after the agent reported the reset done";
        }
      }
      const std::int64_t requested = ms_of(a->get_string({"requestedAt"}));
      if (failure.empty() && now - requested > policy.remediation.timeout_s * 1000) {
        failure_reason = "TimedOut";
        failure = "not done within timeoutSeconds " + std::to_string(policy.remediation.timeout_s);
      }
      if (!failure.empty()) {
        const std::string why = action + " attempt " + std::to_string(attempt) + ": " + failure;
        if (attempt >= policy.remediation.max_attempts) {
          if (action == "gpu-reset") {
            // A GPU the reset did not repair: a reboot, the next stronger action. It disturbs
            // the node's domain like any reboot, so it claims its room in the budget first.
            if (auto wait = budget_wait(node, rem)) return hold_for_budget(rem, *wait);
            request("reboot", 1, "gpu-reset", failure_reason, why);
            return {.requeue_after = 2s};
          }
          if (action == "reboot" && policy.remediation.replace_when_reboot_fails &&
              provider != nullptr) {
            request("replace", 1, "reboot", failure_reason, why);
            return {.requeue_after = 2s};
          }
          finish(rem, "Failed",
                 action + " did not complete in " + std::to_string(attempt) + " attempts (" + why +
                     "); the node stays out",
                 &node);
          return {};
        }
        request(action, attempt + 1, "", "", why);
        return {.requeue_after = 2s};
      }
      // Idempotent per (incident, request): asks again only if the first ask was lost.
      std::vector<std::string> gpus;
      if (const core::Value* g = a->find("gpus"); g != nullptr && g->is_list())
        for (const auto& u : g->as_list())
          if (u.is_string()) gpus.push_back(u.as_string());
      ask(action, attempt, request_no, gpus, old_uid);
      return {.requeue_after = 2s};
    }
    if (phase == "Validating") {
      if (!policy.validation.enabled) {
        finish(rem, "Released", "validation disabled by policy", &node);
        return {};
      }
      kube::ObjectPtr vr = vreqs_.get(name);
      if (vr == nullptr) {
        create_validation_request(policy, node_name, name, now);
        if (rem.get_string({"status", "validationRequest"}).empty()) {
          core::Value s = status_of(rem);
          s["validationRequest"] = name;
          write_status(rem, std::move(s));
        }
        return {.requeue_after = 5s};
      }
      const std::string vphase(vr->get_string({"status", "phase"}));
      if (vphase == "Passed") {
        finish(rem, "Released", "certify passed the node (ValidationRequest " + name + ")", &node,
               true);
      } else if (vphase == "Failed" || vphase == "Expired") {
        std::string why(vr->get_string({"status", "message"}));
        if (const core::Value* results = vr->get({"status", "results"});
            results && results->is_list()) {
          for (const auto& r : results->as_list()) {
            if (r.get_string({"node"}) == node_name && r.get_string({"verdict"}) == "Failed") {
              why = std::string(r.get_string({"reason"})) + ": " +
                    std::string(r.get_string({"message"}));
            }
          }
        }
        finish(
            rem, "Failed",
            "validation " + vphase + (why.empty() ? "" : " (" + why + ")") + "; the node stays out",
            &node);
      }
      return {.requeue_after = 5s};
    }
    return {};
  }

  // The GPU UUIDs among the incident's entities ("<check>/GPU-...") that are still faulty,
  // sorted and once each (xid/GPU-a and gpu-nvml/GPU-a are one GPU). An entity known only by
  // its PCI address is not named: the caller then resets the whole node.
  static std::vector<std::string> faulty_gpus(const std::set<std::string>& entities,
                                              const std::set<std::string>& faulty) {
    std::set<std::string> out;
    for (const auto& e : entities) {
      if (!faulty.contains(e)) continue;
      const auto slash = e.find('/');
      if (slash == std::string::npos) continue;
      const std::string id = e.substr(slash + 1);
      if (id.starts_with("GPU-") && out.size() < 16) out.insert(id);
    }
    return {out.begin(), out.end()};
  }

  // Why a disruptive action on `node` must wait for the DisruptionBudget: the cluster holds
  // maxUnavailable nodes out without it, or its domain maxUnavailablePerDomain. nullopt: go,
  // with the node claimed (controller/disruption_reservation.h) so that hostpkg and other
  // workers count it before their caches show it. No object: nothing waits.
  std::optional<std::string> budget_wait(const core::Value& node, const core::Value& rem) {
    const controller::BudgetReader::Snapshot b = budget_.get();
    if (!b.present) return std::nullopt;
    const std::string& key = b.spec.topology_key;
    const std::string self(kube::name_of(node));
    const std::string domain = key.empty() ? "" : std::string(kube::label_of(node, key));
    std::vector<kube::CountedNode> counted;
    std::int64_t out_domain = 0;
    std::vector<std::string> held;  // "node (holder, ...)" in the domain, a bounded sample
    auto incident_on = [&](std::string_view n) {
      for (const auto& r : remediations_.by_index("node", std::string(n)))
        if (!final_phase(phase_of(*r))) return true;
      return false;
    };
    std::shared_ptr<const OutScan> scan = out_scan(key, incident_on);
    for (const kube::NodeOutFacts& f : scan->out) {
      // Another incident's node counts through its claim once its action goes: incidents
      // waiting for room must not wait for each other (two in one domain would wait forever).
      if (f.incident && f.hostpkg_sets.empty() && f.name != self) continue;
      if (f.name != self && f.domain == domain) {
        ++out_domain;
        if (held.size() < 5) held.push_back(f.name + " (" + join(kube::out_holders(f)) + ")");
      }
      counted.push_back({f.name, f.domain});
    }
    const std::int64_t total_limit = b.spec.total_limit(scan->total);
    if (!key.empty() && out_domain >= b.spec.max_per_domain) {
      std::string who;
      for (const auto& h : held) who += (who.empty() ? "" : ", ") + h;
      if (out_domain > static_cast<std::int64_t>(held.size())) who += ", ...";
      return key + "=" + (domain.empty() ? "(no label)" : domain) + " has " +
             std::to_string(out_domain) +
             " node(s) out without this one, maxUnavailablePerDomain " +
             std::to_string(b.spec.max_per_domain) + ": " + who;
    }
    auto lookup = [&](std::string_view n) {
      kube::ClaimedNodeView v;
      kube::CompactPtr o = nodes_.get_compact(std::string(n));
      if (o == nullptr) return v;
      v.present = true;
      v.rv = std::string(o->resource_version());
      v.out = kube::is_out(kube::node_out_facts(*o, key, incident_on(n)));
      return v;
    };
    kube::ClaimLimits limits;
    limits.total = total_limit;
    limits.domain = b.spec.domain_limit();
    controller::DisruptionReservation::Outcome out =
        claims_.reserve({{self, domain, "Sentinel/" + std::string(kube::name_of(rem)),
                          std::string(kube::resource_version_of(node))}},
                        counted, limits, lookup);
    if (out.granted.at(0)) return std::nullopt;
    return out.why.at(0);
  }

  // The nodes out, from one scan of the Node cache shared by every worker for half a second:
  // at 5,000 nodes a scan costs ~10 ms of CPU, and each waiting incident looks every 2 s. The
  // lock does not rest on it (the claims are read fresh); it only ages the view a little.
  struct OutScan {
    std::int64_t total = 0;
    std::vector<kube::NodeOutFacts> out;
  };
  template <typename IncidentOn>
  std::shared_ptr<const OutScan> out_scan(const std::string& key, IncidentOn&& incident_on) {
    std::lock_guard lock(scan_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (scan_ != nullptr && scan_key_ == key && now - scan_at_ < std::chrono::milliseconds(500))
      return scan_;
    auto s = std::make_shared<OutScan>();
    nodes_.for_each_compact([&](const kube::CompactObject& o) {
      ++s->total;
      // An uncordoned node out only by an open incident is skipped by the caller anyway.
      kube::NodeOutFacts f = kube::node_out_facts(o, key, false);
      if (!kube::is_out(f)) return;
      f.incident = incident_on(f.name);
      s->out.push_back(std::move(f));
    });
    scan_ = std::move(s);
    scan_key_ = key;
    scan_at_ = now;
    return scan_;
  }

  Result hold_for_budget(const core::Value& rem, const std::string& why) {
    core::Value s = status_of(rem);
    const core::Value before = s;
    s["waitingFor"] = "budget";
    s["message"] = ("waiting for the disruption budget: " + why).substr(0, 1000);
    // The claims' answers say "in the cluster", "domain" or (lost every race) "changed under".
    const char* reason = why.find("in the cluster") != std::string::npos  ? "ClusterAtLimit"
                         : why.find("changed under") != std::string::npos ? "ClaimsContended"
                                                                          : "DomainAtLimit";
    kube::Condition c{"WaitingForBudget", "True", reason, why.substr(0, 4000)};
    core::Value conds = s.find("conditions") ? *s.find("conditions") : core::Value::list();
    kube::set_condition(conds, c);
    s["conditions"] = std::move(conds);
    if (!(s == before)) write_status(rem, std::move(s));
    return {.requeue_after = 2s};
  }

  // An escalation in the incident's status: appended to status.escalations (the newest 4)
  // and the condition Escalated (reason: why the action before it failed).
  static void record_escalation(core::Value& s, const std::string& from, const std::string& to,
                                const std::string& reason, const std::string& why,
                                std::int64_t now) {
    core::Value list = s.find("escalations") != nullptr && s.find("escalations")->is_list()
                           ? *s.find("escalations")
                           : core::Value::list();
    core::Value e = core::Value::map();
    e["from"] = from;
    e["to"] = to;
    e["reason"] = reason;
    e["message"] = why.substr(0, 1000);
    e["at"] = rfc3339(now);
    list.push_back(std::move(e));
    while (list.size() > 4) list.as_list().erase(list.as_list().begin());
    s["escalations"] = std::move(list);
    core::Value conds = s.find("conditions") ? *s.find("conditions") : core::Value::list();
    kube::set_condition(conds, kube::Condition{"Escalated", "True", reason,
                                               (from + " → " + to + ": " + why).substr(0, 4000)});
    s["conditions"] = std::move(conds);
  }

  static void clear_budget_wait(core::Value& s) {
    if (s.find("waitingFor") == nullptr) return;
    s.as_map().erase("waitingFor");
    core::Value conds = s.find("conditions") ? *s.find("conditions") : core::Value::list();
    kube::set_condition(conds, kube::Condition{"WaitingForBudget", "False", "BudgetAvailable",
                                               "the budget had room; the action went ahead"});
    s["conditions"] = std::move(conds);
  }

  kube::Client& client_;
  kube::EventRecorder& events_;
  std::shared_ptr<State> state_;
  Metrics& metrics_;
  std::shared_ptr<Remediator> remediator_;
  std::map<std::string, std::shared_ptr<ReplacementProvider>> providers_;
  const controller::Cache& nodes_;
  const controller::Cache& healths_;
  const controller::Cache& remediations_;
  const controller::Cache& pods_;
  const controller::Cache& vreqs_;
  const controller::Cache& policies_;
  controller::StatusWriter breaker_status_;
  controller::BudgetReader budget_;           // the DisruptionBudget (read, not watched)
  controller::DisruptionReservation claims_;  // the lock shared with hostpkg (and replicas)
  std::mutex scan_mu_;                        // guards the three below (out_scan)
  std::shared_ptr<const OutScan> scan_;
  std::string scan_key_;
  std::chrono::steady_clock::time_point scan_at_;
  // Fault -> cordon latency of incidents created by this process, until their status has it
  // (different node keys run in parallel).
  std::mutex latency_mu_;
  std::map<std::string, std::int64_t> cordon_latency_;
  // Incidents whose status this process wrote right after creating them, until the cache
  // shows it (guarded by latency_mu_).
  std::set<std::string> status_written_;
  // Last: its threads are joined before the members they use go.
  controller::WorkPool follow_ups_;
};

std::vector<std::string> index_spec_node(const core::Value& obj) {
  std::string_view n = obj.get_string({"spec", "nodeName"});
  if (n.empty()) return {};
  return {std::string(n)};
}

controller::MapFunc to_node(std::initializer_list<std::string_view> path) {
  std::vector<std::string> p(path.begin(), path.end());
  return [p](const core::Value& obj) -> std::vector<Request> {
    const core::Value* v = &obj;
    for (const auto& k : p) {
      v = v->is_map() ? v->find(k) : nullptr;
      if (v == nullptr) return {};
    }
    if (!v->is_string() || v->as_string().empty()) return {};
    return {Request{"", v->as_string()}};
  };
}

}  // namespace

std::unique_ptr<Remediator> make_annotation_remediator(kube::Client& client) {
  return std::make_unique<AnnotationRemediator>(client);
}

void setup_sentinel(controller::Manager& manager, SentinelOptions options) {
  // The admission webhook refuses a policy whose rules do not compile (or break a limit the
  // schema cannot express), with the parser and compiler the policy reconciler uses.
  std::vector<std::string> provider_names;
  for (const auto& [name, provider] : options.providers) provider_names.push_back(name);
  manager.admission().add(
      api::sentinel_policies().group, "SentinelPolicy",
      [provider_names](const controller::AdmissionRequest& r) {
        if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
          return controller::AdmissionResult::allow();
        const core::Value* spec = r.object.find("spec");
        const Policy p = Policy::from_spec(spec != nullptr ? *spec : core::Value());
        p.check_providers(provider_names);
        (void)RuleSet::compile(p.rules, p.cost_limit);  // InvalidInput: denied with its words
        return controller::AdmissionResult::allow();
      });
  auto state = std::make_shared<State>();
  state->provider_names = provider_names;
  state->follow.insert(options.policies.begin(), options.policies.end());
  // The registry hands out the same series to a second Metrics on it (a second Manager).
  state->metrics = std::make_shared<Metrics>(*manager.options().registry);
  Metrics* metrics = state->metrics.get();
  std::shared_ptr<Remediator> remediator =
      options.remediator
          ? std::shared_ptr<Remediator>(std::move(options.remediator))
          : std::shared_ptr<Remediator>(make_annotation_remediator(manager.client()));

  controller::SourceOptions nodes_src;
  nodes_src.cache.shape.prune = {"status.images"};
  // Kubelets rewrite status every few seconds: only what sentinel reads matters.
  nodes_src.predicates.push_back([](const controller::WatchEvent& ev) {
    if (ev.old_obj == nullptr) return true;
    const core::Value& a = *ev.old_obj;
    const core::Value& b = ev.obj;
    return kube::node::unschedulable(a) != kube::node::unschedulable(b) ||
           kube::node::ready(a) != kube::node::ready(b) ||
           a.get_string({"status", "nodeInfo", "bootID"}) !=
               b.get_string({"status", "nodeInfo", "bootID"}) ||
           !(a.get({"metadata", "annotations"}) == nullptr
                 ? b.get({"metadata", "annotations"}) == nullptr
                 : b.get({"metadata", "annotations"}) != nullptr &&
                       *a.get({"metadata", "annotations"}) ==
                           *b.get({"metadata", "annotations"})) ||
           !(a.get({"spec", "taints"}) == nullptr
                 ? b.get({"spec", "taints"}) == nullptr
                 : b.get({"spec", "taints"}) != nullptr &&
                       *a.get({"spec", "taints"}) == *b.get({"spec", "taints"}));
  });
  controller::Cache& nodes = manager.cache(kube::resources::nodes(), nodes_src.cache);
  controller::Cache& healths = manager.cache(api::node_healths());
  controller::Cache& policies = manager.cache(api::sentinel_policies());
  controller::Cache& rems = manager.cache(api::remediations());
  rems.add_index("node", index_spec_node);
  controller::SourceOptions pods_src;
  controller::Cache& pods = manager.cache(kube::resources::pods(), pods_src.cache);
  pods.add_index("node", index_spec_node);
  controller::Cache& vreqs = manager.cache(api::validation_requests());

  auto node_rec =
      std::make_shared<NodeReconciler>(manager, state, *metrics, remediator,
                                       options.providers, nodes, healths, rems, pods, vreqs, policies,
                                       static_cast<std::size_t>(std::max(1, options.workers)));
  controller::SourceOptions vr_src;
  controller::Controller& nodes_ctl =
      manager.controller("sentinel")
          .for_resource(kube::resources::nodes(), "Node", nodes_src)
          .watches(api::node_healths(), controller::mapping::to_self())
          .watches(api::remediations(), to_node({"spec", "nodeName"}))
          .watches(kube::resources::pods(), to_node({"spec", "nodeName"}), pods_src)
          .watches(api::validation_requests(), to_node({"metadata", "labels", kNodeLabel}), vr_src)
          .max_concurrent_reconciles(options.workers)
          .complete(node_rec);
  state->nodes_controller = &nodes_ctl;

  // Spec edits and the reset annotation; status writes (its own and the breaker saves) are
  // not events for it. Counts and window expiry are refreshed every 5 s by requeue.
  controller::SourceOptions policy_src;
  policy_src.predicates.push_back(
      controller::predicates::any_of({controller::predicates::generation_changed(),
                                      controller::predicates::annotations_changed()}));
  manager.controller("sentinel-policy")
      .for_resource(api::sentinel_policies(), "SentinelPolicy", policy_src)
      .complete(make_policy_reconciler(manager, state, *metrics, policies, nodes, rems));
}

}  // namespace gpufleet::sentinel
