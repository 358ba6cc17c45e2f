// The isolation planner against a simulated fleet: exact sets over many seeds, the round and
// test targets, persistence mid-run, link faults, and input validation.
#include "certify/isolation_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>

#include "certify/isolation_oracle.h"
#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::certify {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The examples of the top-level complements below are written for 16 screen groups of 64
// (6 index bits); at 1,024 nodes the default is now 8 groups of 128.
constexpr PlannerOptions kSixteenGroups{.screen_groups = 16};

std::vector<std::vector<std::string>> racks(const std::vector<std::string>& names,
                                            std::size_t size) {
  std::vector<std::vector<std::string>> out;
  for (std::size_t i = 0; i < names.size(); i += size) {
    out.emplace_back(names.begin() + static_cast<std::ptrdiff_t>(i),
                     names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), i + size)));
  }
  return out;
}

TEST(IsolationPlanner, FindsExactlyTheFaultyNodesOverManySeeds) {
  for (std::size_t n : {2, 3, 7, 64, 100, 256}) {
    for (std::size_t k : {0, 1, 2, 3, 5, 9}) {
      if (k > n) continue;
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        SimulatedFleet fleet(n, seed * 7919 + n * 31 + k);
        fleet.degrade_random(k);
        IsolationPlanner planner(fleet.names());
        IsolationRun run = run_isolation(planner, fleet);
        ASSERT_EQ(run.verdict.faulty(), fleet.faulty_names())
            << "n=" << n << " k=" << k << " seed=" << seed;
        ASSERT_TRUE(run.verdict.infrastructure.empty());
        for (const NodeOutcome& o : run.verdict.nodes)
          ASSERT_NE(o.verdict, NodeVerdict::Unresolved);
      }
    }
  }
}

TEST(IsolationPlanner, TopologyGroupsScreenFirstAndStillFindTheSet) {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    SimulatedFleet fleet(288, seed);
    fleet.degrade_random(seed % 5);
    // NVL72-style domains: 4 groups of 72; the first round is exactly these groups.
    IsolationPlanner planner(fleet.names(), racks(fleet.names(), 72));
    ASSERT_EQ(planner.pending()->tests.size(), 4u);
    EXPECT_EQ(planner.pending()->tests[1].nodes.front(), "node-00072");
    IsolationRun run = run_isolation(planner, fleet);
    ASSERT_EQ(run.verdict.faulty(), fleet.faulty_names()) << "seed " << seed;
  }
}

TEST(IsolationPlanner, HealthyFleetTakesOneRound) {
  SimulatedFleet fleet(1024, 5);
  IsolationPlanner planner(fleet.names());
  IsolationRun run = run_isolation(planner, fleet);
  EXPECT_EQ(run.verdict.rounds, 1);
  EXPECT_TRUE(run.verdict.faulty().empty());
  for (const NodeOutcome& o : run.verdict.nodes) {
    EXPECT_EQ(o.verdict, NodeVerdict::Healthy);
    EXPECT_EQ(o.tests_passed, 1);
  }
}

struct TargetRun {
  double mean = 0;
  int max_rounds = 0, max_tests = 0, within = 0;
};

// 1,000 random fleets of 1,024 nodes with 4 faulty, seed(t) for t = 0..999, default options.
template <typename Seed>
TargetRun run_target(Seed seed) {
  TargetRun r;
  const int trials = 1000;
  for (int t = 0; t < trials; ++t) {
    SimulatedFleet fleet(1024, seed(static_cast<std::uint64_t>(t)));
    fleet.degrade_random(4);
    IsolationPlanner planner(fleet.names());
    IsolationRun run = run_isolation(planner, fleet);
    EXPECT_EQ(run.verdict.faulty(), fleet.faulty_names()) << "trial " << t;
    r.mean += run.verdict.tests;
    r.max_rounds = std::max(r.max_rounds, run.verdict.rounds);
    r.max_tests = std::max(r.max_tests, run.verdict.tests);
    r.within += run.verdict.tests <= 48;
  }
  r.mean /= trials;
  return r;
}

// The target of issue 11: n = 1,024 with k = 4 in at most 5 rounds and 48 tests, over 1,000
// random fleets (the information bound is 36). On the bench's fleets (certify_bench's
// run_trials seeds) every trial is within 5 rounds and 48 tests: mean 42.6, worst 48
// (docs/performance.md; 45.8 and 67 before the 8-group screen and the parts).
TEST(IsolationPlanner, MeetsTheRoundAndTestTargetAt1024Nodes) {
  TargetRun r = run_target([](std::uint64_t t) { return 7919 * t + 17; });
  RecordProperty("tests_mean", std::to_string(r.mean));
  RecordProperty("tests_max", r.max_tests);
  RecordProperty("trials_within_48", r.within);
  EXPECT_LE(r.max_rounds, 5);
  EXPECT_LE(r.max_tests, 48);
  EXPECT_LE(r.mean, 43.0);
}

// Another 1,000 fleets (seeds 1000..1999), held out from every choice of the design: every
// trial within 5 rounds and 48 tests too. Before crowded parts were searched two were not
// (49: three faulty nodes in one part of 32; 54: two pairs each inside one part); over
// 20,000 fleets 112 such trials cost up to 75 tests and 11 took 6 rounds, now none exceeds
// 48 (certify_bench BM_IsolationTarget, docs/performance.md).
TEST(IsolationPlanner, MeetsTheTestTargetOnOtherFleets) {
  TargetRun r = run_target([](std::uint64_t t) { return 1000 + t; });
  RecordProperty("tests_mean", std::to_string(r.mean));
  RecordProperty("tests_max", r.max_tests);
  RecordProperty("trials_within_48", r.within);
  EXPECT_LE(r.max_rounds, 5);
  EXPECT_LE(r.max_tests, 48);
  EXPECT_EQ(r.within, 1000);
  EXPECT_LE(r.mean, 43.0);
}

// Runs `planner` to its verdict against `fleet`; with `restore`, its state is stored (JSON)
// and restored after every recorded result, as a controller restarted at that point would.
std::vector<std::size_t> tests_per_round(IsolationPlanner& planner, SimulatedFleet& fleet,
                                         bool restore = false) {
  std::vector<std::size_t> per_round;
  while (const Round* round = planner.pending()) {
    std::vector<GroupTest> tests = round->tests;
    per_round.push_back(tests.size());
    for (const GroupTest& t : tests) {
      planner.record(t.id, fleet.run(t.nodes));
      if (restore)
        planner = IsolationPlanner::from_value(core::parse_json(core::to_json(planner.to_value())));
    }
  }
  return per_round;
}

// One faulty node where 4 are expected (1,024 nodes): one of the 8 screen groups fails, so it
// is split into 8 parts of 16 with the 4 bits of each member's position inside its part in
// the same round; one part fails and the bits name its member, confirmed in round 3 with one
// check of the rest (the part's members whose position lies inside the member's, when there
// are any): 3 rounds and at most 22 tests, as many rounds as bits alone took before parts
// (a parts round and then bits took 4).
TEST(IsolationPlanner, OneFaultyNodeWhereFourAreExpectedTakesThreeRounds) {
  for (std::size_t bad : {0, 77, 500, 1023}) {
    SimulatedFleet fleet(1024, 5);
    fleet.degrade(bad, 0.85);
    IsolationPlanner planner(fleet.names());
    // The parts-and-bits stage survives a restart between any two results.
    std::vector<std::size_t> per_round = tests_per_round(planner, fleet, true);
    ASSERT_EQ(per_round.size(), 3u) << bad;
    EXPECT_EQ(per_round[0], 8u) << bad;
    EXPECT_EQ(per_round[1], 12u) << bad;
    EXPECT_LE(per_round[2], 2u) << bad;
    IsolationVerdict v = planner.verdict();
    EXPECT_EQ(v.faulty(), fleet.faulty_names()) << bad;
    EXPECT_EQ(v.rounds, 3) << bad;
  }
}

// Two faulty nodes in one screen group (indices 30 = 011110 and 45 = 101101 of group 0: their
// bits OR to 63, so bisection by bits clears nobody in it) plus two alone: 3 failed groups
// where 4 faulty nodes are expected, so round 3 confirms the three decoded members and adds
// 6 complements pooled over the groups (members lacking bit j). Group 0's decoded member 63
// passes and complements 0, 1, 4, 5 fail: a XOR b = 110011, a AND b = 001100. Round 4 splits
// the pair with 3 tests, round 5 confirms 45 and 30 and checks every rest in one test.
TEST(IsolationPlanner, TwoFaultyNodesInOneGroupAreToldApartByComplements) {
  SimulatedFleet fleet(1024, 3);
  for (std::size_t i : {30, 45, 634, 710}) fleet.degrade(i, 0.85);
  IsolationPlanner planner(fleet.names(), {}, kSixteenGroups);
  EXPECT_EQ(tests_per_round(planner, fleet), (std::vector<std::size_t>{16, 18, 9, 3, 3}));
  IsolationVerdict v = planner.verdict();
  EXPECT_EQ(v.faulty(), fleet.faulty_names());
  EXPECT_EQ(v.tests, 49);  // 59 with the shared check and a grid; 72 with parts
  EXPECT_EQ(v.rounds, 5);
}

// The same trial stored and restored (JSON) after every recorded test: the frames, codes
// and masks of the complement and pair stages survive, so the plan is the same.
TEST(IsolationPlanner, ResumesMidComplementsAndPairSplit) {
  SimulatedFleet fleet(1024, 3);
  for (std::size_t i : {30, 45, 634, 710}) fleet.degrade(i, 0.85);
  IsolationPlanner planner(fleet.names(), {}, kSixteenGroups);
  EXPECT_EQ(tests_per_round(planner, fleet, true), (std::vector<std::size_t>{16, 18, 9, 3, 3}));
  EXPECT_EQ(planner.verdict().faulty(), fleet.faulty_names());
  // A stored code that does not fit its frame is rejected, naming it.
  IsolationPlanner p(fleet.names(), {}, kSixteenGroups);
  for (int round = 0; round < 2; ++round) {
    std::vector<GroupTest> tests = p.pending()->tests;
    for (const GroupTest& t : tests) p.record(t.id, fleet.run(t.nodes));
  }
  core::Value state = p.to_value();
  bool edited = false;
  for (core::Value& inv : state["investigations"].as_list()) {
    if (inv.find("frame") != nullptr) {
      inv["code"] = std::int64_t{4096};
      edited = true;
    }
  }
  ASSERT_TRUE(edited) << "round 3 holds complement investigations with frames";
  try {
    (void)IsolationPlanner::from_value(state);
    ADD_FAILURE() << "a code outside its frame was accepted";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("investigation code 4096 does not fit its frame of 64"));
  }
}

// As many failed groups as expected faulty nodes (a fifth faulty node, 900): the decoded
// members are confirmed and the rests share one check. It fails, group 0's decoded member
// passes, so its 63 members go on an 8 x 8 grid (16 tests, and one re-check of the other
// rests), and only the <= 4 crossings of failing rows and columns are tested alone, where
// ~sqrt(63) parts and then every member of each failed part took 8 + 16.
TEST(IsolationPlanner, TwoFaultyNodesInOneGroupCostAGridNotEveryMember) {
  SimulatedFleet fleet(1024, 3);
  for (std::size_t i : {30, 45, 634, 710, 900}) fleet.degrade(i, 0.85);
  IsolationPlanner planner(fleet.names(), {}, kSixteenGroups);
  EXPECT_EQ(tests_per_round(planner, fleet), (std::vector<std::size_t>{16, 24, 5, 17, 4}));
  IsolationVerdict v = planner.verdict();
  EXPECT_EQ(v.faulty(), fleet.faulty_names());
  EXPECT_EQ(v.tests, 66);
}

// A pair whose codes nest (b = 12 = 001100 inside a = 45 = 101101): a is decoded and fails
// its confirmation, the complements of the bits only a has (0, 5) fail, and with no group
// left holding an undecoded pair, code minus those bits names b. Group 9's decoded member
// (58) also has bit 5, so its candidate 58 - 32 = 26 is confirmed too (and passes); round 4
// is those two confirmations and the check of group 0's last two undecided members.
TEST(IsolationPlanner, NestedPairIsFoundFromTheComplementsInFourRounds) {
  SimulatedFleet fleet(1024, 3);
  for (std::size_t i : {12, 45, 634, 710}) fleet.degrade(i, 0.85);
  IsolationPlanner planner(fleet.names(), {}, kSixteenGroups);
  EXPECT_EQ(tests_per_round(planner, fleet), (std::vector<std::size_t>{16, 18, 9, 3}));
  IsolationVerdict v = planner.verdict();
  EXPECT_EQ(v.faulty(), fleet.faulty_names());
  EXPECT_EQ(v.tests, 46);
}

// Two screen groups of 128 fail where 4 faulty nodes are expected (three in group 3 at
// 389, 424, 484, one in group 7 at 913): round 2 splits each failed group into 4 parts of
// 32, the four faulty nodes land in four parts, and those are bisected by bits (5 each),
// confirmed, and their rests checked together: 8 + 8 + 20 + 5.
TEST(IsolationPlanner, GroupsTwoShortAreSplitIntoParts) {
  SimulatedFleet fleet(1024, 3);
  for (std::size_t i : {389, 424, 484, 913}) fleet.degrade(i, 0.85);
  IsolationPlanner planner(fleet.names());
  EXPECT_EQ(tests_per_round(planner, fleet), (std::vector<std::size_t>{8, 8, 20, 5}));
  IsolationVerdict v = planner.verdict();
  EXPECT_EQ(v.faulty(), fleet.faulty_names());
  EXPECT_EQ(v.tests, 41);
}

// Three of the eight parts fail where 4 faulty nodes are expected: part 2 of group 6 holds
// two (843 and 861: indices 11 = 01011 and 29 = 11101 in the part). Round 4 confirms the
// three decoded members (31 for that part, which passes), tests 5 pooled complements (bits
// 1, 2, 4 fail: the pair differs in 10110) and 5 split-ahead tests in the same round, as no
// round is left for a split: the pair shares bit 0, the pivot a split would take, but the
// split-ahead tests tell every pair of every mask apart. Round 5 confirms 11 and 29 and
// checks the rests: 8 + 8 + 15 + 13 + 3.
TEST(IsolationPlanner, PairInAPartIsSplitAheadBesideItsComplements) {
  SimulatedFleet fleet(1024, 3);
  for (std::size_t i : {678, 806, 843, 861}) fleet.degrade(i, 0.85);
  IsolationPlanner planner(fleet.names());
  EXPECT_EQ(tests_per_round(planner, fleet), (std::vector<std::size_t>{8, 8, 15, 13, 3}));
  IsolationVerdict v = planner.verdict();
  EXPECT_EQ(v.faulty(), fleet.faulty_names());
  EXPECT_EQ(v.tests, 47);
}

// Parts that do not separate (as many failed parts as failed screen groups, two short of the
// 4 expected faulty nodes): two pairs each inside one part of 32 (399 and 407 in group 3, 812
// and 820 in group 6). Round 3 splits each part into 4 sub-parts of 8 with the 3 bits of each
// member's position in its sub-part (7 tests a part); the nodes left in doubt are searched:
// round 4 is designed against every set of up to 4 faulty nodes that explains the failures
// (it confirms 399, 812 and 820 and tells the rest apart), round 5 confirms 407 and checks
// the last three: 8 + 8 + 14 + 8 + 2 (the bits and complements of each part took 44).
TEST(IsolationPlanner, CrowdedPartsAreSplitAgainAndSearched) {
  SimulatedFleet fleet(1024, 3);
  for (std::size_t i : {399, 407, 812, 820}) fleet.degrade(i, 0.85);
  IsolationPlanner planner(fleet.names());
  EXPECT_EQ(tests_per_round(planner, fleet), (std::vector<std::size_t>{8, 8, 14, 8, 2}));
  IsolationVerdict v = planner.verdict();
  EXPECT_EQ(v.faulty(), fleet.faulty_names());
  EXPECT_EQ(v.tests, 40);
  // Three in one part (426, 442, 446: sub-parts 1 and 3, positions 2, 2 and 6) and one in
  // another (913): round 4 tests the 10 candidates left alone and is the last (a round more
  // would save less than it costs), 4 rounds where complements of the part's own took 5.
  SimulatedFleet triple(1024, 3);
  for (std::size_t i : {426, 442, 446, 913}) triple.degrade(i, 0.85);
  IsolationPlanner p(triple.names());
  EXPECT_EQ(tests_per_round(p, triple), (std::vector<std::size_t>{8, 8, 14, 10}));
  EXPECT_EQ(p.verdict().faulty(), triple.faulty_names());
  EXPECT_EQ(p.verdict().rounds, 4);
}

// The new stages (parts, complements with split-ahead, crowded parts and their search, whose
// constraints and assumed fault count are stored) survive a store and restore after every
// recorded test: the same plan, the same verdict.
TEST(IsolationPlanner, ResumesMidPartsAndSplitAhead) {
  for (const auto& faulty : std::vector<std::vector<std::size_t>>{
           {678, 806, 843, 861}, {399, 407, 812, 820}, {426, 442, 446, 913}}) {
    SimulatedFleet reference(1024, 3), fleet(1024, 3);
    for (std::size_t i : faulty) {
      reference.degrade(i, 0.85);
      fleet.degrade(i, 0.85);
    }
    IsolationPlanner expected_planner(reference.names());
    std::vector<std::size_t> expected = tests_per_round(expected_planner, reference);
    IsolationPlanner planner(fleet.names());
    EXPECT_EQ(tests_per_round(planner, fleet, true), expected);
    EXPECT_EQ(planner.verdict().faulty(), fleet.faulty_names());
  }
}

// Exact sets where the new stages run (at least 3 expected faulty nodes: from 576 nodes),
// for fault counts below, at and above the expected, with one and two confirmations.
TEST(IsolationPlanner, FindsExactlyTheFaultyNodesInLargeFleets) {
  for (std::size_t n : {576, 1024, 4096}) {
    for (std::size_t k : {1, 2, 3, 4, 5, 6, 8, 11}) {
      for (int confirmations : {1, 2}) {
        for (std::uint64_t seed = 0; seed < 12; ++seed) {
          SimulatedFleet fleet(n, seed * 7919 + n * 31 + k);
          fleet.degrade_random(k);
          IsolationPlanner planner(fleet.names(), {},
                                   PlannerOptions{.confirmations = confirmations});
          IsolationRun run = run_isolation(planner, fleet);
          ASSERT_EQ(run.verdict.faulty(), fleet.faulty_names())
              << "n=" << n << " k=" << k << " seed=" << seed;
          for (const NodeOutcome& o : run.verdict.nodes)
            ASSERT_NE(o.verdict, NodeVerdict::Unresolved);
        }
      }
    }
  }
}

TEST(IsolationPlanner, SingletonsArePaddedWithDistinctKnownGoodNodes) {
  SimulatedFleet fleet(64, 3);
  fleet.degrade(10, 0.8);
  fleet.degrade(40, 0.8);
  IsolationPlanner planner(fleet.names());
  bool saw_confirm = false;
  while (const Round* round = planner.pending()) {
    std::vector<GroupTest> tests = round->tests;
    std::vector<std::string> pads;
    for (const GroupTest& t : tests) {
      EXPECT_GE(t.nodes.size(), 2u) << "round " << round->number;
      if (t.purpose == TestPurpose::Confirm) {
        saw_confirm = true;
        ASSERT_EQ(t.padding.size(), 1u);
        pads.push_back(t.padding[0]);
      }
    }
    std::sort(pads.begin(), pads.end());
    EXPECT_EQ(std::adjacent_find(pads.begin(), pads.end()), pads.end()) << "a pad used twice";
    for (const GroupTest& t : tests) planner.record(t.id, fleet.run(t.nodes));
  }
  EXPECT_TRUE(saw_confirm);
  IsolationVerdict v = planner.verdict();
  EXPECT_THAT(v.faulty(), ElementsAre("node-00010", "node-00040"));
  for (const NodeOutcome& o : v.nodes) {
    if (o.verdict == NodeVerdict::Faulty) {
      EXPECT_GE(o.tests_failed, 2) << o.node;  // screen + confirmation at least
      EXPECT_THAT(o.message, HasSubstr("failed 1 confirmation"));
    }
  }
}

TEST(IsolationPlanner, ResumesFromSerializedStateWithoutRerunningRecordedTests) {
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    SimulatedFleet reference_fleet(300, seed);
    reference_fleet.degrade_random(3);
    IsolationPlanner reference(reference_fleet.names());
    IsolationRun expected = run_isolation(reference, reference_fleet);

    SimulatedFleet fleet(300, seed);
    fleet.degrade_random(3);
    IsolationPlanner planner(fleet.names());
    int runs = 0;
    while (planner.pending() != nullptr) {
      std::vector<GroupTest> tests = planner.pending()->tests;
      // Record half the round, "crash", restore from JSON, finish the round.
      std::size_t half = tests.size() / 2;
      for (std::size_t i = 0; i < half; ++i) {
        planner.record(tests[i].id, fleet.run(tests[i].nodes));
        ++runs;
      }
      std::string saved = core::to_json(planner.to_value());
      planner = IsolationPlanner::from_value(core::parse_json(saved));
      std::vector<std::uint32_t> left = planner.unrecorded();
      ASSERT_EQ(left.size(), tests.size() - half);
      for (std::size_t i = half; i < tests.size(); ++i) {
        ASSERT_EQ(left[i - half], tests[i].id);
        planner.record(tests[i].id, fleet.run(tests[i].nodes));
        ++runs;
      }
    }
    IsolationVerdict v = planner.verdict();
    EXPECT_EQ(v.faulty(), expected.verdict.faulty());
    EXPECT_EQ(v.tests, expected.verdict.tests);
    EXPECT_EQ(runs, v.tests) << "every test ran exactly once";
    EXPECT_EQ(v.rounds, expected.verdict.rounds);
  }
}

TEST(IsolationPlanner, RecordIsIdempotentAndRejectsContradictions) {
  SimulatedFleet fleet(16, 1);
  IsolationPlanner planner(fleet.names(), {}, PlannerOptions{.screen_groups = 2});
  ASSERT_EQ(planner.pending()->tests.size(), 2u);
  std::uint32_t id = planner.pending()->tests[0].id;
  planner.record(id, true);
  planner.record(id, true);
  EXPECT_THROW(planner.record(id, false), core::InvalidInput);
  EXPECT_THROW(planner.record(999, true), core::InvalidInput);
}

TEST(IsolationPlanner, FaultyLinkIsNarrowedToItsTwoEnds) {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    SimulatedFleet fleet(64, seed);
    std::size_t a = seed % 16, b = 16 + (seed * 5) % 16;  // both in the first screen group
    fleet.break_link(a, b);
    std::vector<std::size_t> bad;
    if (seed % 2 == 1) bad = fleet.degrade_random(2);  // and sometimes faulty nodes besides
    IsolationPlanner planner(fleet.names(), {}, PlannerOptions{.screen_groups = 2});
    IsolationRun run = run_isolation(planner, fleet);
    if (std::find(bad.begin(), bad.end(), a) != bad.end() ||
        std::find(bad.begin(), bad.end(), b) != bad.end()) {
      continue;  // a faulty end hides its link
    }
    EXPECT_EQ(run.verdict.faulty(), fleet.faulty_names()) << "seed " << seed;
    // A faulty node in every test that held both ends explains those failures and masks
    // the link (docs/certify.md); without faulty nodes the link is always found.
    if (bad.empty()) {
      ASSERT_EQ(run.verdict.infrastructure.size(), 1u) << "seed " << seed;
    }
    for (const InfrastructureFinding& f : run.verdict.infrastructure) {
      EXPECT_THAT(f.nodes, ElementsAre(fleet.names()[a], fleet.names()[b])) << "seed " << seed;
      EXPECT_THAT(f.message, HasSubstr("link between"));
    }
    EXPECT_LE(run.verdict.rounds, 8) << "seed " << seed;
  }
}

// A stored state edited by hand: each stage that reads its tests' results by position is
// checked for the count and ids it reads, so a decode cannot read past its tests.
TEST(IsolationPlanner, StoredInvestigationsOfTheWrongShapeAreRejected) {
  SimulatedFleet fleet(64, 1);
  fleet.break_link(3, 20);
  IsolationPlanner planner(fleet.names(), {}, PlannerOptions{.screen_groups = 2});
  core::Value narrow;
  while (planner.pending() != nullptr && narrow.is_null()) {
    core::Value state = planner.to_value();
    for (const core::Value& inv : state["investigations"].as_list()) {
      if (inv.find("stage")->as_string() == "narrow") narrow = state;
    }
    std::vector<GroupTest> tests = planner.pending()->tests;
    for (const GroupTest& t : tests) planner.record(t.id, fleet.run(t.nodes));
  }
  ASSERT_FALSE(narrow.is_null()) << "the link is narrowed in some round";
  (void)IsolationPlanner::from_value(narrow);  // as stored: accepted
  auto rejected = [](core::Value state, auto edit) {
    for (core::Value& inv : state["investigations"].as_list()) {
      if (inv.find("stage")->as_string() == "narrow") edit(inv);
    }
    try {
      (void)IsolationPlanner::from_value(state);
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(rejected(narrow, [](core::Value& inv) { inv["tests"].as_list().pop_back(); }),
              HasSubstr("a \"narrow\" investigation over 32 members needs 10 tests, not 9"));
  EXPECT_THAT(
      rejected(narrow, [](core::Value& inv) { inv["tests"].as_list()[0] = std::int64_t{0}; }),
      HasSubstr("has a test id 0 where each result is read"));
}

TEST(IsolationPlanner, LinkInsideOneHalfIsStillNarrowed) {
  SimulatedFleet fleet(40, 9);
  fleet.break_link(3, 5);  // adjacent indices: the same half of most splits
  IsolationPlanner planner(fleet.names(), {}, PlannerOptions{.screen_groups = 1});
  IsolationRun run = run_isolation(planner, fleet);
  EXPECT_TRUE(run.verdict.faulty().empty());
  ASSERT_EQ(run.verdict.infrastructure.size(), 1u);
  EXPECT_THAT(run.verdict.infrastructure[0].nodes, ElementsAre("node-00003", "node-00005"));
}

TEST(IsolationPlanner, NoisyFleetAlwaysTerminates) {
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    SimulatedFleet fleet(256, seed, 0.05);
    fleet.degrade_random(seed % 6);
    IsolationPlanner planner(fleet.names());
    IsolationRun run = run_isolation(planner, fleet);
    EXPECT_LE(run.verdict.rounds, PlannerOptions{}.max_rounds);
  }
}

TEST(IsolationPlanner, TwoConfirmationsCutFalseIsolationOnANoisyFabric) {
  auto false_trials = [](int confirmations) {
    int bad = 0;
    for (std::uint64_t seed = 0; seed < 150; ++seed) {
      SimulatedFleet fleet(256, seed, 0.05);
      fleet.degrade_random(2);
      IsolationPlanner planner(fleet.names(), {}, PlannerOptions{.confirmations = confirmations});
      IsolationRun run = run_isolation(planner, fleet);
      std::vector<std::string> truth = fleet.faulty_names();
      for (const std::string& f : run.verdict.faulty()) {
        if (!std::binary_search(truth.begin(), truth.end(), f)) {
          ++bad;
          break;
        }
      }
    }
    return bad;
  };
  int one = false_trials(1), two = false_trials(2);
  EXPECT_GT(one, 0) << "the noise model should fool a single confirmation sometimes";
  EXPECT_LT(two, one);
  // Noiseless, two confirmations still find exactly the set, each confirmed twice.
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    SimulatedFleet fleet(200, seed);
    fleet.degrade_random(3);
    IsolationPlanner planner(fleet.names(), {}, PlannerOptions{.confirmations = 2});
    IsolationRun run = run_isolation(planner, fleet);
    ASSERT_EQ(run.verdict.faulty(), fleet.faulty_names());
    for (const NodeOutcome& o : run.verdict.nodes) {
      if (o.verdict == NodeVerdict::Faulty) {
        EXPECT_THAT(o.message, HasSubstr("failed 2 confirmation"));
      }
    }
  }
}

TEST(IsolationPlanner, RejectsBadInputNamingIt) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([] { IsolationPlanner(std::vector<std::string>{}); }),
              HasSubstr("at least one node"));
  EXPECT_THAT(message([] {
                IsolationPlanner({"a", "b", "a"});
              }),
              HasSubstr("\"a\" is listed twice"));
  EXPECT_THAT(message([] {
                IsolationPlanner({"a", "b"}, {{"a", "c"}});
              }),
              HasSubstr("\"c\" is not one of the nodes"));
  EXPECT_THAT(message([] {
                IsolationPlanner({"a", "b"}, {{"a"}, {"a", "b"}});
              }),
              HasSubstr("\"a\" is in two topology groups"));
  EXPECT_THAT(message([] {
                IsolationPlanner({"a", "b"}, {}, PlannerOptions{.max_nodes = 1});
              }),
              HasSubstr("exceeds the limit of 1"));
  EXPECT_THAT(message([] {
                IsolationPlanner p({"a", "b"});
                core::Value v = p.to_value();
                v["states"] = "UX";
                IsolationPlanner::from_value(v);
              }),
              HasSubstr("node state 'X'"));
  EXPECT_THAT(message([] {
                IsolationPlanner p({"a", "b"});
                core::Value v = p.to_value();
                v.as_map().erase("tests");
                IsolationPlanner::from_value(v);
              }),
              HasSubstr("\"tests\" is missing"));
  EXPECT_THAT(message([] { (void)IsolationPlanner({"a"}).verdict(); }),
              HasSubstr("still in round 1"));
}

}  // namespace
}  // namespace gpufleet::certify
