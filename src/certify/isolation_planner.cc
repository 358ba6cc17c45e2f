#include "certify/isolation_planner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"

namespace gpufleet::certify {
namespace {

using core::InvalidInput;

constexpr std::string_view kPurposeNames[] = {"screen", "isolate", "check", "confirm", "probe"};
constexpr std::string_view kStageNames[] = {
    "new",         "bits",  "decoded",    "split", "individual", "probe",           "narrow",
    "linkConfirm", "grid",  "complement", "pair",  "rest",       "complementSplit", "partsBits",
    "partsSearch", "search"};
// Screen groups per expected faulty node (plan_screen): 4, or 2 from 3 expected faulty nodes,
// where two faulty nodes sharing a group are resolved by complements (one group short) or by
// parts (two or more short) within the round budget. Measured with bench/certify_bench.cc
// (docs/performance.md).
constexpr std::size_t kScreenGroupsPerFault = 4;
constexpr std::size_t kScreenGroupsPerFaultFrom3 = 2;

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

std::size_t IsolationPlanner::expected_faulty() const {
  if (options_.expected_faulty != 0) return options_.expected_faulty;
  return std::max<std::size_t>(
      1, static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(names_.size())) / 8)));
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
