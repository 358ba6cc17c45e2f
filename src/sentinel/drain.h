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
// - Training jobs (kube/api/job_disruption.h) fold in through the second plan_drain: a job's
//   pods wait while it checkpoints, then its whole gang goes, on every node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/value.h"
#include "kube/api/job_disruption.h"
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
  std::string node;   // a job's pod on another node; "" for the node's own
  bool held = false;  // Wait: its job is checkpointing
};

struct DrainPlan {
  std::vector<PodStep> steps;  // one per pod that still blocks the drain
  std::size_t skipped = 0;     // DaemonSet, mirror, system-namespace and finished pods
  [[nodiscard]] bool done() const noexcept { return steps.empty(); }
  [[nodiscard]] std::size_t held() const noexcept;
  // Nothing to do but wait for checkpoints: every step is held.
  [[nodiscard]] bool only_held() const noexcept { return !done() && held() == steps.size(); }
};

// `pods`: the pods bound to the node; `started_ms`: when the drain began; `now_ms`: now.
DrainPlan plan_drain(const std::vector<const core::Value*>& pods, const DrainPolicy& policy,
                     std::int64_t started_ms, std::int64_t now_ms);

// The node's training jobs, as the controller decided and recorded them this look.
struct JobDrain {
  std::vector<kube::JobDecision> decisions;  // decide_jobs
  std::vector<kube::JobRecord> records;      // as persisted, this look's decisions included
  std::vector<const core::Value*> pods;      // decide_jobs' input: the node's and the gangs' pods
};

// The drain with the node's jobs folded in:
//  - a pod of a job still checkpointing (held_uids of a RequestCheckpoint or Wait) waits,
//    whatever its mode (a Terminating one is still force-deleted once stuck);
//  - a pod of a job disrupted at T is planned as any pod with its deadlines counted from T,
//    not from the drain's start: the wait for the checkpoint does not eat the drain's time;
//  - the job's pods on other nodes (`evict` of a DrainGang or Disrupted decision) join the
//    plan, by the same modes and deadlines (from T), with `node` set;
//  - pods of no multi-pod job are planned as by the plan_drain above.
DrainPlan plan_drain(const std::vector<const core::Value*>& pods, const DrainPolicy& policy,
                     std::int64_t started_ms, std::int64_t now_ms, const JobDrain& jobs);

}  // namespace gpufleet::sentinel
