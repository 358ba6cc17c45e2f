// Designing a round of the isolation planner: each investigation's tests by stage
// (plan_investigation, plan_narrow, plan_complements, plan_parts, plan_pair, plan_search) and
// plan_next, which picks the designs for the round from the rounds left and the expected
// faulty count, then screens stragglers and probes failures nobody explains.
#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_map>

#include "certify/isolation_internal.h"
#include "certify/isolation_planner.h"
#include "certify/isolation_search.h"

namespace gpufleet::certify {
namespace {

using detail::in_split_ahead;
using detail::kCoarseLink;
using detail::part_of;
using detail::pattern_in;
using detail::split_ahead_tests;

// From this many members a failed group's last-but-one round is a grid rather than parts:
// below it one faulty member (the usual case in small fleets) costs a test more on a grid.
// Measured with bench/certify_bench.cc (docs/performance.md).
constexpr std::size_t kGridFrom = 24;
// Crowded parts are split once more and then searched (plan_search) when they hold at most
// this many members together: two parts of 32 leave at most 64 nodes in doubt.
constexpr std::size_t kSearchUpTo = 64;
// ... and when at most this many faulty nodes are expected: the search assumes as many and
// designs for them, which costs the fleets with fewer (4,096 nodes, 8 expected, 2 faulty:
// 52 tests instead of 46, bench/certify_bench.cc).
constexpr std::size_t kSearchMaxExpected = 4;

}  // namespace

void IsolationPlanner::plan_investigation(Investigation& inv, int rounds_left) {
  const std::size_t s = inv.members.size();
  inv.tests.clear();
  if (s <= 4 || rounds_left <= 1) {
    // Few members or no rounds to spare: each one with a known-good partner.
    inv.stage = Investigation::Stage::Individual;
    for (auto m : inv.members) inv.tests.push_back(add_test(TestPurpose::Confirm, {m}));
    return;
  }
  if (rounds_left == 2 && s < kGridFrom) {
    // ~sqrt(s) parts side by side; next round tests the members of failed parts one by one.
    inv.stage = Investigation::Stage::Split;
    std::size_t parts = static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(s))));
    std::size_t base = s / parts, extra = s % parts, at = 0;
    for (std::size_t p = 0; p < parts; ++p) {
      std::size_t size = base + (p < extra ? 1 : 0);
      std::vector<std::uint32_t> part(inv.members.begin() + static_cast<std::ptrdiff_t>(at),
                                      inv.members.begin() + static_cast<std::ptrdiff_t>(at + size));
      at += size;
      inv.tests.push_back(add_test(part.size() == 1 ? TestPurpose::Confirm : TestPurpose::Isolate,
                                   std::move(part)));
    }
    return;
  }
  if (rounds_left == 2) {
    // The members on a grid of ~sqrt(s) rows and columns, every row and every column tested
    // side by side; next round tests one by one the members where a failing row crosses a
    // failing column. With f faulty members that leaves at most f^2 (4 for the usual two
    // faulty nodes that share a screen group), where ~sqrt(s) parts and then every member
    // of each failed part left 2 sqrt(s): 2 sqrt(s) + 4 tests instead of 3 sqrt(s).
    inv.stage = Investigation::Stage::Grid;
    const auto cols = static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(s))));
    const std::size_t rows = (s + cols - 1) / cols;
    for (std::size_t r = 0; r < rows; ++r) {
      std::vector<std::uint32_t> row;
      for (std::size_t i = r * cols; i < std::min(s, (r + 1) * cols); ++i)
        row.push_back(inv.members[i]);
      inv.tests.push_back(
          add_test(row.size() == 1 ? TestPurpose::Confirm : TestPurpose::Isolate, std::move(row)));
    }
    for (std::size_t c = 0; c < cols; ++c) {
      std::vector<std::uint32_t> col;
      for (std::size_t i = c; i < s; i += cols) col.push_back(inv.members[i]);
      inv.tests.push_back(
          add_test(col.size() == 1 ? TestPurpose::Confirm : TestPurpose::Isolate, std::move(col)));
    }
    return;
  }
  // Every bisection level at once: test j holds the members whose index has bit j set.
  inv.stage = Investigation::Stage::Bits;
  int bits = std::bit_width(s - 1);
  for (int j = 0; j < bits; ++j) {
    std::vector<std::uint32_t> part;
    for (std::size_t i = 0; i < s; ++i) {
      if ((i >> j) & 1U) part.push_back(inv.members[i]);
    }
    inv.tests.push_back(add_test(TestPurpose::Isolate, std::move(part)));
  }
}

// "Probe across": with halves A and B each passing alone, the faulty link joins a in A to b
// in B. Test A with the members of B whose index has bit j set (fails exactly when b has
// bit j) and the same the other way: one round of log2|A| + log2|B| tests names the pair.
void IsolationPlanner::plan_narrow(Investigation& inv) {
  inv.tests.clear();
  if (inv.members.size() <= 2) {
    add_finding(inv.members, inv.members.size() == 2
                                 ? "the link between " + names_[inv.members[0]] + " and " +
                                       names_[inv.members[1]] +
                                       " is faulty: each passes other tests, together they fail"
                                 : std::string(kCoarseLink));
    return;
  }
  const std::size_t half = inv.members.size() / 2;
  std::vector<std::uint32_t> a(inv.members.begin(),
                               inv.members.begin() + static_cast<std::ptrdiff_t>(half));
  std::vector<std::uint32_t> b(inv.members.begin() + static_cast<std::ptrdiff_t>(half),
                               inv.members.end());
  inv.tests.push_back(add_test(TestPurpose::Probe, a));
  inv.tests.push_back(add_test(TestPurpose::Probe, b));
  auto across = [&](const std::vector<std::uint32_t>& whole,
                    const std::vector<std::uint32_t>& bitwise) {
    for (int j = 0; j < static_cast<int>(std::bit_width(bitwise.size() - 1)); ++j) {
      std::vector<std::uint32_t> group = whole;
      for (std::size_t i = 0; i < bitwise.size(); ++i) {
        if ((i >> j) & 1U) group.push_back(bitwise[i]);
      }
      inv.tests.push_back(add_test(TestPurpose::Probe, std::move(group)));
    }
  };
  across(a, b);
  across(b, a);
}

// Each decoded member is confirmed beside a known-good node, and for every bit j the rests
// of all these groups whose code has bit j, members lacking bit j, are tested together: one
// test per bit for all groups. A group with one faulty member fails none of them (its rest
// is healthy), so a failing complement names a bit where a group's two faulty members differ.
// With split_ahead (two rounds left, no round for a split) the round also splits the pair in
// advance: split-ahead test t holds, pooled over the groups, the rest members whose pattern
// over their group's code is in test t of its table (in_split_ahead).
void IsolationPlanner::plan_complements(const std::vector<Investigation*>& decoded,
                                        bool split_ahead) {
  if (decoded.empty()) return;
  int bits = 0;
  std::size_t ahead_tests = 0;
  for (const Investigation* inv : decoded) {
    bits = std::max(bits, static_cast<int>(std::bit_width(inv->frame.size() - 1)));
    if (split_ahead)
      ahead_tests = std::max(ahead_tests, split_ahead_tests(std::popcount(inv->code)));
  }
  std::vector<std::vector<std::uint32_t>> lacking(static_cast<std::size_t>(bits));
  std::vector<std::vector<std::uint32_t>> ahead(ahead_tests);
  for (Investigation* inv : decoded) {
    inv->stage =
        split_ahead ? Investigation::Stage::ComplementSplit : Investigation::Stage::Complement;
    inv->tests = {add_test(TestPurpose::Confirm, {inv->suspect})};
    const int w = std::popcount(inv->code);
    for (std::uint32_t c = 0; c < inv->frame.size(); ++c) {
      const std::uint32_t m = inv->frame[c];
      if (std::find(inv->members.begin(), inv->members.end(), m) == inv->members.end()) continue;
      for (int j = 0; j < bits; ++j) {
        if (((inv->code >> j) & 1U) != 0 && ((c >> j) & 1U) == 0)
          lacking[static_cast<std::size_t>(j)].push_back(m);
      }
      if (!split_ahead || (c & ~inv->code) != 0 || c == inv->code) continue;
      for (std::size_t t = 0; t < split_ahead_tests(w); ++t) {
        if (in_split_ahead(w, t, pattern_in(inv->code, c))) ahead[t].push_back(m);
      }
    }
  }
  std::vector<std::uint32_t> ids, ahead_ids;
  for (auto& group : lacking)
    ids.push_back(group.empty() ? 0 : add_test(TestPurpose::Check, std::move(group)));
  for (auto& group : ahead)
    ahead_ids.push_back(group.empty() ? 0 : add_test(TestPurpose::Isolate, std::move(group)));
  for (Investigation* inv : decoded) {
    for (int j = 0; j < bits; ++j)
      inv->tests.push_back(((inv->code >> j) & 1U) != 0 ? ids[static_cast<std::size_t>(j)] : 0);
    // ComplementSplit: [confirm, complements, then one id per split-ahead test of its width].
    if (!split_ahead) continue;
    for (std::size_t t = 0; t < split_ahead_tests(std::popcount(inv->code)); ++t)
      inv->tests.push_back(ahead_ids[t]);
  }
}

// A failed group split into `parts` contiguous parts tested side by side; next round each
// failed part is a group of its own (bits, then what its count against the expected calls).
// Parts of a failed group side by side. `with_bits` (the only failed screen group): the bits
// of each member's position inside its part in the same round, one test per bit over every
// part, so a lone faulty node (the likeliest cause of one failed group) is decoded now and
// confirmed next round, as without parts; several failed parts make the bits mix and cost
// log2 of the part size in vain.
void IsolationPlanner::plan_parts(Investigation& inv, std::size_t parts, bool with_bits) {
  const std::size_t s = inv.members.size();
  inv.stage = with_bits ? Investigation::Stage::PartsBits : Investigation::Stage::Split;
  inv.tests.clear();
  for (std::size_t p = 0; p < parts; ++p) {
    std::vector<std::uint32_t> part = part_of(inv.members, parts, p);
    inv.tests.push_back(
        add_test(part.size() == 1 ? TestPurpose::Confirm : TestPurpose::Isolate, std::move(part)));
  }
  if (!with_bits) return;
  inv.frame = inv.members;
  inv.code = static_cast<std::uint32_t>(parts);
  const auto width = static_cast<int>(std::bit_width((s + parts - 1) / parts - 1));
  for (int j = 0; j < width; ++j) {
    std::vector<std::uint32_t> bit;
    for (std::size_t p = 0; p < parts; ++p) {
      const std::vector<std::uint32_t> part = part_of(inv.members, parts, p);
      for (std::size_t i = 0; i < part.size(); ++i)
        if (((i >> j) & 1U) != 0) bit.push_back(part[i]);
    }
    inv.tests.push_back(add_test(TestPurpose::Isolate, std::move(bit)));
  }
}

// A pair a, b with a AND b = code minus mask and a XOR b = mask: name p the lowest bit of
// mask and a the member holding it; test q holds the members with both p and q, so it fails
// exactly when a holds q. |mask| - 1 tests spell a, and b is the rest of the mask.
void IsolationPlanner::plan_pair(Investigation& inv) {
  inv.tests.clear();
  const std::uint32_t p = inv.mask & (~inv.mask + 1);
  for (std::uint32_t q = inv.mask & ~p; q != 0; q &= q - 1) {
    const std::uint32_t bit = q & (~q + 1);
    std::vector<std::uint32_t> group;
    for (std::uint32_t c = 0; c < inv.frame.size(); ++c) {
      if ((c & p) != 0 && (c & bit) != 0 &&
          std::find(inv.members.begin(), inv.members.end(), inv.frame[c]) != inv.members.end())
        group.push_back(inv.frame[c]);
    }
    inv.tests.push_back(group.empty() ? 0 : add_test(TestPurpose::Isolate, std::move(group)));
  }
}

// The nodes in doubt listed as bits, every set of at most max_faulty of them that explains
// the constraints as a hypothesis, and the round designed against those (isolation_search.h):
// with one round left each node faulty in any hypothesis is confirmed alone and the rest
// checked together. More nodes than 64, or no hypothesis (more faulty nodes than assumed, or
// a noisy result): the members are searched as a plain failed group.
void IsolationPlanner::plan_search(Investigation& inv, int rounds_left) {
  inv.tests.clear();
  SearchRound design;
  if (inv.members.size() <= 64) {
    std::unordered_map<std::uint32_t, int> bit;
    for (std::size_t i = 0; i < inv.members.size(); ++i)
      bit.emplace(inv.members[i], static_cast<int>(i));
    std::vector<std::uint64_t> constraints;
    for (const auto& c : inv.constraints) {
      std::uint64_t mask = 0;
      for (std::uint32_t m : c) {
        if (auto it = bit.find(m); it != bit.end()) mask |= std::uint64_t{1} << it->second;
      }
      if (mask != 0) constraints.push_back(mask);
    }
    // More faulty nodes than assumed leave no hypothesis: assume up to two more. Too many
    // hypotheses to list: assume fewer (a larger fault count is then caught by the checks).
    const int n = static_cast<int>(inv.members.size());
    const int assumed = static_cast<int>(inv.max_faulty);
    for (int k = assumed; k <= assumed + 2 && k >= 1;) {
      design = design_search_round(n, constraints, k, rounds_left);
      if (design.hypotheses != 0) break;
      if (design.too_many) {
        if (k > assumed) break;
        --k;
      } else {
        if (k < assumed) break;
        ++k;
      }
    }
  }
  if (design.hypotheses == 0) {
    inv.stage = Investigation::Stage::New;
    inv.constraints.clear();
    plan_investigation(inv, rounds_left);
    return;
  }
  for (std::uint64_t t : design.tests) {
    std::vector<std::uint32_t> group;
    for (std::uint64_t r = t; r != 0; r &= r - 1) group.push_back(inv.members[std::countr_zero(r)]);
    const TestPurpose purpose = group.size() == 1 ? TestPurpose::Confirm : TestPurpose::Isolate;
    inv.tests.push_back(add_test(purpose, std::move(group)));
  }
}

void IsolationPlanner::plan_next() {
  tests_.clear();
  const int number = round_.number + 1;
  if (number > options_.max_rounds) {
    finish();
    return;
  }
  const int rounds_left = options_.round_budget - number + 1;
  std::vector<bool> covered(names_.size(), false);
  // The calls below add tests in this order, which fixes their ids.
  const std::vector<Investigation*> fresh = plan_decoded_complements(rounds_left);
  plan_crowded_parts(rounds_left);
  plan_round_tests(rounds_left, fresh, covered);
  plan_stragglers(covered);
  plan_probes();
  // Narrowing that ended in a finding has nothing left to test.
  std::erase_if(investigations_, [](const Investigation& inv) {
    return inv.stage == Investigation::Stage::Narrow && inv.tests.empty();
  });
  if (tests_.empty()) {
    finish();
    return;
  }
  round_.number = number;
  publish_round();
}

// Groups just decoded from bits: one fewer than the expected faulty nodes means two faulty
// nodes likely share a group, whose bits then spell only their OR. With three rounds left
// such groups get complements (two rounds more for a pair) instead of the one shared check,
// whose failure would leave every member inside the OR to search. Not with fewer than 3
// expected (one failed group of an expected 2 is as often a lone faulty node, which the
// complements cost log2(s) tests more) nor two or more short (pooled complements of two
// pairs mix; measured, the grid does better there). Returns the groups whose pooled
// complements plan_round_tests plans (empty when none do).
std::vector<IsolationPlanner::Investigation*> IsolationPlanner::plan_decoded_complements(
    int rounds_left) {
  std::vector<Investigation*> fresh;
  for (Investigation& inv : investigations_) {
    if (inv.stage == Investigation::Stage::Decoded && !inv.frame.empty()) fresh.push_back(&inv);
  }
  const std::size_t expected = expected_faulty();
  const bool complements = rounds_left >= 2 && expected >= 3 && fresh.size() + 1 == expected;
  // Two or more short after the groups were split into parts (as many failed parts as groups):
  // more likely fewer faulty nodes than expected, each part alone, so a part's rest joins the
  // shared check; but a wide code (4 bits or more) is as likely a pair, so that part gets
  // complements of its own (not pooled: several parts may hold pairs), and a pair found is
  // then told apart by testing its candidates one by one in the last round.
  // So do wide codes when more parts failed than expected (a fleet with more faulty nodes
  // than expected, where several parts may hold two).
  if (!complements && rounds_left == 2 && expected >= 3 && split_groups_ > 0 &&
      (fresh.size() + 2 <= expected || fresh.size() > expected)) {
    for (Investigation* inv : fresh) {
      if (std::popcount(inv->code) >= 4) plan_complements({inv}, false);
    }
  }
  if (!complements) fresh.clear();
  return fresh;
}

// Failed groups crowded with faulty nodes are split into parts: with four rounds or more left
// the failed groups, with three the parts that did not separate.
void IsolationPlanner::plan_crowded_parts(int rounds_left) {
  const std::size_t expected = expected_faulty();
  // Failed groups two or more short of the expected faulty nodes (several faulty nodes share
  // a group) are first split into parts, about two per expected faulty node in all: next
  // round the failed parts are groups again, alone or one short of the expected count.
  if (rounds_left >= 4 && expected >= 3) {
    std::vector<Investigation*> failed;
    for (Investigation& inv : investigations_) {
      if (inv.stage == Investigation::Stage::New) failed.push_back(&inv);
    }
    // More failed groups than expected: the fleet has more faulty nodes than expected,
    // about twice the failed groups, so groups are as crowded.
    const std::size_t estimate = failed.size() > expected ? 2 * failed.size() : expected;
    if (!failed.empty() && (failed.size() + 2 <= expected || failed.size() > expected)) {
      const std::size_t parts = std::bit_ceil((2 * estimate + failed.size() - 1) / failed.size());
      for (Investigation* inv : failed) {
        if (inv->members.size() >= 2 * parts) {
          plan_parts(*inv, parts, failed.size() == 1);
          ++split_groups_;
        }
      }
    }
  }
  // Parts that did not separate (as many failed parts as failed groups, two or more short of
  // the expected count): under the expected count they are crowded, two or three faulty nodes
  // in one, where bits spell only an OR. Each is split once more, with the members' positions
  // in the same round; the few nodes left in doubt are then searched (plan_search): 4 rounds
  // for a lone faulty node per part, at most 5 for a crowded one.
  if (rounds_left == 3 && expected >= 3 && split_groups_ > 0) {
    std::vector<Investigation*> failed;
    std::size_t members = 0;
    for (Investigation& inv : investigations_) {
      if (inv.stage != Investigation::Stage::New) continue;
      failed.push_back(&inv);
      members += inv.members.size();
    }
    if (!failed.empty() && failed.size() + 2 <= expected && expected <= kSearchMaxExpected &&
        members <= kSearchUpTo) {
      for (Investigation* inv : failed) {
        if (inv->members.size() < 8) continue;
        plan_parts(*inv, 4, true);
        inv->stage = Investigation::Stage::PartsSearch;
      }
    }
  }
}

// Every investigation's tests for the round by its stage: the shared check of the decoded
// rests first, then the pooled complements of `fresh`, then each in turn. Marks in `covered`
// the nodes the investigations hold.
void IsolationPlanner::plan_round_tests(int rounds_left, const std::vector<Investigation*>& fresh,
                                        std::vector<bool>& covered) {
  const bool complements = !fresh.empty();
  const bool splitting =
      std::any_of(investigations_.begin(), investigations_.end(),
                  [](const Investigation& inv) { return inv.stage == Investigation::Stage::Pair; });
  // The rests of all decoded investigations are checked together: they are healthy unless
  // two faulty nodes shared a group, so one test usually clears all of them. Rests wait for
  // a pair split under way, whose own rest joins the same check next round.
  std::vector<std::uint32_t> check;
  for (const Investigation& inv : investigations_) {
    if ((inv.stage == Investigation::Stage::Decoded && !(complements && !inv.frame.empty())) ||
        (inv.stage == Investigation::Stage::Rest && !splitting))
      check.insert(check.end(), inv.members.begin(), inv.members.end());
  }
  std::uint32_t check_id = check.empty() ? 0 : add_test(TestPurpose::Check, std::move(check));
  plan_complements(fresh, rounds_left == 2);
  for (Investigation& inv : investigations_) {
    if (inv.stage == Investigation::Stage::Complement ||
        inv.stage == Investigation::Stage::ComplementSplit) {
      covered[inv.suspect] = true;
    } else if (inv.stage == Investigation::Stage::Rest) {
      inv.tests.clear();
      if (!splitting && check_id != 0) inv.tests.push_back(check_id);
    } else if (inv.stage == Investigation::Stage::Pair) {
      plan_pair(inv);
    } else if (inv.stage == Investigation::Stage::Decoded) {
      inv.tests.clear();
      inv.tests.push_back(add_test(TestPurpose::Confirm, {inv.suspect}));
      covered[inv.suspect] = true;
      if (!inv.members.empty()) inv.tests.push_back(check_id);
    } else if (inv.stage == Investigation::Stage::Narrow) {
      plan_narrow(inv);
    } else if (inv.stage == Investigation::Stage::LinkConfirm) {
      inv.tests = {add_test(TestPurpose::Probe, {inv.suspect, inv.suspect2})};
    } else if (inv.stage == Investigation::Stage::Search) {
      plan_search(inv, rounds_left);
    } else if (inv.stage == Investigation::Stage::Split ||
               inv.stage == Investigation::Stage::PartsBits ||
               inv.stage == Investigation::Stage::PartsSearch) {
      // Split into parts above.
    } else {
      plan_investigation(inv, rounds_left);
    }
    for (auto m : inv.members) covered[m] = true;
  }
}

// Nodes no test has decided and no investigation holds (a result that contradicted an
// earlier one): screen them again.
void IsolationPlanner::plan_stragglers(const std::vector<bool>& covered) {
  std::vector<std::uint32_t> stragglers;
  for (std::uint32_t i = 0; i < names_.size(); ++i) {
    if (state_[i] == NodeState::Unknown && !covered[i]) stragglers.push_back(i);
  }
  if (!stragglers.empty()) {
    // They passed or were cleared before in all likelihood: one test, which, if it fails,
    // makes them an investigation of their own.
    Investigation inv;
    inv.members = stragglers;
    inv.stage = Investigation::Stage::Split;
    inv.tests.push_back(add_test(stragglers.size() == 1 ? TestPurpose::Confirm : TestPurpose::Check,
                                 std::move(stragglers)));
    investigations_.push_back(std::move(inv));
  }
}

// Failed tests whose members all passed elsewhere: re-run the smallest ones once.
void IsolationPlanner::plan_probes() {
  std::erase_if(unexplained_, [&](const FailedGroup& g) {
    return std::any_of(g.members.begin(), g.members.end(),
                       [&](std::uint32_t i) { return state_[i] == NodeState::Faulty; });
  });
  for (FailedGroup& g : unexplained_) {
    if (g.probed) continue;
    bool all_good = std::all_of(g.members.begin(), g.members.end(),
                                [&](std::uint32_t i) { return state_[i] == NodeState::Good; });
    if (!all_good) continue;
    bool minimal =
        std::none_of(unexplained_.begin(), unexplained_.end(), [&](const FailedGroup& o) {
          return &o != &g && o.members.size() < g.members.size() &&
                 std::includes(g.members.begin(), g.members.end(), o.members.begin(),
                               o.members.end());
        });
    g.probed = true;  // a superset is explained by its smaller probe either way
    if (minimal) {
      Investigation inv;
      inv.stage = Investigation::Stage::Probe;
      inv.members = g.members;
      inv.tests = {add_test(TestPurpose::Probe, g.members)};
      investigations_.push_back(std::move(inv));
    }
  }
}

}  // namespace gpufleet::certify
