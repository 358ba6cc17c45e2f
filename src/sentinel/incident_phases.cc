#include "sentinel/node_reconciler.h"

#include <algorithm>

#include "controller/cache.h"
#include "core/log.h"
#include "kube/api/job_disruption.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kube/events.h"
#include "sentinel/drain.h"
#include "sentinel/incident.h"

namespace gpufleet::sentinel::detail {

namespace {
using namespace std::chrono_literals;
using controller::Result;
}  // namespace

Result NodeReconciler::drive(const Policy& policy, const core::Value& node, const core::Value& rem,
                             const QuarantineRecord& rec, const std::set<std::string>& faulty,
                             const core::Value* health) {
  const std::string phase = phase_of(rem);
  Look l{policy, node, rem, rec, faulty, health};
  l.name = std::string(kube::name_of(rem));
  if (phase != "Detected") {
    std::lock_guard lock(latency_mu_);
    status_written_.erase(l.name);
  }
  l.node_name = std::string(kube::name_of(node));
  l.entities = string_set(rem.get({"spec", "entities"}));
  l.new_node = rem.get_string({"spec", "reason"}) == "NewNode";
  l.recovered = !l.new_node;
  for (const auto& e : l.entities) l.recovered = l.recovered && !faulty.contains(e);
  l.now = now_ms();
  if (auto done = drive_common(l, phase)) return *done;
  if (phase == "Detected") return drive_detected(l);
  if (phase == "Quarantined") return drive_quarantined(l);
  if (phase == "Draining") return drive_draining(l);
  if (phase == "Remediating") return drive_remediating(l);
  if (phase == "Validating") return drive_validating(l);
  return {};
}

std::optional<Result> NodeReconciler::drive_common(const Look& l, const std::string& phase) {
  // Someone gave the node back (a manual uncordon, whoever cordoned it first; a taint-only
  // quarantine's taints removed): the person's decision wins, the incident is cancelled.
  // Only once the quarantine is on the node (its record names this incident).
  if (l.rec.incident == l.name && handed_back(l.node, l.rec)) {
    finish(l.rem, "Cancelled",
           l.rec.cordoned || l.rec.foreign_cordon
               ? "the node was uncordoned by someone else; incident cancelled"
               : "sentinel's taints were removed by someone else; incident cancelled",
           &l.node);
    return Result{};
  }
  // Entities that recovered leave the record at once (the node stays held by the rest, or
  // by the incident until certify passed it).
  if (l.rec.incident == l.name && phase != "Detected") {
    if (auto annotation = forget_recovered(l.rec, l.faulty)) {
      NodeChange c;
      c.annotation = std::move(*annotation);
      patch_node(l.node, c);
      return Result{.requeue = true};
    }
  }
  // The agent's log bundle of this incident (NodeHealth status.remediationBundle) is named
  // in the incident once, whenever the journal delivers it (often after the reboot).
  if ((phase == "Remediating" || phase == "Validating") && l.health != nullptr &&
      l.rem.get({"status", "logBundle"}) == nullptr) {
    const core::Value* b = l.health->get({"status", "remediationBundle"});
    if (b != nullptr && b->get_string({"incident"}) == l.name) {
      core::Value lb = core::Value::map();
      for (const char* k : {"state", "path", "sha256", "error"})
        if (auto v = b->get_string({k}); !v.empty()) lb[k] = std::string(v);
      if (const core::Value* n = b->find("bytes"); n != nullptr && n->is_int()) lb["bytes"] = *n;
      core::Value s = status_of(l.rem);
      s["logBundle"] = std::move(lb);
      write_status(l.rem, std::move(s));
      return Result{.requeue = true};
    }
  }
  return std::nullopt;
}

Result NodeReconciler::drive_detected(const Look& l) {
  {
    // This process wrote its status already: the cache has not caught up (acting on the
    // copy would meet 409). Look again shortly.
    std::lock_guard lock(latency_mu_);
    if (status_written_.contains(l.name)) return {.requeue_after = 200ms};
  }
  Decision d;
  d.cordon = l.rem.get({"spec", "cordon"}) != nullptr && l.rem.get({"spec", "cordon"})->as_bool();
  for (const auto& t : string_set(l.rem.get({"spec", "taints"})))
    d.taints.push_back(Taint::parse(t, "spec.taints"));
  patch_node(l.node, plan_quarantine(l.node, d, l.entities, l.name));
  std::int64_t latency = -1;
  {
    std::lock_guard lock(latency_mu_);
    if (auto it = cordon_latency_.find(l.name); it != cordon_latency_.end()) {
      latency = it->second;
      cordon_latency_.erase(it);
    }
  }
  auto quarantined = [&](core::Value& s) {
    s["quarantinedAt"] = rfc3339(l.now);
    if (latency >= 0) s["cordonLatencyMs"] = latency;
  };
  if (l.recovered) {
    set_phase(l.rem, "Quarantined", "quarantined for " + join(l.entities), quarantined);
    return {.requeue = true};
  }
  // The quarantine is confirmed: the step after Quarantined is recorded in the same status
  // write (quarantinedAt marks the passage), one write per incident less; the API server is
  // what bounds quarantines per second.
  after_quarantine(l.policy, l.node, l.rem, l.new_node, l.now, quarantined);
  return {};
}

Result NodeReconciler::drive_quarantined(const Look& l) {
  if (l.new_node) {
    // Not forced by a fault: waits for room in the node's domain like a reboot.
    if (auto why = budget_wait(l.node, l.rem)) return hold_for_budget(l.rem, *why);
  } else if (l.recovered) {
    finish(l.rem, "Released", "every faulty entity recovered before remediation", &l.node);
    return {};
  }
  after_quarantine(l.policy, l.node, l.rem, l.new_node, l.now, nullptr);
  return {};
}

Result NodeReconciler::drive_draining(const Look& l) {
  if (l.recovered) {
    state_->gang_waits.set(l.node_name, {});
    finish(l.rem, "Released", "every faulty entity recovered during the drain; drain cancelled",
           &l.node);
    return {};
  }
  std::vector<kube::ObjectPtr> keep;
  const std::vector<const core::Value*> on_node = pods_on(l.node_name, keep);
  std::optional<core::Value> written;
  const JobDrain jobs = drain_jobs(l, on_node, keep, written);
  const core::Value& rem = written ? *written : l.rem;
  const std::int64_t started = ms_of(rem.get_string({"status", "drainStartedAt"}));
  DrainPlan plan = plan_drain(on_node, l.policy.drain, started > 0 ? started : l.now, l.now, jobs);
  if (plan.done()) {
    state_->gang_waits.set(l.node_name, {});
    set_phase(rem, "Remediating", "drained");
    return {};
  }
  // The pods of the jobs disrupted, whose every eviction is logged (the gang's, on any node).
  std::set<std::string> job_pods;
  for (const auto& r : jobs.records)
    if (r.disrupted_ms > 0)
      for (const auto& p : r.pods) job_pods.insert(p.uid);
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
      if (job_pods.contains(step.uid)) {
        core::log::info("sentinel: job pod evicted",
                        {{"incident", l.name},
                         {"pod", step.namespace_ + "/" + step.name},
                         {"uid", step.uid},
                         {"node", step.node.empty() ? l.node_name : step.node},
                         {"action", std::string(pod_action_name(step.action))}});
      }
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
  counts["heldForCheckpoint"] = static_cast<std::int64_t>(plan.held());
  // While jobs checkpoint, the message says which and until when.
  std::string waits;
  std::size_t waiting = 0;
  for (const auto& d : jobs.decisions) {
    if (d.action != kube::JobAction::RequestCheckpoint && d.action != kube::JobAction::Wait)
      continue;
    if (++waiting <= 3)
      waits += (waits.empty() ? "" : ", ") + d.key.display() + " until " + rfc3339(d.deadline_ms);
  }
  if (waiting > 3) waits += ", ...";
  const std::string message =
      waiting == 0 ? "draining the node's pods"
                   : "draining the node's pods; " + std::to_string(waiting) +
                         " job(s) asked to checkpoint first (request " + l.name + "): " + waits;
  const core::Value* old = s.find("drain");
  if (old == nullptr || !(*old == counts) || s.get_string({"message"}) != message) {
    s["drain"] = std::move(counts);
    s["message"] = message.substr(0, 1000);
    write_status(rem, std::move(s));
  }
  // A wait needs another look at its deadline (an answer is an event for the node).
  const std::int64_t next = kube::next_job_deadline(jobs.decisions);
  const auto until = std::chrono::milliseconds(std::max<std::int64_t>(next - l.now, 0) + 100);
  if (plan.only_held()) return {.requeue_after = until};
  return {.requeue_after = next > 0 ? std::min<std::chrono::milliseconds>(until, 1s) : 1s};
}

JobDrain NodeReconciler::drain_jobs(const Look& l, const std::vector<const core::Value*>& on_node,
                                    std::vector<kube::ObjectPtr>& keep,
                                    std::optional<core::Value>& written) {
  JobDrain jobs;
  jobs.pods = on_node;
  std::set<std::string> gangs;
  for (const core::Value* p : on_node)
    if (auto k = kube::gang_key_of(*p)) gangs.insert(k->index());
  for (const auto& g : gangs) {
    for (auto& p : pods_.by_index(std::string(kGangIndex), g)) {
      if (p->get_string({"spec", "nodeName"}) == l.node_name) continue;  // listed already
      jobs.pods.push_back(p.get());
      keep.push_back(std::move(p));
    }
  }
  kube::JobDisruptionInput in;
  in.node = l.node_name;
  in.pods = jobs.pods;
  in.records = kube::read_job_records(l.rem.get({"status", "jobs"}));
  // The incident's name: a restarted controller asks with the same id.
  in.request_id = l.name;
  in.checkpoint_timeout_s = l.policy.drain.checkpoint_timeout_s;
  in.skip_namespaces = l.policy.drain.system_namespaces;
  in.now_ms = l.now;
  jobs.decisions = kube::decide_jobs(in);
  jobs.records = in.records;
  bool recorded = false;
  std::set<std::string> waiting;
  for (const auto& d : jobs.decisions) {
    kube::record_decision(jobs.records, d, in);
    recorded = recorded || d.action == kube::JobAction::RequestCheckpoint ||
               d.action == kube::JobAction::DrainGang;
    if (d.action == kube::JobAction::RequestCheckpoint || d.action == kube::JobAction::Wait)
      waiting.insert(d.key.index());
  }
  state_->gang_waits.set(l.node_name, std::move(waiting));
  if (recorded) {
    // Recorded before anything is done (a compare-and-swap: a stale copy gets 409 and looks
    // again), so a restart resumes the same wait and disrupts each job once.
    core::Value s = status_of(l.rem);
    s["jobs"] = kube::job_records_value(jobs.records);
    written = write_status(l.rem, std::move(s));
    for (const auto& d : jobs.decisions) record_job_decision(l, d, jobs.records);
  }
  for (const auto& d : jobs.decisions) {
    if (d.annotate.empty()) continue;
    const core::Value patch = kube::checkpoint_request_patch(d.request_id, d.deadline_ms);
    for (const auto& r : d.annotate) {
      try {
        client_.patch(kube::resources::pods(), r.ns, r.name, kube::PatchType::Merge, patch);
      } catch (const kube::ApiError& err) {
        if (!err.is(kube::Reason::NotFound)) throw;  // gone: nothing to ask
      }
    }
  }
  return jobs;
}

// The Event, log line and counters of a decision just recorded.
void NodeReconciler::record_job_decision(const Look& l, const kube::JobDecision& d,
                                         const std::vector<kube::JobRecord>& records) {
  if (d.action != kube::JobAction::RequestCheckpoint && d.action != kube::JobAction::DrainGang)
    return;
  const core::Value subject = regarding(l.rem, "gpufleet.io/v1alpha1", "Remediation");
  std::size_t pods = 0;
  std::set<std::string> nodes;
  for (const auto& r : records) {
    if (!(r.key == d.key)) continue;
    pods = r.pods.size();
    for (const auto& p : r.pods)
      if (!p.node.empty()) nodes.insert(p.node);
  }
  if (d.action == kube::JobAction::RequestCheckpoint) {
    const std::string note = "job " + d.key.display() + " (" + std::to_string(d.annotate.size()) +
                             " pod(s)) asked to checkpoint by " + rfc3339(d.deadline_ms) +
                             " (request " + d.request_id + "); its pods on " + l.node_name +
                             " wait";
    events_.record(subject, kube::EventType::Normal, "CheckpointRequested", "Drain", note);
    core::log::info("sentinel: checkpoint requested", {{"incident", l.name},
                                                       {"job", d.key.display()},
                                                       {"request", d.request_id},
                                                       {"deadline", rfc3339(d.deadline_ms)}});
  } else {
    const std::string why = d.reason == "Acknowledged"       ? "the job acknowledged its checkpoint"
                            : d.reason == "DeadlineExceeded" ? "no checkpoint by the deadline"
                            : d.reason == "NoWait"           ? "the policy waits for no checkpoint"
                                                             : "the job has no checkpoint contract";
    const std::string note = "job " + d.key.display() + " disrupted as one unit (" + d.reason +
                             ": " + why + "): " + std::to_string(pods) + " pod(s) evicted on " +
                             join(nodes);
    events_.record(
        subject,
        d.reason == "DeadlineExceeded" ? kube::EventType::Warning : kube::EventType::Normal,
        "JobDisrupted", "Drain", note.substr(0, 1000));
    core::log::info("sentinel: job disrupted", {{"incident", l.name},
                                                {"job", d.key.display()},
                                                {"reason", d.reason},
                                                {"pods", static_cast<std::int64_t>(pods)}});
    metrics_.jobs_disrupted.with({d.reason}).inc();
  }
  metrics_.job_decisions.with({kube::job_action_name(d.action)}).inc();
}

// --- example begin ---
Result NodeReconciler::drive_remediating(const Look& l) {
  const core::Value* a = l.rem.get({"status", "action"});
  // The spec's action, or a stronger one once an action's attempts were used up
  // (gpu-reset → reboot → replace; the spec is immutable; status.escalatedFrom says so).
  const std::string spec_action(l.rem.get_string({"spec", "action"}));
  const std::string recorded(a != nullptr ? a->get_string({"type"}) : "");
  const std::string action =
      action_strength(recorded) > action_strength(spec_action) ? recorded : spec_action;
  ReplacementProvider* provider = nullptr;
  if (auto it = providers_.find(l.policy.remediation.provider); it != providers_.end())
    provider = it->second.get();
  const RemediationFacts facts = observe_remediation(l, action, provider);
  RemediationLimits limits;
  limits.enabled = l.policy.remediation.enabled;
  limits.max_attempts = l.policy.remediation.max_attempts;
  limits.timeout_s = l.policy.remediation.timeout_s;
  limits.settle_s = l.policy.remediation.settle_s;
  limits.replace_when_reboot_fails = l.policy.remediation.replace_when_reboot_fails;
  limits.provider = l.policy.remediation.provider;
  limits.provider_known = provider != nullptr;
  return act_remediation(l, decide_remediation(facts, limits, l.now), facts, provider);
}
// --- example end ---

// The number the remediator's request carries: the agent takes each (incident, number) once
// and never a lower one, so it rises over the incident's actions (a reboot after two resets
// is request 3, attempt 1). An incident recorded before it existed: its attempt.
static std::int64_t request_number(const core::Value* a) {
  if (a == nullptr) return 0;
  const core::Value* rn = a->find("request");
  if (rn != nullptr && rn->is_int()) return rn->as_int();
  const core::Value* at = a->find("attempt");
  return at != nullptr ? at->as_int() : 0;
}

RemediationFacts NodeReconciler::observe_remediation(const Look& l, const std::string& action,
                                                     ReplacementProvider* provider) const {
  const core::Value* a = l.rem.get({"status", "action"});
  RemediationFacts f;
  f.action = action;
  f.attempt = a != nullptr && a->find("attempt") ? a->find("attempt")->as_int() : 0;
  f.boot_now = std::string(l.node.get_string({"status", "nodeInfo", "bootID"}));
  f.uid_now = std::string(kube::uid_of(l.node));
  f.node_ready = kube::node::ready(l.node);
  f.recovered = l.recovered;
  for (const auto& e : l.entities)
    if (l.faulty.contains(e)) f.still_faulty.push_back(e);
  if (a == nullptr) return f;
  f.requested_ms = ms_of(a->get_string({"requestedAt"}));
  f.finished_ms = ms_of(a->get_string({"finishedAt"}));
  f.boot_before = std::string(a->get_string({"bootID"}));
  f.uid_before = std::string(a->get_string({"nodeUID"}));
  if (action == "replace" && provider != nullptr && f.attempt > 0)
    f.replacement =
        provider->poll({l.node_name, l.name, static_cast<int>(f.attempt), f.uid_before});
  // The agent's word on this request (NodeHealth status.remediation, journalled by the agent
  // that took it), when it is about this incident, action and request.
  const core::Value* said =
      l.health != nullptr ? l.health->get({"status", "remediation"}) : nullptr;
  if (said != nullptr && said->get_string({"incident"}) == l.name &&
      said->get_string({"action"}) == action && said->find("attempt") != nullptr &&
      said->find("attempt")->is_int() && said->find("attempt")->as_int() == request_number(a)) {
    f.agent_state = std::string(said->get_string({"state"}));
    f.agent_detail = std::string(said->get_string({"error"}));
    if (f.agent_detail.empty()) f.agent_detail = std::string(said->get_string({"message"}));
  }
  return f;
}

Result NodeReconciler::act_remediation(const Look& l, const RemediationStep& step,
                                       const RemediationFacts& facts,
                                       ReplacementProvider* provider) {
  using Kind = RemediationStep::Kind;
  switch (step.kind) {
    case Kind::Skip:
      enter_validating(l.policy, l.node, l.rem, "no remediation action; validating", nullptr);
      return {};
    case Kind::Request:
    case Kind::Escalate:
      if (step.claims_budget)
        if (auto why = budget_wait(l.node, l.rem)) return hold_for_budget(l.rem, *why);
      request_action(l, step, provider);
      return {.requeue_after = 2s};
    case Kind::Done:
      if (facts.action == "replace") {
        // A new machine: nothing takes work on it before certify passed it. Cordoned (no
        // fault taints: they were the old machine's) under this incident, then validated.
        Decision d;
        d.cordon = true;
        patch_node(l.node, plan_quarantine(l.node, d, {}, l.name));
      }
      enter_validating(l.policy, l.node, l.rem, facts.action + " done",
                       [&](core::Value& s) { s["action"]["result"] = step.message; });
      return {};
    case Kind::MarkSettled: {
      core::Value s = status_of(l.rem);
      s["action"]["finishedAt"] = rfc3339(l.now);
      s["message"] = "gpu-reset done by the agent (attempt " + std::to_string(facts.attempt) +
                     "); waiting up to " + std::to_string(l.policy.remediation.settle_s) +
                     " s for the GPU(s) to report healthy";
      write_status(l.rem, std::move(s));
      return {.requeue_after = std::chrono::milliseconds(step.wait_ms)};
    }
    case Kind::Settle: return {.requeue_after = std::chrono::milliseconds(step.wait_ms)};
    case Kind::Fail: finish(l.rem, "Failed", step.message, &l.node); return {};
    case Kind::AskAgain: {
      // Idempotent per (incident, request): asks again only if the first ask was lost.
      const core::Value* a = l.rem.get({"status", "action"});
      std::vector<std::string> gpus;
      if (const core::Value* g = a->find("gpus"); g != nullptr && g->is_list())
        for (const auto& u : g->as_list())
          if (u.is_string()) gpus.push_back(u.as_string());
      ask(l, facts.action, facts.attempt, request_number(a), gpus, facts.uid_before, provider);
      return {.requeue_after = 2s};
    }
  }
  return {};
}

void NodeReconciler::ask(const Look& l, const std::string& type, std::int64_t attempt,
                         std::int64_t request_no, const std::vector<std::string>& gpus,
                         const std::string& old_uid, ReplacementProvider* provider) {
  if (type == "wait") return;
  if (type == "replace") {
    if (provider != nullptr)
      provider->request({l.node_name, l.name, static_cast<int>(attempt), old_uid});
    return;
  }
  // A gpu-reset names the GPUs of the incident that are still faulty (a GPU that recovered
  // meanwhile is not reset); each attempt decides again and records its list.
  remediator_->request({l.node_name, l.name, static_cast<int>(request_no), type,
                        type == "gpu-reset" ? gpus : std::vector<std::string>{}});
}

void NodeReconciler::request_action(const Look& l, const RemediationStep& step,
                                    ReplacementProvider* provider) {
  const std::string& type = step.action;
  const std::int64_t request_no = request_number(l.rem.get({"status", "action"})) + 1;
  const std::string uid(kube::uid_of(l.node));
  core::Value s = status_of(l.rem);
  core::Value act = core::Value::map();
  act["type"] = type;
  act["attempt"] = step.attempt;
  act["request"] = request_no;
  act["requestedAt"] = rfc3339(l.now);
  act["bootID"] = std::string(l.node.get_string({"status", "nodeInfo", "bootID"}));
  if (type == "replace") {
    act["nodeUID"] = uid;
    act["provider"] = l.policy.remediation.provider;
  }
  const std::vector<std::string> gpus =
      type == "gpu-reset" ? faulty_gpus(l.entities, l.faulty) : std::vector<std::string>{};
  if (!gpus.empty()) {
    core::Value g = core::Value::list();
    for (const auto& u : gpus) g.push_back(u);
    act["gpus"] = std::move(g);
  }
  s["action"] = std::move(act);
  std::string message = type + " requested (attempt " + std::to_string(step.attempt) + ")" +
                        (gpus.empty() ? "" : " for " + join(gpus));
  if (!step.from.empty()) {
    message = step.from + " attempts used up (" + step.why + "); " + message;
    s["escalatedFrom"] = step.from;
    record_escalation(s, step.from, type, step.reason, step.why, l.now);
  } else if (!step.why.empty()) {
    message = step.why + "; " + message;
  }
  s["message"] = message.substr(0, 1000);
  clear_budget_wait(s);
  write_status(l.rem, std::move(s));  // recorded first: a crash never loses an attempt
  ask(l, type, step.attempt, request_no, gpus, uid, provider);
  metrics_.remediation_requests.with({type}).inc();
  if (!step.from.empty()) {
    events_.record(node_ref(l.node), kube::EventType::Warning, "RemediationEscalated", "Remediate",
                   message.substr(0, 1000));
  }
}

Result NodeReconciler::drive_validating(const Look& l) {
  if (!l.policy.validation.enabled) {
    finish(l.rem, "Released", "validation disabled by policy", &l.node);
    return {};
  }
  kube::ObjectPtr vr = vreqs_.get(l.name);
  if (vr == nullptr) {
    create_validation_request(l.policy, l.node_name, l.name, l.now);
    if (l.rem.get_string({"status", "validationRequest"}).empty()) {
      core::Value s = status_of(l.rem);
      s["validationRequest"] = l.name;
      write_status(l.rem, std::move(s));
    }
    return {.requeue_after = 5s};
  }
  const std::string vphase(vr->get_string({"status", "phase"}));
  if (vphase == "Passed") {
    finish(l.rem, "Released", "certify passed the node (ValidationRequest " + l.name + ")", &l.node,
           true);
  } else if (vphase == "Failed" || vphase == "Expired") {
    std::string why(vr->get_string({"status", "message"}));
    if (const core::Value* results = vr->get({"status", "results"});
        results && results->is_list()) {
      for (const auto& r : results->as_list()) {
        if (r.get_string({"node"}) == l.node_name && r.get_string({"verdict"}) == "Failed") {
          why =
              std::string(r.get_string({"reason"})) + ": " + std::string(r.get_string({"message"}));
        }
      }
    }
    finish(l.rem, "Failed",
           "validation " + vphase + (why.empty() ? "" : " (" + why + ")") + "; the node stays out",
           &l.node);
  }
  return {.requeue_after = 5s};
}

std::vector<const core::Value*> NodeReconciler::pods_on(const std::string& node,
                                                        std::vector<kube::ObjectPtr>& keep) {
  keep = pods_.by_index("node", node);
  std::vector<const core::Value*> out;
  for (const auto& p : keep) out.push_back(p.get());
  return out;
}

// The phase after Quarantined: Draining, Remediating, or Validating (a new node, or nothing
// to drain or do).
void NodeReconciler::after_quarantine(const Policy& policy, const core::Value& node,
                                      const core::Value& rem, bool new_node, std::int64_t now,
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
void NodeReconciler::enter_validating(const Policy& policy, const core::Value& node,
                                      const core::Value& rem, const std::string& message,
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

void NodeReconciler::create_validation_request(const Policy& policy, const std::string& node_name,
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

}  // namespace gpufleet::sentinel::detail
