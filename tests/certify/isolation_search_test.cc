// The isolation endgame (isolation_search.h): the hypotheses it lists, and that every round
// it designs leaves each hypothesis decidable within the cost it reports.
#include "certify/isolation_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>

namespace gpufleet::certify {
namespace {

std::uint64_t bits(std::initializer_list<int> nodes) {
  std::uint64_t m = 0;
  for (int v : nodes) m |= std::uint64_t{1} << v;
  return m;
}

// Nodes 0..3, failed tests {0, 1} and {1, 2}, at most 2 faulty: {1}, {0, 1}, {0, 2}, {1, 2},
// {1, 3} and nothing else (every set meets both tests, none has 3 members).
TEST(IsolationSearch, ListsEverySetThatExplainsTheFailedTests) {
  std::vector<std::uint64_t> h = consistent_hypotheses(4, {bits({0, 1}), bits({1, 2})}, 2, 1000);
  std::sort(h.begin(), h.end());
  std::vector<std::uint64_t> want = {bits({1}), bits({0, 1}), bits({0, 2}), bits({1, 2}),
                                     bits({1, 3})};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(h, want);
  // No constraint: the empty set too; over the cap: nothing (the caller falls back).
  EXPECT_EQ(consistent_hypotheses(3, {}, 1, 1000).size(), 4u);
  EXPECT_TRUE(consistent_hypotheses(20, {}, 4, 100).empty());
  EXPECT_EQ(consistent_hypotheses(64, {bits({63})}, 1, 10), std::vector<std::uint64_t>{bits({63})});
}

// With one round left: each node faulty in some hypothesis alone, the rest in one check.
TEST(IsolationSearch, LastRoundConfirmsEveryCandidateAndChecksTheRest) {
  SearchRound r = design_search_round(6, {bits({0, 1}), bits({1, 2})}, 1, 1);
  EXPECT_EQ(r.hypotheses, 1u);  // only {1} explains both with one faulty node
  EXPECT_EQ(r.tests, (std::vector<std::uint64_t>{bits({1}), bits({0, 2, 3, 4, 5})}));
  SearchRound none = design_search_round(4, {bits({0}), bits({1})}, 1, 1);
  EXPECT_EQ(none.hypotheses, 0u);
  EXPECT_TRUE(none.tests.empty());
}

// For a designed round, the outcome of each hypothesis (which tests fail) must leave a last
// round of at most worst_after tests: every node faulty in some hypothesis with the same
// outcome tested alone (unless a test of this round already held it alone and failed) and
// one check of the nodes still in doubt. Recomputed here from the hypotheses, so a design
// that lumps outcomes it cannot tell apart fails.
void expect_design_holds(int n, const std::vector<std::uint64_t>& constraints, int max_faulty,
                         const SearchRound& r) {
  std::vector<std::uint64_t> hyps = consistent_hypotheses(n, constraints, max_faulty, 1'000'000);
  ASSERT_EQ(r.hypotheses, hyps.size());
  const std::uint64_t all = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  std::map<std::uint64_t, std::uint64_t> uni;  // outcome -> faulty nodes of its hypotheses
  for (std::uint64_t h : hyps) {
    std::uint64_t outcome = 0;
    for (std::size_t j = 0; j < r.tests.size(); ++j)
      if ((h & r.tests[j]) != 0) outcome |= std::uint64_t{1} << j;
    uni[outcome] |= h;
  }
  int worst = 0;
  for (const auto& [outcome, u] : uni) {
    std::uint64_t passed = 0, confirmed = 0;
    for (std::size_t j = 0; j < r.tests.size(); ++j) {
      const bool fails = ((outcome >> j) & 1U) != 0;
      if (!fails) passed |= r.tests[j];
      if (fails && std::popcount(r.tests[j]) == 1) confirmed |= r.tests[j];
    }
    EXPECT_EQ(u & passed, 0u) << "a faulty node in a test that passed";
    const int cost = std::popcount(u & ~confirmed) + ((all & ~passed & ~u) != 0 ? 1 : 0);
    worst = std::max(worst, cost);
  }
  EXPECT_EQ(worst, r.worst_after);
}

// Two crowded parts as the planner hands them over: sub-parts A = 0..7 and B = 8..15 of one
// part and C = 16..23 of the other failed, with the position bits of every failed sub-part
// failing (OR = 7). Up to 4 faulty nodes: about two thousand hypotheses; the designed round
// must be cheaper than confirming all 24 candidates at once (by more than a round's worth,
// expected, and in the worst case), and hold what it reports.
TEST(IsolationSearch, DesignedRoundTellsTheHypothesesApartAsReported) {
  std::vector<std::uint64_t> constraints = {0xffULL, 0xff00ULL, 0xff0000ULL};
  for (int bit = 0; bit < 3; ++bit) {
    std::uint64_t in_part1 = 0, in_part2 = 0;
    for (int v = 0; v < 24; ++v) {
      if (((v % 8) >> bit) & 1) (v < 16 ? in_part1 : in_part2) |= std::uint64_t{1} << v;
    }
    constraints.push_back(in_part1);
    constraints.push_back(in_part2);
  }
  SearchRound r = design_search_round(24, constraints, 4, 2);
  ASSERT_GT(r.hypotheses, 100u);
  RecordProperty("hypotheses", static_cast<int>(r.hypotheses));
  RecordProperty("tests", static_cast<int>(r.tests.size()));
  RecordProperty("worst_after", r.worst_after);
  EXPECT_LT(static_cast<double>(r.tests.size()) + r.expected_after + 2, 24.0);
  EXPECT_LT(static_cast<int>(r.tests.size()) + r.worst_after, 24);
  expect_design_holds(24, constraints, 4, r);
  // The same input designs the same round (a resumed controller re-plans nothing, but a
  // replayed one must not diverge either).
  EXPECT_EQ(design_search_round(24, constraints, 4, 2).tests, r.tests);
}

// When no round pays (two certain nodes): finish at once rather than spend a round.
TEST(IsolationSearch, FinishesAtOnceWhenARoundSavesTooLittle) {
  SearchRound r = design_search_round(4, {bits({1}), bits({3})}, 4, 3);
  // {1, 3} with or without 0 and 2: confirming 1, 3 and two more alone is 4 tests; no round
  // can save more than the 2 a round is worth.
  EXPECT_EQ(r.tests.size(), 4u);
  EXPECT_EQ(r.worst_after, 0);
}

}  // namespace
}  // namespace gpufleet::certify
