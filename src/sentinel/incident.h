// The incident (a Remediation) as a document: its name, the spec and status fields the node
// reconciler reads and writes, and the rules' escalation. Pure functions of values, internal
// to the sentinel module (tests/sentinel/incident_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/text.h"
#include "core/value.h"
#include "sentinel/policy.h"
#include "sentinel/rules.h"

namespace gpufleet::sentinel::detail {

// The strings of a list field (absent or not a list: none).
std::set<std::string> string_set(const core::Value* list);

// Items joined with ',' for a message, cut at 400 characters.
template <typename Items>
std::string join(const Items& items) {
  std::string out = core::join(items, ",");
  return out.size() > 400 ? out.substr(0, 400) + "..." : out;
}

// NodeHealth's status.history for the rules, each entry with ageSeconds (now - time), so a
// pattern can say "within 24 h" (rules.h). An entry without a readable time has no age.
core::Value history_with_age(const core::Value* history, std::int64_t now);

// Incident names: "<node>-<milliseconds since the epoch, base 36>", unique per node (one
// incident per node at a time), at most 253 characters.
std::string incident_name(std::string_view node, std::int64_t ms);

// The incident's status as a map to edit (an empty map when it has none).
core::Value status_of(const core::Value& rem);

// A rule's `escalate` (rules.h) over the action the matching rules asked for: applied when it
// is stronger and the policy can carry it out (a replacement needs a provider), else recorded
// with the reason and the fix; `action` becomes the escalated one when applied. nullopt when
// no rule escalates above `action`. Recorded in the incident's spec.escalation.
std::optional<core::Value> rule_escalation(const Policy& policy, const Decision& d,
                                           std::string& action);

// The GPU UUIDs among the incident's entities ("<check>/GPU-...") that are still faulty,
// sorted and once each (xid/GPU-a and gpu-nvml/GPU-a are one GPU). An entity known only by its
// PCI address is not named: the caller then resets the whole node.
std::vector<std::string> faulty_gpus(const std::set<std::string>& entities,
                                     const std::set<std::string>& faulty);

// An escalation in the incident's status `s`: appended to status.escalations (the newest 4)
// and the condition Escalated (reason: why the action before it failed).
void record_escalation(core::Value& s, const std::string& from, const std::string& to,
                       const std::string& reason, const std::string& why, std::int64_t now);

// The budget wait is over: waitingFor goes and WaitingForBudget turns False.
void clear_budget_wait(core::Value& s);

}  // namespace gpufleet::sentinel::detail
