#include "hostpkg/controller/set_status.h"

#include <algorithm>

#include "hostpkg/controller/reconciler.h"
#include "hostpkg/controller/text_fields.h"
#include "kube/api/conditions.h"

namespace gpufleet::hostpkg {

namespace {

using detail::join_first;

// Totals over the compartments, which go into the status too.
struct Counts {
  std::int64_t nodes = 0, done = 0, active = 0, failed = 0, pending = 0, blocked = 0;
  bool stopped = false;
  std::vector<std::string> failing;
  std::string stop_reason;
};

core::Value compartment_status(const CompartmentStatus& c, Counts& n) {
  n.nodes += c.nodes;
  n.done += c.done;
  n.active += c.in_progress;
  n.failed += c.failed;
  n.pending += c.pending;
  n.blocked += c.blocked;
  core::Value cv;
  cv["name"] = c.name;
  cv["nodes"] = c.nodes;
  cv["done"] = c.done;
  cv["inProgress"] = c.in_progress;
  cv["failed"] = c.failed;
  cv["pending"] = c.pending;
  cv["blocked"] = c.blocked;
  cv["budget"] = c.budget;
  cv["batch"] = c.batch;
  cv["batchSize"] = c.batch_size;
  cv["stopped"] = c.stopped;
  if (c.stopped) {
    n.stopped = true;
    n.stop_reason = c.name + ": " + c.stop_reason;
    cv["stopReason"] = c.stop_reason.substr(0, 1000);
    core::Value fl = core::Value::list();
    for (const auto& f : c.failing_nodes) {
      fl.push_back(f);
      n.failing.push_back(f);
    }
    cv["failingNodes"] = std::move(fl);
  }
  return cv;
}

// The node messages: blocked and failed nodes, drifted ones, then the plan's malformed and
// blocked; the first 20.
std::vector<std::string> node_messages(const SetStatusFacts& f) {
  std::vector<std::string> msgs = f.node_messages;
  for (const auto& m : f.drift_messages)
    msgs.push_back(m.substr(0, m.find(": ")) + ": Drifted: " + m.substr(m.find(": ") + 2));
  if (f.plan != nullptr) {
    for (const auto& m : f.plan->malformed) msgs.push_back(m);
    for (const auto& m : f.plan->blocked) msgs.push_back(m);
  }
  if (msgs.size() > 20) msgs.resize(20);
  return msgs;
}

void set_conditions(const SetStatusFacts& f, const Counts& n, const std::vector<std::string>& msgs,
                    core::Value& conds) {
  auto set_cond = [&](std::string type, bool status, std::string reason, std::string msg) {
    kube::Condition c{std::move(type),   status ? "True" : "False",
                      std::move(reason), msg.substr(0, 4000),
                      f.generation,      f.now};
    kube::set_condition(conds, c, f.now);
  };
  const std::string& phase = f.phase;
  const bool complete = f.plan != nullptr && f.plan->complete && n.active == 0;
  const bool is_blocked = n.blocked > 0 || phase == "Blocked" || phase == "Invalid";
  set_cond("Ready", complete && phase != "Invalid",
           complete ? "RolloutComplete" : (phase == "Invalid" ? "InvalidSpec" : phase),
           complete ? "every selected node is at target " + f.plan->target : f.message);
  const bool progressing = f.plan != nullptr && !n.stopped && !complete && phase != "Paused" &&
                           phase != "Disabled" && phase != "Invalid";
  set_cond("Progressing", progressing,
           progressing ? "NodesUpdating" : (complete ? "Complete" : phase),
           std::to_string(n.done) + "/" + std::to_string(n.nodes) + " nodes done, " +
               std::to_string(n.active) + " in progress");
  set_cond("Paused", f.pause, f.pause ? "SpecPause" : "NotPaused",
           f.pause ? "spec.pause is true: started nodes finish, no new node starts"
                   : "spec.pause is false");
  set_cond("Stopped", n.stopped, n.stopped ? "FailureThreshold" : "NotStopped",
           n.stopped ? n.stop_reason + "; failing nodes: " + join_first(n.failing, ", ") +
                           "; raise " + std::string(kResetAnnotation) + " to resume"
                     : "no compartment is stopped");
  set_cond(
      "Blocked", is_blocked,
      is_blocked ? (f.drain_blocked > 0    ? "DrainBlocked"
                    : f.protected_wait > 0 ? "ProtectedPods"
                    : phase == "Invalid"   ? "InvalidSpec"
                                           : "NodesBlocked")
                 : "NotBlocked",
      is_blocked ? (msgs.empty() ? f.message : join_first(msgs, "; ", 5)) : "nothing is blocked");
  set_cond("Drifted", f.drifted > 0,
           f.drifted > 0 ? "ChecksFailed"
           : f.reverify  ? "NoDrift"
                         : "ReverifyDisabled",
           f.drifted > 0 ? std::to_string(f.drifted) + " node(s) failed re-verification (" +
                               (f.on_drift == DriftAction::Reapply ? "onDrift: Reapply, re-applying"
                                                                   : "onDrift: Report") +
                               "): " + join_first(f.drift_messages, "; ", 5)
           : f.reverify ? "every verified node passed its checks"
                        : "spec.reverify is off");
}

}  // namespace

SetPhase rollout_phase(const RolloutPlan& plan, const PhaseFacts& f) {
  bool stopped = false;
  for (const auto& c : plan.compartments) stopped = stopped || c.stopped;
  SetPhase out;
  out.phase =
      f.deleting      ? "Deleting"
      : stopped       ? "Stopped"
      : f.pause       ? "Paused"  // also on a finished set: pausing shows at once
      : plan.complete ? "Complete"
      : (plan.blocked_count + plan.malformed_count + f.drain_blocked + f.protected_wait) > 0 &&
              !f.in_progress && plan.start.empty()
          ? "Blocked"
          : "Progressing";
  if (stopped) {
    for (const auto& c : plan.compartments) {
      if (c.stopped)
        out.message = "compartment " + c.name + " stopped: " + c.stop_reason +
                      "; failing nodes: " + join_first(c.failing_nodes, ", ");
    }
  } else if (f.pause) {
    out.message = "spec.pause is true: started nodes finish, no new node starts";
  } else if (plan.waiting_on_cluster_budget > 0) {
    out.message = std::to_string(plan.waiting_on_cluster_budget) +
                  " node(s) wait for the cluster disruption budget";
  }
  return out;
}

SetStatus set_status(SetStatusFacts f) {
  core::Value st = core::Value::map();
  st["observedGeneration"] = f.generation;
  st["phase"] = f.phase;
  st["message"] = f.message.substr(0, 1000);
  Counts n;
  if (f.plan != nullptr) {
    st["target"] = f.plan->target;
    core::Value comps = core::Value::list();
    for (const CompartmentStatus& c : f.plan->compartments)
      comps.push_back(compartment_status(c, n));
    st["compartments"] = std::move(comps);
    n.blocked += f.plan->malformed_count + f.drain_blocked + f.protected_wait;
  }
  st["nodes"] = n.nodes;
  st["done"] = n.done;
  st["inProgress"] = n.active;
  st["validating"] = f.validating;
  st["failed"] = n.failed;
  st["pending"] = n.pending;
  st["blocked"] = n.blocked;
  st["malformed"] = f.plan != nullptr ? f.plan->malformed_count : 0;
  st["drifted"] = f.drifted;
  st["progress"] = std::to_string(n.done) + "/" + std::to_string(n.nodes);
  st["resetEpoch"] = f.reset_epoch;
  const std::vector<std::string> msgs = node_messages(f);
  core::Value nm = core::Value::list();
  for (const auto& m : msgs) nm.push_back(m.substr(0, 1000));
  st["nodeMessages"] = std::move(nm);
  core::Value conds = f.conditions.is_list() ? std::move(f.conditions) : core::Value::list();
  set_conditions(f, n, msgs, conds);
  st["conditions"] = std::move(conds);
  SetStatus out;
  out.status = std::move(st);
  out.done = n.done;
  out.in_progress = n.active;
  out.failed = n.failed;
  out.pending = n.pending;
  out.blocked = n.blocked;
  out.stopped = n.stopped;
  return out;
}

StartDecision starts_after_claims(const std::vector<NodeStart>& starts, bool budgeted,
                                  const std::unordered_map<std::string, std::string>& claimed) {
  StartDecision d;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    if (!budgeted) {
      d.go.push_back({i, ""});
      continue;
    }
    auto it = claimed.find(starts[i].node);
    if (it == claimed.end()) {
      ++d.refused;  // refused by the claims: the status says so
      continue;
    }
    d.go.push_back({i, it->second});
  }
  return d;
}

controller::Result pass_requeue(const RequeueFacts& f) {
  if (f.waiting || f.starting || f.verifying) return controller::Result{f.poll, false};
  // Held by the cluster budget: Node and incident events wake the set, an edit of the
  // DisruptionBudget object (read, not watched: controller/budget.h) does not.
  if (f.waiting_on_cluster_budget > 0)
    return controller::Result{std::max<std::chrono::milliseconds>(f.poll, std::chrono::seconds(5)),
                              false};
  if (f.next_verify > 0) {
    // Wake when the next node is due (requeue_after, never a busy loop); a second of slack
    // so the node is past due when the pass runs.
    const std::int64_t wait_s = std::max<std::int64_t>(1, f.next_verify - f.now_s + 1);
    return controller::Result{std::chrono::milliseconds(wait_s * 1000), false};
  }
  return {};
}

}  // namespace gpufleet::hostpkg
