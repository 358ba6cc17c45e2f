// What a pass concludes about its HostPackageSet (the end of a pass, rollout_pass.cc:
// observe -> decide -> act): the phase and its message, the status object (counts, the
// compartments, node messages, conditions Ready / Progressing / Paused / Stopped / Blocked /
// Drifted), which of the plan's starts go ahead after the cluster budget's claims, and when
// to look again. The pass writes the status, records Events and sets the metrics. Pure: the
// clock is an argument, so each decision is unit-tested without an API server
// (tests/hostpkg/set_status_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller/reconciler.h"
#include "core/value.h"
#include "hostpkg/rollout.h"
#include "hostpkg/spec.h"

namespace gpufleet::hostpkg {

// What decides the phase once the plan's starts were sent.
struct PhaseFacts {
  bool deleting = false;
  bool pause = false;
  std::int64_t drain_blocked = 0;   // nodes whose drain a PodDisruptionBudget refused
  std::int64_t protected_wait = 0;  // nodes whose protected pods ran past the wait
  bool in_progress = false;         // nodes were in progress when the pass began
};

struct SetPhase {
  std::string phase;  // Deleting, Stopped, Paused, Complete, Blocked, Progressing
  std::string message;
};

// Deleting wins, then Stopped (a compartment stopped), Paused (also on a finished set:
// pausing shows at once), Complete; Blocked when nodes are blocked or malformed and nothing is
// in progress or starting; else Progressing. The message names the stopped compartment and
// its failing nodes, the pause, or the nodes waiting for the cluster disruption budget.
SetPhase rollout_phase(const RolloutPlan& plan, const PhaseFacts& facts);

// Everything the status is computed from.
struct SetStatusFacts {
  std::int64_t generation = 0;  // the set's metadata.generation
  std::string phase;            // rollout_phase's, or Invalid / Disabled / Blocked (no plan)
  std::string message;
  const RolloutPlan* plan = nullptr;  // null: nothing was planned
  std::int64_t drain_blocked = 0, protected_wait = 0;
  std::int64_t validating = 0;             // nodes in progress waiting on certify's verdict
  std::vector<std::string> node_messages;  // "node: why" for blocked and failed nodes
  std::int64_t drifted = 0;
  std::vector<std::string> drift_messages;  // "node: package: message"
  std::int64_t reset_epoch = 0;             // the reset annotation's value as written
  bool pause = false;
  bool reverify = false;  // spec.reverify is on
  DriftAction on_drift = DriftAction::Report;
  core::Value conditions;  // status.conditions as the set has them now (null: none)
  std::chrono::system_clock::time_point now;
};

struct SetStatus {
  core::Value status;  // the whole status object to apply
  std::int64_t done = 0, in_progress = 0, failed = 0, pending = 0, blocked = 0;
  bool stopped = false;  // a compartment is stopped
};

// Conditions keep Kubernetes semantics: a transition time moves only on a status change.
SetStatus set_status(SetStatusFacts facts);

// Which of the plan's starts go ahead: all without a cluster budget (`budgeted` false; no
// resourceVersion to hold them to), else only those the claims granted, each with the Node
// resourceVersion it was claimed at; `refused` counts the others.
struct StartDecision {
  struct Go {
    std::size_t index = 0;  // in plan.start
    std::string rv;
  };
  std::vector<Go> go;
  std::int64_t refused = 0;
};
StartDecision starts_after_claims(const std::vector<NodeStart>& starts, bool budgeted,
                                  const std::unordered_map<std::string, std::string>& claimed);

// When to look at the set again.
struct RequeueFacts {
  bool waiting = false;    // a node in progress waits, or a start was sent or refused
  bool starting = false;   // the plan started nodes
  bool verifying = false;  // verify pods run, or a verification met a conflict
  std::int64_t waiting_on_cluster_budget = 0;
  std::int64_t next_verify = 0;  // Unix seconds the next node is due (0: none)
  std::int64_t now_s = 0;
  std::chrono::milliseconds poll{2000};
};
// The poll while anything moves; at least 5 s while only the cluster budget holds nodes (an
// edit of the DisruptionBudget object wakes nobody); else when the next node's
// re-verification is due, a second late; else nothing (events wake the set).
controller::Result pass_requeue(const RequeueFacts& facts);

}  // namespace gpufleet::hostpkg
