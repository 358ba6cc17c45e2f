// Drain planning: which pods on a quarantined node to evict, delete, force-delete or wait for,
// now. Pure (pods and times in, actions out), so every mode and escalation is unit-tested; the
// controller carries the actions out and calls again on its next look (level-triggered: the
// plan depends only on the pods as they are and on when the drain started).
//
// - Never drained: DaemonSet pods (they belong to the node), mirror pods (static), pods in
//   system namespaces, pods already Succeeded/Failed.
// - Evict: the Eviction API at once (PodDisruptionBudget-aware: a refused eviction is tried
//   again next time); past the drain's deadline escalated to a plain delete (forced).
// - AllowCompletion: left to finish up to its timeout (default: the drain deadline), then
//   evicted; deleted when a PDB still holds it one drain deadline after that.
// - Delete: evicted at once; deleted once its timeout passed (default: the drain deadline).
// - A pod already Terminating longer than terminating_timeout is force-deleted (grace 0), so a
//   pod whose kubelet is gone never blocks the drain for ever.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/value.h"
#include "sentinel/policy.h"

namespace gpufleet::sentinel {

enum class PodAction { Wait, Evict, Delete, ForceDelete };
std::string_view pod_action_name(PodAction a) noexcept;

struct PodStep {
  std::string namespace_;
  std::string name;
  std::string uid;
  PodAction action = PodAction::Wait;
  DrainMode mode = DrainMode::Evict;
};

struct DrainPlan {
  std::vector<PodStep> steps;  // one per pod that still blocks the drain
  std::size_t skipped = 0;     // DaemonSet, mirror, system-namespace and finished pods
  [[nodiscard]] bool done() const noexcept { return steps.empty(); }
};

// `pods`: the pods bound to the node; `started_ms`: when the drain began; `now_ms`: now.
DrainPlan plan_drain(const std::vector<const core::Value*>& pods, const DrainPolicy& policy,
                     std::int64_t started_ms, std::int64_t now_ms);

}  // namespace gpufleet::sentinel
