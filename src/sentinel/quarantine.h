// Per-entity quarantine bookkeeping on the Node itself, so it survives controller restarts
// and never touches what others set. Pure: Node and NodeHealth in (core::Value), the change
// to make out; the controller (next) applies it with a compare-and-swap.
//
// The annotation `sentinel.gpufleet.io/quarantine` holds what sentinel owns on the node:
//   {"cordoned": true, "taints": ["nvidia.com/gpu-error=fatal:NoSchedule"],
//    "entities": ["xid/GPU-8f3e...", "ib-port/mlx5_0/1"]}
// - cordoned is true only when sentinel set spec.unschedulable (a node cordoned before, by a
//   person or hostpkg, stays cordoned at release);
// - taints lists only taints sentinel added (a taint with the same key and effect that was
//   already there is left alone and not recorded);
// - entities are the faulty entities ("<check>/<entity id>") the quarantine is for. A node is
//   released only when every one of them is Healthy again in NodeHealth.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/value.h"
#include "sentinel/rules.h"

namespace gpufleet::sentinel {

inline constexpr std::string_view kQuarantineAnnotation = "sentinel.gpufleet.io/quarantine";

struct QuarantineRecord {
  bool cordoned = false;
  std::vector<Taint> taints;
  std::set<std::string> entities;
  [[nodiscard]] bool empty() const noexcept {
    return !cordoned && taints.empty() && entities.empty();
  }
  // From the node's annotation; an absent annotation is an empty record. A damaged one throws
  // core::InvalidInput naming the annotation (the controller reports it and does nothing).
  static QuarantineRecord from_node(const core::Value& node);
  [[nodiscard]] std::string to_annotation() const;
};

struct NodeChange {
  std::optional<bool> unschedulable;  // set spec.unschedulable to this
  std::vector<Taint> add_taints;
  std::vector<Taint> remove_taints;
  std::optional<std::string> annotation;  // new value; "" removes the annotation
  [[nodiscard]] bool empty() const noexcept {
    return !unschedulable && add_taints.empty() && remove_taints.empty() && !annotation;
  }
};

// "<check>/<entity id>" of every entity NodeHealth reports Warning or Fatal, and of checks
// without entities that are not Healthy/Unknown.
std::set<std::string> faulty_entities(const core::Value& node_health);

// Quarantine `node` for `entities` with the decision's actions (cordon, taints). Adds to an
// existing quarantine; claims only what it actually changes.
NodeChange plan_quarantine(const core::Value& node, const Decision& decision,
                           const std::set<std::string>& entities);

// Releases the node when every entity of its quarantine recovered (not in `faulty`); entities
// that recovered are dropped from the record meanwhile. Undoes only sentinel's own marks.
NodeChange plan_release(const core::Value& node, const std::set<std::string>& faulty);

}  // namespace gpufleet::sentinel
