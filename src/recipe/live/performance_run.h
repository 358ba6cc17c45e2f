// validate's performance phase on a live cluster: for each node pool with bandwidth floors, a
// certify Certification by a deterministic name (reused while it runs, replaced once it is
// finished or its spec differs: specs are immutable), all pools at once, waited for up to a
// deadline; then one result per node (recipe/performance.h). The certify controller runs the
// workloads; this only creates and reads API objects.
#pragma once

#include <iosfwd>

#include "recipe/live/live_cluster.h"
#include "recipe/performance.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"
#include "recipe/validate.h"

namespace gpufleet::recipe {

// `snapshot` is the live cluster's (its nodes pick each pool's nodes; its CRDs tell whether
// certify is installed). Throws std::runtime_error naming the fix when the Certification
// resource is missing, the namespace does not exist or a request is forbidden. Progress lines
// (created, reused, phase changes) go to `progress`.
void run_performance_phase(ValidationReport& out, const Recipe& recipe, const Snapshot& snapshot,
                           const LiveClusterOptions& cluster, const PerformanceOptions& options,
                           std::ostream& progress);

}  // namespace gpufleet::recipe
