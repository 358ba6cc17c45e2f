// UTF-8: validation and repair for text that must reach logs, metrics or JSON intact, and
// code point access for CEL's string functions (which count and index by code point).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::core {

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF).
bool is_valid_utf8(std::string_view s) noexcept;

// Appends `s` with every ill-formed byte sequence replaced by U+FFFD, so the output is
// always valid UTF-8.
void append_valid_utf8(std::string& out, std::string_view s);

// Code points in `s`, counted by lead bytes (for valid UTF-8, which CEL strings are).
std::size_t code_point_count(std::string_view s) noexcept;

// Decodes all code points; every byte of an ill-formed sequence decodes as U+FFFD.
std::vector<std::uint32_t> decode_utf8(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (<= U+10FFFF).
void append_utf8(std::string& out, std::uint32_t cp);

// Byte offset of code point `index` (index <= count); npos when beyond the end.
std::size_t byte_offset_of(std::string_view s, std::size_t index) noexcept;

}  // namespace gpufleet::core
