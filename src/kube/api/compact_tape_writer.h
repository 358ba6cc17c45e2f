// The writing half both compact decoders share (compact_json.cc from JSON text,
// compact_protobuf.cc from protobuf): a map's entries are written in arrival order, then put
// into key order in place; counts and body lengths go in front of bodies; keys and strings
// are interned. Internal to kube/api.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "core/input_limits.h"
#include "kube/api/compact.h"
#include "kube/api/compact_tape.h"

namespace gpufleet::kube::tape {

// `Decoder` gives each decoder its own per-thread buffers: the protobuf decoder runs the JSON
// one inside it (managedFields' FieldsV1 is JSON text), and the two must not share a map's
// pending entries.
template <class Decoder>
class TapeWriterBase {
 public:
  [[noreturn]] void fail(const std::string& what) const {
    throw core::ParseError(std::string(source_), 0, 0, what);
  }

 protected:
  TapeWriterBase(StringInterner& interner, const core::InputLimits& limits, std::string_view source,
                 std::string& out)
      : interner_(interner), limits_(limits), source_(source), out_(out) {
    entries_.clear();
  }

  struct Entry {
    std::string_view key;
    std::uint32_t begin;  // of the key record, relative to the map's body
    std::uint32_t end;
  };

  // Rewrites the map body at `body` (entries_[first..]) in key order; duplicate keys are an
  // error, as in core::parse_json.
  void sort_entries(std::size_t body, std::size_t first) {
    auto begin = entries_.begin() + static_cast<std::ptrdiff_t>(first);
    std::sort(begin, entries_.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
    for (auto it = begin; it + 1 < entries_.end(); ++it) {
      if (it->key == (it + 1)->key) {
        fail("duplicate key \"" + std::string(it->key) +
             "\" in an object; each key may appear once");
      }
    }
    scratch_.assign(out_, body, std::string::npos);
    out_.resize(body);
    for (auto it = begin; it != entries_.end(); ++it) {
      out_.append(scratch_, it->begin, it->end - it->begin);
    }
    if (scratch_.capacity() > kKeepScratchBelow) std::string().swap(scratch_);
  }

  // Puts `count` and the body length in front of the body that starts at `body`.
  void insert_header(std::size_t body, std::size_t count) {
    char hdr[20];
    std::size_t n = put_varint(hdr, count);
    n += put_varint(hdr + n, out_.size() - body);
    out_.insert(body, hdr, n);
  }

  void key(std::string_view k) {
    std::uint32_t id = interner_.intern_cached(k);
    if (id != StringInterner::kNone) {
      put_varint(out_, std::uint64_t{id} << 1);
    } else {
      put_varint(out_, (std::uint64_t{k.size()} << 1) | 1);
      out_.append(k);
    }
  }

  void string(std::string_view s, bool intern) {
    std::uint32_t id = intern ? interner_.intern_cached(s) : StringInterner::kNone;
    if (id != StringInterner::kNone) {
      out_.push_back(static_cast<char>(kInterned));
      put_varint(out_, id);
    } else {
      out_.push_back(static_cast<char>(kInline));
      put_varint(out_, s.size());
      out_.append(s);
    }
  }

  // A huge object's scratch copy is not kept for the thread's life.
  static constexpr std::size_t kKeepScratchBelow = std::size_t{1} << 20;

  StringInterner& interner_;
  const core::InputLimits& limits_;
  std::string_view source_;
  std::string& out_;
  // Per thread and reused, so that decoding an object allocates only its tape.
  inline static thread_local std::vector<Entry> entries_;
  inline static thread_local std::string scratch_;
};

}  // namespace gpufleet::kube::tape
