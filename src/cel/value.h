// The value a CEL expression computes with. A Val either owns a small scalar, borrows a
// pointer into a core::Value (strings, lists and maps of bound JSON/YAML data are walked in
// place, never copied), borrows program constants, or shares a reference-counted object that
// the evaluation built (a concatenated string, a list from `map`, an error).
//
// Lifetime: a Val that borrows (bound data or program constants) must not outlive the
// core::Value it was read from or the Program that produced it. Call to_value() to keep a
// result independently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/time.h"
#include "core/value.h"

namespace gpufleet::cel {

enum class ValKind : std::uint8_t {
  Null,
  Bool,
  Int,
  Uint,
  Double,
  String,
  Bytes,
  List,
  Map,
  Timestamp,
  Duration,
  Type,
  Opaque,  // quantity, semver: extension types with their own operations
  Error,
};

class Val;

// Base of the reference-counted objects an evaluation creates.
struct Obj {
  mutable std::atomic<std::uint32_t> refs{1};
  virtual ~Obj() = default;
};

struct StrObj final : Obj {
  explicit StrObj(std::string v) : s(std::move(v)) {}
  std::string s;
};

struct ErrObj final : Obj {
  explicit ErrObj(std::string m) : message(std::move(m)) {}
  std::string message;
};

// An extension value (quantity, semver). Equality and ordering are within one type name.
struct OpaqueObj : Obj {
  virtual std::string_view type_name() const noexcept = 0;
  // <0, 0, >0; only called for two objects of the same type_name.
  virtual int compare(const OpaqueObj& other) const = 0;
  virtual std::string to_string() const = 0;
};

struct ListObj;
struct MapObj;

class Val {
 public:
  Val() noexcept : kind_(ValKind::Null) { p_.i = 0; }
  static Val null() noexcept { return Val(); }
  static Val boolean(bool b) noexcept {
    Val v(ValKind::Bool);
    v.p_.b = b;
    return v;
  }
  static Val integer(std::int64_t i) noexcept {
    Val v(ValKind::Int);
    v.p_.i = i;
    return v;
  }
  static Val uinteger(std::uint64_t u) noexcept {
    Val v(ValKind::Uint);
    v.p_.u = u;
    return v;
  }
  static Val dbl(double d) noexcept {
    Val v(ValKind::Double);
    v.p_.d = d;
    return v;
  }
  // Borrowed text: the caller keeps the characters alive for as long as the Val lives.
  static Val string_view(std::string_view s) noexcept { return text(ValKind::String, s); }
  static Val bytes_view(std::string_view s) noexcept { return text(ValKind::Bytes, s); }
  static Val string(std::string s) { return owned_text(ValKind::String, std::move(s)); }
  static Val bytes(std::string s) { return owned_text(ValKind::Bytes, std::move(s)); }
  static Val list(std::vector<Val> items);
  // Entries must already have distinct keys (see make_map in the evaluator for checks).
  static Val map(std::vector<std::pair<Val, Val>> entries);
  static Val timestamp(std::int64_t seconds, std::int32_t nanos) noexcept {
    Val v(ValKind::Timestamp);
    v.p_.t = {seconds, nanos};
    return v;
  }
  static Val duration(std::int64_t seconds, std::int32_t nanos) noexcept {
    Val v(ValKind::Duration);
    v.p_.t = {seconds, nanos};
    return v;
  }
  static Val timestamp(const core::Timestamp& t) noexcept { return timestamp(t.seconds, t.nanos); }
  // Seconds and nanoseconds of the same sign, as CEL's duration keeps them.
  static Val duration(std::chrono::nanoseconds d) noexcept {
    return duration(d.count() / 1'000'000'000,
                    static_cast<std::int32_t>(d.count() % 1'000'000'000));
  }
  // `name` must be static (the type names the library knows).
  static Val type(std::string_view name) noexcept { return text(ValKind::Type, name); }
  static Val error(std::string message);
  static Val opaque(OpaqueObj* adopted) noexcept;  // takes the initial reference
  // A view of bound data: strings/bytes/lists/maps borrow, scalars are copied.
  static Val from_core(const core::Value& v) noexcept;

  Val(const Val& o) noexcept
      : kind_(o.kind_), core_(o.core_), program_(o.program_), p_(o.p_), owner_(o.owner_) {
    if (owner_ != nullptr) owner_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  Val(Val&& o) noexcept
      : kind_(o.kind_), core_(o.core_), program_(o.program_), p_(o.p_), owner_(o.owner_) {
    o.owner_ = nullptr;
  }
  Val& operator=(const Val& o) noexcept {
    if (this != &o) {
      Val copy(o);
      swap(copy);
    }
    return *this;
  }
  Val& operator=(Val&& o) noexcept {
    Val moved(std::move(o));
    swap(moved);
    return *this;
  }
  ~Val() { release(); }

  void swap(Val& o) noexcept {
    std::swap(kind_, o.kind_);
    std::swap(core_, o.core_);
    std::swap(program_, o.program_);
    std::swap(p_, o.p_);
    std::swap(owner_, o.owner_);
  }

  // A copy that does not take a reference: valid while this Val's storage lives.
  [[nodiscard]] Val borrowed() const noexcept {
    Val v(kind_);
    v.core_ = core_;
    v.program_ = program_;
    v.p_ = p_;
    return v;
  }
  // A borrowed copy of a compiled constant, marked so that detach() can copy it out.
  [[nodiscard]] Val program_view() const noexcept {
    Val v = borrowed();
    v.program_ = true;
    return v;
  }
  // A copy that borrows nothing from a Program (it may still borrow bound core::Values):
  // what Program::evaluate returns, so results outlive the Program.
  [[nodiscard]] Val detach() const;

  [[nodiscard]] ValKind kind() const noexcept { return kind_; }
  [[nodiscard]] bool is_error() const noexcept { return kind_ == ValKind::Error; }
  [[nodiscard]] bool from_program() const noexcept { return program_; }
  [[nodiscard]] bool is_core_view() const noexcept { return core_; }
  [[nodiscard]] bool is_bool() const noexcept { return kind_ == ValKind::Bool; }
  [[nodiscard]] bool is_number() const noexcept {
    return kind_ == ValKind::Int || kind_ == ValKind::Uint || kind_ == ValKind::Double;
  }
  [[nodiscard]] bool as_bool() const noexcept { return p_.b; }
  [[nodiscard]] std::int64_t as_int() const noexcept { return p_.i; }
  [[nodiscard]] std::uint64_t as_uint() const noexcept { return p_.u; }
  [[nodiscard]] double as_double() const noexcept { return p_.d; }
  // Text of a String, Bytes or Type.
  [[nodiscard]] std::string_view text() const noexcept { return {p_.s.p, p_.s.n}; }
  [[nodiscard]] std::int64_t seconds() const noexcept { return p_.t.seconds; }
  [[nodiscard]] std::int32_t nanos() const noexcept { return p_.t.nanos; }
  // A Timestamp as core's type; a Duration as nanoseconds (CEL durations fit int64 nanos).
  [[nodiscard]] core::Timestamp as_timestamp() const noexcept { return {p_.t.seconds, p_.t.nanos}; }
  [[nodiscard]] std::chrono::nanoseconds as_duration() const noexcept {
    return std::chrono::nanoseconds(p_.t.seconds * 1'000'000'000 + p_.t.nanos);
  }
  [[nodiscard]] const std::string& error_message() const noexcept;
  [[nodiscard]] const OpaqueObj& opaque() const noexcept { return *p_.opaque; }

  // Lists and maps: size and element access work for both bound data and built values.
  [[nodiscard]] std::size_t size() const noexcept;
  // i < size(); the element shares ownership with this list.
  [[nodiscard]] Val list_at(std::size_t i) const;
  // Map lookup by CEL key equality (1 == 1u == 1.0). Returns false when absent.
  bool map_find(const Val& key, Val* out) const;
  bool map_find_string(std::string_view key, Val* out) const;
  // The i-th key of a map (iteration order: sorted for bound data, insertion otherwise).
  [[nodiscard]] Val map_key_at(std::size_t i) const;
  [[nodiscard]] Val map_value_at(std::size_t i) const;

  // The type name CEL prints for this value ("int", "google.protobuf.Timestamp", ...).
  [[nodiscard]] std::string_view type_name() const noexcept;

  // A self-contained copy as core::Value. Timestamps/durations become RFC 3339/"1.5s"
  // strings, types their names, maps with non-string keys get their keys printed.
  // Errors throw core::InvalidInput with the error message.
  [[nodiscard]] core::Value to_value() const;
  // Human-readable rendering as the strings extension prints values ("[1, 2]", "{a: 1}").
  [[nodiscard]] std::string debug_string() const;

 private:
  explicit Val(ValKind k) noexcept : kind_(k) { p_.i = 0; }
  static Val text(ValKind k, std::string_view s) noexcept {
    Val v(k);
    v.p_.s = {s.data(), s.size()};
    return v;
  }
  static Val owned_text(ValKind k, std::string s);
  void release() noexcept {
    if (owner_ != nullptr && owner_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete owner_;
    }
  }

  struct Str {
    const char* p;
    std::size_t n;
  };
  struct Time {
    std::int64_t seconds;
    std::int32_t nanos;
  };
  union Payload {
    bool b;
    std::int64_t i;
    std::uint64_t u;
    double d;
    Str s;
    Time t;
    const core::List* clist;
    const core::Map* cmap;
    const ListObj* list;
    const MapObj* map;
    const OpaqueObj* opaque;
    const ErrObj* error;
  };

  ValKind kind_;
  bool core_ = false;     // list/map payload points into a core::Value
  bool program_ = false;  // borrowed from a Program's constants
  Payload p_;
  const Obj* owner_ = nullptr;

  friend struct ValAccess;
};

struct ListObj final : Obj {
  std::vector<Val> items;
};

struct MapObj final : Obj {
  std::vector<std::pair<Val, Val>> entries;
};

// CEL equality: numbers compare across int/uint/double, lists and maps element-wise,
// values of different kinds are unequal. Errors are handled by the caller.
bool equals(const Val& a, const Val& b);
// Ordering of two values of comparable kinds: -1, 0, 1; 2 when unordered (NaN), 3 when the
// kinds have no ordering (the caller reports no_matching_overload).
int compare(const Val& a, const Val& b);

// Numbers that are mathematically equal as map keys/list elements hash alike; used when
// building maps so that duplicates are caught.
bool is_valid_map_key(const Val& k) noexcept;

}  // namespace gpufleet::cel
