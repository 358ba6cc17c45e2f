// The rollout planner: which nodes of a HostPackageSet start their change now. A pure
// function of the set, its DeploymentPolicy, the cluster-wide disruption budget, the nodes
// (labels, readiness, cordon) with their records, the nodes out for other reasons (sentinel
// quarantines, other sets) and the set's reset epoch. Batch history is read back from the
// records (each started node carries its rollout, batch and epoch), so a restarted
// controller computes exactly the plan the old one would have.
//
// Rules, per compartment (a node belongs to the safest compartment that selects it: the one
// with the smallest budget, then the smallest initial batch, then the name; nodes no
// compartment selects belong to `default`):
//   - budget: at most `budget` nodes of the compartment out at once; "out" is in progress,
//     failed (left cordoned), not ready, cordoned by anyone, or out for another reason;
//   - batches: batch b holds strategy.batch_size(streak) nodes, where streak counts the
//     successful batches since the last failed one; batch b+1 opens only when batch b is
//     full (or nothing is left to start) and none of its nodes is still in progress;
//   - a closed batch passes when >= batchThreshold % of its nodes succeeded;
//   - stop: failureThreshold consecutive failed batches, or more than safetyLimit % of the
//     compartment's nodes failed in this epoch. A stopped compartment starts nothing until
//     the reset epoch is raised (an explicit reset); failures of older epochs no longer count.
// Cluster-wide, over all nodes of all sets: at most max_total out at once, and at most
// max_per_domain out per value of the topology label (nodes without the label share one
// domain, which is the safe reading).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "hostpkg/node_record.h"
#include "hostpkg/selector.h"
#include "hostpkg/spec.h"

namespace gpufleet::hostpkg {

struct NodeFacts {
  std::string name;
  Labels labels;
  bool ready = true;
  bool unschedulable = false;  // cordoned, by hostpkg or anyone else
  bool cordon_ours = false;    // the cordon carries hostpkg's owner mark (e.g. a failed node)
};

struct NodeInput {
  NodeFacts facts;
  const NodeRecord* record = nullptr;  // this set's record; null when the node has none
  std::string record_error;            // non-empty: the record exists but cannot be read
};

struct RolloutInput {
  const HostPackageSet* set = nullptr;
  const DeploymentPolicy* policy = nullptr;                  // null: conservative_policy()
  const ClusterBudget* cluster = nullptr;                    // null: no cluster-wide limit
  std::span<const NodeInput> nodes;                          // every node of the cluster
  const std::unordered_set<std::string>* outside = nullptr;  // out for other reasons
  std::int64_t reset_epoch = 0;
  // Priority gating by earlier sets: nodes that may not start yet (sequencing node), or all
  // of them (sequencing all).
  const std::unordered_set<std::string>* gated = nullptr;
  bool gated_all = false;
};

struct NodeStart {
  std::string node;
  std::string compartment;
  std::int64_t batch = 0;
  std::int64_t epoch = 0;
  std::string rollout;  // the set's target hash, to store in the record
};

inline constexpr std::size_t kMaxNamedNodes = 20;  // bounded status lists

struct CompartmentStatus {
  std::string name;
  std::int64_t nodes = 0, done = 0, in_progress = 0, failed = 0, pending = 0, blocked = 0;
  std::int64_t out = 0;     // nodes out, including this plan's starts
  std::int64_t budget = 0;  // resolved node count
  std::int64_t batch = -1;  // the open (or next) batch
  std::int64_t batch_size = 0;
  std::int64_t streak = 0;
  std::int64_t consecutive_failures = 0;
  bool stopped = false;
  std::string stop_reason;
  std::vector<std::string> failing_nodes;  // at most kMaxNamedNodes
};

struct RolloutPlan {
  std::string target;
  std::vector<NodeStart> start;
  std::vector<CompartmentStatus> compartments;
  std::vector<std::string> malformed;  // "node: error", at most kMaxNamedNodes
  std::vector<std::string> blocked;    // "node: reason", at most kMaxNamedNodes
  std::int64_t malformed_count = 0;
  std::int64_t blocked_count = 0;
  std::int64_t waiting_on_cluster_budget = 0;  // eligible nodes held back cluster-wide
  bool paused = false, disabled = false, stopped = false, complete = false;
};

RolloutPlan plan_rollout(const RolloutInput& in);

}  // namespace gpufleet::hostpkg
