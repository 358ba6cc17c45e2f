// Drift: what differs between a recipe and a cluster (missing, extra, wrong version, values
// drift), and between two snapshots of a cluster (Kubernetes version, nodes, components).
#pragma once

#include <string>
#include <vector>

#include "core/value.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"

namespace gpufleet::recipe {

struct Drift {
  std::string kind;     // missing | extra | version | values | status | kubernetes | node-added |
                        // node-removed | node | node-driver
  std::string subject;  // namespace/name of a component, a node name, "cluster"
  std::string field;    // the value path or fact that differs, if any
  std::string expected;
  std::string actual;
};

// Components of the recipe against the Helm releases of the snapshot. Values drift compares
// every leaf the recipe sets with the release's user-supplied values. Each GPU node of a pool
// that pins a driver (nodePool.driver.version) and runs another is a `node-driver` row.
std::vector<Drift> diff_recipe(const Recipe& recipe, const Snapshot& snapshot);
// `before` against `after`.
std::vector<Drift> diff_snapshots(const Snapshot& before, const Snapshot& after);

std::string drift_table(const std::vector<Drift>& drift);
core::Value drift_to_value(const std::vector<Drift>& drift);

}  // namespace gpufleet::recipe
