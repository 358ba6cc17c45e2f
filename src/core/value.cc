#include "core/value.h"

#include <algorithm>
#include <cstddef>

#include "core/errors.h"

namespace gpufleet::core {

std::string_view kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Uint: return "uint";
    case Kind::Double: return "double";
    case Kind::String: return "string";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Map: return "map";
  }
  return "unknown";
}

namespace {

bool key_less(const MapEntry& e, std::string_view key) { return e.key < key; }

[[noreturn]] void wrong_kind(Kind want, Kind got) {
  throw TypeError("expected a " + std::string(kind_name(want)) + " but found a " +
                  std::string(kind_name(got)));
}

}  // namespace

// ---- Map --------------------------------------------------------------------------------

const Value* Map::find(std::string_view key) const noexcept {
  // Small maps (most Kubernetes objects) are faster to scan than to bisect.
  if (entries_.size() <= 8) {
    for (const auto& e : entries_) {
      if (e.key == key) return &e.value;
    }
    return nullptr;
  }
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key, key_less);
  return (it != entries_.end() && it->key == key) ? &it->value : nullptr;
}

Value* Map::find(std::string_view key) noexcept {
  return const_cast<Value*>(static_cast<const Map*>(this)->find(key));
}

Value& Map::operator[](std::string_view key) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key, key_less);
  if (it != entries_.end() && it->key == key) return it->value;
  return entries_.insert(it, MapEntry{std::string(key), Value()})->value;
}

Value& Map::set(std::string_view key, Value v) {
  Value& slot = (*this)[key];
  slot = std::move(v);
  return slot;
}

bool Map::erase(std::string_view key) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key, key_less);
  if (it == entries_.end() || it->key != key) return false;
  entries_.erase(it);
  return true;
}

void Map::append_unsorted(std::string key, Value v) {
  entries_.push_back(MapEntry{std::move(key), std::move(v)});
}

std::optional<std::string> Map::seal() {
  if (entries_.size() < 2) return std::nullopt;
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const MapEntry& a, const MapEntry& b) { return a.key < b.key; });
  std::optional<std::string> duplicate;
  // Keep the last of equal keys (the stable sort keeps input order among equals).
  std::size_t out = 0;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (i + 1 < entries_.size() && entries_[i].key == entries_[i + 1].key) {
      if (!duplicate) duplicate = entries_[i].key;
      continue;
    }
    if (out != i) entries_[out] = std::move(entries_[i]);
    ++out;
  }
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(out), entries_.end());
  return duplicate;
}

bool operator==(const Map& a, const Map& b) { return a.entries_ == b.entries_; }

// ---- Value ------------------------------------------------------------------------------

bool Value::as_bool() const {
  if (auto* p = std::get_if<bool>(&v_)) return *p;
  wrong_kind(Kind::Bool, kind());
}
std::int64_t Value::as_int() const {
  if (auto* p = std::get_if<std::int64_t>(&v_)) return *p;
  wrong_kind(Kind::Int, kind());
}
std::uint64_t Value::as_uint() const {
  if (auto* p = std::get_if<std::uint64_t>(&v_)) return *p;
  wrong_kind(Kind::Uint, kind());
}
double Value::as_double() const {
  switch (kind()) {
    case Kind::Double: return std::get<double>(v_);
    case Kind::Int: return static_cast<double>(std::get<std::int64_t>(v_));
    case Kind::Uint: return static_cast<double>(std::get<std::uint64_t>(v_));
    default: wrong_kind(Kind::Double, kind());
  }
}
const std::string& Value::as_string() const {
  if (auto* p = std::get_if<std::string>(&v_)) return *p;
  wrong_kind(Kind::String, kind());
}
std::string& Value::as_string() {
  if (auto* p = std::get_if<std::string>(&v_)) return *p;
  wrong_kind(Kind::String, kind());
}
const Bytes& Value::as_bytes() const {
  if (auto* p = std::get_if<Bytes>(&v_)) return *p;
  wrong_kind(Kind::Bytes, kind());
}
const List& Value::as_list() const {
  if (auto* p = std::get_if<List>(&v_)) return *p;
  wrong_kind(Kind::List, kind());
}
List& Value::as_list() {
  if (auto* p = std::get_if<List>(&v_)) return *p;
  wrong_kind(Kind::List, kind());
}
const Map& Value::as_map() const {
  if (auto* p = std::get_if<Map>(&v_)) return *p;
  wrong_kind(Kind::Map, kind());
}
Map& Value::as_map() {
  if (auto* p = std::get_if<Map>(&v_)) return *p;
  wrong_kind(Kind::Map, kind());
}

const Value* Value::find(std::string_view key) const noexcept {
  const Map* m = if_map();
  return m ? m->find(key) : nullptr;
}

Value* Value::find(std::string_view key) noexcept {
  Map* m = if_map();
  return m ? m->find(key) : nullptr;
}

const Value* Value::get(std::initializer_list<std::string_view> path) const noexcept {
  const Value* cur = this;
  for (std::string_view key : path) {
    cur = cur->find(key);
    if (cur == nullptr) return nullptr;
  }
  return cur;
}

std::string_view Value::get_string(std::initializer_list<std::string_view> path,
                                   std::string_view fallback) const noexcept {
  const Value* v = get(path);
  const std::string* s = v ? v->if_string() : nullptr;
  return s ? std::string_view(*s) : fallback;
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) v_ = Map{};
  return as_map()[key];
}

const Value& Value::operator[](std::size_t i) const {
  const List& l = as_list();
  if (i >= l.size()) {
    std::string msg = "list index ";
    msg.append(std::to_string(i)).append(" out of range (size ");
    msg.append(std::to_string(l.size())).append(")");
    throw TypeError(msg);
  }
  return l[i];
}

std::size_t Value::size() const noexcept {
  switch (kind()) {
    case Kind::List: return std::get<List>(v_).size();
    case Kind::Map: return std::get<Map>(v_).size();
    case Kind::String: return std::get<std::string>(v_).size();
    case Kind::Bytes: return std::get<Bytes>(v_).data.size();
    default: return 0;
  }
}

Value& Value::push_back(Value v) {
  if (is_null()) v_ = List{};
  List& l = as_list();
  l.push_back(std::move(v));
  return l.back();
}

bool operator==(const Value& a, const Value& b) { return a.v_ == b.v_; }

// ---- errors -----------------------------------------------------------------------------

namespace {
std::string format_parse_error(const std::string& source, std::size_t line, std::size_t column,
                               const std::string& what) {
  std::string out = source.empty() ? std::string("<input>") : source;
  if (line > 0) {
    out.push_back(':');
    out.append(std::to_string(line));
    if (column > 0) {
      out.push_back(':');
      out.append(std::to_string(column));
    }
  }
  out += ": ";
  out += what;
  return out;
}
}  // namespace

ParseError::ParseError(std::string source, std::size_t line, std::size_t column,
                       const std::string& what)
    : InvalidInput(format_parse_error(source, line, column, what)),
      source_(std::move(source)),
      line_(line),
      column_(column),
      reason_(what) {}

}  // namespace gpufleet::core
