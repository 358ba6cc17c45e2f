#include "core/text.h"

#include <charconv>

#include <fnmatch.h>

#include <algorithm>
#include <vector>

namespace gpufleet::core {

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  if (s.size() > 80) out += "...";
  return out + '"';
}

std::string_view trim(std::string_view s) noexcept {
  constexpr std::string_view kSpace = " \t\r\n";
  const std::size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

std::string_view trim_end(std::string_view s) noexcept {
  const std::size_t last = s.find_last_not_of(" \t\r\n");
  return last == std::string_view::npos ? std::string_view{} : s.substr(0, last + 1);
}

std::optional<std::int64_t> parse_int(std::string_view s) noexcept {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> split_trimmed(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    auto at = line.find(sep);
    out.push_back(trim(line.substr(0, at)));
    if (at == std::string_view::npos) return out;
    line.remove_prefix(at + 1);
  }
}

bool glob_match(std::string_view pattern, std::string_view text) {
  return ::fnmatch(std::string(pattern).c_str(), std::string(text).c_str(), 0) == 0;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the swap of adjacent characters looks two back.
  std::vector<std::size_t> two(b.size() + 1), one(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) one[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({one[j] + 1, cur[j - 1] + 1, one[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], two[j - 2] + 1);
      }
    }
    std::swap(two, one);
    std::swap(one, cur);
  }
  return one[b.size()];
}

bool is_near_miss(std::string_view word, std::string_view candidate) {
  // Lengths alone bound the distance from below: skip far candidates without the table.
  const std::size_t longer = std::max(word.size(), candidate.size());
  const std::size_t limit = longer <= 4 ? 1 : longer <= 8 ? 2 : 3;
  const std::size_t gap = word.size() > candidate.size() ? word.size() - candidate.size()
                                                         : candidate.size() - word.size();
  return gap <= limit && edit_distance(word, candidate) <= limit;
}

}  // namespace gpufleet::core
