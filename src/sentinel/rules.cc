#include "sentinel/rules.h"

#include <algorithm>
#include <map>

#include "core/errors.h"

namespace gpufleet::sentinel {
namespace {

constexpr std::size_t kMaxReported = 256;

bool valid_effect(std::string_view e) {
  return e == "NoSchedule" || e == "PreferNoSchedule" || e == "NoExecute";
}

std::string with_commas(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

// Bytes of a string of at most `chars` characters of UTF-8.
cel::ShapePtr text(std::uint64_t chars) { return cel::Shape::string(4 * chars); }

}  // namespace

const cel::Sizes& rule_input_sizes() {
  using cel::Shape;
  static const cel::Sizes sizes = [] {
    // deploy/crds/nodehealth.yaml (structural: the API server prunes undeclared fields).
    const auto state = Shape::string(7);  // Healthy | Unknown | Warning | Fatal
    const auto time = Shape::string(64);  // date-time
    const auto entity = Shape::object({{"id", text(128)},
                                       {"kind", text(32)},
                                       {"state", state},
                                       {"reason", text(128)},
                                       {"message", text(1100)},
                                       {"lastTransitionTime", time}});
    const auto check = Shape::object({{"name", text(63)},
                                      {"state", state},
                                      {"reason", text(128)},
                                      {"message", text(1100)},
                                      {"lastTransitionTime", time},
                                      {"entities", Shape::list(64, entity)}});
    // ageSeconds: added by the controller (now - time), for windows like "in 24 h".
    const auto history = Shape::list(32, Shape::object({{"recordId", Shape::scalar()},
                                                        {"time", time},
                                                        {"ageSeconds", Shape::scalar()},
                                                        {"check", text(63)},
                                                        {"entity", text(128)},
                                                        {"state", state},
                                                        {"reason", text(128)}}));
    const auto remediation = Shape::object({{"incident", text(253)},
                                            {"attempt", Shape::scalar()},
                                            {"action", text(32)},
                                            {"state", Shape::string(9)},
                                            {"message", text(1100)},
                                            {"error", text(1100)},
                                            {"recordId", Shape::scalar()},
                                            {"time", time}});
    const auto status =
        Shape::object({{"state", state},
                       {"bootID", text(64)},
                       {"lastAppliedRecordId", Shape::scalar()},
                       {"rejectedRecords", Shape::scalar()},
                       {"lastRejection", text(1100)},
                       {"remediation", remediation},
                       {"compactedRecords", Shape::map(64, nullptr, Shape::scalar())},
                       {"checks", Shape::list(64, check)},
                       {"history", history}});
    // metadata is ObjectMeta (open); apiVersion and kind are short.
    const auto health = Shape::object(
        {{"spec", Shape::object({{"nodeName", text(253)}})}, {"status", status}}, nullptr);
    // The event: one check, or one entity of it (controller.cc, evaluate()).
    const auto event = Shape::object({{"check", text(63)},
                                      {"entity", text(128)},
                                      {"kind", text(32)},
                                      {"state", state},
                                      {"reason", text(128)},
                                      {"message", text(1100)}});
    // A Node: Kubernetes validates label keys (253 + '/' + 63), values (63) and the total
    // size of annotations (256 KiB); how many there are is not bounded.
    const auto key = Shape::string(317);
    const auto metadata = Shape::object(
        {{"name", Shape::string(253)},
         {"labels", Shape::map(Shape::kUnbounded, key, Shape::string(63))},
         {"annotations", Shape::map(Shape::kUnbounded, key, Shape::string(256 << 10))}},
        nullptr);
    const auto taint = Shape::object({{"key", key},
                                      {"value", Shape::string(63)},
                                      {"effect", Shape::string(16)},
                                      {"timeAdded", time}});
    const auto node = Shape::object(
        {{"metadata", metadata},
         {"spec", Shape::object({{"taints", Shape::list(Shape::kUnbounded, taint)}}, nullptr)}},
        nullptr);
    cel::Sizes s;
    s.variable("event", event).variable("health", health).variable("node", node);
    s.variable("history", history);
    return s;
  }();
  return sizes;
}

std::string Taint::to_string() const {
  return key + (value.empty() ? "" : "=" + value) + ":" + effect;
}

Taint Taint::parse(std::string_view text, std::string_view field) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    throw core::InvalidInput(std::string(field) + ": '" + std::string(text) +
                             "' is not a taint; write key=value:Effect, e.g. "
                             "nvidia.com/gpu-error=fatal:NoSchedule");
  }
  Taint t;
  t.effect = std::string(text.substr(colon + 1));
  std::string_view kv = text.substr(0, colon);
  const auto eq = kv.find('=');
  t.key = std::string(kv.substr(0, eq));
  if (eq != std::string_view::npos) t.value = std::string(kv.substr(eq + 1));
  if (!valid_effect(t.effect)) {
    throw core::InvalidInput(std::string(field) + ": effect '" + t.effect +
                             "' is not one of NoSchedule, PreferNoSchedule, NoExecute");
  }
  if (t.key.empty() || t.key.size() > 253) {
    throw core::InvalidInput(std::string(field) + ": taint key '" + t.key +
                             "' must have 1 to 253 characters");
  }
  return t;
}

RuleSpec RuleSpec::from_value(const core::Value& v, std::string_view where) {
  const std::string at(where);
  if (!v.is_map()) throw core::InvalidInput(at + ": a rule must be a map");
  static constexpr std::string_view kKeys[] = {"name",  "when",     "priority",  "cordon",
                                               "taint", "escalate", "remediate", "dryRun"};
  for (const auto& e : v.as_map()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), e.key) == std::end(kKeys)) {
      throw core::InvalidInput(at + "." + e.key +
                               ": unknown key; use name, when, priority, cordon, taint, "
                               "escalate, remediate, dryRun");
    }
  }
  RuleSpec r;
  auto str = [&](std::string_view key, bool required) -> std::string {
    const core::Value* f = v.find(key);
    if (f == nullptr || f->is_null()) {
      if (required) {
        throw core::InvalidInput(at + "." + std::string(key) + ": required, e.g. " +
                                 (key == "name" ? "xid-fatal" : "event.severity == 'critical'"));
      }
      return "";
    }
    if (!f->is_string()) {
      throw core::InvalidInput(at + "." + std::string(key) + ": must be a string");
    }
    return f->as_string();
  };
  auto boolean = [&](std::string_view key) {
    const core::Value* f = v.find(key);
    if (f == nullptr || f->is_null()) return false;
    if (!f->is_bool()) {
      throw core::InvalidInput(at + "." + std::string(key) + ": must be true or false");
    }
    return f->as_bool();
  };
  r.name = str("name", true);
  r.when = str("when", true);
  r.escalate = str("escalate", false);
  if (!r.escalate.empty() && r.escalate != "gpu-reset" && r.escalate != "reboot" &&
      r.escalate != "replace") {
    throw core::InvalidInput(
        at + ".escalate: \"" + r.escalate +
        "\" is not an action to escalate to; use gpu-reset, reboot or replace");
  }
  r.remediate = str("remediate", false);
  if (!r.remediate.empty() && r.remediate != "none" && r.remediate != "wait" &&
      r.remediate != "gpu-reset" && r.remediate != "reboot" && r.remediate != "replace") {
    throw core::InvalidInput(at + ".remediate: \"" + r.remediate +
                             "\" is not an action; use none, wait, gpu-reset, reboot or replace");
  }
  r.cordon = boolean("cordon");
  r.dry_run = boolean("dryRun");
  if (const core::Value* p = v.find("priority"); p != nullptr && !p->is_null()) {
    if (!p->is_int() || p->as_int() < -1000000 || p->as_int() > 1000000) {
      throw core::InvalidInput(at + ".priority: must be an integer in [-1000000, 1000000]");
    }
    r.priority = static_cast<int>(p->as_int());
  }
  if (std::string t = str("taint", false); !t.empty()) r.taint = Taint::parse(t, at + ".taint");
  if (!r.cordon && !r.taint && r.escalate.empty() && r.remediate.empty()) {
    throw core::InvalidInput(at + ": rule '" + r.name +
                             "' has no action; set cordon: true, a taint, escalate or remediate");
  }
  return r;
}

RuleSet RuleSet::compile(std::vector<RuleSpec> rules, std::uint64_t cost_limit) {
  std::sort(rules.begin(), rules.end(), [](const RuleSpec& a, const RuleSpec& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.name < b.name;
  });
  cel::Env env;
  env.variable("event").variable("health").variable("node").variable("history");
  env.cost_limit(cost_limit);
  RuleSet set;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (i > 0 && rules[i].name == rules[i - 1].name) {
      throw core::InvalidInput("rules: name '" + rules[i].name +
                               "' is used twice; names must be unique");
    }
  }
  for (auto& r : rules) {
    cel::Program p;
    try {
      p = cel::compile(r.when, env);
    } catch (const core::InvalidInput& e) {
      throw core::InvalidInput("rule '" + r.name + "'.when: " + e.what());
    }
    const cel::CostEstimate cost = cel::estimate_cost(p, rule_input_sizes());
    if (cost.max > cost_limit) {
      std::string where = cost.describe_costliest();
      throw core::InvalidInput(
          "rule '" + r.name + "'.when: estimated worst-case cost " +
          (cost.max == UINT64_MAX ? std::string("beyond 2^64") : with_commas(cost.max)) +
          " units exceeds spec.costLimit " + with_commas(cost_limit) +
          (where.empty() ? "" : " (" + where + ")") +
          "; bound the list it iterates over (history has at most 32 entries, "
          "health.status.checks and their entities at most 64; index labels by key instead "
          "of iterating), or split the rule, or raise spec.costLimit (at most 10,000,000)");
    }
    set.rules_.push_back({std::move(r), std::move(p)});
  }
  return set;
}

Decision RuleSet::evaluate(const core::Value& event, const core::Value& health,
                           const core::Value& node, const core::Value& history,
                           std::vector<std::string>* problems) {
  cel::Activation act;
  act.bind("event", event).bind("health", health).bind("node", node).bind("history", history);
  Decision d;
  std::map<std::pair<std::string, std::string>, bool> taken;  // (key, effect)
  for (const auto& r : rules_) {
    const cel::Val v = r.program.evaluate(act);
    std::string problem;
    if (v.is_error()) {
      problem = v.error_message();
    } else if (!v.is_bool()) {
      problem = "the condition is not a bool";
    }
    if (!problem.empty()) {
      std::string key = r.spec.name + ": " + problem;
      if (reported_.size() < kMaxReported) {
        if (reported_.insert(key).second && problems != nullptr) problems->push_back(key);
      } else if (!reported_.contains(key)) {
        ++suppressed_;
      }
      continue;
    }
    if (!v.as_bool()) continue;
    if (r.spec.dry_run) {
      d.dry_run.push_back(r.spec.name);
      continue;
    }
    d.matched.push_back(r.spec.name);
    d.cordon = d.cordon || r.spec.cordon;
    if (r.spec.taint && !taken[{r.spec.taint->key, r.spec.taint->effect}]) {
      taken[{r.spec.taint->key, r.spec.taint->effect}] = true;
      d.taints.push_back(*r.spec.taint);
    }
    if (d.escalate.empty() && !r.spec.escalate.empty()) {
      d.escalate = r.spec.escalate;
      d.escalate_rule = r.spec.name;
    }
    // Strength order: "" < none < wait < gpu-reset < reboot < replace (a reboot covers a
    // pending GPU reset, a new machine covers both; an action covers waiting).
    auto strength = [](std::string_view a) { return action_strength(a); };
    if (strength(r.spec.remediate) > strength(d.remediate)) d.remediate = r.spec.remediate;
  }
  return d;
}

void EventHistory::add(const core::Value& event, std::int64_t at_ms) {
  core::Value e = core::Value::map();
  for (std::string_view k : {"type", "code", "entity", "reason", "severity"}) {
    if (const core::Value* f = event.find(k); f != nullptr) e[k] = *f;
  }
  entries_.emplace_back(at_ms, std::move(e));
  while (entries_.size() > max_entries_) entries_.pop_front();
}

core::Value EventHistory::to_value(std::int64_t now_ms) const {
  core::Value list = core::Value::list();
  for (const auto& [at, e] : entries_) {
    if (now_ms - at > max_age_ms_) continue;
    core::Value c = e;
    c["ageSeconds"] = (now_ms - at) / 1000;
    list.push_back(std::move(c));
  }
  return list;
}

int action_strength(std::string_view a) noexcept {
  return a == "replace"     ? 5
         : a == "reboot"    ? 4
         : a == "gpu-reset" ? 3
         : a == "wait"      ? 2
         : a == "none"      ? 1
                            : 0;
}

}  // namespace gpufleet::sentinel
