// The isolation planner's endgame: when the nodes still in doubt are few (at most 64) and a
// round or two is left, every set of faulty nodes that explains the failed tests so far is
// listed, and the next round is designed against that list instead of a fixed scheme.
//
// Nodes are numbered 0..n-1 (bit i of a mask is node i). A constraint is a failed test: it
// holds at least one faulty node. A hypothesis is a set of at most `max_faulty` nodes that
// meets every constraint. With one round left the design tests alone (a confirmation) every
// node that is faulty in some hypothesis, plus one check of the rest. With more, tests are
// added greedily while they lower the expected tests still to run (every hypothesis equally
// likely), then a local search trades this round's tests against the worst and expected
// count after it; the round is run only if it saves more than a round is worth against
// finishing at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpufleet::certify {

struct SearchRound {
  // Each test as a mask of nodes; a single node is a confirmation.
  std::vector<std::uint64_t> tests;
  // Hypotheses the design was made against (0: none fits, or too many to list).
  std::size_t hypotheses = 0;
  bool too_many = false;
  // The design's expected and worst count of tests still to run after this round (0 with
  // one round left).
  double expected_after = 0;
  int worst_after = 0;
};

// Every subset of 0..n-1 with at most `max_faulty` members that meets each constraint, or
// nothing (and *overflow set) when there are more than `cap` of them or they take too long
// to find.
std::vector<std::uint64_t> consistent_hypotheses(int n,
                                                 const std::vector<std::uint64_t>& constraints,
                                                 int max_faulty, std::size_t cap,
                                                 bool* overflow = nullptr);

// The next round for n <= 64 nodes in doubt. Deterministic for the same input.
SearchRound design_search_round(int n, const std::vector<std::uint64_t>& constraints,
                                int max_faulty, int rounds_left);

}  // namespace gpufleet::certify
