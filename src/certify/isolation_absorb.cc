// IsolationPlanner::absorb_results(): what a finished round says. Passes first (a node in a
// passing test is healthy), then failed tests become evidence, then each investigation reads
// its own tests by stage into the next round's investigations. Complements and crowded parts
// are read together after that: their tests are pooled over several investigations.
#include <algorithm>
#include <bit>
#include <unordered_map>

#include "certify/isolation_internal.h"
#include "certify/isolation_planner.h"

namespace gpufleet::certify {

using detail::in_split_ahead;
using detail::kCoarseLink;
using detail::part_of;
using detail::pattern_in;
using detail::split_ahead_tests;

// A Complement or ComplementSplit investigation as its results read.
struct IsolationPlanner::SeenComplement {
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

// One absorb_results() pass: the round's tests by id, and what it builds for the next round.
struct IsolationPlanner::Absorb {
  explicit Absorb(const IsolationPlanner& p) : planner(p) {
    for (const Test& t : p.tests_) by_id.emplace(t.id, &t);
  }

  const IsolationPlanner& planner;
  std::unordered_map<std::uint32_t, const Test*> by_id;
  std::vector<std::uint32_t> reconfirm;
  std::vector<Investigation> next;
  // Rests of decoded investigations whose suspect was confirmed faulty, under a failed
  // shared check: together they hold a faulty node only if no rest above was blamed.
  std::vector<std::uint32_t> failed_check_rest;
  bool rest_blamed = false;
  std::vector<const Investigation*> complements;
  std::vector<const Investigation*> parts_search;
  std::vector<SeenComplement> seen;
  // The next round is the last of the budget: a pair can no longer be split and confirmed.
  bool last = false;
  std::vector<std::size_t> own_rests;  // indices in next
  std::size_t candidate_sets = 0;

  int result_of(std::uint32_t id) const { return by_id.at(id)->result; }
  bool failed(std::uint32_t id) const { return id != 0 && by_id.at(id)->result == 0; }
  bool unknown_at(const Investigation& inv, std::uint32_t code) const {
    return code < inv.frame.size() && planner.state_[inv.frame[code]] == NodeState::Unknown;
  }

  // A pair with a AND b = code minus mask, and a the one holding `with_p` of the mask:
  // both are confirmed and the rest joins the shared check, unless the codes point at
  // members already cleared (more faulty members than two), which makes it a new search.
  void decode_pair(const Investigation& inv, std::uint32_t with_p,
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
  }

  // Bits decoded to position d of `frame`: that member is the suspect (unless d is past the
  // frame or already decided, as with several faulty members) and `rest` waits for its check.
  void push_decoded(const std::vector<std::uint32_t>& frame, std::size_t d,
                    std::vector<std::uint32_t> rest) {
    Investigation n;
    if (d < frame.size() && planner.state_[frame[d]] == NodeState::Unknown) {
      n.stage = Investigation::Stage::Decoded;
      n.suspect = frame[d];
      n.frame = frame;
      n.code = static_cast<std::uint32_t>(d);
      std::erase(rest, n.suspect);
    }
    n.members = std::move(rest);
    next.push_back(std::move(n));
  }

  // A constraint of search n: the members of a failed test still in doubt, unless a faulty
  // node explains it (nor when every member passed since: a contradiction the probe handles).
  void add_constraint(Investigation& n, const std::vector<std::uint32_t>& members) const {
    if (std::any_of(members.begin(), members.end(),
                    [&](std::uint32_t m) { return planner.state_[m] == NodeState::Faulty; }))
      return;
    std::vector<std::uint32_t> c = planner.without_good(members);
    if (!c.empty()) n.constraints.push_back(std::move(c));
  }

  // Complements: tests [confirm the decoded member, then per bit j of the code the pooled
  // test of the rests lacking bit j]; ComplementSplit: then the split-ahead tests.
  SeenComplement read_complements(const Investigation* inv) const {
    SeenComplement s{inv, !inv->tests.empty() && failed(inv->tests[0]), 0, 0,
                     planner.without_good(inv->members)};
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
    return s;
  }

  static bool share(const SeenComplement& s, const SeenComplement& o) {
    return &o != &s &&
           std::any_of(s.inv->tests.begin() + 1, s.inv->tests.end(), [&](std::uint32_t id) {
             return id != 0 && std::find(o.inv->tests.begin() + 1, o.inv->tests.end(), id) !=
                                   o.inv->tests.end();
           });
  }

  // A pair in a group sharing pooled complements with `s`: its failed complements are not
  // evidence of a second faulty node in s.
  bool pair_beside(const SeenComplement& s) const {
    return std::any_of(seen.begin(), seen.end(),
                       [&](const SeenComplement& o) { return o.pair && share(s, o); });
  }

  // The rest of s, checked with the others' (see SeenComplement::own for when it is searched
  // instead).
  void push_rest(const SeenComplement& s, std::vector<std::uint32_t> rest) {
    if (rest.empty()) return;
    if (s.own && last) own_rests.push_back(next.size());
    Investigation r;
    r.stage = Investigation::Stage::Rest;
    r.members = std::move(rest);
    next.push_back(std::move(r));
  }
};

void IsolationPlanner::absorb_results() {
  Absorb pass(*this);
  absorb_passes();
  absorb_failures(pass);
  for (const Investigation& inv : investigations_) absorb_investigation(pass, inv);
  absorb_parts_search(pass);
  absorb_complements(pass);
  absorb_leftovers(pass);
  investigations_ = std::move(pass.next);
}

// Passes first: a node in any passing test is healthy (noiseless reasoning).
void IsolationPlanner::absorb_passes() {
  for (const Test& t : tests_) {
    auto mark = [&](std::uint32_t i) {
      (t.result == 1 ? passed_ : failed_)[i]++;
      if (t.result == 1 && state_[i] == NodeState::Unknown) state_[i] = NodeState::Good;
    };
    for (auto i : t.members) mark(i);
    for (auto i : t.padding) mark(i);
  }
}

// Failed tests: a failed confirmation counts against its node, and each failure (probes
// aside) waits to be explained.
void IsolationPlanner::absorb_failures(Absorb& pass) {
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
        pass.reconfirm.push_back(m);  // on a noisy fabric one failure may be chance: again
      }
    }
    unexplained_.push_back({std::move(all), false});
  }
}

void IsolationPlanner::absorb_investigation(Absorb& pass, const Investigation& inv) {
  switch (inv.stage) {
    case Investigation::Stage::Complement:
    case Investigation::Stage::ComplementSplit:
      // Decided together below: the pooled complements of one group may be another's.
      pass.complements.push_back(&inv);
      break;
    case Investigation::Stage::Pair: absorb_pair(pass, inv); break;
    case Investigation::Stage::Rest: absorb_rest(pass, inv); break;
    case Investigation::Stage::Bits: absorb_bits(pass, inv); break;
    case Investigation::Stage::Decoded: absorb_decoded(pass, inv); break;
    case Investigation::Stage::Split: absorb_split(pass, inv); break;
    case Investigation::Stage::PartsBits: absorb_parts_bits(pass, inv); break;
    case Investigation::Stage::PartsSearch:
      // Decided together below: one search over all crowded parts.
      pass.parts_search.push_back(&inv);
      break;
    case Investigation::Stage::Search: absorb_search(pass, inv); break;
    case Investigation::Stage::Grid: absorb_grid(pass, inv); break;
    case Investigation::Stage::Probe: absorb_probe(pass, inv); break;
    case Investigation::Stage::Narrow: absorb_narrow(pass, inv); break;
    case Investigation::Stage::LinkConfirm: absorb_link_confirm(pass, inv); break;
    case Investigation::Stage::New:
    case Investigation::Stage::Individual: break;
  }
}

// Pair: tests, one per bit q of mask above its lowest bit p, holding the members with both
// p and q: it fails when the faulty member holding p holds q too.
void IsolationPlanner::absorb_pair(Absorb& pass, const Investigation& inv) const {
  std::vector<std::uint32_t> rest = without_good(inv.members);
  if (rest.empty()) return;
  const std::uint32_t p = inv.mask & (~inv.mask + 1);
  std::uint32_t with_p = p;
  std::size_t t = 0;
  for (std::uint32_t q = inv.mask & ~p; q != 0; q &= q - 1, ++t) {
    if (t < inv.tests.size() && pass.failed(inv.tests[t])) with_p |= q & (~q + 1);
  }
  pass.decode_pair(inv, with_p, std::move(rest));
}

// Rest: the members left in doubt wait for the shared check, or join the failed check's rests.
void IsolationPlanner::absorb_rest(Absorb& pass, const Investigation& inv) const {
  std::vector<std::uint32_t> rest = without_good(inv.members);
  if (rest.empty()) return;
  if (inv.tests.empty()) {
    // Not checked yet (a pair split was under way): keep waiting for the shared check.
    Investigation n;
    n.stage = Investigation::Stage::Rest;
    n.members = std::move(rest);
    pass.next.push_back(std::move(n));
  } else if (pass.failed(inv.tests[0])) {
    pass.failed_check_rest.insert(pass.failed_check_rest.end(), rest.begin(), rest.end());
  }
}

// Bits: the failing bit tests spell the suspect's index.
void IsolationPlanner::absorb_bits(Absorb& pass, const Investigation& inv) const {
  std::vector<std::uint32_t> rest = without_good(inv.members);
  if (rest.empty()) return;
  std::size_t d = 0;
  // At most 32 bits: a stored state with more (edited by hand) decodes wrongly, which
  // the confirmation catches, rather than shifting past the word.
  for (std::size_t j = 0; j < std::min<std::size_t>(inv.tests.size(), 32); ++j) {
    if (pass.result_of(inv.tests[j]) == 0) d |= std::size_t{1} << j;
  }
  pass.push_decoded(inv.members, d, std::move(rest));
}

// Decoded: tests [confirm suspect, the check shared by every decoded investigation's rest].
void IsolationPlanner::absorb_decoded(Absorb& pass, const Investigation& inv) const {
  if (inv.tests.size() == 2 && pass.result_of(inv.tests[1]) == 0) {
    std::vector<std::uint32_t> rest = without_good(inv.members);
    if (rest.empty()) return;
    if (pass.result_of(inv.tests[0]) == 1) {
      // The decoded suspect is healthy, so this rest holds a faulty node.
      Investigation n;
      n.members = std::move(rest);
      pass.next.push_back(std::move(n));
      pass.rest_blamed = true;
    } else {
      pass.failed_check_rest.insert(pass.failed_check_rest.end(), rest.begin(), rest.end());
    }
  }
}

// Split: each failed part is a group of its own.
void IsolationPlanner::absorb_split(Absorb& pass, const Investigation& inv) const {
  for (std::uint32_t id : inv.tests) {
    const Test* t = pass.by_id.at(id);
    if (t->result != 0) continue;
    Investigation n;
    n.members = without_good(t->members);
    if (!n.members.empty()) pass.next.push_back(std::move(n));
  }
}

// PartsBits: tests [one per part (code of them), then the position bits]. One failed part is
// decoded from the bits as a Bits group would be; several make the bits mix, and each
// failed part is a group of its own.
void IsolationPlanner::absorb_parts_bits(Absorb& pass, const Investigation& inv) const {
  const std::size_t parts = std::min<std::size_t>(inv.code, inv.tests.size());
  std::vector<std::size_t> failed_parts;
  for (std::size_t p = 0; p < parts; ++p)
    if (pass.failed(inv.tests[p])) failed_parts.push_back(p);
  if (failed_parts.size() != 1) {
    for (std::size_t p : failed_parts) {
      Investigation n;
      n.members = without_good(pass.by_id.at(inv.tests[p])->members);
      if (!n.members.empty()) pass.next.push_back(std::move(n));
    }
    return;
  }
  const std::vector<std::uint32_t> part = part_of(inv.frame, parts, failed_parts[0]);
  std::vector<std::uint32_t> rest = without_good(part);
  if (rest.empty()) return;
  std::size_t d = 0;
  for (std::size_t j = parts; j < std::min<std::size_t>(inv.tests.size(), parts + 32); ++j) {
    if (pass.failed(inv.tests[j])) d |= std::size_t{1} << (j - parts);
  }
  pass.push_decoded(part, d, std::move(rest));
}

// Search: failed tests become constraints; a confirmed faulty member explains those holding it.
void IsolationPlanner::absorb_search(Absorb& pass, const Investigation& inv) const {
  Investigation n;
  n.stage = Investigation::Stage::Search;
  n.max_faulty = inv.max_faulty;
  for (std::uint32_t m : inv.members) {
    if (state_[m] == NodeState::Faulty && n.max_faulty > 0) --n.max_faulty;
  }
  n.members = without_good(inv.members);
  std::vector<std::vector<std::uint32_t>> all = inv.constraints;
  for (std::uint32_t id : inv.tests) {
    if (pass.failed(id)) all.push_back(pass.by_id.at(id)->members);
  }
  for (const auto& c : all) pass.add_constraint(n, c);
  if (!n.members.empty()) pass.next.push_back(std::move(n));
}

// Grid: members in a passing row or column are healthy; the rest sit where a failing row
// crosses a failing column.
void IsolationPlanner::absorb_grid(Absorb& pass, const Investigation& inv) const {
  Investigation n;
  n.members = without_good(inv.members);
  if (!n.members.empty()) pass.next.push_back(std::move(n));
}

// Probe: a failure that does not reproduce was transient; one that does is narrowed.
void IsolationPlanner::absorb_probe(Absorb& pass, const Investigation& inv) const {
  if (pass.result_of(inv.tests[0]) == 0) {
    Investigation n;
    n.stage = Investigation::Stage::Narrow;
    n.members = inv.members;
    pass.next.push_back(std::move(n));
  }
}

// Narrow: tests [A, B, A + B_j for each bit of B, A_j + B for each bit of A]; a failed half
// is narrowed again, else the failing bits spell the pair across the halves.
void IsolationPlanner::absorb_narrow(Absorb& pass, const Investigation& inv) {
  const std::size_t half = inv.members.size() / 2;
  std::vector<std::uint32_t> a(inv.members.begin(),
                               inv.members.begin() + static_cast<std::ptrdiff_t>(half));
  std::vector<std::uint32_t> b(inv.members.begin() + static_cast<std::ptrdiff_t>(half),
                               inv.members.end());
  const int bits_b = static_cast<int>(std::bit_width(b.size() - 1));
  const int bits_a = static_cast<int>(std::bit_width(a.size() - 1));
  bool a_failed = pass.result_of(inv.tests[0]) == 0, b_failed = pass.result_of(inv.tests[1]) == 0;
  if (a_failed || b_failed) {
    // The faulty link lies inside a half: narrow that one.
    Investigation n;
    n.stage = Investigation::Stage::Narrow;
    n.members = a_failed ? a : b;
    if (n.members.size() >= 2) {
      pass.next.push_back(std::move(n));
    } else {
      add_finding(inv.members, kCoarseLink);
    }
    return;
  }
  std::size_t ib = 0, ia = 0;
  for (int j = 0; j < bits_b; ++j) {
    if (pass.result_of(inv.tests[2 + static_cast<std::size_t>(j)]) == 0) ib |= std::size_t{1} << j;
  }
  for (int j = 0; j < bits_a; ++j) {
    if (pass.result_of(inv.tests[2 + static_cast<std::size_t>(bits_b + j)]) == 0)
      ia |= std::size_t{1} << j;
  }
  if (ia < a.size() && ib < b.size()) {
    Investigation n;
    n.stage = Investigation::Stage::LinkConfirm;
    n.members = inv.members;
    n.suspect = a[ia];
    n.suspect2 = b[ib];
    pass.next.push_back(std::move(n));
  } else {
    add_finding(inv.members, kCoarseLink);
  }
}

// LinkConfirm: the decoded pair failing alone is the faulty link; passing, the finding stays
// coarse.
void IsolationPlanner::absorb_link_confirm(Absorb& pass, const Investigation& inv) {
  if (pass.result_of(inv.tests[0]) == 0) {
    add_finding({inv.suspect, inv.suspect2},
                "the link between " + names_[inv.suspect] + " and " + names_[inv.suspect2] +
                    " is faulty: each passes other tests, together they fail (a cable, NIC "
                    "port or switch between them)");
  } else {
    add_finding(inv.members, kCoarseLink);
  }
}

// Crowded parts searched together: the nodes still in doubt in any of them, every failed test
// of theirs a constraint, at most the expected count of faulty nodes not yet found.
void IsolationPlanner::absorb_parts_search(Absorb& pass) const {
  if (pass.parts_search.empty()) return;
  Investigation n;
  n.stage = Investigation::Stage::Search;
  std::size_t found = 0;
  for (NodeState st : state_) found += st == NodeState::Faulty ? 1 : 0;
  n.max_faulty = static_cast<std::uint32_t>(
      std::max<std::size_t>(1, expected_faulty() > found ? expected_faulty() - found : 1));
  for (const Investigation* inv : pass.parts_search) {
    for (std::uint32_t m : without_good(inv->frame)) n.members.push_back(m);
    for (std::uint32_t id : inv->tests) {
      if (pass.failed(id)) pass.add_constraint(n, pass.by_id.at(id)->members);
    }
  }
  if (!n.members.empty()) pass.next.push_back(std::move(n));
}

// Complements: tests [confirm the decoded member, then per bit j of the code the pooled
// test of the rests lacking bit j]. A group with one faulty member fails its confirmation
// and none of its complements; two faulty members a, b fail the complements of the bits
// where they differ (a XOR b), so a group whose decoded member passed holds a pair with
// a AND b = code minus those bits, told apart next round.
// ComplementSplit: the same tests, then the split-ahead tests of the code's width (pooled
// over the groups like the complements), which name the pair among those differing in the
// failed complements' bits (kSplitAhead).
void IsolationPlanner::absorb_complements(Absorb& pass) const {
  pass.last = options_.round_budget - round_.number <= 1;
  for (const Investigation* inv : pass.complements) pass.seen.push_back(pass.read_complements(inv));
  for (SeenComplement& s : pass.seen) {
    s.own = std::none_of(pass.seen.begin(), pass.seen.end(),
                         [&](const SeenComplement& o) { return Absorb::share(s, o); });
  }
  for (SeenComplement& s : pass.seen) {
    if (s.rest.empty()) continue;
    if (!s.confirm_failed) {
      absorb_unconfirmed(pass, s);
      continue;
    }
    // The decoded member is faulty. Failed complements of its bits come from a pair found
    // elsewhere (then this rest is only checked), or from a second faulty member here whose
    // code is a subset of the first's: code minus the failed bits.
    const std::uint32_t b = s.inv->code & ~s.differ;
    if (!pass.pair_beside(s) && b != s.inv->code && pass.unknown_at(*s.inv, b)) {
      Investigation d;
      d.stage = Investigation::Stage::Decoded;
      d.suspect = s.inv->frame[b];
      std::erase(s.rest, d.suspect);
      pass.next.push_back(std::move(d));
    }
    pass.push_rest(s, std::move(s.rest));
  }
  // Fewer faulty nodes found or pending than expected: the rests of groups with complements of
  // their own are searched member by member in the last round rather than checked together.
  if (!pass.own_rests.empty()) {
    std::size_t explained = 2 * pass.candidate_sets;
    for (NodeState st : state_) explained += st == NodeState::Faulty ? 1 : 0;
    for (const Investigation& inv : pass.next) {
      explained += inv.stage == Investigation::Stage::Decoded ? 1 : 0;
    }
    if (explained < expected_faulty()) {
      for (std::size_t i : pass.own_rests) pass.next[i].stage = Investigation::Stage::New;
    }
  }
}

// A complement group whose decoded member passed: its fault lies in the rest, a pair when two
// or more complements failed (decoded now when two did or split-ahead tests name it).
void IsolationPlanner::absorb_unconfirmed(Absorb& pass, SeenComplement& s) const {
  Investigation n;
  if (std::popcount(s.differ) >= 2) {
    n.stage = Investigation::Stage::Pair;
    n.frame = s.inv->frame;
    n.code = s.inv->code;
    n.mask = s.differ;
  }
  if (std::popcount(s.differ) == 2) {
    // a = base + p, b = base + q: code itself passed, so no split is needed.
    pass.decode_pair(n, s.differ & (~s.differ + 1), std::move(s.rest));
    return;
  }
  if ((s.inv->stage == Investigation::Stage::ComplementSplit || pass.last) &&
      std::popcount(s.differ) > 2) {
    absorb_split_ahead(pass, s, n);
    return;
  }
  n.members = std::move(s.rest);
  pass.next.push_back(std::move(n));
}

// Split ahead: the one pair whose members fail exactly the split-ahead tests that failed
// (tests of other groups' rests pass: those hold no faulty node). `pair`: the Pair
// investigation the complements spell.
void IsolationPlanner::absorb_split_ahead(Absorb& pass, SeenComplement& s,
                                          const Investigation& pair) const {
  const std::uint32_t c = s.inv->code, base = c & ~s.differ, low = s.differ & (~s.differ + 1);
  const int w = std::popcount(c);
  std::uint32_t match = 0;
  int matches = 0;
  for (std::uint32_t sub =
           s.inv->stage == Investigation::Stage::ComplementSplit ? (s.differ - 1) & s.differ : 0;
       sub != 0; sub = (sub - 1) & s.differ) {
    if ((sub & low) == 0) continue;
    const std::uint32_t a = base | sub, b = base | (s.differ & ~sub);
    if (!pass.unknown_at(*s.inv, a) || !pass.unknown_at(*s.inv, b)) continue;
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
    pass.decode_pair(pair, match, std::move(s.rest));
    return;
  }
  // No round is left for a split: every candidate base + S (S inside the differing
  // bits) is tested alone (each test a confirmation) and the rest checked. (Not base
  // itself, unless more than two faulty nodes may share the group: only with the code,
  // which passed, could it be one of a pair.)
  Investigation cand;
  for (std::uint32_t sub = s.differ;; sub = (sub - 1) & s.differ) {
    if ((sub != 0 || s.own) && pass.unknown_at(*s.inv, base | sub)) {
      cand.members.push_back(s.inv->frame[base | sub]);
      std::erase(s.rest, cand.members.back());
    }
    if (sub == 0) break;
  }
  if (!cand.members.empty()) {
    pass.next.push_back(std::move(cand));
    ++pass.candidate_sets;
  }
  pass.push_rest(s, std::move(s.rest));
}

// What no investigation took: the rests under a failed check nobody was blamed for, failed
// screen groups, and nodes awaiting another confirmation.
void IsolationPlanner::absorb_leftovers(Absorb& pass) const {
  if (!pass.failed_check_rest.empty() && !pass.rest_blamed) {
    Investigation n;
    n.members = std::move(pass.failed_check_rest);
    pass.next.push_back(std::move(n));
  }
  // Otherwise those nodes stay undecided and plan_next() screens them again.
  for (const Test& t : tests_) {
    if (t.purpose != TestPurpose::Screen || t.result != 0) continue;
    Investigation n;
    n.members = without_good(t.members);
    if (!n.members.empty()) pass.next.push_back(std::move(n));
  }
  for (std::uint32_t m : pass.reconfirm) {
    bool held = std::any_of(pass.next.begin(), pass.next.end(), [&](const Investigation& inv) {
      return std::find(inv.members.begin(), inv.members.end(), m) != inv.members.end();
    });
    if (!held) {
      Investigation n;
      n.members = {m};
      pass.next.push_back(std::move(n));
    }
  }
}

}  // namespace gpufleet::certify
