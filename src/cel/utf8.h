// UTF-8 helpers: CEL string functions count and index by code point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::cel {

bool valid_utf8(std::string_view s) noexcept;
std::size_t code_point_count(std::string_view s) noexcept;
// Decodes all code points (invalid bytes decode as U+FFFD).
std::vector<std::uint32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, std::uint32_t cp);
// Byte offset of code point `index` (index <= count); npos when beyond the end.
std::size_t byte_offset_of(std::string_view s, std::size_t index) noexcept;

}  // namespace gpufleet::cel
