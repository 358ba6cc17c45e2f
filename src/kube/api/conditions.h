// Kubernetes status conditions (metav1.Condition) with the API's semantics, for controllers
// and anything else that writes status:
//  - lastTransitionTime moves only when a condition's status changes (a new reason or
//    message alone does not move it), so "how long has this been False" stays true;
//  - observedGeneration records the metadata.generation the condition was computed from, so
//    readers can tell a stale condition from a current one;
//  - type and reason are validated as the API server does (CamelCase reason, at most 1024
//    characters; status True, False or Unknown), and rejected here with the field and the
//    fix named instead of a 422 from the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::kube {

struct Condition {
  std::string type;    // "Ready", "gpufleet.io/Certified"
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;  // CamelCase: "BurnInPassed"
  std::string message;
  std::int64_t observed_generation = 0;
  std::chrono::system_clock::time_point last_transition_time{};
};

// Throws core::InvalidInput naming the field, the value and the rule it breaks.
void validate_condition(const Condition& c);

// The condition of that type in a conditions list (a Value list of condition maps).
std::optional<Condition> get_condition(const core::Value& conditions, std::string_view type);

// Sets `c` in `conditions` (a list, or null for an empty one), validated first. An existing
// condition of that type keeps its lastTransitionTime unless the status changes; a new one,
// or a status change, gets `now` (seconds precision, as the API stores it). Returns true
// when anything in the list changed (so callers can skip a no-op write).
bool set_condition(core::Value& conditions, const Condition& c,
                   std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// Removes the condition of that type; true when it was there.
bool remove_condition(core::Value& conditions, std::string_view type);

// "2026-01-02T03:04:05Z": RFC 3339 in UTC, seconds precision (metav1.Time's wire form).
std::string format_rfc3339(std::chrono::system_clock::time_point t);

}  // namespace gpufleet::kube
