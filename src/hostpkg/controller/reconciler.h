// The hostpkg controller: one reconcile per HostPackageSet, level-triggered. Each pass reads
// the set, its DeploymentPolicy, every Node (labels, readiness, cordon, the per-node records
// in annotations, see record_store.h) and the stage pods, then:
//   1. asks plan_rollout (rollout.h) which nodes start now, and starts them: one Node patch
//      writes the record (InProgress, batch, epoch) and hostpkg's cordon share together;
//   2. drives every node of the set that is in progress one transition at a time: cordon →
//      wait for protected pods → drain by eviction (PDBs honoured; DrainBlocked names the
//      PDB) → the stage planner's next step as a stage pod (stage_pod.h) → record the step →
//      ... → a reboot confirmed by the node's boot ID changing → mark done and release the
//      cordon share (the last gpufleet holder uncordons; a foreign cordon is kept);
//   3. lifts the runtime-required taint where every runtime-required set is done, taints
//      new nodes for autoTaintNewNodes sets;
//   4. writes status (counts, compartments, conditions Ready/Progressing/Stopped/Blocked),
//      events and metrics.
// Every decision is recomputed from API state, and every write carries a precondition (the
// Node's resourceVersion) or is idempotent (pods named by step key), so a controller killed at
// any point resumes without interrupting a node twice or exceeding a budget.
// The reconciler itself is internal: set_reconciler.h says which file holds which part.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "controller/manager.h"
#include "controller/reconciler.h"
#include "controller/registry.h"
#include "controller/status.h"
#include "core/metrics.h"
#include "hostpkg/spec.h"
#include "kube/events.h"

namespace gpufleet::hostpkg {

inline constexpr std::string_view kOwner = "hostpkg";  // cordon owner (kube/api/cordon.h)
inline constexpr std::string_view kFinalizer = "hostpkg.gpufleet.io/uninstall";
// Raising this annotation's integer value on a set resumes a stopped rollout (reset epoch).
inline constexpr std::string_view kResetAnnotation = "hostpkg.gpufleet.io/reset-epoch";
inline constexpr std::string_view kRuntimeRequiredTaint = "gpufleet.io/runtime-required";
inline constexpr std::string_view kFieldManager = "gpufleet-hostpkg";

struct ControllerSettings {
  std::string namespace_ = "gpufleet-system";  // stage pods and config maps
  std::string runner_image = "ghcr.io/gpufleet/gpufleet:0.1.0";
  bool has_cluster_budget = false;
  ClusterBudget cluster;
  std::chrono::milliseconds poll{2000};  // re-look while waiting on pods, drains, reboots
  // Re-verification: at most this many verify pods of one set run at once (they are cheap
  // but the fleet may be 5,000 nodes whose records say "never verified").
  std::int64_t reverify_max_in_flight = 50;
  // > 0: replaces the interval of every set that enables spec.reverify. For tests and demos,
  // whose intervals are shorter than the schema's 1m minimum; never needed in production.
  std::chrono::milliseconds reverify_interval{0};
};

// Reads the --set hostpkg.* settings; throws core::InvalidInput naming the setting and fix.
ControllerSettings settings_from(const controller::Context& context);

// The Node updates that can change a pass: labels, deletion, cordon, taints, boot ID, the
// Ready condition's status, hostpkg's records and condition, gpufleet's cordon owners.
// Heartbeats and status reports that move only timestamps, capacity or images are dropped:
// at 5,000 nodes each would otherwise cost a pass over every node.
controller::Predicate node_event_filter();

// Adds the caches, the controller and its watches to the manager.
void setup_hostpkg(controller::Manager& manager, const controller::Context& context);
void setup_hostpkg(controller::Manager& manager, const ControllerSettings& settings);

}  // namespace gpufleet::hostpkg
