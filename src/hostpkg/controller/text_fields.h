// The controller's two small text helpers that src/core does not have: a whole integer read
// from an annotation or a --set value, and a list joined for a message with at most `max` of
// its items named (core::join does the joining).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/text.h"

namespace gpufleet::hostpkg::detail {

using core::parse_int;

// "a, b, c", or "a, b, ... (7 in all)" beyond `max` items.
inline std::string join_first(const std::vector<std::string>& v, std::string_view sep,
                              std::size_t max = 20) {
  std::string out = core::join(std::span(v).first(std::min(max, v.size())), sep);
  if (v.size() > max) out += std::string(sep) + "... (" + std::to_string(v.size()) + " in all)";
  return out;
}

}  // namespace gpufleet::hostpkg::detail
