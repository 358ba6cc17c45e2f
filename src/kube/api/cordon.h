// Shared ownership of a Node's cordon among gpufleet's controllers (hostpkg, sentinel, and
// anything after them), so that no controller ever uncordons a node another one, or a person,
// still wants out of the scheduler.
//
// The annotation `gpufleet.io/cordon-owners` lists the gpufleet components that hold the
// cordon, comma-separated and sorted ("hostpkg,sentinel"). Rules:
//  - cordon: an uncordoned node is cordoned and gets {owner}; a node cordoned by other
//    gpufleet owners gets `owner` added (joint ownership: each releases only its own share);
//    a node cordoned with no owners annotation was cordoned by someone else (a person, a
//    cloud tool) and is NOT claimed: it is already out, and it stays out after we are done;
//  - uncordon: removes `owner`; the last owner leaving uncordons the node and drops the
//    annotation; an owner not in the list changes nothing;
//  - a node whose owners are set but which is schedulable was uncordoned by someone else
//    (`overridden()`): each controller decides what that means for it (sentinel cancels the
//    incident; hostpkg re-cordons only between its own steps).
// Patches are JSON merge patches carrying metadata.resourceVersion, so the API server refuses
// them with 409 Conflict when the Node changed since it was read (optimistic concurrency:
// re-read and re-plan, never read-modify-write blind).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::kube {

inline constexpr std::string_view kCordonOwnersAnnotation = "gpufleet.io/cordon-owners";

struct CordonState {
  bool unschedulable = false;
  std::vector<std::string> owners;  // sorted, unique

  // Cordoned by someone outside gpufleet: never uncordon it.
  [[nodiscard]] bool foreign() const noexcept { return unschedulable && owners.empty(); }
  // gpufleet owners recorded, but someone made the node schedulable again.
  [[nodiscard]] bool overridden() const noexcept { return !unschedulable && !owners.empty(); }
  [[nodiscard]] bool owned_by(std::string_view owner) const noexcept;
  // Held out by a gpufleet owner other than `owner` (counts against shared budgets).
  [[nodiscard]] bool held_by_other(std::string_view owner) const noexcept;
};

// Reads the node's cordon. A damaged annotation (an owner that is not a DNS label) throws
// core::InvalidInput naming the annotation, the value and the fix.
CordonState cordon_state(const core::Value& node);

// Checks an owner name (a DNS label: "hostpkg", "sentinel"); throws core::InvalidInput.
void check_cordon_owner(std::string_view owner);

// The merge patch that makes `owner` a holder of the node's cordon, or nullopt when there is
// nothing to write (already a holder, or a foreign cordon that is not ours to claim).
std::optional<core::Value> cordon_patch(const core::Value& node, std::string_view owner);

// The merge patch that releases `owner`'s share, or nullopt when `owner` holds none. The last
// holder's release uncordons the node.
std::optional<core::Value> uncordon_patch(const core::Value& node, std::string_view owner);

}  // namespace gpufleet::kube
