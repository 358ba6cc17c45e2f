// Small text helpers that every module needs once: quoting a value for a message, joining,
// trimming, shell-style globs and "did you mean" suggestions for near misses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::core {

// `s` in double quotes for an error message: control characters become '?', text beyond 80
// bytes is cut and marked "...", so that hostile input cannot flood or garble a log line.
std::string quoted(std::string_view s);

// The items (anything convertible to string_view) separated by `sep`.
template <class Range>
std::string join(const Range& items, std::string_view sep = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += sep;
    first = false;
    out += std::string_view(item);
  }
  return out;
}

// `s` without leading and trailing spaces, tabs, CR and LF.
std::string_view trim(std::string_view s) noexcept;
// `s` without trailing spaces, tabs, CR and LF (leading ones kept: indentation that matters).
std::string_view trim_end(std::string_view s) noexcept;

// The whole text as a base-10 integer; nullopt for anything else ("", "1x", " 1", "+1").
std::optional<std::int64_t> parse_int(std::string_view s) noexcept;

// The fields of `line` split at every `sep`, each trimmed ("a, b,,c" -> a, b, "", c): CSV
// cells of tool output (nvidia-smi --format=csv) where values never hold the separator.
std::vector<std::string_view> split_trimmed(std::string_view line, char sep = ',');

// Shell-style match through fnmatch(3): '*' (also across '/'), '?', "[a-z]", '\' escapes.
bool glob_match(std::string_view pattern, std::string_view text);

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// adjacent characters each count 1 ("gpuu" -> "gpu" is 1, "nmae" -> "name" is 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// Whether `candidate` is close enough to `word` to be what was meant: distance 1 for words
// of up to 4 characters, 2 up to 8, 3 beyond.
bool is_near_miss(std::string_view word, std::string_view candidate);

// The candidate nearest to `word` when it is a near miss; nullopt when none is (or `word` is
// one of them).
template <class Range>
std::optional<std::string> did_you_mean(std::string_view word, const Range& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& item : candidates) {
    const std::string_view c(item);
    if (c == word) return std::nullopt;
    if (!is_near_miss(word, c)) continue;
    const std::size_t d = edit_distance(word, c);
    if (!best || d < best_distance) {
      best = std::string(c);
      best_distance = d;
    }
  }
  return best;
}

}  // namespace gpufleet::core
