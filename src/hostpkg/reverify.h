// Periodic re-verification (spec.reverify): a node that finished the set has every package's
// checks run again every `interval`, without cordon or drain (checking must not disrupt
// work). Pure functions here; the controller runs the checks as verify pods
// (controller/stage_pod.h) and writes the outcome into the node record.
//
// Timing is a function of the record alone, so it survives restarts: a node is due at
// `verified + interval + jitter`, where `verified` is when its checks last ran and the jitter
// is a deterministic per-node offset in [0, interval/10], so a fleet that finished a rollout
// together does not have all its checks fire in the same second. A node never verified (a
// record from before reverify was enabled) is due at once; the controller caps the checks in
// flight per set, which spreads those.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hostpkg/node_record.h"
#include "hostpkg/spec.h"
#include "hostpkg/stage_plan.h"

namespace gpufleet::hostpkg {

// Deterministic offset in seconds, in [0, interval / 10], from the set and node names.
std::int64_t reverify_jitter(std::string_view set, std::string_view node,
                             std::chrono::seconds interval);

// When the node's next verification is due (Unix seconds).
std::int64_t reverify_due(const NodeRecord& record, std::string_view set, std::string_view node,
                          std::chrono::seconds interval);

// Whether the node is one to re-verify at all: it finished the set's current change and has
// nothing to re-apply (a node in a change is verified by the change's own checks).
bool reverify_eligible(const NodeRecord& record, const DesiredState& desired);

// The stages whose checks prove a package still holds, in order: apply (the installed
// version's effect), config (when the package has a configMap), post-interrupt (the live
// state; when the package or a config key needs an interrupt).
std::vector<Stage> verify_stages(const Package& package);

// The outcome of one verification of a node: every package passed, or the first that failed.
struct VerifyOutcome {
  bool ok = true;
  std::string package;  // the package whose check failed
  std::string message;  // the check's message
};

// Records a verification at `now`: a pass clears the drift; a failure sets it (keeping `since`
// while the same package stays drifted) and, with Reapply, sends the package back through the
// rollout. The caller writes the record with commit() semantics.
void record_verification(NodeRecord& record, std::int64_t now, const VerifyOutcome& outcome,
                         DriftAction on_drift);

// onDrift: Reapply applies to a node already drifted (the policy changed since the check):
// true when the record changed.
bool reapply_drifted(NodeRecord& record, const HostPackageSet& set);

// The idempotence key of one package's verification in one round (the round is the record's
// `verified` it started from): "<package>/verify/<version>/<config-hash>/r<round>".
std::string verify_key(const Package& package, const DesiredState& desired, std::int64_t round);

}  // namespace gpufleet::hostpkg
