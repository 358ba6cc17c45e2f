// Adaptive fault isolation: which nodes of a set make a group test (an NCCL collective, a
// multi-node diagnostic, a training step) fail, found in few rounds of few tests.
//
// A test is a group of nodes run together; it passes when every member (and every link
// between them) is healthy. The planner is pure: it yields a round of tests, takes their
// results, and plans the next round from everything learnt so far, until a verdict. It
// holds no clock and no Kubernetes objects, so the certify controller persists it (to_value /
// from_value) between rounds and a restarted controller resumes without re-running a test
// whose result it already recorded.
//
// Phases (docs/certify.md "Fault isolation"):
//   screen    every node in one group: the NVLink domains / racks when given, else groups
//             sized from the expected number of faulty nodes (4 per expected fault, 2 from 3
//             expected); a k = 0 fleet ends here.
//   parts     failed groups two or more short of the expected count (or more failed groups
//             than expected) are first split into parts, ~2 per expected fault in all, tested
//             side by side; the failed parts are groups from then on.
//   search    parts that did not separate (as many failed as failed groups, two or more short
//             of the expected count) are split into 4 sub-parts with the bits of each member's
//             position; the few nodes left in doubt are searched: every set of faulty nodes
//             that explains the failed tests is listed and the next round is designed
//             against them, the last one confirming each possibly faulty node alone
//             (isolation_search.h).
//   isolate   each failed group is bisected along every bit of its members' indices at once
//             (test j holds the members whose index has bit j set): one round, log2(s) tests,
//             and the failing bits spell the suspect's index. When few rounds remain, a failed
//             group is split into ~sqrt(s) parts tested side by side instead, then members are
//             tested one by one; both cope with several faulty nodes in one group.
//   confirm   each suspect is tested paired with a distinct known-good node (padding), and the
//             rest of its group is re-checked together; a failed confirmation is the verdict.
//             When one group fewer failed than expected (two faulty nodes likely share one),
//             the rests get complements instead (per bit, the members lacking it, pooled over
//             the groups), which spell where a pair differs; the pair is split next round, or
//             in the same round by split-ahead tests when no round is left for a split. A part
//             whose parts did not separate and whose code is wide gets complements of its own,
//             and a pair or triple found with one round left has its candidates tested alone.
//   probe     a failed test whose members all passed elsewhere points at the infrastructure
//             between them (a link or switch): it is re-run once and reported if it fails again.
// Evidence (tests failed and passed) accumulates per node across rounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::certify {

struct PlannerOptions {
  // Smallest group a test may have; singletons are padded with known-good nodes up to it.
  std::size_t min_group_size = 2;
  // Expected faulty nodes, for sizing the screen groups (about four groups per expected
  // fault); 0 = sqrt(n)/8 rounded, at least 1 (4 at 1,024 nodes). Set it when the fleet's
  // failure rate is known.
  std::size_t expected_faulty = 0;
  // Screen group count when no topology groups are given; 0 = derived from expected_faulty.
  std::size_t screen_groups = 0;
  // Rounds the plan aims to finish in: designs switch to fewer-round ones as it nears.
  int round_budget = 5;
  // Hard stop: nodes still undecided after this many rounds are Unresolved.
  int max_rounds = 12;
  // Failed confirmations (each beside a different known-good node) before a node is Faulty:
  // 1 on a clean fabric; 2 where measurements are noisy costs a round and a test per
  // suspect and cuts false isolation (docs/performance.md).
  int confirmations = 1;
  // Upper bound on the node count a planner accepts (state is kept per node).
  std::size_t max_nodes = 20000;
};

enum class TestPurpose { Screen, Isolate, Check, Confirm, Probe };
std::string_view purpose_name(TestPurpose p) noexcept;

struct GroupTest {
  std::uint32_t id = 0;  // unique within one planner
  TestPurpose purpose = TestPurpose::Screen;
  std::vector<std::string> nodes;    // every member, padding included
  std::vector<std::string> padding;  // members added as known-good padding
};

struct Round {
  int number = 0;  // 1-based
  std::vector<GroupTest> tests;
};

enum class NodeVerdict { Healthy, Faulty, Unresolved };
std::string_view verdict_name(NodeVerdict v) noexcept;

struct NodeOutcome {
  std::string node;
  NodeVerdict verdict = NodeVerdict::Healthy;
  int tests_failed = 0;  // evidence: tests this node was a member of that failed
  int tests_passed = 0;
  std::string message;
};

// A test that failed twice although each member passed elsewhere: the fault lies between
// these nodes (a link or switch), not in one of them.
struct InfrastructureFinding {
  std::vector<std::string> nodes;
  std::string message;
};

struct IsolationVerdict {
  std::vector<NodeOutcome> nodes;  // in the planner's node order
  std::vector<InfrastructureFinding> infrastructure;
  int rounds = 0;
  int tests = 0;
  [[nodiscard]] std::vector<std::string> faulty() const;
};

namespace detail {
// Split-ahead tests for a pair inside a code of w bits (isolation_planner.cc): how many, and
// whether test t holds the member whose pattern over the code's bits is `pattern`.
std::size_t split_ahead_tests(int w) noexcept;
bool in_split_ahead(int w, std::size_t t, std::uint32_t pattern) noexcept;
}  // namespace detail

class IsolationPlanner {
 public:
  // `nodes`: distinct names. `topology_groups`: optional partition for the screen (each
  // NVLink domain or rack); nodes it leaves out are screened in derived groups. Throws
  // core::InvalidInput on an empty, duplicated, oversized or inconsistent input.
  IsolationPlanner(std::vector<std::string> nodes,
                   std::vector<std::vector<std::string>> topology_groups = {},
                   PlannerOptions options = {});

  [[nodiscard]] bool done() const noexcept { return done_; }
  // The round awaiting results; nullptr once done.
  [[nodiscard]] const Round* pending() const noexcept { return done_ ? nullptr : &round_; }
  // Records one result of the pending round (idempotent for the same value; a different
  // value for a recorded test, or an unknown id, throws core::InvalidInput). When the last
  // result of the round arrives the next round is planned (or the verdict reached).
  void record(std::uint32_t test_id, bool passed);
  // Ids of pending tests without a result (what a resumed controller still has to run).
  [[nodiscard]] std::vector<std::uint32_t> unrecorded() const;
  // Valid once done().
  [[nodiscard]] IsolationVerdict verdict() const;

  // The whole state, for persistence; from_value() validates it and resumes.
  [[nodiscard]] core::Value to_value() const;
  static IsolationPlanner from_value(const core::Value& state);

 private:
  IsolationPlanner() = default;
  enum class NodeState : std::uint8_t { Unknown, Good, Faulty };
  // A set of nodes known to hold at least one faulty node, and how it is being examined.
  struct Investigation {
    // Probe: re-run a failed group whose members all passed elsewhere; Narrow: split it
    // into halves A, B and find the pair across them by bits in one round; LinkConfirm:
    // test the decoded pair alone. Complement: the decoded member is confirmed while the
    // rest is tested per bit of the code, pooled with the other groups; Pair: the two
    // faulty members a group's complements revealed are told apart; Rest: members that are
    // healthy unless more nodes are faulty than explained, checked in one shared test.
    // ComplementSplit: Complement with split-ahead tests, when no round is left for a Pair
    // split. PartsBits: the only failed screen group split into parts, with the bits of the
    // members' positions inside their parts in the same round (frame: the group, code: the
    // number of parts): one failed part is decoded at once, as from Bits. PartsSearch: parts
    // and bits the same way, for parts crowded with faulty nodes (fewer failed than expected);
    // the results of all of them make one Search. Search: the nodes in doubt are few, so every
    // set of faulty nodes that explains the failed tests (constraints) is listed and the round
    // is designed against them (isolation_search.h).
    enum class Stage : std::uint8_t {
      New,
      Bits,
      Decoded,
      Split,
      Individual,
      Probe,
      Narrow,
      LinkConfirm,
      Grid,
      Complement,
      Pair,
      Rest,
      ComplementSplit,
      PartsBits,
      PartsSearch,
      Search
    };
    Stage stage = Stage::New;
    std::vector<std::uint32_t> members;
    std::vector<std::uint32_t> tests;  // ids of this round's tests of this investigation (0: none)
    std::uint32_t suspect = 0;         // Decoded: the decoded member; LinkConfirm: one end
    std::uint32_t suspect2 = 0;        // LinkConfirm: the other end
    // Decoded from bits, Complement, Pair: the failed group in bit order (a member's code is
    // its position), the OR of the faulty members' codes, and (Pair) the bits where the two
    // faulty members differ.
    std::vector<std::uint32_t> frame;
    std::uint32_t code = 0;
    std::uint32_t mask = 0;
    // Search: failed tests (members still in doubt) that each hold a faulty node, and the
    // most faulty nodes the hypotheses may hold.
    std::vector<std::vector<std::uint32_t>> constraints;
    std::uint32_t max_faulty = 0;
  };
  struct Test {
    std::uint32_t id = 0;
    TestPurpose purpose = TestPurpose::Screen;
    std::vector<std::uint32_t> members;  // padding excluded
    std::vector<std::uint32_t> padding;
    int result = -1;  // -1 none, 0 failed, 1 passed
  };
  struct FailedGroup {
    std::vector<std::uint32_t> members;
    bool probed = false;
  };

  void plan_screen(const std::vector<std::vector<std::string>>& topology_groups);
  // absorb_results() in steps (isolation_absorb.cc): Absorb is one pass's lookups and what it
  // builds for the next round; SeenComplement, a Complement investigation as its results read.
  struct Absorb;
  struct SeenComplement;
  void absorb_results();
  void absorb_passes();
  void absorb_failures(Absorb& pass);
  void absorb_investigation(Absorb& pass, const Investigation& inv);
  void absorb_pair(Absorb& pass, const Investigation& inv) const;
  void absorb_rest(Absorb& pass, const Investigation& inv) const;
  void absorb_bits(Absorb& pass, const Investigation& inv) const;
  void absorb_decoded(Absorb& pass, const Investigation& inv) const;
  void absorb_split(Absorb& pass, const Investigation& inv) const;
  void absorb_parts_bits(Absorb& pass, const Investigation& inv) const;
  void absorb_search(Absorb& pass, const Investigation& inv) const;
  void absorb_grid(Absorb& pass, const Investigation& inv) const;
  void absorb_probe(Absorb& pass, const Investigation& inv) const;
  void absorb_narrow(Absorb& pass, const Investigation& inv);
  void absorb_link_confirm(Absorb& pass, const Investigation& inv);
  void absorb_parts_search(Absorb& pass) const;
  void absorb_complements(Absorb& pass) const;
  void absorb_unconfirmed(Absorb& pass, SeenComplement& s) const;
  void absorb_split_ahead(Absorb& pass, SeenComplement& s, const Investigation& pair) const;
  void absorb_leftovers(Absorb& pass) const;
  // plan_next() in steps (isolation_plan.cc), called in this order (it fixes the test ids).
  void plan_next();
  std::vector<Investigation*> plan_decoded_complements(int rounds_left);
  void plan_crowded_parts(int rounds_left);
  void plan_round_tests(int rounds_left, const std::vector<Investigation*>& fresh,
                        std::vector<bool>& covered);
  void plan_stragglers(const std::vector<bool>& covered);
  void plan_probes();
  void plan_investigation(Investigation& inv, int rounds_left);
  void plan_narrow(Investigation& inv);
  void plan_complements(const std::vector<Investigation*>& decoded, bool split_ahead);
  void plan_parts(Investigation& inv, std::size_t parts, bool with_bits);
  void plan_pair(Investigation& inv);
  void plan_search(Investigation& inv, int rounds_left);
  static void check_shape(const Investigation& inv);
  [[nodiscard]] std::size_t expected_faulty() const;
  void add_finding(const std::vector<std::uint32_t>& nodes, std::string message);
  std::uint32_t add_test(TestPurpose purpose, std::vector<std::uint32_t> members);
  std::vector<std::uint32_t> without_good(const std::vector<std::uint32_t>& v) const;
  void publish_round();
  void finish();

  PlannerOptions options_;
  std::vector<std::string> names_;
  std::vector<NodeState> state_;
  std::vector<int> failed_;
  std::vector<int> passed_;
  std::vector<int> confirm_failed_;
  std::vector<Investigation> investigations_;
  std::vector<Test> tests_;  // the pending round's tests
  std::vector<FailedGroup> unexplained_;
  std::vector<InfrastructureFinding> infrastructure_;
  Round round_;
  std::uint32_t next_id_ = 1;
  int total_tests_ = 0;
  std::size_t pad_cursor_ = 0;
  std::size_t split_groups_ = 0;  // failed screen groups split into parts (round 2)
  bool done_ = false;
};

}  // namespace gpufleet::certify
