// Validation of a cluster (its Snapshot) against a recipe: constraints, evaluated with
// version-aware comparisons on the facts of the cluster and of each node pool's nodes, and
// health assertions on CRDs, Deployments, DaemonSets, StatefulSets and pods.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"

namespace gpufleet::recipe {

struct CheckResult {
  std::string category;  // constraint | health | release | operator | conformance
  std::string name;      // constraint name, or "<Kind> <namespace>/<name>"
  std::string subject;   // cluster, node name, pool, component
  std::string expected;
  std::string actual;
  bool passed = false;
  // Constraints carry the library's severity and remediation: a failed "warning" is reported
  // but does not fail validation.
  std::string severity = "error";
  std::string remediation = {};
  bool failed_error() const { return !passed && severity != "warning"; }
  std::string phase = {};  // readiness | deployment | conformance
  bool skipped = false;    // does not apply to this recipe or cluster (counts as neither)
};

struct ValidationReport {
  std::string recipe;
  std::vector<CheckResult> results;
  bool passed() const;
  std::size_t failures() const;  // failed checks of severity error
  std::size_t warnings() const;  // failed checks of severity warning
};

// The phases of `gpufleet validate --phase`:
//   readiness    the cluster meets the recipe's constraints (Kubernetes version, node OS,
//                kernel, driver, GPU) before anything is installed;
//   deployment   what the recipe installs is there and working: health checks, each
//                component's Helm release deployed at the pinned chart version (external
//                ones: deployed at any version), operator resources (ClusterPolicy,
//                NicClusterPolicy) ready;
//   conformance  what AI workloads rely on: GPUs published for DRA allocation, a gang
//                scheduler, accelerator metrics on every GPU node, no pod reaching GPU
//                devices through a hostPath;
//   performance  NCCL bus bandwidth through a certify Certification per node pool, judged
//                against the pool's floors (recipe/live/performance_run.h).
enum class Phase { Readiness, Deployment, Performance, Conformance };
// Throws core::InvalidInput naming the value and the valid phases.
Phase parse_phase(std::string_view name);
std::string_view phase_name(Phase p);

// Without phases: the constraints and the health checks (what validate always checked).
ValidationReport validate(const Recipe& recipe, const Snapshot& snapshot);
// The given phases, in order. The performance phase runs `performance` (it needs the live
// cluster); without one it throws core::InvalidInput.
using PerformancePhase = std::function<void(ValidationReport&)>;
ValidationReport validate_phases(const Recipe& recipe, const Snapshot& snapshot,
                                 const std::vector<Phase>& phases,
                                 const PerformancePhase& performance = {});

// A fixed-width table, failures first, and a summary line.
std::string report_table(const ValidationReport& r);
core::Value report_to_value(const ValidationReport& r);
// The Common Test Report Format (ctrf.io): one test per check, suite [phase, category],
// failures carry expected and actual in `message`. Times in milliseconds since the epoch.
core::Value report_to_ctrf(const ValidationReport& r, std::string_view tool_version,
                           std::int64_t start_ms, std::int64_t stop_ms);

// Whether a node's labels contain every key/value of `selector`.
bool selector_matches(const core::Value& selector, const core::Value& labels);

}  // namespace gpufleet::recipe
