// One pass over one HostPackageSet (observe -> decide -> act): observe the set, its policy,
// the open incidents, the earlier sets and the Nodes; plan_rollout (rollout.h) decides which
// nodes start; drive the nodes in progress (node_drive.cc), start the planned ones
// (node_start.cc), lift or set taints, re-verify; rollout_phase and set_status
// (set_status.h) decide the phase and the status, pass_requeue when to look again.
#include <atomic>
#include <exception>
#include <thread>

#include "api/resources.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/time.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/set_reconciler.h"
#include "hostpkg/controller/set_status.h"
#include "hostpkg/controller/text_fields.h"
#include "kube/api/disruption.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/errors.h"

namespace gpufleet::hostpkg::detail {

namespace {

namespace log = core::log;
using controller::Request;
using controller::Result;
using kube::incident_open;  // the one definition of "out": kube/api/disruption.h
using kube::kIncidentNodeLabel;

// Nodes in progress driven at once in a pass (drive_in_progress says why); the client's own
// rate limit (--kube-qps) still caps the writes.
constexpr std::size_t kDriveWorkers = 8;

// Earlier sets (lower priority numbers) gate this one, per node or for all nodes.
struct Earlier {
  HostPackageSet set;
  std::string target;
};

std::vector<Earlier> earlier_sets(const controller::Cache& sets, const HostPackageSet& self) {
  std::vector<Earlier> earlier;
  for (const auto& o : sets.list()) {
    if (kube::name_of(*o) == self.name) continue;
    try {
      HostPackageSet s = parse_host_package_set(*o);
      if (s.disable || s.priority >= self.priority) continue;
      std::string target = digest(s).target;
      earlier.push_back({std::move(s), std::move(target)});
    } catch (const std::exception&) {
    }
  }
  return earlier;
}

}  // namespace

Result HostPkgReconciler::reconcile_pass(const Request& req, std::stop_token stop, bool replan,
                                         Rescan* reuse) {
  Pass p;
  if (std::optional<Result> done = observe_set(p, req)) return *done;
  observe_nodes(p, reuse);
  RolloutInput ri;
  ri.set = &p.set;
  ri.policy = p.policy;
  ri.cluster = p.cluster;
  ri.nodes = p.inputs;
  ri.outside = &p.outside;
  std::int64_t epoch = 0;
  if (auto e = parse_int(kube::annotation_of(*p.object, kResetAnnotation)); e && *e >= 0)
    epoch = *e;
  ri.reset_epoch = epoch;
  ri.gated = &p.gated;
  ri.gated_all = p.gated_all;
  RolloutPlan plan = plan_rollout(ri);

  bool waiting = false;
  const std::size_t finished = drive_in_progress(p, stop, waiting);
  if (stop.stop_requested()) return {};
  if (finished > 0 && finished == p.in_progress.size() && plan.start.empty() && replan &&
      !p.deleting) {
    plan = RolloutPlan{};  // the re-plan makes its own
    return replan_after_batch(p, req, stop);
  }
  if (!start_planned(p, plan, stop, waiting)) return {};
  taints(p);
  std::int64_t next_verify = 0;
  if (!stop.stop_requested()) next_verify = reverify(p);
  // From this pass's scan: a record written above shows on the next pass (its own Node event).
  if (!stop.stop_requested()) sync_drift_conditions(p.nodes);
  return conclude(p, plan, waiting, next_verify);
}

std::optional<Result> HostPkgReconciler::observe_set(Pass& p, const Request& req) {
  p.object = sets_.get(req.key());
  if (p.object == nullptr) {
    // The set is gone (its finalizer let it go, or it was forced): its drift no longer shows.
    std::vector<NodeScan> scans;
    const LabelKeys none;  // the drift conditions read no labels
    nodes_.for_each_compact(
        [&](const kube::CompactObject& o) { scans.push_back(scan_node(o, &none)); });
    sync_drift_conditions(scans);
    return Result{};
  }
  const core::Value& obj = *p.object;
  p.deleting = obj.get({"metadata", "deletionTimestamp"}) != nullptr;
  try {
    p.set = parse_host_package_set(obj);
  } catch (const core::InvalidInput& e) {
    p.set.name = req.name;
    if (p.deleting) {
      ensure_finalizer(obj, false);  // nothing we can plan from: keep the records, let it go
      return Result{};
    }
    write_status(p, nullptr, "Invalid", e.what());
    return Result{};
  }
  if (!p.deleting && ensure_finalizer(obj, true)) return Result{};  // back through the watch
  if (p.deleting) {
    // Deletion: the same rollout with no packages, which plans the uninstall of whatever
    // supports it and keeps the records of what does not.
    p.set.packages.clear();
    p.set.pause = false;
    p.set.disable = false;
  }
  if (p.set.disable) {
    write_status(p, nullptr, "Disabled", "spec.disable is true: the set is ignored");
    return Result{};
  }
  if (!p.set.deployment_policy.empty()) {
    kube::ObjectPtr pol = policies_.get(p.set.deployment_policy);
    if (pol == nullptr) {
      write_status(p, nullptr, "Blocked",
                   "DeploymentPolicy " + p.set.deployment_policy +
                       " not found; create it or clear spec.deploymentPolicy");
      return Result{};
    }
    try {
      p.policy_storage = parse_deployment_policy(*pol);
      p.policy = &p.policy_storage;
    } catch (const core::InvalidInput& e) {
      write_status(p, nullptr, "Blocked",
                   "DeploymentPolicy " + p.set.deployment_policy + ": " + e.what());
      return Result{};
    }
  }
  p.desired = digest(p.set);
  return std::nullopt;
}

void HostPkgReconciler::observe_nodes(Pass& p, Rescan* reuse) {
  std::vector<Earlier> earlier;
  if (!p.deleting) earlier = earlier_sets(sets_, p.set);
  // One scan of the Nodes, after the nodes with an open sentinel incident: out even while
  // uncordoned (Detected before the cordon lands, or a validation that needs it schedulable).
  remediations_.for_each_compact([&](const kube::CompactObject& o) {
    const std::string_view node = o.root().get_string({"metadata", "labels", kIncidentNodeLabel});
    if (!node.empty() && incident_open(o.root().get_string({"status", "phase"})))
      p.incidents.emplace(node);
  });
  // Label keys read below: this set's, its policy's and the other sets' selectors (earlier
  // priorities gate, runtime-required sets share the taint), the cluster budget's topology.
  add_keys(p.keys, p.set.node_selector);
  if (p.policy != nullptr) {
    add_keys(p.keys, p.policy->fallback.selector);
    for (const auto& c : p.policy->compartments) add_keys(p.keys, c.selector);
  }
  for (const auto& o : sets_.list()) {
    try {
      add_keys(p.keys, parse_host_package_set(*o).node_selector);
    } catch (const std::exception&) {
      // An invalid set plans nothing and gates nothing.
    }
  }
  // The budget in force (the DisruptionBudget object, else the --set settings), read once per
  // pass: its topology label must be among the keys copied out of the cache.
  p.cluster = cluster_budget(p.cluster_storage);
  if (p.cluster != nullptr && !p.cluster->topology_key.empty())
    p.keys.insert(p.cluster->topology_key);
  if (reuse != nullptr && reuse->keys == p.keys) {
    p.nodes = std::move(reuse->nodes);
  } else {
    p.nodes.reserve(nodes_.size());
    nodes_.for_each_compact(
        [&](const kube::CompactObject& o) { p.nodes.push_back(scan_node(o, &p.keys)); });
  }
  p.inputs.reserve(p.nodes.size());
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    NodeScan& n = p.nodes[i];
    NodeInput in;
    in.facts.name = n.name;
    in.facts.ready = n.ready;
    in.facts.unschedulable = n.unschedulable;
    bool ours_recorded = false;
    if (auto it = n.records.find(p.set.name); it != n.records.end()) {
      RecordRead rr = parse_record_text(p.set.name, it->second);
      if (rr.record) {
        p.records.push_back(std::move(*rr.record));
        in.record = &p.records.back();
        ours_recorded =
            in.record->state == NodeState::InProgress || in.record->state == NodeState::Failed;
        if (in.record->state == NodeState::InProgress) p.in_progress.push_back(n.name);
      } else {
        in.record_error = rr.error;
      }
    }
    // hostpkg's cordon share belongs to this set only where this set's record holds the node.
    in.facts.cordon_ours = owned(n) && ours_recorded;
    bool other_holds = false;
    for (const auto& [set, text] : n.records) {
      if (set != p.set.name && kube::record_holds(text, owned(n))) other_holds = true;
    }
    for (const auto& o : n.owners) {
      if (o != kOwner) other_holds = true;  // sentinel's quarantine and the like
    }
    if (p.incidents.contains(n.name)) other_holds = true;
    if (other_holds) p.outside.insert(n.name);
    for (const Earlier& e : earlier) {
      if (!e.set.node_selector.matches(n.labels)) continue;
      if (!record_done_at(n, e.set.name, e.target)) {
        p.gated.insert(n.name);
        if (e.set.sequencing == Sequencing::All || p.set.sequencing == Sequencing::All)
          p.gated_all = true;
      }
    }
    // Moved, not copied: the labels are most of a pass's memory at 5,000 nodes. From here on
    // they are read as p.inputs[i].facts.labels.
    in.facts.labels = std::move(n.labels);
    p.index.emplace(n.name, p.inputs.size());
    p.inputs.push_back(std::move(in));
  }
}

// Nodes go a few at a time: each step is one write whose latency (an etcd commit; 0.1-0.25 s
// on a loaded API server) set the pace when they went one by one (4.4 writes/s at 5,000
// nodes: ~19 min a batch), never the controller's CPU. Each node is one worker's; nothing
// here starts a node.
std::size_t HostPkgReconciler::drive_in_progress(Pass& p, std::stop_token stop, bool& waiting) {
  std::atomic<bool> any_waiting{false};
  std::atomic<std::size_t> finished{0}, next{0};
  std::mutex error_mu;
  std::exception_ptr error;
  auto drive_some = [&] {
    for (std::size_t i; (i = next++) < p.in_progress.size();) {
      if (stop.stop_requested()) return;
      {
        std::lock_guard lock(error_mu);
        if (error) return;
      }
      try {
        Drive d = drive_node(p, p.in_progress[i], stop);
        if (d == Drive::Waiting) any_waiting = true;
        if (d == Drive::Done) ++finished;
      } catch (const kube::ApiError& e) {
        if (e.is(kube::Reason::Conflict)) {
          any_waiting = true;  // the Node changed under us: re-read it next pass
          continue;
        }
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
      } catch (...) {
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (std::size_t w = 1; w < std::min(kDriveWorkers, p.in_progress.size()); ++w)
      helpers.emplace_back(drive_some);
    drive_some();
  }
  if (error) std::rethrow_exception(error);
  waiting = waiting || any_waiting.load();
  return finished.load();
}

// Every node in progress finished in this pass and this plan (made before) started nobody:
// the batch is over and the next one may start now. (Only then: a re-plan after each node of
// a batch would cost a pass of CPU per node and start nothing.) The re-plan (which also writes
// status, taints, re-verification) works from this pass's scan with the nodes it wrote
// replaced by the API's answers to those writes: as new as the cache after waiting for the
// watch (0.2-0.5 s of the batch overhead at 5,000 nodes under load), and no second scan. A
// node changed elsewhere meanwhile is as stale as in any pass: its start carries the Node's
// resourceVersion and gets 409.
Result HostPkgReconciler::replan_after_batch(Pass& p, const Request& req, std::stop_token stop) {
  auto planned_from = clock_.steady_now();
  Rescan rescan;
  rescan.keys = std::move(p.keys);
  rescan.nodes = std::move(p.nodes);
  for (std::size_t i = 0; i < rescan.nodes.size(); ++i) {
    NodeScan& n = rescan.nodes[i];
    if (auto it = fresh_.find(n.name); it != fresh_.end()) {
      n = scan_node(*it->second, &rescan.keys);
    } else {
      n.labels = std::move(p.inputs[i].facts.labels);  // moved there by this pass
    }
  }
  fresh_.clear();
  p.inputs = {};
  p.records.clear();
  p.index = {};
  Result r = reconcile_pass(req, stop, false, &rescan);
  log::info("hostpkg: batch over, planned the next",
            {{"set", p.set.name},
             {"replan_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                               clock_.steady_now() - planned_from)
                               .count()}});
  return r;
}

bool HostPkgReconciler::start_planned(Pass& p, RolloutPlan& plan, std::stop_token stop,
                                      bool& waiting) {
  // The plan counted from this process's cache; the claims object counts what other
  // controllers and replicas decided in the same instant (controller/disruption_reservation.h).
  std::unordered_map<std::string, std::string> claimed;
  if (p.cluster != nullptr && !plan.start.empty() && !p.deleting && !stop.stop_requested())
    claimed = claim_starts(p, plan);
  const StartDecision d = starts_after_claims(plan.start, p.cluster != nullptr, claimed);
  if (stop.stop_requested() && !plan.start.empty()) return false;
  if (d.refused > 0) waiting = true;
  plan.waiting_on_cluster_budget += d.refused;  // the status says so
  for (const StartDecision::Go& go : d.go) {
    if (stop.stop_requested()) return false;
    try {
      start_node(p, plan.start[go.index], go.rv);
      waiting = true;
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::Conflict)) throw;
      waiting = true;
    }
  }
  return true;
}

Result HostPkgReconciler::conclude(Pass& p, RolloutPlan& plan, bool waiting,
                                   std::int64_t next_verify) {
  PhaseFacts pf;
  pf.deleting = p.deleting;
  pf.pause = p.set.pause;
  pf.drain_blocked = p.drain_blocked;
  pf.protected_wait = p.protected_wait;
  pf.in_progress = !p.in_progress.empty();
  const SetPhase phase = rollout_phase(plan, pf);
  if (p.deleting && plan.complete && p.in_progress.empty()) {
    // Everything that supports uninstall is uninstalled; records stay on the Nodes.
    ensure_finalizer(*p.object, false);
    // The set is gone: so are its series (a name that never comes back must not stay on
    // /metrics). Nothing of this set runs now, so nothing re-creates them.
    metrics_.nodes->remove_matching("set", p.set.name);
    metrics_.stopped->remove_matching("set", p.set.name);
    metrics_.steps->remove_matching("set", p.set.name);
    metrics_.stage_duration->remove_matching("set", p.set.name);
    metrics_.interrupts->remove_matching("set", p.set.name);
    metrics_.verifications->remove_matching("set", p.set.name);
    metrics_.drift->remove_matching("set", p.set.name);
    return {};
  }
  write_status(p, &plan, phase.phase, phase.message);
  RequeueFacts rf;
  rf.waiting = waiting;
  rf.starting = !plan.start.empty();
  rf.verifying = p.verifying;
  rf.waiting_on_cluster_budget = plan.waiting_on_cluster_budget;
  rf.next_verify = next_verify;
  rf.now_s = clock_.unix_seconds();
  rf.poll = settings_.poll;
  return pass_requeue(rf);
}

void HostPkgReconciler::write_status(Pass& p, const RolloutPlan* plan, const std::string& phase,
                                     const std::string& message) {
  const core::Value& obj = *p.object;
  SetStatusFacts f;
  if (const core::Value* g = obj.get({"metadata", "generation"}); g && g->is_int())
    f.generation = g->as_int();
  f.phase = phase;
  f.message = message;
  f.plan = plan;
  f.drain_blocked = p.drain_blocked;
  f.protected_wait = p.protected_wait;
  f.validating = p.validating;
  f.node_messages = p.node_messages;
  f.drifted = p.drifted;
  f.drift_messages = p.drift_messages;
  f.reset_epoch = parse_int(kube::annotation_of(obj, kResetAnnotation)).value_or(0);
  f.pause = p.set.pause;
  f.reverify = p.set.reverify.enabled();
  f.on_drift = p.set.reverify.on_drift;
  if (const core::Value* c = obj.get({"status", "conditions"})) f.conditions = *c;
  f.now = clock_.now();
  const SetStatus st = set_status(std::move(f));

  // Events on transitions the status shows for the first time.
  const core::Value* old = obj.get({"status", "phase"});
  std::string old_phase = old != nullptr && old->is_string() ? old->as_string() : "";
  if (old_phase != phase) {
    record_event(obj,
                 phase == "Stopped" || phase == "Invalid" || phase == "Blocked"
                     ? kube::EventType::Warning
                     : kube::EventType::Normal,
                 "Rollout" + phase, message.empty() ? "phase " + phase : message);
  }
  // Metrics: bounded by sets x 5 states.
  const std::string& sn = p.set.name.empty() ? std::string(kube::name_of(obj)) : p.set.name;
  metrics_.nodes->with({sn, "done"}).set(static_cast<double>(st.done));
  metrics_.nodes->with({sn, "in_progress"}).set(static_cast<double>(st.in_progress));
  metrics_.nodes->with({sn, "failed"}).set(static_cast<double>(st.failed));
  metrics_.nodes->with({sn, "pending"}).set(static_cast<double>(st.pending));
  metrics_.nodes->with({sn, "blocked"}).set(static_cast<double>(st.blocked));
  metrics_.nodes->with({sn, "drifted"}).set(static_cast<double>(p.drifted));
  metrics_.stopped->with({sn}).set(st.stopped ? 1 : 0);

  const core::Value* cur = obj.find("status");
  if (cur != nullptr && *cur == st.status) return;
  metrics_.writes->with({"status"}).inc();
  status_.apply("", kube::name_of(obj), st.status);
}

}  // namespace gpufleet::hostpkg::detail
