#include "core/field_reader.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "core/errors.h"
#include "core/json.h"
#include "core/text.h"
#include "core/time.h"
#include "core/yaml_path.h"

namespace gpufleet::core {

namespace {

struct OpenDocument {
  std::string_view source;
  std::string_view text;
  std::size_t document;
};
// Innermost last. Per thread: documents are read on the thread that calls the parser.
thread_local std::vector<OpenDocument> open_documents;

// The unknown-key message shared by FieldReader::done and check_keys.
template <class Range>
[[noreturn]] void fail_unknown(std::string_view source, std::string field, std::string_view key,
                               const Range& known) {
  std::string fix;
  if (auto near = did_you_mean(key, known)) fix = "did you mean \"" + *near + "\"? ";
  fix += "fields here: " + join(known);
  fail_field(source, field, "is not a known field", fix);
}

}  // namespace

DocumentScope::DocumentScope(std::string_view source, std::string_view text, std::size_t document) {
  open_documents.push_back({source, text, document});
}

DocumentScope::~DocumentScope() { open_documents.pop_back(); }

std::string located(std::string_view source, std::string_view field) {
  std::string out(source);
  for (auto it = open_documents.rbegin(); it != open_documents.rend(); ++it) {
    if (it->source != source) continue;
    // A missing field has no position: point at the nearest enclosing one that has.
    for (std::string_view f = field;;) {
      const TextPosition p = locate_field(it->text, f, it->document);
      if (p.line != 0) {
        out += ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
        break;
      }
      const std::size_t cut = f.find_last_of(".[");
      if (f.empty() || cut == std::string_view::npos) break;
      f = f.substr(0, cut);
    }
    break;
  }
  return out;
}

std::string describe_value(const Value& v) {
  switch (v.kind()) {
    case Kind::Map: return "a map";
    case Kind::List: return "a list";
    case Kind::Null: return "null";
    case Kind::Bytes: return "binary data";
    default: break;
  }
  std::string text = to_json(v);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

void fail_field(std::string_view source, std::string_view field, std::string_view problem,
                std::string_view fix) {
  std::string msg;
  if (!source.empty()) msg.append(located(source, field)).append(": ");
  msg.append(field).append(": ").append(problem);
  if (!fix.empty()) msg.append(" (").append(fix).append(")");
  throw InvalidInput(msg);
}

double seconds_from(const Value& v, std::string_view source, std::string_view field) {
  double s = -1;
  if (v.is_number()) {
    s = v.as_double();
  } else if (v.is_string()) {
    if (auto d = try_parse_duration(v.as_string())) s = std::chrono::duration<double>(*d).count();
  }
  if (!(s >= 0) || s > 365.0 * 24 * 3600) {
    fail_field(source, field, "value " + describe_value(v) + " is not a duration",
               "write seconds (30) or a duration such as \"90s\", \"2m\", \"1h30m\"");
  }
  return s;
}

FieldReader::FieldReader(const Value& v, std::string source, std::string path)
    : source_(std::move(source)), path_(std::move(path)) {
  if (v.is_null()) return;
  map_ = v.if_map();
  if (map_ == nullptr) {
    fail_field(source_, path_, "expected a map, got " + describe_value(v),
               "write it as key: value lines");
  }
}

std::string FieldReader::field(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  return path_ + "." + std::string(key);
}

const Value* FieldReader::get(std::string_view key) {
  known_.emplace(key);
  if (map_ == nullptr) return nullptr;
  const Value* v = map_->find(key);
  if (v != nullptr && v->is_null()) return nullptr;
  return v;
}

bool FieldReader::has(std::string_view key) const {
  if (map_ == nullptr) return false;
  const Value* v = map_->find(key);
  return v != nullptr && !v->is_null();
}

void FieldReader::fail(std::string_view key, const Value& value, std::string_view problem,
                       std::string_view fix) const {
  fail_field(source_, field(key), "value " + describe_value(value) + " " + std::string(problem),
             fix);
}

std::string FieldReader::required_string(std::string_view key, std::string_view fix) {
  const Value* v = get(key);
  if (v == nullptr) fail_required(key, fix);
  if (!v->is_string() || v->as_string().empty()) fail(key, *v, "is not a non-empty string", fix);
  return v->as_string();
}

std::string FieldReader::string(std::string_view key, std::string_view fallback) {
  const Value* v = get(key);
  if (v == nullptr) return std::string(fallback);
  if (v->is_string()) return v->as_string();
  // Versions such as 22.04 or 12.8 read as numbers in YAML; the user meant text.
  if (v->is_int() || v->is_uint()) return describe_value(*v);
  fail(key, *v, "is not a string", "quote it, e.g. \"22.04\"");
}

std::int64_t FieldReader::integer(std::string_view key, std::optional<std::int64_t> fallback,
                                  std::int64_t min, std::int64_t max, std::string_view fix) {
  const Value* v = get(key);
  if (v == nullptr) {
    if (!fallback) fail_required(key, fix);
    return *fallback;
  }
  std::int64_t n = 0;
  if (v->is_int()) {
    n = v->as_int();
  } else if (v->is_uint() && v->as_uint() <= static_cast<std::uint64_t>(INT64_MAX)) {
    n = static_cast<std::int64_t>(v->as_uint());
  } else {
    fail(key, *v, "is not an integer", fix);
  }
  if (n < min || n > max) {
    std::ostringstream range;
    range << "is out of range: must be between " << min << " and " << max;
    fail(key, *v, range.str(), fix);
  }
  return n;
}

double FieldReader::number(std::string_view key, std::optional<double> fallback, double min,
                           double max, std::string_view fix) {
  const Value* v = get(key);
  if (v == nullptr) {
    if (!fallback) fail_required(key, fix);
    return *fallback;
  }
  if (!v->is_number()) fail(key, *v, "is not a number", fix);
  double d = v->as_double();
  if (!std::isfinite(d) || d < min || d > max) {
    std::ostringstream range;
    range << "is out of range: must be between " << min << " and " << max;
    fail(key, *v, range.str(), fix);
  }
  return d;
}

bool FieldReader::boolean(std::string_view key, bool fallback) {
  const Value* v = get(key);
  if (v == nullptr) return fallback;
  if (!v->is_bool()) fail(key, *v, "is not a boolean", "write true or false");
  return v->as_bool();
}

std::string FieldReader::one_of(std::string_view key, std::optional<std::string_view> fallback,
                                std::initializer_list<std::string_view> allowed) {
  std::string list;
  for (auto a : allowed) {
    if (!list.empty()) list += ", ";
    list += a;
  }
  const Value* v = get(key);
  if (v == nullptr) {
    if (!fallback) fail_required(key, "use one of: " + list);
    return std::string(*fallback);
  }
  if (v->is_string()) {
    for (auto a : allowed) {
      if (v->as_string() == a) return v->as_string();
    }
  }
  fail(key, *v, "is not supported", "use one of: " + list);
}

Map FieldReader::string_map(std::string_view key) {
  const Value* v = get(key);
  Map out;
  if (v == nullptr) return out;
  if (!v->is_map()) fail(key, *v, "is not a map", "write it as key: value lines");
  for (const auto& e : v->as_map()) {
    if (e.value.is_string()) {
      out.set(e.key, e.value);
    } else if (e.value.is_number() || e.value.is_bool()) {
      out.set(e.key, describe_value(e.value));
    } else {
      fail_field(source_, field(key) + "." + e.key,
                 "value " + describe_value(e.value) + " is not a string", "quote the value");
    }
  }
  return out;
}

void FieldReader::fail_required(std::string_view key, std::string_view fix) const {
  // A required key that is missing because it is misspelled: name the misspelling.
  if (map_ != nullptr) {
    for (const auto& e : *map_) {
      if (known_.count(e.key) == 0 && is_near_miss(e.key, key)) {
        fail_field(source_, field(e.key), "is not a known field",
                   "did you mean \"" + std::string(key) + "\"?");
      }
    }
  }
  fail_field(source_, field(key), "is required", fix);
}

void FieldReader::done() const {
  if (map_ == nullptr) return;
  for (const auto& e : *map_) {
    if (known_.count(e.key) != 0) continue;
    fail_unknown(source_, field(e.key), e.key, known_);
  }
}

void check_keys(const Map& m, std::initializer_list<std::string_view> allowed,
                std::string_view source, std::string_view path) {
  for (const auto& e : m) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == e.key;
    if (ok) continue;
    fail_unknown(source, path.empty() ? e.key : std::string(path) + "." + e.key, e.key, allowed);
  }
}

}  // namespace gpufleet::core
