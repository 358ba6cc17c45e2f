#include "certify/isolation_planner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "certify/isolation_search.h"
#include "core/errors.h"

namespace gpufleet::certify {
namespace {

using core::InvalidInput;

constexpr std::string_view kPurposeNames[] = {"screen", "isolate", "check", "confirm", "probe"};
constexpr std::string_view kStageNames[] = {
    "new",         "bits",  "decoded",    "split", "individual", "probe",           "narrow",
    "linkConfirm", "grid",  "complement", "pair",  "rest",       "complementSplit", "partsBits",
    "partsSearch", "search"};
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
// Screen groups per expected faulty node (plan_screen): 4, or 2 from 3 expected faulty nodes,
// where two faulty nodes sharing a group are resolved by complements (one group short) or by
// parts (two or more short) within the round budget. Measured with bench/certify_bench.cc
// (docs/performance.md).
constexpr std::size_t kScreenGroupsPerFault = 4;
constexpr std::size_t kScreenGroupsPerFaultFrom3 = 2;
constexpr const char* kCoarseLink =
    "a group test failed twice although each node passed other tests: a link or switch "
    "between these nodes is faulty";

// Split-ahead tests of a pair whose two members' OR is a code c of w bits (the members are
// the subsets of c; write a member's pattern as its w bits of c, in order). Test t holds the
// patterns whose bit is set in kSplitAhead[w][t]. Whatever bits M of c the pair differs in
// (|M| >= 2, found by the complements in the same round) and whichever of the 2^(|M|-1) - 1
// pairs {c - M + S, c - M + (M - S)} it is, the w tests fail differently, so the round that
// finds M also splits the pair (a pivot bit, as in plan_pair, fails when the pivot is a bit
// both members hold). Found by a search; IsolationPlanner.SplitAheadTablesTellEveryPairApart
// checks the property. Wider codes use the pivot tests: the lowest bit of c and bit t + 1.
constexpr std::uint64_t kSplitAhead3[] = {0x34, 0x14, 0x65};
constexpr std::uint64_t kSplitAhead4[] = {0x498, 0x107b, 0x21ed, 0x45a0};
constexpr std::uint64_t kSplitAhead5[] = {0x63334cba, 0x20509058, 0x484819f5, 0x4cb8d431,
                                          0x52df890b};
constexpr std::uint64_t kSplitAhead6[] = {0x4994cfb4a0c305,  0x6614a25e13a5014b, 0x91406dec40281a,
                                          0xb6380144c9d837b, 0x1020b453446f61a4, 0x44957118b600180};

}  // namespace

namespace detail {

std::size_t split_ahead_tests(int w) noexcept { return w <= 2 ? 0 : w <= 6 ? w : w - 1; }

bool in_split_ahead(int w, std::size_t t, std::uint32_t pattern) noexcept {
  const std::uint64_t* table = w == 3   ? kSplitAhead3
                               : w == 4 ? kSplitAhead4
                               : w == 5 ? kSplitAhead5
                               : w == 6 ? kSplitAhead6
                                        : nullptr;
  if (table != nullptr) return ((table[t] >> pattern) & 1U) != 0;
  return (pattern & 1U) != 0 && ((pattern >> (t + 1)) & 1U) != 0;
}

}  // namespace detail

namespace {

using detail::in_split_ahead;
using detail::split_ahead_tests;

// Part p of `members` split into `parts` consecutive parts, the first s % parts one longer.
std::vector<std::uint32_t> part_of(const std::vector<std::uint32_t>& members, std::size_t parts,
                                   std::size_t p) {
  const std::size_t s = members.size(), base = s / parts, extra = s % parts;
  const std::size_t at = p * base + std::min(p, extra), size = base + (p < extra ? 1 : 0);
  return {members.begin() + static_cast<std::ptrdiff_t>(at),
          members.begin() + static_cast<std::ptrdiff_t>(at + size)};
}

// A member's code as its pattern over the bits of c (bit i = the i-th lowest bit of c).
std::uint32_t pattern_in(std::uint32_t c, std::uint32_t code) {
  std::uint32_t out = 0;
  int i = 0;
  for (std::uint32_t rest = c; rest != 0; rest &= rest - 1, ++i) {
    if ((code & rest & (~rest + 1)) != 0) out |= std::uint32_t{1} << i;
  }
  return out;
}

template <typename E, std::size_t N>
E enum_from(const core::Value& v, const std::string_view (&names)[N], std::string_view field) {
  const std::string& s = v.as_string();
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  throw InvalidInput("isolation planner state: " + std::string(field) + " \"" + s +
                     "\" is not a known value");
}

core::Value index_list(const std::vector<std::uint32_t>& v) {
  core::List l;
  l.reserve(v.size());
  for (std::uint32_t i : v) l.emplace_back(static_cast<std::int64_t>(i));
  return core::Value(std::move(l));
}

std::vector<std::uint32_t> read_indices(const core::Value* v, std::size_t n,
                                        std::string_view field) {
  std::vector<std::uint32_t> out;
  if (v == nullptr) return out;
  for (const core::Value& e : v->as_list()) {
    std::int64_t i = e.as_int();
    if (i < 0 || static_cast<std::size_t>(i) >= n) {
      throw InvalidInput("isolation planner state: " + std::string(field) + " holds node index " +
                         std::to_string(i) + " outside 0.." + std::to_string(n - 1));
    }
    out.push_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

const core::Value& need(const core::Value& v, std::string_view key) {
  const core::Value* f = v.find(key);
  if (f == nullptr) {
    throw InvalidInput("isolation planner state: field \"" + std::string(key) + "\" is missing");
  }
  return *f;
}

// An optional count in 0..n (absent in state saved before the field existed).
std::optional<std::size_t> optional_count(const core::Value& v, std::string_view key,
                                          std::size_t n) {
  const core::Value* f = v.find(key);
  if (f == nullptr) return std::nullopt;
  const std::int64_t c = f->as_int();
  if (c < 0 || static_cast<std::uint64_t>(c) > n)
    throw InvalidInput("isolation planner state: " + std::string(key) + " " + std::to_string(c) +
                       " is outside 0.." + std::to_string(n));
  return static_cast<std::size_t>(c);
}

}  // namespace

std::string_view purpose_name(TestPurpose p) noexcept { return kPurposeNames[static_cast<int>(p)]; }

std::string_view verdict_name(NodeVerdict v) noexcept {
  switch (v) {
    case NodeVerdict::Healthy: return "Healthy";
    case NodeVerdict::Faulty: return "Faulty";
    case NodeVerdict::Unresolved: return "Unresolved";
  }
  return "Unresolved";
}

std::vector<std::string> IsolationVerdict::faulty() const {
  std::vector<std::string> out;
  for (const NodeOutcome& n : nodes) {
    if (n.verdict == NodeVerdict::Faulty) out.push_back(n.node);
  }
  return out;
}

IsolationPlanner::IsolationPlanner(std::vector<std::string> nodes,
                                   std::vector<std::vector<std::string>> topology_groups,
                                   PlannerOptions options)
    : options_(options), names_(std::move(nodes)) {
  if (names_.empty()) throw InvalidInput("fault isolation needs at least one node");
  if (names_.size() > options_.max_nodes) {
    throw InvalidInput("fault isolation over " + std::to_string(names_.size()) +
                       " nodes exceeds the limit of " + std::to_string(options_.max_nodes) +
                       " (split the certification into smaller node sets)");
  }
  if (options_.min_group_size < 1) {
    throw InvalidInput("minGroupSize must be at least 1");
  }
  if (options_.confirmations < 1 || options_.confirmations > 5) {
    throw InvalidInput("confirmations must be 1..5, not " + std::to_string(options_.confirmations));
  }
  if (options_.round_budget < 1 || options_.max_rounds < options_.round_budget) {
    throw InvalidInput("round budget " + std::to_string(options_.round_budget) +
                       " must be at least 1 and at most maxRounds " +
                       std::to_string(options_.max_rounds));
  }
  std::unordered_set<std::string> seen;
  for (const std::string& n : names_) {
    if (n.empty()) throw InvalidInput("fault isolation: a node name is empty");
    if (!seen.insert(n).second)
      throw InvalidInput("fault isolation: node \"" + n + "\" is listed twice");
  }
  state_.assign(names_.size(), NodeState::Unknown);
  failed_.assign(names_.size(), 0);
  passed_.assign(names_.size(), 0);
  confirm_failed_.assign(names_.size(), 0);
  plan_screen(topology_groups);
}

void IsolationPlanner::plan_screen(const std::vector<std::vector<std::string>>& topology_groups) {
  const std::size_t n = names_.size();
  std::unordered_map<std::string, std::uint32_t> index;
  for (std::uint32_t i = 0; i < n; ++i) index.emplace(names_[i], i);
  std::vector<bool> grouped(n, false);
  round_.number = 1;
  for (const auto& group : topology_groups) {
    if (group.empty()) throw InvalidInput("fault isolation: a topology group is empty");
    std::vector<std::uint32_t> members;
    for (const std::string& name : group) {
      auto it = index.find(name);
      if (it == index.end()) {
        throw InvalidInput("fault isolation: topology group member \"" + name +
                           "\" is not one of the nodes under test");
      }
      if (grouped[it->second]) {
        throw InvalidInput("fault isolation: node \"" + name + "\" is in two topology groups");
      }
      grouped[it->second] = true;
      members.push_back(it->second);
    }
    add_test(TestPurpose::Screen, std::move(members));
  }
  std::vector<std::uint32_t> rest;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!grouped[i]) rest.push_back(i);
  }
  if (!rest.empty()) {
    // Screen groups sized for the expected fault count: isolating one faulty node costs
    // about log2(group size) + 1 tests, so fewer, larger groups are cheaper until two
    // faulty nodes tend to share one, which costs a split and one-by-one tests. Measured
    // (bench/certify_bench.cc), ~4 groups per expected fault balances the two.
    std::size_t expected = options_.expected_faulty;
    // Default prior sqrt(n)/8 (4 at 1,024 nodes, 8 at 4,096): a certification run usually
    // meets a handful of bad nodes, and over-sizing the screen costs a test per group.
    if (expected == 0) {
      expected = std::max<std::size_t>(
          1,
          static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(rest.size())) / 8)));
    }
    std::size_t groups = options_.screen_groups != 0 ? options_.screen_groups
                         : expected >= 3             ? kScreenGroupsPerFaultFrom3 * expected
                                                     : kScreenGroupsPerFault * expected;
    groups = std::clamp<std::size_t>(
        groups, 1, std::max<std::size_t>(1, rest.size() / options_.min_group_size));
    std::size_t base = rest.size() / groups, extra = rest.size() % groups, at = 0;
    for (std::size_t g = 0; g < groups; ++g) {
      std::size_t size = base + (g < extra ? 1 : 0);
      add_test(TestPurpose::Screen,
               std::vector<std::uint32_t>(rest.begin() + static_cast<std::ptrdiff_t>(at),
                                          rest.begin() + static_cast<std::ptrdiff_t>(at + size)));
      at += size;
    }
  }
  publish_round();
}

std::uint32_t IsolationPlanner::add_test(TestPurpose purpose, std::vector<std::uint32_t> members) {
  Test t;
  t.id = next_id_++;
  t.purpose = purpose;
  // Padding: known-good nodes, never ones that failed a test (a link fault next to them
  // would fail the suspect's test), rotating so that each test gets a distinct one.
  if (members.size() < options_.min_group_size) {
    std::vector<std::uint32_t> good_clean, good_any;
    for (std::uint32_t i = 0; i < names_.size(); ++i) {
      if (state_[i] != NodeState::Good) continue;
      (failed_[i] == 0 ? good_clean : good_any).push_back(i);
    }
    const auto& pool = good_clean.empty() ? good_any : good_clean;
    std::size_t want = options_.min_group_size - members.size();
    for (std::size_t k = 0; k < pool.size() && t.padding.size() < want; ++k) {
      std::uint32_t p = pool[pad_cursor_++ % pool.size()];
      if (std::find(t.padding.begin(), t.padding.end(), p) == t.padding.end())
        t.padding.push_back(p);
    }
  }
  t.members = std::move(members);
  tests_.push_back(std::move(t));
  ++total_tests_;
  return tests_.back().id;
}

void IsolationPlanner::record(std::uint32_t test_id, bool passed) {
  if (done_)
    throw InvalidInput("fault isolation is finished; test " + std::to_string(test_id) +
                       " is not pending");
  auto it =
      std::find_if(tests_.begin(), tests_.end(), [&](const Test& t) { return t.id == test_id; });
  if (it == tests_.end()) {
    throw InvalidInput("test " + std::to_string(test_id) + " is not in round " +
                       std::to_string(round_.number));
  }
  int r = passed ? 1 : 0;
  if (it->result == r) return;
  if (it->result != -1) {
    throw InvalidInput("test " + std::to_string(test_id) + " already has the other result");
  }
  it->result = r;
  if (std::all_of(tests_.begin(), tests_.end(), [](const Test& t) { return t.result != -1; })) {
    absorb_results();
    plan_next();
  }
}

std::vector<std::uint32_t> IsolationPlanner::unrecorded() const {
  std::vector<std::uint32_t> out;
  if (done_) return out;
  for (const Test& t : tests_) {
    if (t.result == -1) out.push_back(t.id);
  }
  return out;
}

std::vector<std::uint32_t> IsolationPlanner::without_good(
    const std::vector<std::uint32_t>& v) const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t i : v) {
    if (state_[i] == NodeState::Unknown) out.push_back(i);
  }
  return out;
}

void IsolationPlanner::absorb_results() {
  std::unordered_map<std::uint32_t, const Test*> by_id;
  for (const Test& t : tests_) by_id.emplace(t.id, &t);
  std::vector<std::uint32_t> reconfirm;
  // Passes first: a node in any passing test is healthy (noiseless reasoning).
  for (const Test& t : tests_) {
    auto mark = [&](std::uint32_t i) {
      (t.result == 1 ? passed_ : failed_)[i]++;
      if (t.result == 1 && state_[i] == NodeState::Unknown) state_[i] = NodeState::Good;
    };
    for (auto i : t.members) mark(i);
    for (auto i : t.padding) mark(i);
  }
  for (const Test& t : tests_) {
    if (t.result == 1) continue;
    std::vector<std::uint32_t> all = t.members;
    all.insert(all.end(), t.padding.begin(), t.padding.end());
    std::sort(all.begin(), all.end());
    if (t.purpose == TestPurpose::Probe) continue;  // read by its investigation below
    if (t.purpose == TestPurpose::Confirm && t.members.size() == 1 &&
        state_[t.members[0]] == NodeState::Unknown) {
      std::uint32_t m = t.members[0];
      if (++confirm_failed_[m] >= options_.confirmations) {
        state_[m] = NodeState::Faulty;
      } else {
        reconfirm.push_back(m);  // on a noisy fabric one failure may be chance: again
      }
    }
    unexplained_.push_back({std::move(all), false});
  }

  std::vector<Investigation> next;
  // Rests of decoded investigations whose suspect was confirmed faulty, under a failed
  // shared check: together they hold a faulty node only if no rest above was blamed.
  std::vector<std::uint32_t> failed_check_rest;
  bool rest_blamed = false;
  auto result_of = [&](std::uint32_t id) { return by_id.at(id)->result; };
  auto failed = [&](std::uint32_t id) { return id != 0 && by_id.at(id)->result == 0; };
  auto unknown_at = [&](const Investigation& inv, std::uint32_t code) {
    return code < inv.frame.size() && state_[inv.frame[code]] == NodeState::Unknown;
  };
  // A pair with a AND b = code minus mask, and a the one holding `with_p` of the mask:
  // both are confirmed and the rest joins the shared check, unless the codes point at
  // members already cleared (more faulty members than two), which makes it a new search.
  auto decode_pair = [&](const Investigation& inv, std::uint32_t with_p,
                         std::vector<std::uint32_t> rest) {
    const std::uint32_t base = inv.code & ~inv.mask;
    const std::uint32_t a = base | with_p, b = base | (inv.mask & ~with_p);
    Investigation n;
    if (a != b && unknown_at(inv, a) && unknown_at(inv, b)) {
      for (std::uint32_t c : {a, b}) {
        Investigation d;
        d.stage = Investigation::Stage::Decoded;
        d.suspect = inv.frame[c];
        std::erase(rest, d.suspect);
        next.push_back(std::move(d));
      }
      n.stage = Investigation::Stage::Rest;
    }
    n.members = std::move(rest);
    if (!n.members.empty()) next.push_back(std::move(n));
  };
  // Bits decoded to position d of `frame`: that member is the suspect (unless d is past the
  // frame or already decided, as with several faulty members) and `rest` waits for its check.
  auto push_decoded = [&](const std::vector<std::uint32_t>& frame, std::size_t d,
                          std::vector<std::uint32_t> rest) {
    Investigation n;
    if (d < frame.size() && state_[frame[d]] == NodeState::Unknown) {
      n.stage = Investigation::Stage::Decoded;
      n.suspect = frame[d];
      n.frame = frame;
      n.code = static_cast<std::uint32_t>(d);
      std::erase(rest, n.suspect);
    }
    n.members = std::move(rest);
    next.push_back(std::move(n));
  };
  std::vector<const Investigation*> complements;
  std::vector<const Investigation*> parts_search;
  // A constraint of search n: the members of a failed test still in doubt, unless a faulty
  // node explains it (nor when every member passed since: a contradiction the probe handles).
  auto add_constraint = [&](Investigation& n, const std::vector<std::uint32_t>& members) {
    if (std::any_of(members.begin(), members.end(),
                    [&](std::uint32_t m) { return state_[m] == NodeState::Faulty; }))
      return;
    std::vector<std::uint32_t> c = without_good(members);
    if (!c.empty()) n.constraints.push_back(std::move(c));
  };
  for (Investigation& inv : investigations_) {
    switch (inv.stage) {
      case Investigation::Stage::Complement:
      case Investigation::Stage::ComplementSplit:
        // Decided together below: the pooled complements of one group may be another's.
        complements.push_back(&inv);
        break;
      case Investigation::Stage::Pair: {
        // tests: one per bit q of mask above its lowest bit p, holding the members with both
        // p and q: it fails when the faulty member holding p holds q too.
        std::vector<std::uint32_t> rest = without_good(inv.members);
        if (rest.empty()) break;
        const std::uint32_t p = inv.mask & (~inv.mask + 1);
        std::uint32_t with_p = p;
        std::size_t t = 0;
        for (std::uint32_t q = inv.mask & ~p; q != 0; q &= q - 1, ++t) {
          if (t < inv.tests.size() && failed(inv.tests[t])) with_p |= q & (~q + 1);
        }
        decode_pair(inv, with_p, std::move(rest));
        break;
      }
      case Investigation::Stage::Rest: {
        std::vector<std::uint32_t> rest = without_good(inv.members);
        if (rest.empty()) break;
        if (inv.tests.empty()) {
          // Not checked yet (a pair split was under way): keep waiting for the shared check.
          Investigation n;
          n.stage = Investigation::Stage::Rest;
          n.members = std::move(rest);
          next.push_back(std::move(n));
        } else if (failed(inv.tests[0])) {
          failed_check_rest.insert(failed_check_rest.end(), rest.begin(), rest.end());
        }
        break;
      }
      case Investigation::Stage::Bits: {
        std::vector<std::uint32_t> rest = without_good(inv.members);
        if (rest.empty()) break;
        std::size_t d = 0;
        // At most 32 bits: a stored state with more (edited by hand) decodes wrongly, which
        // the confirmation catches, rather than shifting past the word.
        for (std::size_t j = 0; j < std::min<std::size_t>(inv.tests.size(), 32); ++j) {
          if (result_of(inv.tests[j]) == 0) d |= std::size_t{1} << j;
        }
        push_decoded(inv.members, d, std::move(rest));
        break;
      }
      case Investigation::Stage::Decoded:
        // tests: [confirm suspect, the check shared by every decoded investigation's rest].
        if (inv.tests.size() == 2 && result_of(inv.tests[1]) == 0) {
          std::vector<std::uint32_t> rest = without_good(inv.members);
          if (rest.empty()) break;
          if (result_of(inv.tests[0]) == 1) {
            // The decoded suspect is healthy, so this rest holds a faulty node.
            Investigation n;
            n.members = std::move(rest);
            next.push_back(std::move(n));
            rest_blamed = true;
          } else {
            failed_check_rest.insert(failed_check_rest.end(), rest.begin(), rest.end());
          }
        }
        break;
      case Investigation::Stage::Split:
        for (std::uint32_t id : inv.tests) {
          const Test* t = by_id.at(id);
          if (t->result != 0) continue;
          Investigation n;
          n.members = without_good(t->members);
          if (!n.members.empty()) next.push_back(std::move(n));
        }
        break;
      case Investigation::Stage::PartsBits: {
        // tests: [one per part (code of them), then the position bits]. One failed part is
        // decoded from the bits as a Bits group would be; several make the bits mix, and each
        // failed part is a group of its own.
        const std::size_t parts = std::min<std::size_t>(inv.code, inv.tests.size());
        std::vector<std::size_t> failed_parts;
        for (std::size_t p = 0; p < parts; ++p)
          if (failed(inv.tests[p])) failed_parts.push_back(p);
        if (failed_parts.size() != 1) {
          for (std::size_t p : failed_parts) {
            Investigation n;
            n.members = without_good(by_id.at(inv.tests[p])->members);
            if (!n.members.empty()) next.push_back(std::move(n));
          }
          break;
        }
        const std::vector<std::uint32_t> part = part_of(inv.frame, parts, failed_parts[0]);
        std::vector<std::uint32_t> rest = without_good(part);
        if (rest.empty()) break;
        std::size_t d = 0;
        for (std::size_t j = parts; j < std::min<std::size_t>(inv.tests.size(), parts + 32); ++j) {
          if (failed(inv.tests[j])) d |= std::size_t{1} << (j - parts);
        }
        push_decoded(part, d, std::move(rest));
        break;
      }
      case Investigation::Stage::PartsSearch:
        // Decided together below: one search over all crowded parts.
        parts_search.push_back(&inv);
        break;
      case Investigation::Stage::Search: {
        // Failed tests become constraints; a confirmed faulty member explains those holding it.
        Investigation n;
        n.stage = Investigation::Stage::Search;
        n.max_faulty = inv.max_faulty;
        for (std::uint32_t m : inv.members) {
          if (state_[m] == NodeState::Faulty && n.max_faulty > 0) --n.max_faulty;
        }
        n.members = without_good(inv.members);
        std::vector<std::vector<std::uint32_t>> all = inv.constraints;
        for (std::uint32_t id : inv.tests) {
          if (failed(id)) all.push_back(by_id.at(id)->members);
        }
        for (const auto& c : all) add_constraint(n, c);
        if (!n.members.empty()) next.push_back(std::move(n));
        break;
      }
      case Investigation::Stage::Grid: {
        // Members in a passing row or column are healthy; the rest sit where a failing row
        // crosses a failing column.
        Investigation n;
        n.members = without_good(inv.members);
        if (!n.members.empty()) next.push_back(std::move(n));
        break;
      }
      case Investigation::Stage::Probe:
        // A failure that does not reproduce was transient; one that does is narrowed.
        if (result_of(inv.tests[0]) == 0) {
          Investigation n;
          n.stage = Investigation::Stage::Narrow;
          n.members = inv.members;
          next.push_back(std::move(n));
        }
        break;
      case Investigation::Stage::Narrow: {
        // tests: [A, B, A + B_j for each bit of B, A_j + B for each bit of A]
        const std::size_t half = inv.members.size() / 2;
        std::vector<std::uint32_t> a(inv.members.begin(),
                                     inv.members.begin() + static_cast<std::ptrdiff_t>(half));
        std::vector<std::uint32_t> b(inv.members.begin() + static_cast<std::ptrdiff_t>(half),
                                     inv.members.end());
        const int bits_b = static_cast<int>(std::bit_width(b.size() - 1));
        const int bits_a = static_cast<int>(std::bit_width(a.size() - 1));
        bool a_failed = result_of(inv.tests[0]) == 0, b_failed = result_of(inv.tests[1]) == 0;
        if (a_failed || b_failed) {
          // The faulty link lies inside a half: narrow that one.
          Investigation n;
          n.stage = Investigation::Stage::Narrow;
          n.members = a_failed ? a : b;
          if (n.members.size() >= 2) {
            next.push_back(std::move(n));
          } else {
            add_finding(inv.members, kCoarseLink);
          }
          break;
        }
        std::size_t ib = 0, ia = 0;
        for (int j = 0; j < bits_b; ++j) {
          if (result_of(inv.tests[2 + static_cast<std::size_t>(j)]) == 0) ib |= std::size_t{1} << j;
        }
        for (int j = 0; j < bits_a; ++j) {
          if (result_of(inv.tests[2 + static_cast<std::size_t>(bits_b + j)]) == 0)
            ia |= std::size_t{1} << j;
        }
        if (ia < a.size() && ib < b.size()) {
          Investigation n;
          n.stage = Investigation::Stage::LinkConfirm;
          n.members = inv.members;
          n.suspect = a[ia];
          n.suspect2 = b[ib];
          next.push_back(std::move(n));
        } else {
          add_finding(inv.members, kCoarseLink);
        }
        break;
      }
      case Investigation::Stage::LinkConfirm:
        if (result_of(inv.tests[0]) == 0) {
          add_finding({inv.suspect, inv.suspect2},
                      "the link between " + names_[inv.suspect] + " and " + names_[inv.suspect2] +
                          " is faulty: each passes other tests, together they fail (a cable, NIC "
                          "port or switch between them)");
        } else {
          add_finding(inv.members, kCoarseLink);
        }
        break;
      case Investigation::Stage::New:
      case Investigation::Stage::Individual: break;
    }
  }
  // Crowded parts searched together: the nodes still in doubt in any of them, every failed test
  // of theirs a constraint, at most the expected count of faulty nodes not yet found.
  if (!parts_search.empty()) {
    Investigation n;
    n.stage = Investigation::Stage::Search;
    std::size_t found = 0;
    for (NodeState st : state_) found += st == NodeState::Faulty ? 1 : 0;
    n.max_faulty = static_cast<std::uint32_t>(
        std::max<std::size_t>(1, expected_faulty() > found ? expected_faulty() - found : 1));
    for (const Investigation* inv : parts_search) {
      for (std::uint32_t m : without_good(inv->frame)) n.members.push_back(m);
      for (std::uint32_t id : inv->tests) {
        if (failed(id)) add_constraint(n, by_id.at(id)->members);
      }
    }
    if (!n.members.empty()) next.push_back(std::move(n));
  }
  // Complements: tests [confirm the decoded member, then per bit j of the code the pooled
  // test of the rests lacking bit j]. A group with one faulty member fails its confirmation
  // and none of its complements; two faulty members a, b fail the complements of the bits
  // where they differ (a XOR b), so a group whose decoded member passed holds a pair with
  // a AND b = code minus those bits, told apart next round.
  // ComplementSplit: the same tests, then the split-ahead tests of the code's width (pooled
  // over the groups like the complements), which name the pair among those differing in the
  // failed complements' bits (kSplitAhead).
  struct Seen {
    const Investigation* inv;
    bool confirm_failed;
    std::uint32_t differ;
    std::uint32_t ahead;
    std::vector<std::uint32_t> rest;
    bool pair = false;  // a pair here: decoded member passed, two or more complements failed
    // Complements of its own (shared with no other group: a part where several faulty nodes
    // are expected). With the last round next and fewer faulty nodes found than expected,
    // its rest is tested member by member, not in the shared check: a third may hide in it.
    bool own = true;
  };
  std::vector<Seen> seen;
  // The next round is the last of the budget: a pair can no longer be split and confirmed.
  const bool last = options_.round_budget - round_.number <= 1;
  for (const Investigation* inv : complements) {
    Seen s{inv, !inv->tests.empty() && failed(inv->tests[0]), 0, 0, without_good(inv->members)};
    const std::size_t ahead = inv->stage == Investigation::Stage::ComplementSplit
                                  ? split_ahead_tests(std::popcount(inv->code))
                                  : 0;
    const std::size_t bits = inv->tests.size() < 1 + ahead ? 0 : inv->tests.size() - 1 - ahead;
    for (std::size_t j = 0; j < bits; ++j) {
      if (failed(inv->tests[1 + j])) s.differ |= std::uint32_t{1} << j;
    }
    for (std::size_t t = 0; t < ahead && bits > 0; ++t) {
      if (failed(inv->tests[1 + bits + t])) s.ahead |= std::uint32_t{1} << t;
    }
    s.pair = !s.confirm_failed && std::popcount(s.differ) >= 2 && !s.rest.empty();
    seen.push_back(std::move(s));
  }
  auto share = [](const Seen& s, const Seen& o) {
    return &o != &s &&
           std::any_of(s.inv->tests.begin() + 1, s.inv->tests.end(), [&](std::uint32_t id) {
             return id != 0 && std::find(o.inv->tests.begin() + 1, o.inv->tests.end(), id) !=
                                   o.inv->tests.end();
           });
  };
  for (Seen& s : seen) {
    s.own = std::none_of(seen.begin(), seen.end(), [&](const Seen& o) { return share(s, o); });
  }
  // A pair in a group sharing pooled complements with `s`: its failed complements are not
  // evidence of a second faulty node in s.
  auto pair_beside = [&](const Seen& s) {
    return std::any_of(seen.begin(), seen.end(),
                       [&](const Seen& o) { return o.pair && share(s, o); });
  };
  // The rest of s, checked with the others' (see Seen::own for when it is searched instead).
  std::vector<std::size_t> own_rests;  // indices in next
  std::size_t candidate_sets = 0;
  auto push_rest = [&](const Seen& s, std::vector<std::uint32_t> rest) {
    if (rest.empty()) return;
    if (s.own && last) own_rests.push_back(next.size());
    Investigation r;
    r.stage = Investigation::Stage::Rest;
    r.members = std::move(rest);
    next.push_back(std::move(r));
  };
  for (Seen& s : seen) {
    if (s.rest.empty()) continue;
    Investigation n;
    if (!s.confirm_failed) {
      if (std::popcount(s.differ) >= 2) {
        n.stage = Investigation::Stage::Pair;
        n.frame = s.inv->frame;
        n.code = s.inv->code;
        n.mask = s.differ;
      }
      if (std::popcount(s.differ) == 2) {
        // a = base + p, b = base + q: code itself passed, so no split is needed.
        decode_pair(n, s.differ & (~s.differ + 1), std::move(s.rest));
        continue;
      }
      if ((s.inv->stage == Investigation::Stage::ComplementSplit || last) &&
          std::popcount(s.differ) > 2) {
        // Split ahead: the one pair whose members fail exactly the split-ahead tests that
        // failed (tests of other groups' rests pass: those hold no faulty node).
        const std::uint32_t c = s.inv->code, base = c & ~s.differ, low = s.differ & (~s.differ + 1);
        const int w = std::popcount(c);
        std::uint32_t match = 0;
        int matches = 0;
        for (std::uint32_t sub = s.inv->stage == Investigation::Stage::ComplementSplit
                                     ? (s.differ - 1) & s.differ
                                     : 0;
             sub != 0; sub = (sub - 1) & s.differ) {
          if ((sub & low) == 0) continue;
          const std::uint32_t a = base | sub, b = base | (s.differ & ~sub);
          if (!unknown_at(*s.inv, a) || !unknown_at(*s.inv, b)) continue;
          std::uint32_t fails = 0;
          for (std::size_t t = 0; t < split_ahead_tests(w); ++t) {
            if (in_split_ahead(w, t, pattern_in(c, a)) || in_split_ahead(w, t, pattern_in(c, b)))
              fails |= std::uint32_t{1} << t;
          }
          if (fails == s.ahead) {
            match = sub;
            ++matches;
          }
        }
        if (matches == 1) {
          decode_pair(n, match, std::move(s.rest));
          continue;
        }
        // No round is left for a split: every candidate base + S (S inside the differing
        // bits) is tested alone (each test a confirmation) and the rest checked. (Not base
        // itself, unless more than two faulty nodes may share the group: only with the code,
        // which passed, could it be one of a pair.)
        Investigation cand;
        for (std::uint32_t sub = s.differ;; sub = (sub - 1) & s.differ) {
          if ((sub != 0 || s.own) && unknown_at(*s.inv, base | sub)) {
            cand.members.push_back(s.inv->frame[base | sub]);
            std::erase(s.rest, cand.members.back());
          }
          if (sub == 0) break;
        }
        if (!cand.members.empty()) {
          next.push_back(std::move(cand));
          ++candidate_sets;
        }
        push_rest(s, std::move(s.rest));
        continue;
      }
      n.members = std::move(s.rest);
      next.push_back(std::move(n));
      continue;
    }
    // The decoded member is faulty. Failed complements of its bits come from a pair found
    // elsewhere (then this rest is only checked), or from a second faulty member here whose
    // code is a subset of the first's: code minus the failed bits.
    const std::uint32_t b = s.inv->code & ~s.differ;
    if (!pair_beside(s) && b != s.inv->code && unknown_at(*s.inv, b)) {
      Investigation d;
      d.stage = Investigation::Stage::Decoded;
      d.suspect = s.inv->frame[b];
      std::erase(s.rest, d.suspect);
      next.push_back(std::move(d));
    }
    push_rest(s, std::move(s.rest));
  }
  // Fewer faulty nodes found or pending than expected: the rests of groups with complements of
  // their own are searched member by member in the last round rather than checked together.
  if (!own_rests.empty()) {
    std::size_t explained = 2 * candidate_sets;
    for (NodeState st : state_) explained += st == NodeState::Faulty ? 1 : 0;
    for (const Investigation& inv : next) {
      explained += inv.stage == Investigation::Stage::Decoded ? 1 : 0;
    }
    if (explained < expected_faulty()) {
      for (std::size_t i : own_rests) next[i].stage = Investigation::Stage::New;
    }
  }
  if (!failed_check_rest.empty() && !rest_blamed) {
    Investigation n;
    n.members = std::move(failed_check_rest);
    next.push_back(std::move(n));
  }
  // Otherwise those nodes stay undecided and plan_next() screens them again.
  for (const Test& t : tests_) {
    if (t.purpose != TestPurpose::Screen || t.result != 0) continue;
    Investigation n;
    n.members = without_good(t.members);
    if (!n.members.empty()) next.push_back(std::move(n));
  }
  for (std::uint32_t m : reconfirm) {
    bool held = std::any_of(next.begin(), next.end(), [&](const Investigation& inv) {
      return std::find(inv.members.begin(), inv.members.end(), m) != inv.members.end();
    });
    if (!held) {
      Investigation n;
      n.members = {m};
      next.push_back(std::move(n));
    }
  }
  investigations_ = std::move(next);
}

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

void IsolationPlanner::add_finding(const std::vector<std::uint32_t>& nodes, std::string message) {
  InfrastructureFinding f;
  for (auto i : nodes) f.nodes.push_back(names_[i]);
  std::sort(f.nodes.begin(), f.nodes.end());
  f.message = std::move(message);
  // Two failed groups holding the same faulty link narrow to the same pair: report it once.
  for (const InfrastructureFinding& g : infrastructure_) {
    if (g.nodes == f.nodes) return;
  }
  infrastructure_.push_back(std::move(f));
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

std::size_t IsolationPlanner::expected_faulty() const {
  if (options_.expected_faulty != 0) return options_.expected_faulty;
  return std::max<std::size_t>(
      1, static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(names_.size())) / 8)));
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
  // Groups just decoded from bits: one fewer than the expected faulty nodes means two faulty
  // nodes likely share a group, whose bits then spell only their OR. With three rounds left
  // such groups get complements (two rounds more for a pair) instead of the one shared check,
  // whose failure would leave every member inside the OR to search. Not with fewer than 3
  // expected (one failed group of an expected 2 is as often a lone faulty node, which the
  // complements cost log2(s) tests more) nor two or more short (pooled complements of two
  // pairs mix; measured, the grid does better there).
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
  // Nodes no test has decided and no investigation holds (a result that contradicted an
  // earlier one): screen them again.
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
  // Failed tests whose members all passed elsewhere: re-run the smallest ones once.
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

void IsolationPlanner::publish_round() {
  round_.tests.clear();
  for (const Test& t : tests_) {
    GroupTest g;
    g.id = t.id;
    g.purpose = t.purpose;
    for (auto i : t.members) g.nodes.push_back(names_[i]);
    for (auto i : t.padding) {
      g.nodes.push_back(names_[i]);
      g.padding.push_back(names_[i]);
    }
    round_.tests.push_back(std::move(g));
  }
}

void IsolationPlanner::finish() {
  done_ = true;
  tests_.clear();
  round_.tests.clear();
}

IsolationVerdict IsolationPlanner::verdict() const {
  if (!done_)
    throw InvalidInput("fault isolation is still in round " + std::to_string(round_.number));
  IsolationVerdict v;
  v.rounds = round_.number;
  v.tests = total_tests_;
  v.infrastructure = infrastructure_;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    NodeOutcome o;
    o.node = names_[i];
    o.tests_failed = failed_[i];
    o.tests_passed = passed_[i];
    switch (state_[i]) {
      case NodeState::Good:
        o.verdict = NodeVerdict::Healthy;
        o.message = "passed " + std::to_string(passed_[i]) + " group test(s)";
        break;
      case NodeState::Faulty:
        o.verdict = NodeVerdict::Faulty;
        o.message = "failed " + std::to_string(confirm_failed_[i]) +
                    " confirmation test(s) beside known-good nodes; member of " +
                    std::to_string(failed_[i]) + " failed group test(s)";
        break;
      case NodeState::Unknown:
        o.verdict = NodeVerdict::Unresolved;
        o.message = "undecided after " + std::to_string(round_.number) + " rounds (limit " +
                    std::to_string(options_.max_rounds) + "); member of " +
                    std::to_string(failed_[i]) + " failed group test(s)";
        break;
    }
    v.nodes.push_back(std::move(o));
  }
  return v;
}

core::Value IsolationPlanner::to_value() const {
  core::Value v = core::Value::map();
  core::Value& o = v["options"];
  o["minGroupSize"] = static_cast<std::int64_t>(options_.min_group_size);
  o["expectedFaulty"] = static_cast<std::int64_t>(options_.expected_faulty);
  o["screenGroups"] = static_cast<std::int64_t>(options_.screen_groups);
  o["roundBudget"] = options_.round_budget;
  o["maxRounds"] = options_.max_rounds;
  o["maxNodes"] = static_cast<std::int64_t>(options_.max_nodes);
  o["confirmations"] = options_.confirmations;
  core::List names, failed, passed, confirm_failed;
  std::string states;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    names.emplace_back(names_[i]);
    failed.emplace_back(failed_[i]);
    passed.emplace_back(passed_[i]);
    confirm_failed.emplace_back(confirm_failed_[i]);
    states += state_[i] == NodeState::Good ? 'G' : state_[i] == NodeState::Faulty ? 'F' : 'U';
  }
  v["nodes"] = std::move(names);
  v["states"] = states;  // one letter per node: U unknown, G good, F faulty
  v["failed"] = std::move(failed);
  v["passed"] = std::move(passed);
  v["confirmFailed"] = std::move(confirm_failed);
  core::List invs;
  for (const Investigation& inv : investigations_) {
    core::Value i = core::Value::map();
    i["stage"] = kStageNames[static_cast<int>(inv.stage)];
    i["members"] = index_list(inv.members);
    core::List ids;
    for (auto t : inv.tests) ids.emplace_back(static_cast<std::int64_t>(t));
    i["tests"] = std::move(ids);
    i["suspect"] = static_cast<std::int64_t>(inv.suspect);
    i["suspect2"] = static_cast<std::int64_t>(inv.suspect2);
    if (!inv.frame.empty()) {
      i["frame"] = index_list(inv.frame);
      i["code"] = static_cast<std::int64_t>(inv.code);
      i["mask"] = static_cast<std::int64_t>(inv.mask);
    }
    if (inv.stage == Investigation::Stage::Search) {
      core::List constraints;
      for (const auto& c : inv.constraints) constraints.push_back(index_list(c));
      i["constraints"] = std::move(constraints);
      i["maxFaulty"] = static_cast<std::int64_t>(inv.max_faulty);
    }
    invs.push_back(std::move(i));
  }
  v["investigations"] = std::move(invs);
  core::List tests;
  for (const Test& t : tests_) {
    core::Value x = core::Value::map();
    x["id"] = static_cast<std::int64_t>(t.id);
    x["purpose"] = purpose_name(t.purpose);
    x["members"] = index_list(t.members);
    x["padding"] = index_list(t.padding);
    x["result"] = t.result;
    tests.push_back(std::move(x));
  }
  v["tests"] = std::move(tests);
  core::List groups;
  for (const FailedGroup& g : unexplained_) {
    core::Value x = core::Value::map();
    x["members"] = index_list(g.members);
    x["probed"] = g.probed;
    groups.push_back(std::move(x));
  }
  v["unexplained"] = std::move(groups);
  core::List infra;
  for (const InfrastructureFinding& f : infrastructure_) {
    core::Value x = core::Value::map();
    core::List nodes;
    for (const auto& n : f.nodes) nodes.emplace_back(n);
    x["nodes"] = std::move(nodes);
    x["message"] = f.message;
    infra.push_back(std::move(x));
  }
  v["infrastructure"] = std::move(infra);
  v["round"] = round_.number;
  v["nextId"] = static_cast<std::int64_t>(next_id_);
  v["totalTests"] = total_tests_;
  v["padCursor"] = static_cast<std::int64_t>(pad_cursor_);
  v["splitGroups"] = static_cast<std::int64_t>(split_groups_);
  v["done"] = done_;
  return v;
}

// The tests a stored investigation's stage reads its results from by position: a state
// edited by hand must not make a decode read past them or look up test 0.
void IsolationPlanner::check_shape(const Investigation& inv) {
  const std::string stage(kStageNames[static_cast<int>(inv.stage)]);
  auto fail = [&](const std::string& why) {
    throw InvalidInput("isolation planner state: a \"" + stage + "\" investigation " + why);
  };
  auto all_set = [&] {
    if (std::find(inv.tests.begin(), inv.tests.end(), 0U) != inv.tests.end())
      fail("has a test id 0 where each result is read");
  };
  switch (inv.stage) {
    case Investigation::Stage::Probe:
    case Investigation::Stage::LinkConfirm:
      if (inv.tests.size() != 1)
        fail("needs exactly 1 test, not " + std::to_string(inv.tests.size()));
      all_set();
      break;
    case Investigation::Stage::Narrow: {
      if (inv.members.size() < 3) fail("needs at least 3 members");
      const std::size_t half = inv.members.size() / 2;
      const std::size_t want =
          2 + std::bit_width(half - 1) + std::bit_width(inv.members.size() - half - 1);
      if (inv.tests.size() != want)
        fail("over " + std::to_string(inv.members.size()) + " members needs " +
             std::to_string(want) + " tests, not " + std::to_string(inv.tests.size()));
      all_set();
      break;
    }
    case Investigation::Stage::Decoded:
      if (inv.tests.size() > 2) fail("has more than 2 tests");
      all_set();
      break;
    case Investigation::Stage::Bits:
    case Investigation::Stage::Split: all_set(); break;
    default: break;
  }
}

IsolationPlanner IsolationPlanner::from_value(const core::Value& s) {
  if (!s.is_map())
    throw InvalidInput("isolation planner state must be a map, not " +
                       std::string(core::kind_name(s.kind())));
  IsolationPlanner p;
  const core::Value& o = need(s, "options");
  p.options_.min_group_size = static_cast<std::size_t>(need(o, "minGroupSize").as_int());
  p.options_.expected_faulty = static_cast<std::size_t>(need(o, "expectedFaulty").as_int());
  p.options_.screen_groups = static_cast<std::size_t>(need(o, "screenGroups").as_int());
  p.options_.round_budget = static_cast<int>(need(o, "roundBudget").as_int());
  p.options_.max_rounds = static_cast<int>(need(o, "maxRounds").as_int());
  p.options_.max_nodes = static_cast<std::size_t>(need(o, "maxNodes").as_int());
  p.options_.confirmations = static_cast<int>(need(o, "confirmations").as_int());
  for (const core::Value& n : need(s, "nodes").as_list()) p.names_.push_back(n.as_string());
  const std::size_t n = p.names_.size();
  if (n == 0 || n > p.options_.max_nodes) {
    throw InvalidInput("isolation planner state: node count " + std::to_string(n) +
                       " is outside 1.." + std::to_string(p.options_.max_nodes));
  }
  const std::string& states = need(s, "states").as_string();
  const core::List& failed = need(s, "failed").as_list();
  const core::List& passed = need(s, "passed").as_list();
  const core::List& confirm_failed = need(s, "confirmFailed").as_list();
  if (states.size() != n || failed.size() != n || passed.size() != n ||
      confirm_failed.size() != n) {
    throw InvalidInput(
        "isolation planner state: states/failed/passed/confirmFailed do not have one entry per "
        "node");
  }
  for (std::size_t i = 0; i < n; ++i) {
    char c = states[i];
    if (c != 'U' && c != 'G' && c != 'F') {
      throw InvalidInput(std::string("isolation planner state: node state '") + c +
                         "' is not U, G or F");
    }
    p.state_.push_back(c == 'G'   ? NodeState::Good
                       : c == 'F' ? NodeState::Faulty
                                  : NodeState::Unknown);
    p.failed_.push_back(static_cast<int>(failed[i].as_int()));
    p.passed_.push_back(static_cast<int>(passed[i].as_int()));
    p.confirm_failed_.push_back(static_cast<int>(confirm_failed[i].as_int()));
  }
  for (const core::Value& i : need(s, "investigations").as_list()) {
    Investigation inv;
    inv.stage =
        enum_from<Investigation::Stage>(need(i, "stage"), kStageNames, "investigation stage");
    inv.members = read_indices(&need(i, "members"), n, "investigation members");
    for (const core::Value& t : need(i, "tests").as_list())
      inv.tests.push_back(static_cast<std::uint32_t>(t.as_int()));
    std::int64_t suspect = need(i, "suspect").as_int();
    if (suspect < 0 || static_cast<std::size_t>(suspect) >= n) {
      throw InvalidInput("isolation planner state: suspect index out of range");
    }
    inv.suspect = static_cast<std::uint32_t>(suspect);
    std::int64_t suspect2 = need(i, "suspect2").as_int();
    if (suspect2 < 0 || static_cast<std::size_t>(suspect2) >= n) {
      throw InvalidInput("isolation planner state: suspect2 index out of range");
    }
    inv.suspect2 = static_cast<std::uint32_t>(suspect2);
    // Optional: only investigations decoded from bits have a frame.
    inv.frame = read_indices(i.find("frame"), n, "investigation frame");
    for (const char* key : {"code", "mask"}) {
      const core::Value* f = i.find(key);
      std::int64_t v = f == nullptr ? 0 : f->as_int();
      if (v < 0 || (v != 0 && static_cast<std::uint64_t>(v) >= 2 * inv.frame.size())) {
        throw InvalidInput("isolation planner state: investigation " + std::string(key) + " " +
                           std::to_string(v) + " does not fit its frame of " +
                           std::to_string(inv.frame.size()) + " members");
      }
      (std::string_view(key) == "code" ? inv.code : inv.mask) = static_cast<std::uint32_t>(v);
    }
    check_shape(inv);
    // Optional: only searches have constraints.
    if (const core::Value* c = i.find("constraints"); c != nullptr) {
      for (const core::Value& members : c->as_list())
        inv.constraints.push_back(read_indices(&members, n, "investigation constraint"));
    }
    if (auto k = optional_count(i, "maxFaulty", n)) inv.max_faulty = static_cast<std::uint32_t>(*k);
    p.investigations_.push_back(std::move(inv));
  }
  std::unordered_set<std::uint32_t> ids;
  for (const core::Value& x : need(s, "tests").as_list()) {
    Test t;
    t.id = static_cast<std::uint32_t>(need(x, "id").as_int());
    t.purpose = enum_from<TestPurpose>(need(x, "purpose"), kPurposeNames, "test purpose");
    t.members = read_indices(&need(x, "members"), n, "test members");
    t.padding = read_indices(&need(x, "padding"), n, "test padding");
    t.result = static_cast<int>(need(x, "result").as_int());
    if (t.result < -1 || t.result > 1)
      throw InvalidInput("isolation planner state: test result must be -1, 0 or 1");
    ids.insert(t.id);
    p.tests_.push_back(std::move(t));
  }
  for (const Investigation& inv : p.investigations_) {
    for (auto id : inv.tests) {
      if (id != 0 && !ids.contains(id)) {
        throw InvalidInput("isolation planner state: investigation refers to test " +
                           std::to_string(id) + " that is not pending");
      }
    }
  }
  for (const core::Value& x : need(s, "unexplained").as_list()) {
    p.unexplained_.push_back(
        {read_indices(&need(x, "members"), n, "unexplained members"), need(x, "probed").as_bool()});
  }
  for (const core::Value& x : need(s, "infrastructure").as_list()) {
    InfrastructureFinding f;
    for (const core::Value& m : need(x, "nodes").as_list()) f.nodes.push_back(m.as_string());
    f.message = need(x, "message").as_string();
    p.infrastructure_.push_back(std::move(f));
  }
  p.round_.number = static_cast<int>(need(s, "round").as_int());
  p.next_id_ = static_cast<std::uint32_t>(need(s, "nextId").as_int());
  p.total_tests_ = static_cast<int>(need(s, "totalTests").as_int());
  p.pad_cursor_ = static_cast<std::size_t>(need(s, "padCursor").as_int());
  // Optional: absent in state saved before groups were split into parts.
  if (auto g = optional_count(s, "splitGroups", n)) p.split_groups_ = *g;
  p.done_ = need(s, "done").as_bool();
  if (!p.done_) p.publish_round();
  return p;
}

}  // namespace gpufleet::certify
