#include "sentinel/policy.h"

#include "core/errors.h"
#include "core/json.h"
#include "kube/api/selector.h"

namespace gpufleet::sentinel {
namespace {

// An hour: a larger value is most likely a unit slip (milliseconds for seconds), and a drain that
// waits longer for a job on a faulty node is a drain that does not happen.
constexpr std::int64_t kMaxCheckpointTimeoutS = 3600;

const core::Value* field(const core::Value& v, std::string_view key) {
  const core::Value* f = v.is_map() ? v.find(key) : nullptr;
  return f != nullptr && !f->is_null() ? f : nullptr;
}

bool bool_field(const core::Value& v, std::string_view key, bool fallback, const std::string& at) {
  const core::Value* f = field(v, key);
  if (f == nullptr) return fallback;
  if (!f->is_bool())
    throw core::InvalidInput(at + "." + std::string(key) + ": must be true or false");
  return f->as_bool();
}

std::int64_t int_field(const core::Value& v, std::string_view key, std::int64_t fallback,
                       std::int64_t lo, std::int64_t hi, const std::string& at) {
  const core::Value* f = field(v, key);
  if (f == nullptr) return fallback;
  if (!f->is_int() || f->as_int() < lo || f->as_int() > hi) {
    throw core::InvalidInput(at + "." + std::string(key) + ": " + core::to_json(*f) +
                             " is not an integer in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
  }
  return f->as_int();
}

std::string action_field(const core::Value& v, std::string_view key, std::string fallback,
                         const std::string& at) {
  const core::Value* f = field(v, key);
  if (f == nullptr) return fallback;
  if (!f->is_string() ||
      (f->as_string() != "none" && f->as_string() != "wait" && f->as_string() != "gpu-reset" &&
       f->as_string() != "reboot" && f->as_string() != "replace")) {
    throw core::InvalidInput(at + "." + std::string(key) + ": " + core::to_json(*f) +
                             " is not an action; use none, wait, gpu-reset, reboot or replace");
  }
  return f->as_string();
}

DrainMode mode_of(const core::Value* f, DrainMode fallback, const std::string& at) {
  if (f == nullptr || f->is_null()) return fallback;
  const std::string_view s = f->is_string() ? std::string_view(f->as_string()) : "";
  if (s == "Evict") return DrainMode::Evict;
  if (s == "AllowCompletion") return DrainMode::AllowCompletion;
  if (s == "Delete") return DrainMode::Delete;
  throw core::InvalidInput(at + ": " + core::to_json(*f) +
                           " is not a drain mode; use Evict, AllowCompletion or Delete");
}

}  // namespace

std::string_view drain_mode_name(DrainMode m) noexcept {
  switch (m) {
    case DrainMode::Evict: return "Evict";
    case DrainMode::AllowCompletion: return "AllowCompletion";
    case DrainMode::Delete: return "Delete";
  }
  return "Evict";
}

bool DrainRule::matches(const core::Value& pod) const {
  for (const auto& [k, v] : match_labels) {
    const core::Value* l = pod.get({"metadata", "labels", k});
    if (l == nullptr || !l->is_string() || l->as_string() != v) return false;
  }
  return true;
}

Policy Policy::from_spec(const core::Value& spec) {
  Policy p;
  if (!spec.is_map()) throw core::InvalidInput("spec: must be a map with rules");
  const core::Value* rules = field(spec, "rules");
  if (rules == nullptr || !rules->is_list()) {
    throw core::InvalidInput("spec.rules: required, a list of {name, when, cordon|taint|...}");
  }
  for (std::size_t i = 0; i < rules->size(); ++i) {
    p.rules.push_back(RuleSpec::from_value((*rules)[i], "spec.rules[" + std::to_string(i) + "]"));
  }
  p.cost_limit =
      static_cast<std::uint64_t>(int_field(spec, "costLimit", 100'000, 100, 10'000'000, "spec"));
  if (const core::Value* sel = field(spec, "nodeSelector")) {
    kube::validate_label_selector(*sel, "spec.nodeSelector");
    p.node_selector = *sel;
  }
  p.priority = int_field(spec, "priority", 0, -1000, 1000, "spec");
  if (const core::Value* b = field(spec, "breaker")) {
    try {
      p.breaker = BreakerPolicy::from_value(*b);
    } catch (const core::InvalidInput& e) {
      throw core::InvalidInput(std::string("spec.") + e.what());
    }
  } else {
    // A breaker is always on: 10 % of the GPU nodes within 10 minutes unless told otherwise.
    p.breaker.max_fraction = 0.1;
  }
  p.breaker.validate();

  if (const core::Value* d = field(spec, "drain")) {
    const std::string at = "spec.drain";
    p.drain.enabled = bool_field(*d, "enabled", true, at);
    p.drain.default_mode = mode_of(field(*d, "defaultMode"), DrainMode::Evict, at + ".defaultMode");
    p.drain.deadline_s = int_field(*d, "deadlineSeconds", 600, 1, 604800, at);
    p.drain.terminating_timeout_s = int_field(*d, "terminatingTimeoutSeconds", 120, 1, 86400, at);
    if (const core::Value* c = field(*d, "checkpointTimeoutSeconds")) {
      if (!c->is_int() || c->as_int() < 0 || c->as_int() > kMaxCheckpointTimeoutS) {
        throw core::InvalidInput(
            at + ".checkpointTimeoutSeconds: " + core::to_json(*c) +
            " is not a number of seconds in [0, " + std::to_string(kMaxCheckpointTimeoutS) +
            "]; give how long a job may take to checkpoint before its pods are evicted, e.g. 300 "
            "(0: do not wait for checkpoints)");
      }
      p.drain.checkpoint_timeout_s = c->as_int();
    }
    if (const core::Value* ns = field(*d, "systemNamespaces"); ns && ns->is_list()) {
      for (const auto& n : ns->as_list()) {
        if (n.is_string()) p.drain.system_namespaces.push_back(n.as_string());
      }
    }
    if (const core::Value* modes = field(*d, "modes"); modes && modes->is_list()) {
      for (std::size_t i = 0; i < modes->size(); ++i) {
        const core::Value& m = (*modes)[i];
        const std::string mat = at + ".modes[" + std::to_string(i) + "]";
        DrainRule r;
        r.mode = mode_of(field(m, "mode"), DrainMode::Evict, mat + ".mode");
        r.timeout_s = int_field(m, "timeoutSeconds", 0, 0, 604800, mat);
        const core::Value* labels = m.get({"selector", "matchLabels"});
        if (labels != nullptr && labels->is_map()) {
          for (const auto& e : labels->as_map()) {
            if (!e.value.is_string()) {
              throw core::InvalidInput(mat + ".selector.matchLabels." + e.key +
                                       ": must be a string");
            }
            r.match_labels[e.key] = e.value.as_string();
          }
        }
        p.drain.modes.push_back(std::move(r));
      }
    }
  }
  if (const core::Value* r = field(spec, "remediation")) {
    const std::string at = "spec.remediation";
    p.remediation.enabled = bool_field(*r, "enabled", true, at);
    p.remediation.default_action = action_field(*r, "defaultAction", "reboot", at);
    p.remediation.max_attempts = static_cast<int>(int_field(*r, "maxAttempts", 2, 1, 10, at));
    p.remediation.timeout_s = int_field(*r, "timeoutSeconds", 600, 5, 86400, at);
    p.remediation.settle_s = int_field(*r, "settleSeconds", 30, 1, 3600, at);
    if (const core::Value* rep = field(*r, "replacement")) {
      const std::string rat = at + ".replacement";
      if (const core::Value* pr = field(*rep, "provider")) {
        if (!pr->is_string() || pr->as_string().empty() || pr->as_string().size() > 63)
          throw core::InvalidInput(rat + ".provider: " + core::to_json(*pr) +
                                   " is not a provider name; use e.g. simulator");
        p.remediation.provider = pr->as_string();
      }
      p.remediation.replace_when_reboot_fails = bool_field(*rep, "whenRebootFails", false, rat);
    }
  }
  if (p.remediation.provider.empty() && p.may_replace()) {
    std::string why = p.remediation.default_action == "replace"
                          ? "spec.remediation.defaultAction is \"replace\""
                      : p.remediation.replace_when_reboot_fails
                          ? "spec.remediation.replacement.whenRebootFails is true"
                          : "a rule remediates with \"replace\"";
    for (const auto& r : p.rules)
      if (r.remediate == "replace") why = "rule '" + r.name + "'.remediate is \"replace\"";
    throw core::InvalidInput(
        why +
        " but spec.remediation.replacement.provider is not set; name the "
        "provider that replaces nodes, e.g. replacement: {provider: simulator}");
  }
  if (const core::Value* v = field(spec, "validation")) {
    const std::string at = "spec.validation";
    p.validation.enabled = bool_field(*v, "enabled", true, at);
    p.validation.new_nodes = bool_field(*v, "newNodes", true, at);
    p.validation.deadline_s = int_field(*v, "deadlineSeconds", 3600, 10, 604800, at);
    if (const core::Value* c = field(*v, "categories"); c && c->is_list() && c->size() > 0) {
      p.validation.categories.clear();
      for (const auto& s : c->as_list()) {
        if (!s.is_string() || s.as_string().find('/') == std::string::npos) {
          throw core::InvalidInput(at + ".categories: " + core::to_json(s) +
                                   " is not a catalog category; use e.g. diagnostics/dcgm-r2");
        }
        p.validation.categories.push_back(s.as_string());
      }
    }
  }
  return p;
}

bool Policy::may_replace() const {
  if (remediation.default_action == "replace" || remediation.replace_when_reboot_fails) return true;
  for (const auto& r : rules)
    if (r.remediate == "replace") return true;
  return false;
}

void Policy::check_providers(const std::vector<std::string>& known) const {
  if (remediation.provider.empty()) return;
  for (const auto& k : known)
    if (k == remediation.provider) return;
  std::string names;
  for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
  throw core::InvalidInput("spec.remediation.replacement.provider: \"" + remediation.provider +
                           "\" is not a replacement provider of this sentinel controller; " +
                           (names.empty()
                                ? std::string("it has none (the simulator's is registered by --set "
                                              "sentinel.sim-replacement-state-dir=DIR)")
                                : "use one of: " + names));
}

}  // namespace gpufleet::sentinel
