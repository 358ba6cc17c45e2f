// Turning byte offsets into the line:column positions that error messages show.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpufleet::core {

struct TextPosition {
  std::size_t line = 0;    // 1-based; 0 = unknown
  std::size_t column = 0;  // 1-based, in bytes
};

TextPosition position_of(std::string_view text, std::size_t offset) noexcept;

// The line at `pos` followed by a caret under the column, for messages that show the spot.
std::string caret_excerpt(std::string_view text, TextPosition pos);

}  // namespace gpufleet::core
