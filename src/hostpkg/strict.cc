#include "hostpkg/strict.h"

#include <cmath>

#include "core/duration.h"
#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::hostpkg {

std::string describe(const core::Value& v) {
  if (v.is_map() || v.is_list()) return "<" + std::string(core::kind_name(v.kind())) + ">";
  std::string s = core::to_json(v);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

const core::Map& strict_map(const core::Value& v, const std::string& field,
                            std::initializer_list<std::string_view> allowed) {
  if (!v.is_map()) {
    throw core::InvalidInput(field + ": expected a map, got " +
                             std::string(core::kind_name(v.kind())) + " " + describe(v));
  }
  const core::Map& m = v.as_map();
  if (allowed.size() == 0) return m;
  for (const auto& e : m) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == e.key;
    if (!ok) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw core::InvalidInput(field + "." + e.key + ": unknown field; the fields here are " +
                               list + " (check the spelling)");
    }
  }
  return m;
}

std::optional<std::string> optional_string(const core::Map& m, const std::string& field,
                                           std::string_view key) {
  const core::Value* v = m.find(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    throw core::InvalidInput(field + "." + std::string(key) + ": expected a string, got " +
                             std::string(core::kind_name(v->kind())) + " " + describe(*v) +
                             "; quote the value");
  }
  return v->as_string();
}

std::string required_string(const core::Map& m, const std::string& field, std::string_view key) {
  auto s = optional_string(m, field, key);
  if (!s || s->empty()) {
    throw core::InvalidInput(field + "." + std::string(key) +
                             ": required; set it to a non-empty string");
  }
  return *s;
}

bool optional_bool(const core::Map& m, const std::string& field, std::string_view key,
                   bool fallback) {
  const core::Value* v = m.find(key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_bool()) {
    throw core::InvalidInput(field + "." + std::string(key) + ": expected true or false, got " +
                             describe(*v));
  }
  return v->as_bool();
}

double optional_number(const core::Map& m, const std::string& field, std::string_view key,
                       double fallback, double min, double max) {
  const core::Value* v = m.find(key);
  if (v == nullptr || v->is_null()) return fallback;
  std::string f = field + "." + std::string(key);
  if (!v->is_number()) {
    throw core::InvalidInput(f + ": expected a number, got " + describe(*v));
  }
  double d = v->as_double();
  if (!(d >= min && d <= max)) {
    throw core::InvalidInput(f + ": " + describe(*v) + " is out of range; use a value from " +
                             core::to_json(core::Value(min)) + " to " +
                             core::to_json(core::Value(max)));
  }
  return d;
}

std::int64_t optional_int(const core::Map& m, const std::string& field, std::string_view key,
                          std::int64_t fallback, std::int64_t min, std::int64_t max) {
  const core::Value* v = m.find(key);
  if (v == nullptr || v->is_null()) return fallback;
  std::string f = field + "." + std::string(key);
  if (!v->is_number() || (v->is_double() && std::floor(v->as_double()) != v->as_double())) {
    throw core::InvalidInput(f + ": expected a whole number, got " + describe(*v));
  }
  double d = v->as_double();
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    throw core::InvalidInput(f + ": " + describe(*v) + " is out of range; use a value from " +
                             std::to_string(min) + " to " + std::to_string(max));
  }
  return static_cast<std::int64_t>(d);
}

std::chrono::seconds optional_duration(const core::Map& m, const std::string& field,
                                       std::string_view key, std::chrono::seconds fallback,
                                       std::chrono::seconds max) {
  auto s = optional_string(m, field, key);
  if (!s) return fallback;
  std::string f = field + "." + std::string(key);
  auto d = core::try_parse_duration(*s);
  if (!d || *d <= std::chrono::nanoseconds::zero() || *d > max) {
    throw core::InvalidInput(f + ": \"" + *s + "\" is not a duration from 1s to " +
                             core::format_duration(max) +
                             "; write e.g. \"90s\", \"10m\" or \"1h\"");
  }
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(*d);
  return secs.count() == 0 ? std::chrono::seconds(1) : secs;
}

std::vector<std::string> string_list(const core::Value* v, const std::string& field) {
  std::vector<std::string> out;
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_list()) {
    throw core::InvalidInput(field + ": expected a list of strings, got " + describe(*v));
  }
  for (std::size_t i = 0; i < v->size(); ++i) {
    const core::Value& e = (*v)[i];
    if (!e.is_string()) {
      throw core::InvalidInput(field + "[" + std::to_string(i) + "]: expected a string, got " +
                               describe(e));
    }
    out.push_back(e.as_string());
  }
  return out;
}

}  // namespace gpufleet::hostpkg
