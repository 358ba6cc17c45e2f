#include "sentinel/incident.h"

#include <algorithm>

#include "kube/api/conditions.h"
#include "sentinel/controller_shared.h"

namespace gpufleet::sentinel::detail {

std::set<std::string> string_set(const core::Value* list) {
  std::set<std::string> out;
  if (list == nullptr || !list->is_list()) return out;
  for (const auto& s : list->as_list())
    if (s.is_string()) out.insert(s.as_string());
  return out;
}

core::Value history_with_age(const core::Value* history, std::int64_t now) {
  if (history == nullptr || !history->is_list()) return core::Value::list();
  core::Value out = *history;
  for (auto& h : out.as_list()) {
    if (!h.is_map()) continue;
    if (const std::int64_t at = ms_of(h.get_string({"time"})); at > 0)
      h["ageSeconds"] = std::max<std::int64_t>(0, (now - at) / 1000);
  }
  return out;
}

std::string incident_name(std::string_view node, std::int64_t ms) {
  std::string digits;
  std::int64_t s = ms;
  do {
    digits.insert(digits.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[s % 36]);
    s /= 36;
  } while (s > 0);
  std::string base(node.substr(0, 253 - digits.size() - 1));
  return base + "-" + digits;
}

core::Value status_of(const core::Value& rem) {
  const core::Value* s = rem.get({"status"});
  return s != nullptr && s->is_map() ? *s : core::Value::map();
}

std::optional<core::Value> rule_escalation(const Policy& policy, const Decision& d,
                                           std::string& action) {
  if (d.escalate.empty() || action_strength(d.escalate) <= action_strength(action))
    return std::nullopt;
  core::Value e = core::Value::map();
  e["rule"] = d.escalate_rule;
  e["from"] = action;
  e["to"] = d.escalate;
  std::string why;
  if (!policy.remediation.enabled) {
    why = "spec.remediation.enabled is false; set it to true for sentinel to act";
  } else if (d.escalate == "replace" && policy.remediation.provider.empty()) {
    why =
        "spec.remediation.replacement.provider is not set; name the provider that replaces "
        "nodes, e.g. replacement: {provider: simulator}";
  }
  e["applied"] = why.empty();
  e["message"] = "rule '" + d.escalate_rule + "' escalates " + action + " to " + d.escalate +
                 (why.empty() ? "" : "; not applied: " + why);
  if (why.empty()) action = d.escalate;
  return e;
}

std::vector<std::string> faulty_gpus(const std::set<std::string>& entities,
                                     const std::set<std::string>& faulty) {
  std::set<std::string> out;
  for (const auto& e : entities) {
    if (!faulty.contains(e)) continue;
    const auto slash = e.find('/');
    if (slash == std::string::npos) continue;
    const std::string id = e.substr(slash + 1);
    if (id.starts_with("GPU-") && out.size() < 16) out.insert(id);
  }
  return {out.begin(), out.end()};
}

void record_escalation(core::Value& s, const std::string& from, const std::string& to,
                       const std::string& reason, const std::string& why, std::int64_t now) {
  core::Value list = s.find("escalations") != nullptr && s.find("escalations")->is_list()
                         ? *s.find("escalations")
                         : core::Value::list();
  core::Value e = core::Value::map();
  e["from"] = from;
  e["to"] = to;
  e["reason"] = reason;
  e["message"] = why.substr(0, 1000);
  e["at"] = rfc3339(now);
  list.push_back(std::move(e));
  while (list.size() > 4) list.as_list().erase(list.as_list().begin());
  s["escalations"] = std::move(list);
  core::Value conds = s.find("conditions") ? *s.find("conditions") : core::Value::list();
  kube::set_condition(conds, kube::Condition{"Escalated", "True", reason,
                                             (from + " → " + to + ": " + why).substr(0, 4000)});
  s["conditions"] = std::move(conds);
}

void clear_budget_wait(core::Value& s) {
  if (s.find("waitingFor") == nullptr) return;
  s.as_map().erase("waitingFor");
  core::Value conds = s.find("conditions") ? *s.find("conditions") : core::Value::list();
  kube::set_condition(conds, kube::Condition{"WaitingForBudget", "False", "BudgetAvailable",
                                             "the budget had room; the action went ahead"});
  s["conditions"] = std::move(conds);
}

}  // namespace gpufleet::sentinel::detail
