#include "certify/isolation_search.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace gpufleet::certify {
namespace {

// At most this many hypotheses are listed, and this many candidate sets visited to find
// them (all sets of up to 4 of 64 nodes fit); a larger doubt is searched with fewer faulty
// nodes assumed, or left to the planner's fixed schemes.
constexpr std::size_t kHypothesisCap = 200'000;
constexpr std::size_t kVisitBudget = 2'000'000;
// Tests one designed round may hold.
constexpr std::size_t kMaxTestsPerRound = 64;
// Random candidate tests per density tried for each test the greedy design adds.
constexpr int kRandomPerDensity = 32;
// The local search after the greedy design: at most this many steps, and about this many
// hypothesis evaluations in all (a few tens of milliseconds).
constexpr std::size_t kImproveSteps = 6000;
constexpr std::size_t kImproveWork = 100'000'000;
// Local search chains per designed round (each its own steps; the best design is kept).
constexpr int kChains = 2;
// How much the expected tests after a round count beside the worst in the local search.
constexpr double kExpectedWeight = 0.5;
// A round is worth this many tests: a designed round is run only when it saves more than
// that against finishing now (a round is minutes of an idle cluster).
constexpr double kRoundCost = 2.0;

std::uint64_t all_of(int n) { return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1; }

// The hypotheses that give the same results for the tests chosen so far.
struct Bucket {
  std::uint64_t uni = 0;        // nodes faulty in at least one of them
  std::uint64_t passed = 0;     // nodes in a test that passed (healthy from then on)
  std::uint64_t confirmed = 0;  // nodes alone in a test that failed (faulty, decided)
  std::size_t count = 0;
};

// Tests still to run after this round for a bucket, with one round left: each node faulty in
// some hypothesis alone, and one check of the others still in doubt.
int finish_cost(const Bucket& b, std::uint64_t all) {
  const std::uint64_t open = b.uni & ~b.confirmed;
  const bool rest = (all & ~b.passed & ~b.uni) != 0;
  return std::popcount(open) + (rest ? 1 : 0);
}

struct Score {
  int worst = 0;
  double expected = 0;  // every hypothesis equally likely
};

Score score_of(const std::vector<Bucket>& buckets, std::uint64_t all, std::size_t hypotheses) {
  Score s;
  for (const Bucket& b : buckets) {
    if (b.count == 0) continue;
    const int c = finish_cost(b, all);
    s.worst = std::max(s.worst, c);
    s.expected += static_cast<double>(b.count) * c;
  }
  s.expected /= static_cast<double>(hypotheses);
  return s;
}

class Designer {
 public:
  Designer(int n, std::vector<std::uint64_t> hypotheses, std::vector<std::uint64_t> constraints)
      : all_(all_of(n)),
        hyps_(std::move(hypotheses)),
        constraints_(std::move(constraints)),
        bucket_of_(hyps_.size(), 0) {
    Bucket b;
    for (std::uint64_t h : hyps_) b.uni |= h;
    b.count = hyps_.size();
    buckets_.push_back(b);
    doubt_ = b.uni;
    rng_ ^= doubt_ * 0xbf58476d1ce4e5b9ULL;
    for (std::uint64_t r = doubt_; r != 0; r &= r - 1) nodes_.push_back(std::countr_zero(r));
  }

  SearchRound design() {
    const SearchRound start = greedy();
    // Independent chains from the greedy design; the best stays. A chain settles in a local
    // optimum now and then, and restarts cost less than a longer chain for the same result.
    SearchRound out;
    double best = 0;
    for (int chain = 0; chain < kChains; ++chain) {
      SearchRound r = start;
      const double f = improve(r);
      if (chain == 0 || f < best - 1e-9) {
        best = f;
        out = std::move(r);
      }
    }
    out.hypotheses = hyps_.size();
    return out;
  }

 private:
  // Adds the test that lowers the expected tests after this round the most, while any does,
  // and keeps the prefix with the fewest tests in all, this round's and after. Tests often
  // pay only together (the halves that tell a pair apart), so one that saves less than
  // itself is still taken and the prefix decides.
  SearchRound greedy() {
    std::vector<std::uint64_t> candidates = structured_candidates();
    std::vector<std::uint64_t> chosen;
    SearchRound out;
    Score now = score_of(buckets_, all_, hyps_.size());
    double best_total = now.expected;
    out.expected_after = now.expected;
    out.worst_after = now.worst;
    while (chosen.size() < kMaxTestsPerRound) {
      double best = now.expected - 1e-9;
      std::uint64_t pick = 0;
      auto consider = [&](std::uint64_t t) {
        if (t == 0 || std::find(chosen.begin(), chosen.end(), t) != chosen.end()) return;
        const double e = score_of(split(t), all_, hyps_.size()).expected;
        if (e < best) {
          best = e;
          pick = t;
        }
      };
      for (std::uint64_t t : candidates) consider(t);
      for (std::uint64_t t : random_candidates()) consider(t);
      if (pick == 0) break;
      buckets_ = split(pick, true);
      chosen.push_back(pick);
      now = score_of(buckets_, all_, hyps_.size());
      if (static_cast<double>(chosen.size()) + now.expected < best_total - 1e-9) {
        best_total = static_cast<double>(chosen.size()) + now.expected;
        out.tests = chosen;
        out.expected_after = now.expected;
        out.worst_after = now.worst;
      }
      for (std::uint64_t t : likeliest_rest()) candidates.push_back(t);
    }
    return out;
  }

  // The buckets after adding test t: each splits by whether t holds a faulty node. With
  // `keep`, bucket_of_ follows (empty buckets dropped).
  std::vector<Bucket> split(std::uint64_t t, bool keep = false) {
    std::vector<Bucket> next(2 * buckets_.size());
    const bool single = std::popcount(t) == 1;
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      next[2 * k].passed = buckets_[k].passed | t;
      next[2 * k].confirmed = buckets_[k].confirmed;
      next[2 * k + 1].passed = buckets_[k].passed;
      next[2 * k + 1].confirmed = buckets_[k].confirmed | (single ? t : 0);
    }
    for (std::size_t i = 0; i < hyps_.size(); ++i) {
      Bucket& b = next[2 * bucket_of_[i] + ((hyps_[i] & t) != 0 ? 1 : 0)];
      b.uni |= hyps_[i];
      ++b.count;
    }
    if (!keep) return next;
    std::vector<std::uint32_t> renumber(next.size(), 0);
    std::vector<Bucket> kept;
    for (std::size_t k = 0; k < next.size(); ++k) {
      if (next[k].count == 0) continue;
      renumber[k] = static_cast<std::uint32_t>(kept.size());
      kept.push_back(next[k]);
    }
    for (std::size_t i = 0; i < hyps_.size(); ++i)
      bucket_of_[i] = renumber[2 * bucket_of_[i] + ((hyps_[i] & t) != 0 ? 1 : 0)];
    return kept;
  }

  // Every node in doubt alone; the bit slices (by position, and their complements) of the
  // nodes in doubt and of those of each constraint, which spell a lone faulty node of a
  // failed test; and the likeliest-rest tests of the start.
  std::vector<std::uint64_t> structured_candidates() const {
    std::vector<std::uint64_t> out;
    for (int v : nodes_) out.push_back(std::uint64_t{1} << v);
    auto slices = [&](std::uint64_t set) {
      std::vector<int> members;
      for (std::uint64_t r = set & doubt_; r != 0; r &= r - 1)
        members.push_back(std::countr_zero(r));
      for (int j = 0; j < static_cast<int>(std::bit_width(members.size())); ++j) {
        std::uint64_t with = 0;
        for (std::size_t i = 0; i < members.size(); ++i) {
          if ((i >> j) & 1U) with |= std::uint64_t{1} << members[i];
        }
        out.push_back(with);
        out.push_back(set & doubt_ & ~with);
      }
      out.push_back(set & doubt_);
    };
    slices(doubt_);
    for (std::uint64_t c : constraints_) slices(c);
    for (std::uint64_t t : likeliest_rest()) out.push_back(t);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // Random subsets of the nodes in doubt of several densities, fresh for every test chosen,
  // from a generator seeded by the input (the design is repeatable).
  std::vector<std::uint64_t> random_candidates() {
    std::vector<std::uint64_t> out;
    for (std::uint64_t density : {2, 3, 4, 5, 6, 8, 10, 12}) {
      for (int k = 0; k < kRandomPerDensity; ++k) out.push_back(random_subset(density));
    }
    return out;
  }

  std::uint64_t random_subset(std::uint64_t density) {
    std::uint64_t t = 0;
    for (int v : nodes_) {
      if (next_random() % density == 0) t |= std::uint64_t{1} << v;
    }
    return t;
  }

  std::uint64_t next_random() {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }

  // For the largest buckets: all their nodes still in doubt except those of one smallest
  // hypothesis, a test that passes exactly when that hypothesis is the truth.
  std::vector<std::uint64_t> likeliest_rest() const {
    std::vector<std::size_t> order(buckets_.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    const std::size_t top = std::min<std::size_t>(order.size(), 8);
    std::partial_sort(
        order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
        [&](std::size_t a, std::size_t b) { return buckets_[a].count > buckets_[b].count; });
    std::vector<std::uint64_t> smallest(top, 0);
    std::vector<int> size(top, 65);
    for (std::size_t i = 0; i < hyps_.size(); ++i) {
      for (std::size_t r = 0; r < top; ++r) {
        if (bucket_of_[i] == order[r] && std::popcount(hyps_[i]) < size[r]) {
          size[r] = std::popcount(hyps_[i]);
          smallest[r] = hyps_[i];
        }
      }
    }
    std::vector<std::uint64_t> out;
    for (std::size_t r = 0; r < top; ++r) {
      const std::uint64_t rest = all_ & ~buckets_[order[r]].passed & ~smallest[r];
      if (rest != 0) out.push_back(rest);
    }
    return out;
  }

  // The worst and expected tests after a round of `tests`, from scratch.
  Score evaluate(const std::vector<std::uint64_t>& tests) const {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed(hyps_.size());
    for (std::size_t i = 0; i < hyps_.size(); ++i) {
      std::uint64_t key = 0;
      for (std::size_t j = 0; j < tests.size(); ++j) {
        if ((hyps_[i] & tests[j]) != 0) key |= std::uint64_t{1} << j;
      }
      keyed[i] = {key, hyps_[i]};
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<Bucket> buckets;
    for (std::size_t a = 0; a < keyed.size();) {
      Bucket b;
      const std::uint64_t key = keyed[a].first;
      for (std::size_t j = 0; j < tests.size(); ++j) {
        const bool fails = ((key >> j) & 1U) != 0;
        if (!fails) b.passed |= tests[j];
        if (fails && std::popcount(tests[j]) == 1) b.confirmed |= tests[j];
      }
      for (; a < keyed.size() && keyed[a].first == key; ++a) {
        b.uni |= keyed[a].second;
        ++b.count;
      }
      buckets.push_back(b);
    }
    return score_of(buckets, all_, hyps_.size());
  }

  // Local search from the greedy design: drop, add or replace a test, or move one node in or
  // out of one, keeping each change that does not raise this round's tests + the worst after
  // (the isolation's target is a bound) + half the expected after.
  // Returns the design's score (this round's tests + worst + weighted expected).
  double improve(SearchRound& out) {
    if (nodes_.empty()) return static_cast<double>(out.tests.size()) + out.worst_after;
    auto total = [](const std::vector<std::uint64_t>& d, const Score& s) {
      return static_cast<double>(d.size()) + s.worst + kExpectedWeight * s.expected;
    };
    std::vector<std::uint64_t> cur = out.tests;
    Score score = evaluate(cur);
    double f = total(cur, score);
    const std::size_t steps =
        std::min(kImproveSteps, kImproveWork / std::max<std::size_t>(1, hyps_.size()));
    for (std::size_t step = 0; step < steps; ++step) {
      std::vector<std::uint64_t> d = cur;
      const std::uint64_t move = next_random() % 4;
      const std::size_t at = d.empty() ? 0 : next_random() % d.size();
      const std::uint64_t node = std::uint64_t{1} << nodes_[next_random() % nodes_.size()];
      std::uint64_t fresh = random_subset(2 + next_random() % 8);
      if (next_random() % 4 == 0) fresh = node;
      if (move == 0 && !d.empty()) {
        d.erase(d.begin() + static_cast<std::ptrdiff_t>(at));
      } else if (move == 1 && fresh != 0 && d.size() < kMaxTestsPerRound) {
        d.push_back(fresh);
      } else if (move == 2 && !d.empty() && fresh != 0) {
        d[at] = fresh;
      } else if (!d.empty()) {
        d[at] ^= node;
        if (d[at] == 0) d.erase(d.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        continue;
      }
      const Score s = evaluate(d);
      const double f2 = total(d, s);
      if (f2 <= f) {
        cur = std::move(d);
        f = f2;
        score = s;
      }
    }
    out.tests = std::move(cur);
    out.worst_after = score.worst;
    out.expected_after = score.expected;
    return f;
  }

  std::uint64_t all_;
  std::vector<std::uint64_t> hyps_;
  std::vector<std::uint64_t> constraints_;
  std::vector<std::uint32_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::uint64_t doubt_ = 0;  // nodes faulty in some hypothesis
  std::vector<int> nodes_;   // the bits of doubt_
  std::uint64_t rng_ = 0x9e3779b97f4a7c15ULL;
};

// Depth-first over the nodes in order; `budget` bounds the prefixes visited (sets that
// meet nothing yet are visited too), so a doubt too large to list is given up quickly.
struct Enumeration {
  const std::vector<std::uint64_t>& constraints;
  int n;
  int max_faulty;
  std::size_t cap;
  std::size_t budget;
  std::vector<std::uint64_t> out;
  bool overflow = false;

  void visit(int from, std::uint64_t chosen, int size) {
    if (overflow) return;
    if (budget-- == 0) {
      overflow = true;
      return;
    }
    bool meets_all = true;
    for (std::uint64_t c : constraints) {
      if ((c & chosen) != 0) continue;
      meets_all = false;
      // A constraint no later node can meet: nothing below this prefix fits.
      if (from >= 64 || (c >> from) == 0) return;
    }
    if (meets_all) {
      if (out.size() >= cap) {
        overflow = true;
        return;
      }
      out.push_back(chosen);
    }
    if (size == max_faulty) return;
    for (int v = from; v < n && !overflow; ++v)
      visit(v + 1, chosen | (std::uint64_t{1} << v), size + 1);
  }
};

}  // namespace

std::vector<std::uint64_t> consistent_hypotheses(int n,
                                                 const std::vector<std::uint64_t>& constraints,
                                                 int max_faulty, std::size_t cap, bool* overflow) {
  if (overflow != nullptr) *overflow = false;
  if (n < 0 || n > 64 || max_faulty < 0) return {};
  Enumeration e{constraints, n, std::min(max_faulty, n), cap, kVisitBudget, {}};
  e.visit(0, 0, 0);
  if (overflow != nullptr) *overflow = e.overflow;
  if (e.overflow) e.out.clear();
  return std::move(e.out);
}

SearchRound design_search_round(int n, const std::vector<std::uint64_t>& constraints,
                                int max_faulty, int rounds_left) {
  SearchRound out;
  std::vector<std::uint64_t> hyps =
      consistent_hypotheses(n, constraints, max_faulty, kHypothesisCap, &out.too_many);
  if (hyps.empty()) return out;
  // Finishing now: every node faulty in some hypothesis alone, the rest checked together.
  std::uint64_t uni = 0;
  for (std::uint64_t h : hyps) uni |= h;
  std::vector<std::uint64_t> finish;
  for (std::uint64_t r = uni; r != 0; r &= r - 1) finish.push_back(r & (~r + 1));
  if (const std::uint64_t rest = all_of(n) & ~uni; rest != 0) finish.push_back(rest);
  if (rounds_left >= 2) {
    out = Designer(n, hyps, constraints).design();
    if (!out.tests.empty() &&
        static_cast<double>(out.tests.size()) + out.expected_after + kRoundCost <
            static_cast<double>(finish.size()))
      return out;
  }
  out = SearchRound{};
  out.hypotheses = hyps.size();
  out.tests = std::move(finish);
  return out;
}

}  // namespace gpufleet::certify
