// The compact cached form of an object: one flat byte tape per object instead of a tree of
// std::string + std::variant + map entries, with map keys and repeated values (label keys and
// values that thousands of Nodes share, condition types, quantities) interned once per process.
//
// Why: a core::Value Node costs ~72 B per map entry plus a heap block per long string; a
// cached GPU Node with 33 labels came to 6.5-12 KB. The tape keeps the same content in a
// fraction of that (figures in docs/performance.md, "Informer cache: compact form"), and reads
// stay cheap: path lookups walk the tape in place, and to_value() rebuilds a core::Value when a
// caller needs the old API.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/value.h"

namespace gpufleet::kube {

// A process-wide, append-only table of strings, each stored once. Thread-safe: intern() takes a
// shared lock on a hit and an exclusive one on a miss; view() takes no lock (an id is only ever
// learnt through the tape of an object published under some lock, which orders the reads).
// Bounded: past max_strings or max_bytes, intern() returns kNone and callers store the string
// inline, so a stream of unique values can never grow it without limit.
class StringInterner {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffU;
  static constexpr std::size_t kMaxLength = 256;  // longer strings are never interned

  explicit StringInterner(std::size_t max_strings = std::size_t{1} << 18,
                          std::size_t max_bytes = std::size_t{16} << 20);
  ~StringInterner();
  StringInterner(const StringInterner&) = delete;
  StringInterner& operator=(const StringInterner&) = delete;

  // The id of `s`, adding it when new; kNone when `s` is too long or the table is full.
  std::uint32_t intern(std::string_view s);
  // intern() behind a small per-thread cache of recent strings: no lock and no table lookup on
  // a hit. Decoders look up the same few hundred keys and label values for every object.
  std::uint32_t intern_cached(std::string_view s);
  [[nodiscard]] std::string_view view(std::uint32_t id) const noexcept;

  [[nodiscard]] std::size_t size() const;
  // Heap bytes held by the table (strings, index and hash map), for memory accounting.
  [[nodiscard]] std::size_t heap_bytes() const;

  // The interner every cache of the process shares (label keys repeat across resources too).
  static StringInterner& shared();

 private:
  struct Entry {
    const char* data;
    std::uint32_t size;
  };
  static constexpr std::size_t kChunkEntries = 4096;
  static constexpr std::size_t kArenaBlock = 64 * 1024;

  const std::size_t max_strings_;
  const std::size_t max_bytes_;
  const std::uint64_t uid_;  // tells per-thread caches apart (an address may be reused)
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string_view, std::uint32_t> ids_;  // views into arena_
  std::vector<std::unique_ptr<char[]>> arena_;
  std::size_t arena_used_ = kArenaBlock;  // bytes used in arena_.back()
  std::size_t bytes_ = 0;
  std::uint32_t next_ = 0;
  // id -> string, in fixed chunks so that view() never races with a reallocation.
  std::array<std::atomic<Entry*>, 1024> chunks_{};
};

class CompactObject;

// A read-only view of one value inside a compact object's tape. Cheap to copy; valid while the
// CompactObject lives.
class CompactView {
 public:
  [[nodiscard]] core::Kind kind() const noexcept;
  [[nodiscard]] bool is_null() const noexcept { return kind() == core::Kind::Null; }
  [[nodiscard]] bool is_map() const noexcept { return kind() == core::Kind::Map; }
  [[nodiscard]] bool is_list() const noexcept { return kind() == core::Kind::List; }
  [[nodiscard]] bool is_string() const noexcept { return kind() == core::Kind::String; }

  // Scalars; nullopt when the kind differs.
  [[nodiscard]] std::optional<std::string_view> string() const noexcept;
  [[nodiscard]] std::optional<std::int64_t> int_value() const noexcept;
  [[nodiscard]] std::optional<bool> bool_value() const noexcept;
  // Elements of a list or entries of a map; 0 otherwise.
  [[nodiscard]] std::size_t size() const noexcept;

  // Map member; nullopt when not a map or absent.
  [[nodiscard]] std::optional<CompactView> find(std::string_view key) const noexcept;
  // Follows map keys: obj.get({"metadata", "name"}).
  [[nodiscard]] std::optional<CompactView> get(
      std::initializer_list<std::string_view> path) const noexcept;
  // String at a path, or `fallback`.
  [[nodiscard]] std::string_view get_string(std::initializer_list<std::string_view> path,
                                            std::string_view fallback = {}) const noexcept;

  // Calls fn(key, value) for each map entry in key order (no-op for other kinds).
  void for_each_entry(const std::function<void(std::string_view, CompactView)>& fn) const;
  // Calls fn(element) for each list element (no-op for other kinds).
  void for_each_element(const std::function<void(CompactView)>& fn) const;

  // Rebuilds this value as a core::Value.
  [[nodiscard]] core::Value to_value() const;

 private:
  friend class CompactObject;
  CompactView(const StringInterner* interner, const std::uint8_t* p) noexcept
      : interner_(interner), p_(p) {}
  const StringInterner* interner_;
  const std::uint8_t* p_;  // at the value's tag byte
};

// An immutable object in compact form. Build with encode(); share as CompactPtr.
class CompactObject {
 public:
  // Encodes `v`. Map keys, and string values short enough and not known to be unique per
  // object (names, uids, resourceVersions, timestamps, addresses), go through `interner`.
  static std::shared_ptr<const CompactObject> encode(
      const core::Value& v, StringInterner& interner = StringInterner::shared());

  [[nodiscard]] CompactView root() const noexcept { return {interner_, tape_.get()}; }
  [[nodiscard]] core::Value to_value() const { return root().to_value(); }
  [[nodiscard]] std::size_t tape_bytes() const noexcept { return size_; }
  // The tape itself, to compare two objects' cached forms byte for byte.
  [[nodiscard]] std::string_view tape() const noexcept {
    return {reinterpret_cast<const char*>(tape_.get()), size_};
  }

  // Shortcuts for the metadata every cache needs.
  [[nodiscard]] std::string_view name() const noexcept {
    return root().get_string({"metadata", "name"});
  }
  [[nodiscard]] std::string_view namespace_() const noexcept {
    return root().get_string({"metadata", "namespace"});
  }
  [[nodiscard]] std::string_view resource_version() const noexcept {
    return root().get_string({"metadata", "resourceVersion"});
  }

  CompactObject(const StringInterner* interner, std::unique_ptr<std::uint8_t[]> tape,
                std::uint32_t size) noexcept
      : interner_(interner), tape_(std::move(tape)), size_(size) {}

 private:
  const StringInterner* interner_;
  std::unique_ptr<std::uint8_t[]> tape_;
  std::uint32_t size_;
};

using CompactPtr = std::shared_ptr<const CompactObject>;

}  // namespace gpufleet::kube
