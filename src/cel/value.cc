#include "cel/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/errors.h"

namespace gpufleet::cel {

struct ValAccess {
  static const ListObj* list(const Val& v) noexcept { return v.core_ ? nullptr : v.p_.list; }
  static const core::List* clist(const Val& v) noexcept { return v.core_ ? v.p_.clist : nullptr; }
  static const MapObj* map(const Val& v) noexcept { return v.core_ ? nullptr : v.p_.map; }
  static const core::Map* cmap(const Val& v) noexcept { return v.core_ ? v.p_.cmap : nullptr; }
};

Val Val::owned_text(ValKind k, std::string s) {
  auto* obj = new StrObj(std::move(s));
  Val v(k);
  v.p_.s = {obj->s.data(), obj->s.size()};
  v.owner_ = obj;
  return v;
}

Val Val::list(std::vector<Val> items) {
  auto* obj = new ListObj();
  obj->items = std::move(items);
  Val v(ValKind::List);
  v.p_.list = obj;
  v.owner_ = obj;
  return v;
}

Val Val::map(std::vector<std::pair<Val, Val>> entries) {
  auto* obj = new MapObj();
  obj->entries = std::move(entries);
  Val v(ValKind::Map);
  v.p_.map = obj;
  v.owner_ = obj;
  return v;
}

Val Val::error(std::string message) {
  auto* obj = new ErrObj(std::move(message));
  Val v(ValKind::Error);
  v.p_.error = obj;
  v.owner_ = obj;
  return v;
}

Val Val::opaque(OpaqueObj* adopted) noexcept {
  Val v(ValKind::Opaque);
  v.p_.opaque = adopted;
  v.owner_ = adopted;
  return v;
}

const std::string& Val::error_message() const noexcept { return p_.error->message; }

Val Val::from_core(const core::Value& v) noexcept {
  switch (v.kind()) {
    case core::Kind::Null: return Val();
    case core::Kind::Bool: return boolean(*v.if_bool());
    case core::Kind::Int: return integer(*v.if_int());
    case core::Kind::Uint: return uinteger(v.as_uint());
    case core::Kind::Double: return dbl(v.as_double());
    case core::Kind::String: return string_view(*v.if_string());
    case core::Kind::Bytes: return bytes_view(v.as_bytes().data);
    case core::Kind::List: {
      Val r(ValKind::List);
      r.core_ = true;
      r.p_.clist = v.if_list();
      return r;
    }
    case core::Kind::Map: {
      Val r(ValKind::Map);
      r.core_ = true;
      r.p_.cmap = v.if_map();
      return r;
    }
  }
  return Val();
}

std::size_t Val::size() const noexcept {
  switch (kind_) {
    case ValKind::List: return core_ ? p_.clist->size() : p_.list->items.size();
    case ValKind::Map: return core_ ? p_.cmap->size() : p_.map->entries.size();
    case ValKind::String:
    case ValKind::Bytes: return p_.s.n;
    default: return 0;
  }
}

Val Val::list_at(std::size_t i) const {
  if (core_) return from_core((*p_.clist)[i]);
  return p_.list->items[i];
}

Val Val::map_key_at(std::size_t i) const {
  if (core_) return string_view((p_.cmap->begin() + static_cast<std::ptrdiff_t>(i))->key);
  return p_.map->entries[i].first;
}

Val Val::map_value_at(std::size_t i) const {
  if (core_) return from_core((p_.cmap->begin() + static_cast<std::ptrdiff_t>(i))->value);
  return p_.map->entries[i].second;
}

bool Val::map_find_string(std::string_view key, Val* out) const {
  if (core_) {
    const core::Value* v = p_.cmap->find(key);
    if (v == nullptr) return false;
    *out = from_core(*v);
    return true;
  }
  for (const auto& [k, v] : p_.map->entries) {
    if (k.kind() == ValKind::String && k.text() == key) {
      *out = v;
      return true;
    }
  }
  return false;
}

bool Val::map_find(const Val& key, Val* out) const {
  if (key.kind() == ValKind::String) return map_find_string(key.text(), out);
  if (core_) return false;  // bound maps have string keys only
  for (const auto& [k, v] : p_.map->entries) {
    if (equals(k, key)) {
      *out = v;
      return true;
    }
  }
  return false;
}

namespace {

bool needs_detach(const Val& v) {
  if (v.kind() == ValKind::Opaque) return v.from_program();
  if (v.kind() != ValKind::String && v.kind() != ValKind::Bytes && v.kind() != ValKind::List &&
      v.kind() != ValKind::Map) {
    return false;
  }
  if (v.from_program()) return true;
  if (v.kind() == ValKind::List && !v.is_core_view()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (needs_detach(v.list_at(i))) return true;
    }
  }
  if (v.kind() == ValKind::Map && !v.is_core_view()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (needs_detach(v.map_key_at(i)) || needs_detach(v.map_value_at(i))) return true;
    }
  }
  return false;
}

}  // namespace

Val Val::detach() const {
  if (!needs_detach(*this)) return *this;
  switch (kind_) {
    case ValKind::String: return string(std::string(text()));
    case ValKind::Bytes: return bytes(std::string(text()));
    case ValKind::List: {
      std::vector<Val> items;
      items.reserve(size());
      for (std::size_t i = 0; i < size(); ++i) items.push_back(list_at(i).detach());
      return list(std::move(items));
    }
    case ValKind::Map: {
      std::vector<std::pair<Val, Val>> entries;
      entries.reserve(size());
      for (std::size_t i = 0; i < size(); ++i) {
        entries.emplace_back(map_key_at(i).detach(), map_value_at(i).detach());
      }
      return map(std::move(entries));
    }
    case ValKind::Opaque: {
      // Take a reference to the compiled constant's object instead of borrowing it.
      Val v(ValKind::Opaque);
      v.p_.opaque = p_.opaque;
      v.owner_ = p_.opaque;
      p_.opaque->refs.fetch_add(1, std::memory_order_relaxed);
      return v;
    }
    default: return *this;
  }
}

std::string_view Val::type_name() const noexcept {
  switch (kind_) {
    case ValKind::Null: return "null_type";
    case ValKind::Bool: return "bool";
    case ValKind::Int: return "int";
    case ValKind::Uint: return "uint";
    case ValKind::Double: return "double";
    case ValKind::String: return "string";
    case ValKind::Bytes: return "bytes";
    case ValKind::List: return "list";
    case ValKind::Map: return "map";
    case ValKind::Timestamp: return "google.protobuf.Timestamp";
    case ValKind::Duration: return "google.protobuf.Duration";
    case ValKind::Type: return "type";
    case ValKind::Opaque: return opaque().type_name();
    case ValKind::Error: return "error";
  }
  return "unknown";
}

namespace {

std::string format_double(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, res.ptr);
}

}  // namespace

std::string Val::debug_string() const {
  switch (kind_) {
    case ValKind::Null: return "null";
    case ValKind::Bool: return p_.b ? "true" : "false";
    case ValKind::Int: return std::to_string(p_.i);
    case ValKind::Uint: return std::to_string(p_.u);
    case ValKind::Double: return format_double(p_.d);
    case ValKind::String:
    case ValKind::Bytes:
    case ValKind::Type: return std::string(text());
    case ValKind::Timestamp: return as_timestamp().to_rfc3339();
    case ValKind::Duration: return core::format_duration_seconds(as_duration());
    case ValKind::Opaque: return opaque().to_string();
    case ValKind::Error: return "error: " + error_message();
    case ValKind::List: {
      std::string out = "[";
      for (std::size_t i = 0, n = size(); i < n; ++i) {
        if (i > 0) out += ", ";
        out += list_at(i).debug_string();
      }
      return out + "]";
    }
    case ValKind::Map: {
      std::vector<std::pair<std::string, std::string>> parts;
      for (std::size_t i = 0, n = size(); i < n; ++i) {
        parts.emplace_back(map_key_at(i).debug_string(), map_value_at(i).debug_string());
      }
      std::sort(parts.begin(), parts.end());
      std::string out = "{";
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) out += ", ";
        out += parts[i].first + ": " + parts[i].second;
      }
      return out + "}";
    }
  }
  return {};
}

core::Value Val::to_value() const {
  switch (kind_) {
    case ValKind::Null: return core::Value();
    case ValKind::Bool: return core::Value(p_.b);
    case ValKind::Int: return core::Value(static_cast<long long>(p_.i));
    case ValKind::Uint: return core::Value(static_cast<unsigned long long>(p_.u));
    case ValKind::Double: return core::Value(p_.d);
    case ValKind::String: return core::Value(std::string(text()));
    case ValKind::Bytes: return core::Value(core::Bytes{std::string(text())});
    case ValKind::Type:
    case ValKind::Timestamp:
    case ValKind::Duration:
    case ValKind::Opaque: return core::Value(debug_string());
    case ValKind::Error: throw core::InvalidInput(error_message());
    case ValKind::List: {
      if (core_) return core::Value(*p_.clist);
      core::List out;
      out.reserve(size());
      for (const Val& v : p_.list->items) out.push_back(v.to_value());
      return core::Value(std::move(out));
    }
    case ValKind::Map: {
      if (core_) return core::Value(*p_.cmap);
      core::Map out;
      out.reserve(size());
      for (const auto& [k, v] : p_.map->entries) {
        out.append_unsorted(k.kind() == ValKind::String ? std::string(k.text()) : k.debug_string(),
                            v.to_value());
      }
      out.seal();
      return core::Value(std::move(out));
    }
  }
  return core::Value();
}

namespace {

// Compares an int with a uint exactly.
int cmp_int_uint(std::int64_t a, std::uint64_t b) noexcept {
  if (a < 0) return -1;
  auto ua = static_cast<std::uint64_t>(a);
  return ua < b ? -1 : (ua > b ? 1 : 0);
}

// Int/uint against double compare as doubles, as cel-go does (the conformance suite
// expects 9223372036854775807 < 9223372036854775808.0 to be false).
int cmp_doubles(double x, double y) noexcept {
  if (std::isnan(x) || std::isnan(y)) return 2;
  return x < y ? -1 : (x > y ? 1 : 0);
}

int cmp_int_double(std::int64_t a, double b) noexcept {
  return cmp_doubles(static_cast<double>(a), b);
}

int cmp_uint_double(std::uint64_t a, double b) noexcept {
  return cmp_doubles(static_cast<double>(a), b);
}

int cmp_numbers(const Val& a, const Val& b) noexcept {
  switch (a.kind()) {
    case ValKind::Int:
      switch (b.kind()) {
        case ValKind::Int: return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int());
        case ValKind::Uint: return cmp_int_uint(a.as_int(), b.as_uint());
        default: return cmp_int_double(a.as_int(), b.as_double());
      }
    case ValKind::Uint:
      switch (b.kind()) {
        case ValKind::Int: return -cmp_int_uint(b.as_int(), a.as_uint());
        case ValKind::Uint: return a.as_uint() < b.as_uint() ? -1 : (a.as_uint() > b.as_uint());
        default: return cmp_uint_double(a.as_uint(), b.as_double());
      }
    default:
      switch (b.kind()) {
        case ValKind::Int: {
          int c = cmp_int_double(b.as_int(), a.as_double());
          return c == 2 ? 2 : -c;
        }
        case ValKind::Uint: {
          int c = cmp_uint_double(b.as_uint(), a.as_double());
          return c == 2 ? 2 : -c;
        }
        default: {
          double x = a.as_double(), y = b.as_double();
          if (std::isnan(x) || std::isnan(y)) return 2;
          return x < y ? -1 : (x > y ? 1 : 0);
        }
      }
  }
}

template <typename T>
int three_way(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

}  // namespace

int compare(const Val& a, const Val& b) {
  if (a.is_number() && b.is_number()) return cmp_numbers(a, b);
  if (a.kind() != b.kind()) return 3;
  switch (a.kind()) {
    case ValKind::Bool: return three_way(a.as_bool(), b.as_bool());
    case ValKind::String:
    case ValKind::Bytes: {
      int c = a.text().compare(b.text());
      return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    case ValKind::Timestamp:
    case ValKind::Duration: {
      if (a.seconds() != b.seconds()) return three_way(a.seconds(), b.seconds());
      return three_way(a.nanos(), b.nanos());
    }
    case ValKind::Opaque:
      if (a.opaque().type_name() != b.opaque().type_name()) return 3;
      return a.opaque().compare(b.opaque());
    default: return 3;
  }
}

bool equals(const Val& a, const Val& b) {
  if (a.is_number() && b.is_number()) return cmp_numbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValKind::Null: return true;
    case ValKind::Bool: return a.as_bool() == b.as_bool();
    case ValKind::String:
    case ValKind::Bytes:
    case ValKind::Type: return a.text() == b.text();
    case ValKind::Timestamp:
    case ValKind::Duration: return a.seconds() == b.seconds() && a.nanos() == b.nanos();
    case ValKind::Opaque:
      return a.opaque().type_name() == b.opaque().type_name() &&
             a.opaque().compare(b.opaque()) == 0;
    case ValKind::List: {
      std::size_t n = a.size();
      if (n != b.size()) return false;
      for (std::size_t i = 0; i < n; ++i) {
        if (!equals(a.list_at(i), b.list_at(i))) return false;
      }
      return true;
    }
    case ValKind::Map: {
      std::size_t n = a.size();
      if (n != b.size()) return false;
      for (std::size_t i = 0; i < n; ++i) {
        Val other;
        if (!b.map_find(a.map_key_at(i), &other)) return false;
        if (!equals(a.map_value_at(i), other)) return false;
      }
      return true;
    }
    default: return false;
  }
}

bool is_valid_map_key(const Val& k) noexcept {
  switch (k.kind()) {
    case ValKind::Bool:
    case ValKind::Int:
    case ValKind::Uint:
    case ValKind::String: return true;
    default: return false;
  }
}

}  // namespace gpufleet::cel
