#include "kube/api/conditions.h"

#include <ctime>

#include "core/errors.h"
#include "kube/api/meta.h"
#include "kube/api/names.h"

namespace gpufleet::kube {
namespace {

constexpr std::size_t kMaxReason = 1024;
constexpr std::size_t kMaxMessage = 32768;

bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// metav1.Condition's reason pattern: ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$
std::string check_reason(std::string_view r) {
  if (r.empty()) return "must not be empty";
  if (r.size() > kMaxReason) return "must be at most 1024 characters";
  if (!is_alpha(r.front())) return "must start with a letter";
  for (char c : r) {
    if (!is_alpha(c) && !is_digit(c) && c != '_' && c != ',' && c != ':')
      return "may contain only letters, digits, '_', ',' and ':' (CamelCase, e.g. BurnInPassed)";
  }
  if (r.back() == ',' || r.back() == ':') return "must end with a letter, digit or '_'";
  return {};
}

// The type is a qualified name: an optional DNS-subdomain prefix and '/', then at most 63
// characters of alphanumerics, '-', '_' and '.', alphanumeric at both ends (the label-key rule).
std::string check_type(std::string_view t) {
  if (t.empty()) return "must not be empty";
  return check_label_key(t);
}

std::time_t to_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::system_clock::to_time_t(
      std::chrono::time_point_cast<std::chrono::seconds>(t));
}

core::Value to_value(const Condition& c) {
  core::Value v;
  v["type"] = c.type;
  v["status"] = c.status;
  v["observedGeneration"] = c.observed_generation;
  v["lastTransitionTime"] = format_rfc3339(c.last_transition_time);
  v["reason"] = c.reason;
  v["message"] = c.message;
  return v;
}

}  // namespace

void validate_condition(const Condition& c) {
  if (std::string why = check_type(c.type); !why.empty()) {
    throw core::InvalidInput(
        "condition type \"" + c.type + "\": " + why +
        "; use CamelCase, optionally prefixed by a domain (gpufleet.io/Ready)");
  }
  if (c.status != "True" && c.status != "False" && c.status != "Unknown") {
    throw core::InvalidInput("condition " + c.type + ": status \"" + c.status +
                             "\" is not one of True, False, Unknown");
  }
  if (std::string why = check_reason(c.reason); !why.empty()) {
    throw core::InvalidInput("condition " + c.type + ": reason \"" + c.reason + "\" " + why);
  }
  if (c.message.size() > kMaxMessage) {
    throw core::InvalidInput("condition " + c.type + ": message is " +
                             std::to_string(c.message.size()) +
                             " bytes; at most 32768 are accepted, shorten it");
  }
  if (c.observed_generation < 0) {
    throw core::InvalidInput("condition " + c.type + ": observedGeneration " +
                             std::to_string(c.observed_generation) + " must not be negative");
  }
}

std::optional<Condition> get_condition(const core::Value& conditions, std::string_view type) {
  const core::List* list = conditions.if_list();
  if (list == nullptr) return std::nullopt;
  for (const core::Value& v : *list) {
    if (v.get_string({"type"}) != type) continue;
    Condition c;
    c.type = std::string(type);
    c.status = std::string(v.get_string({"status"}));
    c.reason = std::string(v.get_string({"reason"}));
    c.message = std::string(v.get_string({"message"}));
    if (const core::Value* g = v.find("observedGeneration"); g != nullptr && g->is_number())
      c.observed_generation = static_cast<std::int64_t>(g->as_double());
    if (auto t = parse_rfc3339(v.get_string({"lastTransitionTime"}))) c.last_transition_time = *t;
    return c;
  }
  return std::nullopt;
}

bool set_condition(core::Value& conditions, const Condition& c,
                   std::chrono::system_clock::time_point now) {
  validate_condition(c);
  if (conditions.is_null()) conditions = core::Value::list();
  core::List& list = conditions.as_list();
  Condition next = c;
  next.last_transition_time = std::chrono::system_clock::from_time_t(to_seconds(now));
  for (core::Value& v : list) {
    if (v.get_string({"type"}) != c.type) continue;
    std::optional<Condition> old = get_condition(conditions, c.type);
    // The status did not change: the transition happened when it last did.
    if (old->status == c.status) next.last_transition_time = old->last_transition_time;
    core::Value updated = to_value(next);
    if (updated == v) return false;
    v = std::move(updated);
    return true;
  }
  list.push_back(to_value(next));
  return true;
}

bool remove_condition(core::Value& conditions, std::string_view type) {
  core::List* list = conditions.if_list();
  if (list == nullptr) return false;
  for (auto it = list->begin(); it != list->end(); ++it) {
    if (it->get_string({"type"}) == type) {
      list->erase(it);
      return true;
    }
  }
  return false;
}

std::string format_rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t s = to_seconds(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gpufleet::kube
