// Resolution: criteria + library -> Recipe. Selects overlays by criteria (per node pool),
// merges them field by field in order of specificity, orders components by dependencies,
// collects constraints and health checks, and digests the inputs.
#pragma once

#include "recipe/criteria.h"
#include "recipe/library.h"
#include "recipe/recipe.h"

namespace gpufleet::recipe {

// Name of the mixin applied automatically when node pools carry different accelerators
// (for example to let the GPU Operator manage one driver per pool).
inline constexpr std::string_view kHeterogeneousMixin = "heterogeneous-pools";

// Throws core::InvalidInput for invalid criteria (listing the valid values), unsupported
// combinations (with the library's reason), merge conflicts, unknown dependencies and cycles.
Recipe resolve(const Library& lib, const Query& query);

// Whether an overlay's criteria select the given query criteria (see criteria.h for the
// wildcard rule) for a pool with `node_count` nodes (if known).
bool overlay_matches(const Overlay& o, const CriteriaValues& query,
                     const std::optional<std::int64_t>& node_count);

}  // namespace gpufleet::recipe
