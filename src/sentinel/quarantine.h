// Per-entity quarantine bookkeeping on the Node itself, so it survives controller restarts
// and never touches what others set. Pure: Node and NodeHealth in (core::Value), the change
// to make out; node_patch() turns it into one merge patch carrying the Node's resourceVersion
// (a compare-and-swap: the API server refuses it when the Node changed since it was read).
//
// The annotation `sentinel.gpufleet.io/quarantine` holds what sentinel owns on the node:
//   {"cordoned": true, "taints": ["nvidia.com/gpu-error=fatal:NoSchedule"],
//    "entities": ["xid/GPU-8f3e...", "ib-port/mlx5_0/1"], "incident": "gpu-1-x1"}
// - cordoned is true when sentinel holds a share of the cordon through the shared owners
//   annotation of kube/api/cordon.h (owner "sentinel"): alone, or jointly with hostpkg; the
//   last gpufleet owner to leave uncordons. A node cordoned before by a person or a cloud tool
//   (cordoned, no owners) is not claimed and stays cordoned at release;
// - foreignCordon is true when the quarantine wanted a cordon and found that foreign one: the
//   node is out only by someone else's cordon, so lifting it hands the node back (below);
// - taints lists only taints sentinel added (a taint with the same key and effect that was
//   already there is left alone and not recorded);
// - entities are the faulty entities ("<check>/<entity id>") the quarantine is for. A node is
//   released only when every one of them is Healthy again in NodeHealth;
// - incident names the Remediation the quarantine belongs to (written before the Remediation
//   is created, so a crash in between re-creates the same one, never a second);
// - policy and admittedAtMs: the SentinelPolicy whose circuit breaker admitted the quarantine,
//   and when. The breaker's saved state is written after the cordon, so after a crash the
//   breaker is rebuilt from these (CircuitBreaker::remember).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/value.h"
#include "sentinel/rules.h"

namespace gpufleet::sentinel {

inline constexpr std::string_view kQuarantineAnnotation = "sentinel.gpufleet.io/quarantine";
// sentinel's name in the shared cordon owners annotation.
inline constexpr std::string_view kCordonOwner = "sentinel";

// A circuit breaker's admission of a quarantine.
struct Admission {
  std::string policy;
  std::int64_t at_ms = 0;  // 0: none recorded
};

struct QuarantineRecord {
  bool cordoned = false;
  bool foreign_cordon = false;
  std::vector<Taint> taints;
  std::set<std::string> entities;
  std::string incident;
  Admission admission;
  [[nodiscard]] bool empty() const noexcept {
    return !cordoned && !foreign_cordon && taints.empty() && entities.empty() && incident.empty();
  }
  // From the node's annotation; an absent annotation is an empty record. A damaged one throws
  // core::InvalidInput naming the annotation (the controller reports it and does nothing).
  static QuarantineRecord from_node(const core::Value& node);
  [[nodiscard]] std::string to_annotation() const;
};

struct NodeChange {
  bool cordon = false;    // take sentinel's share of the cordon (kube::cordon_patch)
  bool uncordon = false;  // release it (kube::uncordon_patch; the last owner uncordons)
  std::vector<Taint> add_taints;
  std::vector<Taint> remove_taints;
  std::optional<std::string> annotation;  // new value; "" removes the annotation
  [[nodiscard]] bool empty() const noexcept {
    return !cordon && !uncordon && add_taints.empty() && remove_taints.empty() && !annotation;
  }
};

// The JSON merge patch that makes `change` on `node`, with metadata.resourceVersion (409 when
// the Node changed since it was read: re-read and re-plan). nullopt when nothing is to write.
std::optional<core::Value> node_patch(const core::Value& node, const NodeChange& change);

// "<check>/<entity id>" of every entity NodeHealth reports Warning or Fatal, and of checks
// without entities that are not Healthy/Unknown.
std::set<std::string> faulty_entities(const core::Value& node_health);

// Quarantine `node` for `entities` with the decision's actions (cordon, taints) under
// `incident` ("" keeps the recorded one). Adds to an existing quarantine; claims only what it
// actually changes.
// `take_over`: a new incident takes over a node still held by an ended (Failed) one: the
// recorded entities are replaced by `entities` instead of added to.
NodeChange plan_quarantine(const core::Value& node, const Decision& decision,
                           const std::set<std::string>& entities, const std::string& incident = "",
                           bool take_over = false, const Admission& admission = {});

// Releases everything sentinel holds on the node now, whatever the entities say (an incident
// that ends: validated, cancelled). Undoes only sentinel's own marks.
NodeChange plan_release_all(const core::Value& node);

// True when someone gave the node back to the scheduler against the quarantine: a node the
// quarantine keeps out by a cordon (sentinel's share, or a foreign cordon it found) that is
// schedulable now, or a taint-only quarantine whose taints were all removed. The caller ends
// the incident (Cancelled) or lets a Failed one go. False for a record that holds nothing.
bool handed_back(const core::Value& node, const QuarantineRecord& rec);

// The record without the entities that recovered (not in `faulty`): the annotation to write,
// or nullopt when every recorded entity is still faulty. The node stays held.
std::optional<std::string> forget_recovered(const QuarantineRecord& rec,
                                            const std::set<std::string>& faulty);

// Releases the node when every entity of its quarantine recovered (not in `faulty`); entities
// that recovered are dropped from the record meanwhile. Undoes only sentinel's own marks.
NodeChange plan_release(const core::Value& node, const std::set<std::string>& faulty);

}  // namespace gpufleet::sentinel
