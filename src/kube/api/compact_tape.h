// The byte format of a CompactObject's tape, shared by its two writers (CompactObject::encode
// from a core::Value, decode_compact_json straight from JSON text) and its reader. Internal to
// kube/api: nothing outside reads tapes except through CompactView.
//
// Every value starts with a tag byte. Integers are LEB128 varints (signed ones zigzag-coded).
//   Null | False | True
//   Int varint | Uint varint | Double 8 bytes
//   Interned id | Inline len bytes | Bytes len bytes
//   List count body_len elements...      (body_len lets readers skip a whole subtree)
//   Map count body_len (key value)...    (keys sorted bytewise, as in core::Map; a key is id<<1,
//                                         or len<<1|1 followed by the bytes when not interned)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpufleet::kube::tape {

enum Tag : std::uint8_t {
  kNull,
  kFalse,
  kTrue,
  kInt,
  kUint,
  kDouble,
  kInterned,
  kInline,
  kBytes,
  kList,
  kMap
};

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Writes the varint into buf (at least 10 bytes); returns its length.
inline std::size_t put_varint(char* buf, std::uint64_t v) noexcept {
  std::size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  return n;
}

inline std::uint64_t get_varint(const std::uint8_t*& p) noexcept {
  std::uint64_t v = 0;
  int shift = 0;
  for (;;) {
    std::uint8_t b = *p++;
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
    shift += 7;
  }
}

inline std::uint64_t zigzag(std::int64_t i) noexcept {
  return (static_cast<std::uint64_t>(i) << 1) ^ static_cast<std::uint64_t>(i >> 63);
}

// Values under these keys are unique per object (or per update): interning them would only
// fill the table. They are stored inline.
bool unique_valued_key(std::string_view key) noexcept;

}  // namespace gpufleet::kube::tape
