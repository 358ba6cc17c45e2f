// What the isolation planner's files share (isolation_planner.cc: state and persistence,
// isolation_plan.cc: designing a round, isolation_absorb.cc: reading its results). Internal
// to the certify module.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpufleet::certify::detail {

inline constexpr const char* kCoarseLink =
    "a group test failed twice although each node passed other tests: a link or switch "
    "between these nodes is faulty";

// Part p of `members` split into `parts` consecutive parts, the first s % parts one longer.
inline std::vector<std::uint32_t> part_of(const std::vector<std::uint32_t>& members,
                                          std::size_t parts, std::size_t p) {
  const std::size_t s = members.size(), base = s / parts, extra = s % parts;
  const std::size_t at = p * base + std::min(p, extra), size = base + (p < extra ? 1 : 0);
  return {members.begin() + static_cast<std::ptrdiff_t>(at),
          members.begin() + static_cast<std::ptrdiff_t>(at + size)};
}

// A member's code as its pattern over the bits of c (bit i = the i-th lowest bit of c).
inline std::uint32_t pattern_in(std::uint32_t c, std::uint32_t code) {
  std::uint32_t out = 0;
  int i = 0;
  for (std::uint32_t rest = c; rest != 0; rest &= rest - 1, ++i) {
    if ((code & rest & (~rest + 1)) != 0) out |= std::uint32_t{1} << i;
  }
  return out;
}

}  // namespace gpufleet::certify::detail
