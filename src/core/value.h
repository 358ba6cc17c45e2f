// One dynamic value type shared by JSON, YAML, CEL, Kubernetes objects and patches.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gpufleet::core {

enum class Kind : std::uint8_t { Null, Bool, Int, Uint, Double, String, Bytes, List, Map };

// Name of a kind for error messages ("int", "map", ...).
std::string_view kind_name(Kind k) noexcept;

class Value;
struct MapEntry;

// Raw bytes, kept apart from text so that JSON/YAML/CEL can tell them apart.
struct Bytes {
  std::string data;
  friend bool operator==(const Bytes&, const Bytes&) = default;
};

using List = std::vector<Value>;

// A map with string keys kept sorted, so that lookups are binary searches and every
// serialization is deterministic (byte-identical output for the same content).
class Map {
 public:
  using iterator = std::vector<MapEntry>::iterator;
  using const_iterator = std::vector<MapEntry>::const_iterator;

  // Special members are defined after MapEntry (clang needs the complete element type).
  Map() noexcept;
  Map(std::initializer_list<MapEntry> entries);
  Map(const Map&);
  Map(Map&&) noexcept;
  Map& operator=(const Map&);
  Map& operator=(Map&&) noexcept;
  ~Map();

  // Defined after MapEntry: clang needs the complete element type here.
  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] bool empty() const noexcept;
  const_iterator begin() const noexcept { return entries_.begin(); }
  const_iterator end() const noexcept { return entries_.end(); }
  iterator begin() noexcept { return entries_.begin(); }
  iterator end() noexcept { return entries_.end(); }

  [[nodiscard]] const Value* find(std::string_view key) const noexcept;
  [[nodiscard]] Value* find(std::string_view key) noexcept;
  [[nodiscard]] bool contains(std::string_view key) const noexcept { return find(key) != nullptr; }
  // Inserts null when the key is absent.
  Value& operator[](std::string_view key);
  Value& set(std::string_view key, Value v);
  bool erase(std::string_view key);

  // Bulk building: append in any order, then seal() once. seal() sorts and returns the
  // first duplicated key, if any (the later duplicate wins in the map).
  void append_unsorted(std::string key, Value v);
  std::optional<std::string> seal();
  void reserve(std::size_t n);

  friend bool operator==(const Map& a, const Map& b);

 private:
  std::vector<MapEntry> entries_;
};

class Value {
 public:
  Value() noexcept = default;
  Value(std::nullptr_t) noexcept {}
  Value(bool b) noexcept : v_(b) {}
  Value(int i) noexcept : v_(std::int64_t{i}) {}
  Value(long i) noexcept : v_(std::int64_t{i}) {}
  Value(long long i) noexcept : v_(std::int64_t{i}) {}
  Value(unsigned u) noexcept : v_(std::uint64_t{u}) {}
  Value(unsigned long u) noexcept : v_(std::uint64_t{u}) {}
  Value(unsigned long long u) noexcept : v_(std::uint64_t{u}) {}
  Value(double d) noexcept : v_(d) {}
  Value(std::string s) noexcept : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Bytes b) noexcept : v_(std::move(b)) {}
  Value(List l) noexcept : v_(std::move(l)) {}
  Value(Map m) noexcept : v_(std::move(m)) {}

  static Value list() { return Value(List{}); }
  static Value map() { return Value(Map{}); }

  [[nodiscard]] Kind kind() const noexcept { return static_cast<Kind>(v_.index()); }
  [[nodiscard]] bool is_null() const noexcept { return kind() == Kind::Null; }
  [[nodiscard]] bool is_bool() const noexcept { return kind() == Kind::Bool; }
  [[nodiscard]] bool is_int() const noexcept { return kind() == Kind::Int; }
  [[nodiscard]] bool is_uint() const noexcept { return kind() == Kind::Uint; }
  [[nodiscard]] bool is_double() const noexcept { return kind() == Kind::Double; }
  [[nodiscard]] bool is_number() const noexcept {
    return kind() == Kind::Int || kind() == Kind::Uint || kind() == Kind::Double;
  }
  [[nodiscard]] bool is_string() const noexcept { return kind() == Kind::String; }
  [[nodiscard]] bool is_bytes() const noexcept { return kind() == Kind::Bytes; }
  [[nodiscard]] bool is_list() const noexcept { return kind() == Kind::List; }
  [[nodiscard]] bool is_map() const noexcept { return kind() == Kind::Map; }

  // Checked accessors: throw TypeError naming the expected and actual kinds.
  [[nodiscard]] bool as_bool() const;
  [[nodiscard]] std::int64_t as_int() const;
  [[nodiscard]] std::uint64_t as_uint() const;
  [[nodiscard]] double as_double() const;  // any number kind
  [[nodiscard]] const std::string& as_string() const;
  [[nodiscard]] std::string& as_string();
  [[nodiscard]] const Bytes& as_bytes() const;
  [[nodiscard]] const List& as_list() const;
  [[nodiscard]] List& as_list();
  [[nodiscard]] const Map& as_map() const;
  [[nodiscard]] Map& as_map();

  // Unchecked pointers: nullptr when the kind differs. Cheap, for hot paths.
  [[nodiscard]] const std::string* if_string() const noexcept {
    return std::get_if<std::string>(&v_);
  }
  [[nodiscard]] const List* if_list() const noexcept { return std::get_if<List>(&v_); }
  [[nodiscard]] List* if_list() noexcept { return std::get_if<List>(&v_); }
  [[nodiscard]] const Map* if_map() const noexcept { return std::get_if<Map>(&v_); }
  [[nodiscard]] Map* if_map() noexcept { return std::get_if<Map>(&v_); }
  [[nodiscard]] const std::int64_t* if_int() const noexcept {
    return std::get_if<std::int64_t>(&v_);
  }
  [[nodiscard]] const bool* if_bool() const noexcept { return std::get_if<bool>(&v_); }

  // Map member lookup; nullptr when this is not a map or the key is absent.
  [[nodiscard]] const Value* find(std::string_view key) const noexcept;
  [[nodiscard]] Value* find(std::string_view key) noexcept;
  // Follows a path of map keys: v.get({"metadata", "name"}).
  [[nodiscard]] const Value* get(std::initializer_list<std::string_view> path) const noexcept;
  // String at a path, or `fallback` when absent or not a string.
  [[nodiscard]] std::string_view get_string(std::initializer_list<std::string_view> path,
                                            std::string_view fallback = {}) const noexcept;
  // Map member access that turns a null into an empty map and inserts missing keys.
  Value& operator[](std::string_view key);
  // List element access, checked.
  [[nodiscard]] const Value& operator[](std::size_t i) const;
  // Element count of a list, map, string or bytes; 0 otherwise.
  [[nodiscard]] std::size_t size() const noexcept;
  // Appends to a list, turning a null into an empty list.
  Value& push_back(Value v);

  // Structural equality: same kind and same content (1 and 1u and 1.0 differ).
  friend bool operator==(const Value& a, const Value& b);

 private:
  std::variant<std::monostate, bool, std::int64_t, std::uint64_t, double, std::string, Bytes, List,
               Map>
      v_;
};

struct MapEntry {
  std::string key;
  Value value;
  friend bool operator==(const MapEntry&, const MapEntry&) = default;
};

inline Map::Map() noexcept = default;
inline Map::Map(std::initializer_list<MapEntry> entries) : entries_(entries) { seal(); }
inline Map::Map(const Map&) = default;
inline Map::Map(Map&&) noexcept = default;
inline Map& Map::operator=(const Map&) = default;
inline Map& Map::operator=(Map&&) noexcept = default;
inline Map::~Map() = default;
inline std::size_t Map::size() const noexcept { return entries_.size(); }
inline bool Map::empty() const noexcept { return entries_.empty(); }
inline void Map::reserve(std::size_t n) { entries_.reserve(n); }

}  // namespace gpufleet::core
