// SentinelPolicy rules: CEL conditions over the event, the node's NodeHealth and the Node,
// plus a bounded history of earlier events for pattern escalation, mapped to actions
// (cordon, a taint with sentinel as owner, an escalation). Kubernetes-free: the controller
// feeds objects as core::Value and applies the Decision.
//
// Variables: `event` (the journalled record's payload, e.g. a sentinel.kernel event),
// `health` (NodeHealth), `node` (Node), `history` (list of earlier events of this node, newest
// last, each with `ageSeconds`; see EventHistory).
//
// - A rule whose condition touches an absent field (or fails any other way) does not match;
//   the failure is reported once per rule and message (RuleSet::evaluate's `problems`), never
//   thrown.
// - Cost-bounded twice: compile() refuses a rule whose static worst case (cel::estimate_cost
//   over rule_input_sizes()) exceeds `cost_limit`, naming the rule, the estimate, the limit and
//   the costliest part; and every evaluation runs under Env::cost_limit (`cost_limit` units),
//   over which is a failure like any other (no match, reported) — inputs larger than declared.
// - Combination (deterministic): matching rules are taken in order of priority (higher first),
//   then name. cordon = any non-dry-run match cordons; taints are united by (key, effect), the
//   first rule in that order decides the value; escalation = the first non-empty one. A
//   dry-run rule is evaluated and listed in `dry_run` but contributes nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cel/cel.h"
#include "cel/cost.h"
#include "core/value.h"

namespace gpufleet::sentinel {

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute
  friend bool operator==(const Taint&, const Taint&) = default;
  // "key=value:Effect"
  [[nodiscard]] std::string to_string() const;
  // Parses "key=value:Effect" or "key:Effect"; throws core::InvalidInput naming `field`.
  static Taint parse(std::string_view text, std::string_view field);
};

struct RuleSpec {
  std::string name;
  std::string when;  // CEL, must yield a bool
  int priority = 0;
  bool cordon = false;
  std::optional<Taint> taint;
  // The action a match escalates the incident to when it is stronger than the one asked for
  // (gpu-reset, reboot or replace; "" for none): a pattern over `history` (the same Xid on the
  // same GPU again and again) asks for more than the single fault would.
  std::string escalate;
  // The remediation asked for: "" (none asked), "none", "wait" (no action: until every faulty
  // entity recovered, e.g. a cloud maintenance window ended), "gpu-reset" or "reboot".
  std::string remediate;
  bool dry_run = false;

  // {name, when, priority, cordon, taint: "k=v:Effect", escalate, remediate, dryRun}; strict
  // keys.
  static RuleSpec from_value(const core::Value& v, std::string_view where);
};

struct Decision {
  bool cordon = false;
  std::vector<Taint> taints;
  std::string escalate;
  std::string escalate_rule;  // the rule `escalate` came from
  // The strongest remediation any acting rule asked for ("" none asked; a reboot covers a GPU
  // reset, so "reboot" wins over "gpu-reset").
  std::string remediate;
  std::vector<std::string> matched;  // rules that acted, in combination order
  std::vector<std::string> dry_run;  // dry-run rules that would have acted
  [[nodiscard]] bool acts() const noexcept {
    return cordon || !taints.empty() || !escalate.empty() || !remediate.empty();
  }
};

// The declared sizes of what the controller feeds a rule, from the schemas: `history` is
// NodeHealth's status.history (at most 32 entries), `health` a NodeHealth (checks and their
// entities at most 64 each, strings per maxLength), `event` one check or entity of it, `node` a
// Node (label values at most 63 bytes; the number of labels and taints is not bounded).
// Strings are in bytes: a maxLength of N characters is at most 4N bytes.
const cel::Sizes& rule_input_sizes();

class RuleSet {
 public:
  // Compiles every rule; throws core::InvalidInput (CEL errors with position, a worst-case
  // cost over `cost_limit`) naming the rule.
  static RuleSet compile(std::vector<RuleSpec> rules, std::uint64_t cost_limit = 100'000);

  // `problems` receives the messages reported for the first time (rule: reason), so a rule
  // broken for every event is reported once, not per event. Bounded: after 256 distinct
  // problems new ones are counted only.
  Decision evaluate(const core::Value& event, const core::Value& health, const core::Value& node,
                    const core::Value& history, std::vector<std::string>* problems = nullptr);

  [[nodiscard]] std::size_t size() const noexcept { return rules_.size(); }
  [[nodiscard]] std::uint64_t problems_suppressed() const noexcept { return suppressed_; }

 private:
  struct Rule {
    RuleSpec spec;
    cel::Program program;
  };
  std::vector<Rule> rules_;  // in combination order
  std::set<std::string> reported_;
  std::uint64_t suppressed_ = 0;
};

// A node's recent events for pattern rules, bounded by count and age. Entries keep a few
// fields (type, code, entity, reason) and their time; to_value() adds ageSeconds.
class EventHistory {
 public:
  explicit EventHistory(std::size_t max_entries = 512, std::int64_t max_age_ms = 24 * 3600 * 1000)
      : max_entries_(max_entries), max_age_ms_(max_age_ms) {}
  void add(const core::Value& event, std::int64_t at_ms);
  [[nodiscard]] core::Value to_value(std::int64_t now_ms) const;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

 private:
  std::size_t max_entries_;
  std::int64_t max_age_ms_;
  std::deque<std::pair<std::int64_t, core::Value>> entries_;
};

// How much an action covers: "" < none < wait < gpu-reset < reboot < replace.
int action_strength(std::string_view action) noexcept;

}  // namespace gpufleet::sentinel
