// Validation of a cluster (its Snapshot) against a recipe: constraints, evaluated with
// version-aware comparisons on the facts of the cluster and of each node pool's nodes, and
// health assertions on CRDs, Deployments, DaemonSets, StatefulSets and pods.
#pragma once

#include <string>
#include <vector>

#include "core/value.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"

namespace gpufleet::recipe {

struct CheckResult {
  std::string category;  // constraint | health
  std::string name;      // constraint name, or "<Kind> <namespace>/<name>"
  std::string subject;   // cluster, node name, pool, component
  std::string expected;
  std::string actual;
  bool passed = false;
  // Constraints carry the library's severity and remediation: a failed "warning" is reported
  // but does not fail validation.
  std::string severity = "error";
  std::string remediation;
  bool failed_error() const { return !passed && severity != "warning"; }
};

struct ValidationReport {
  std::string recipe;
  std::vector<CheckResult> results;
  bool passed() const;
  std::size_t failures() const;  // failed checks of severity error
  std::size_t warnings() const;  // failed checks of severity warning
};

ValidationReport validate(const Recipe& recipe, const Snapshot& snapshot);

// A fixed-width table, failures first, and a summary line.
std::string report_table(const ValidationReport& r);
core::Value report_to_value(const ValidationReport& r);

// Whether a node's labels contain every key/value of `selector`.
bool selector_matches(const core::Value& selector, const core::Value& labels);

}  // namespace gpufleet::recipe
