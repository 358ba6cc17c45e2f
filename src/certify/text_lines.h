#include "core/text.h"
// Line and token helpers shared by the workload output parsers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace gpufleet::certify::detail {

// Calls f(line_number, line) for every line (1-based; "\r\n" endings accepted).
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  std::size_t number = 0;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    f(++number, line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

std::vector<std::string_view> split_ws(std::string_view line);
using core::trim;
// Whole-token numbers; nullopt on anything else (trailing text, inf, nan, empty).
std::optional<double> to_double(std::string_view s);
std::optional<std::int64_t> to_int(std::string_view s);
std::optional<std::uint64_t> to_uint(std::string_view s);
bool iequals(std::string_view a, std::string_view b);
bool icontains(std::string_view haystack, std::string_view needle);

}  // namespace gpufleet::certify::detail
