// The HostPackageDrifted node condition: a host that drifted shows on its Node (where people and
// schedulers look), not only in the set's status. It is derived from the per-node records on
// the Node, so a controller killed between a record write and the condition write fixes the
// condition on its next pass.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "core/value.h"

namespace gpufleet::hostpkg {

inline constexpr std::string_view kDriftCondition = "HostPackageDrifted";

// The condition as the Node shows it now (present false: the Node has none).
struct NodeDriftCondition {
  bool present = false;
  std::string status, reason, message, last_transition;
};

// The nodes/status strategic merge patch (conditions merge by type, so the kubelet's stay)
// that brings the condition to what `records` (set -> record annotation text) say, counting
// the sets in `reporting` only; nullopt when nothing would change. True, reason ChecksFailed,
// naming "<set>/<package>: <check message>" (at most 5, at most 1,000 bytes); False, reason
// NoDrift, once no reporting set's record holds drift — only where the condition is there: a
// node that never drifted gets none. lastTransitionTime moves only when the status changes
// (kube/api/conditions.h).
std::optional<core::Value> drift_condition_patch(
    const std::map<std::string, std::string, std::less<>>& records,
    const std::unordered_set<std::string>& reporting, const NodeDriftCondition& current,
    std::chrono::system_clock::time_point now);

}  // namespace gpufleet::hostpkg
