// The `sentinel-policy` reconciler (key: a SentinelPolicy): compiles each followed policy's
// rules into the shared State, owns its circuit breaker (restored from the policy's status,
// saved there by the node reconciler on every admission), applies the reset verb and the
// quiet-period reset, counts the GPU nodes each policy governs (the breaker's denominator) and
// those it selects that a policy above it governs, and reports all of it in the policy's status,
// conditions, events and metrics. A policy created, edited or deleted takes effect at once: the
// nodes are looked at again under the policy that governs them now.
#pragma once

#include <memory>

#include "sentinel/controller_shared.h"

namespace gpufleet::controller {
class Cache;
class Manager;
class Reconciler;
}  // namespace gpufleet::controller

namespace gpufleet::sentinel::detail {

std::shared_ptr<controller::Reconciler> make_policy_reconciler(
    controller::Manager& manager, std::shared_ptr<State> state, Metrics& metrics,
    const controller::Cache& policies, const controller::Cache& nodes,
    const controller::Cache& remediations);

// Recounts every policy's governed and overlapped GPU nodes and its open incidents (one pass
// over the nodes; the selectors are matched outside the lock).
void count_nodes(State& state, const controller::Cache& nodes,
                 const controller::Cache& remediations);

}  // namespace gpufleet::sentinel::detail
