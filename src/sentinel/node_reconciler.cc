#include "sentinel/node_reconciler.h"

#include <algorithm>

#include "controller/cache.h"
#include "controller/manager.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "kube/api/conditions.h"
#include "kube/api/meta.h"
#include "kube/api/names.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kube/events.h"
#include "sentinel/incident.h"
#include "sentinel/policy_reconciler.h"

namespace gpufleet::sentinel::detail {

namespace {
using namespace std::chrono_literals;
using controller::Request;
using controller::Result;
constexpr const char* kBreakerFieldManager = "gpufleet-sentinel-breaker";
}  // namespace

NodeReconciler::NodeReconciler(
    controller::Manager& m, std::shared_ptr<State> state, Metrics& metrics,
    std::shared_ptr<Remediator> remediator,
    std::map<std::string, std::shared_ptr<ReplacementProvider>> providers, const NodeCaches& caches,
    std::size_t follow_up_threads)
    : client_(m.client()),
      events_(m.event_recorder("sentinel")),
      state_(std::move(state)),
      metrics_(metrics),
      remediator_(std::move(remediator)),
      providers_(std::move(providers)),
      nodes_(caches.nodes),
      healths_(caches.healths),
      remediations_(caches.remediations),
      pods_(caches.pods),
      vreqs_(caches.vreqs),
      policies_(caches.policies),
      breaker_status_(m.client(), api::sentinel_policies(), "SentinelPolicy", kBreakerFieldManager),
      budget_(m.client()),
      claims_(m.client(), {.namespace_ = m.options().lease_namespace}),
      follow_ups_(follow_up_threads, nullptr, [](const std::string& node, const std::string& what) {
        // The next look of the node finishes it (a record without its Remediation).
        core::log::warn("sentinel: quarantine follow-up failed", {{"node", node}, {"error", what}});
      }) {}

Result NodeReconciler::reconcile(const Request& req, std::stop_token) {
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
      continue;
    }
    if (active == nullptr || kube::name_of(*r) < kube::name_of(*active)) active = r;
  }
  // Only a Draining incident's look at the node says which gangs it waits for.
  if (active == nullptr || phase_of(*active) != "Draining") state_->gang_waits.set(req.name, {});
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
  if (node == nullptr) return active != nullptr ? node_gone(policy, *active) : Result{};
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
  if (auto done =
          resume_record(ps, policy, *node, rec, faulty, health.get(), overridden, take_over))
    return *done;

  // A new incident? Evaluate the rules over every faulty entity.
  Decision decision;
  std::set<std::string> entities;
  std::int64_t fault_since = 0;
  if (health != nullptr && !faulty.empty())
    evaluate(*ps, *health, *node, faulty, overridden, decision, entities, fault_since);
  if (!decision.cordon && decision.taints.empty()) {
    return take_over ? Result{} : gate_new_node(ps->name, policy, policy_created, *node);
  }
  return quarantine(req, ps, std::move(policy), *node, std::move(decision), std::move(entities),
                    fault_since, take_over);
}

Result NodeReconciler::node_gone(const Policy& policy, const core::Value& active) {
  // A replacement deletes the Node; the new machine registers under the same name.
  const core::Value* a = active.get({"status", "action"});
  if (phase_of(active) == "Remediating" && a != nullptr && a->get_string({"type"}) == "replace") {
    const std::int64_t requested = ms_of(a->get_string({"requestedAt"}));
    if (now_ms() - requested <= policy.remediation.timeout_s * 1000) return {.requeue_after = 2s};
    finish(active, "Failed", "the replacement node did not register in time", nullptr);
    return {};
  }
  finish(active, "Failed", "the node was deleted", nullptr);
  return {};
}

std::optional<Result> NodeReconciler::resume_record(
    const PolicyPtr& ps, const Policy& policy, const core::Value& node, const QuarantineRecord& rec,
    const std::set<std::string>& faulty, const core::Value* health,
    const std::map<std::string, std::int64_t>& overridden, bool& take_over) {
  if (rec.incident.empty()) return std::nullopt;
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
        evaluate(*ps, *health, node, still, overridden, d, matched, since);
      action = d.remediate.empty() ? policy.remediation.default_action : d.remediate;
    }
    create_incident(node, ps->name, rec.incident, rec.entities.empty() ? "NewNode" : "Fault",
                    rec.entities, d.matched, rec.cordoned, rec.taints, action);
    return Result{.requeue = true};
  }
  if (phase_of(*named) != "Failed") {
    // A finished incident whose release was interrupted: finish it.
    patch_node(node, plan_release_all(node));
    return Result{.requeue = true};
  }
  // A Failed incident keeps the node out until a person hands it back (uncordons it, or
  // removes a taint-only quarantine's taints): then sentinel's marks go and the node is
  // watched like any other. While it is out, a new fault opens a new incident that takes
  // the quarantine over, so no fault on the node is ever ignored.
  if (handed_back(node, rec)) {
    patch_node(node, plan_release_all(node));
    events_.record(node_ref(node), kube::EventType::Normal, "HandedBack", "Release",
                   "the node was made schedulable after incident " + rec.incident +
                       " failed; sentinel's marks removed");
    return Result{.requeue = true};
  }
  take_over = true;
  return std::nullopt;
}

Result NodeReconciler::quarantine(const Request& req, const PolicyPtr& ps, Policy policy,
                                  const core::Value& node, Decision decision,
                                  std::set<std::string> entities, std::int64_t fault_since,
                                  bool take_over) {
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
    events_.record(node_ref(node), kube::EventType::Warning, "QuarantineRefused", "Quarantine",
                   "circuit breaker of SentinelPolicy " + ps->name + ": " + refused);
    return {.requeue_after = 15s};
  }
  // The cordon is the only write between the fault and the node being out: the breaker's
  // admission is recorded in the same patch (the quarantine record), so the breaker's own
  // save, the Remediation, its status and the Event follow on the follow-up pool, and a
  // crash in between loses nothing (the breaker is rebuilt from the records; a record
  // without its Remediation gets it on the next look).
  const std::string name = incident_name(req.name, now);
  std::optional<core::Value> patched =
      patch_node(node, plan_quarantine(node, decision, entities, name, take_over, {ps->name, now}));
  const std::int64_t cordoned = now_ms();
  metrics_.quarantines.inc();
  if (fault_since > 0 && cordoned >= fault_since) {
    metrics_.cordon_latency.observe(static_cast<double>(cordoned - fault_since) / 1000.0);
  }
  std::string action =
      decision.remediate.empty() ? policy.remediation.default_action : decision.remediate;
  std::optional<core::Value> escalation = rule_escalation(policy, decision, action);
  const std::int64_t latency = fault_since > 0 ? cordoned - fault_since : -1;
  follow_ups_.submit(
      req.name,
      [this, ps, version, policy = std::move(policy), out = patched ? std::move(*patched) : node,
       decision = std::move(decision), entities = std::move(entities), name,
       action = std::move(action), escalation = std::move(escalation), cordoned, latency] {
        after_cordon(ps, version, policy, out, decision, entities, name, action, escalation,
                     cordoned, latency);
      });
  return {};
}

// What follows a quarantine's cordon, off the worker: the incident, its Events and status,
// and the breaker's durable form.
void NodeReconciler::after_cordon(const PolicyPtr& ps, std::uint64_t version, const Policy& policy,
                                  const core::Value& node, const Decision& decision,
                                  const std::set<std::string>& entities, const std::string& name,
                                  const std::string& action,
                                  const std::optional<core::Value>& escalation,
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

void NodeReconciler::evaluate(PolicyState& ps, const core::Value& health, const core::Value& node,
                              const std::set<std::string>& faulty,
                              const std::map<std::string, std::int64_t>& overridden,
                              Decision& decision, std::set<std::string>& entities,
                              std::int64_t& fault_since) {
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
void NodeReconciler::save_breaker(const PolicyPtr& ps, std::uint64_t version) {
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
bool NodeReconciler::policies_settled() {
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
PolicyPtr NodeReconciler::policy_for(const core::Value* node, const core::Value* incident) {
  std::lock_guard lock(state_->mu);
  if (node != nullptr)
    if (PolicyPtr p = governing_policy(state_->policies, *node)) return p;
  if (incident == nullptr) return nullptr;
  auto it = state_->policies.find(std::string(kube::annotation_of(*incident, kPolicyLabel)));
  return it != state_->policies.end() && it->second->loaded ? it->second : nullptr;
}

Result NodeReconciler::gate_new_node(const std::string& policy_name, const Policy& policy,
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
std::optional<core::Value> NodeReconciler::patch_node(const core::Value& node,
                                                      const NodeChange& change) {
  auto patch = node_patch(node, change);
  if (!patch) return std::nullopt;
  // 409 Conflict (the Node changed since the cache's copy) throws: retried with backoff
  // from the newer copy.
  return client_.patch(kube::resources::nodes(), "", kube::name_of(node), kube::PatchType::Merge,
                       *patch);
}

// The Remediation as created, or nullopt when it existed already.
std::optional<core::Value> NodeReconciler::create_incident(
    const core::Value& node, const std::string& policy_name, const std::string& name,
    const std::string& reason, const std::set<std::string>& entities,
    const std::vector<std::string>& rules, bool cordon, const std::vector<Taint>& taints,
    const std::string& action, const core::Value* escalation) {
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
core::Value NodeReconciler::write_status(const core::Value& rem, core::Value status) {
  core::Value obj = rem;
  obj["status"] = std::move(status);
  return client_.update_status(api::remediations(), obj);
}

void NodeReconciler::set_phase(const core::Value& rem, const std::string& phase,
                               const std::string& message,
                               const std::function<void(core::Value&)>& extra) {
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
void NodeReconciler::finish(const core::Value& rem, const std::string& phase,
                            const std::string& message, const core::Value* node, bool validated,
                            const std::function<void(core::Value&)>& extra) {
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

// The nodes out, from one scan of the Node cache shared by every worker for half a second:
// at 5,000 nodes a scan costs ~10 ms of CPU, and each waiting incident looks every 2 s. The
// lock does not rest on it (the claims are read fresh); it only ages the view a little.
template <typename IncidentOn>
std::shared_ptr<const NodeReconciler::OutScan> NodeReconciler::out_scan(const std::string& key,
                                                                        IncidentOn&& incident_on) {
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

// Why a disruptive action on `node` must wait for the DisruptionBudget: the cluster holds
// maxUnavailable nodes out without it, or its domain maxUnavailablePerDomain. nullopt: go,
// with the node claimed (controller/disruption_reservation.h) so that hostpkg and other
// workers count it before their caches show it. No object: nothing waits.
std::optional<std::string> NodeReconciler::budget_wait(const core::Value& node,
                                                       const core::Value& rem) {
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
           std::to_string(out_domain) + " node(s) out without this one, maxUnavailablePerDomain " +
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

Result NodeReconciler::hold_for_budget(const core::Value& rem, const std::string& why) {
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

}  // namespace gpufleet::sentinel::detail
