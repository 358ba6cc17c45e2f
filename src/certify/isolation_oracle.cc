#include "certify/isolation_oracle.h"

#include <algorithm>
#include <cstdio>

#include "core/errors.h"

namespace gpufleet::certify {

SimulatedFleet::SimulatedFleet(std::size_t nodes, std::uint64_t seed, double jitter)
    : factor_(nodes, 1.0), rng_(seed), jitter_(jitter) {
  char name[32];
  for (std::size_t i = 0; i < nodes; ++i) {
    std::snprintf(name, sizeof name, "node-%05zu", i);
    names_.emplace_back(name);
  }
}

std::vector<std::size_t> SimulatedFleet::degrade_random(std::size_t count) {
  if (count > names_.size()) throw core::InvalidInput("more faulty nodes than nodes");
  std::vector<std::size_t> idx(names_.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  // Partial Fisher-Yates: the first `count` entries are a uniform random subset.
  for (std::size_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<std::size_t> pick(i, idx.size() - 1);
    std::swap(idx[i], idx[pick(rng_)]);
  }
  idx.resize(count);
  std::uniform_real_distribution<double> f(0.80, 0.93);
  for (std::size_t i : idx) factor_[i] = f(rng_);
  std::sort(idx.begin(), idx.end());
  return idx;
}

void SimulatedFleet::degrade(std::size_t node, double factor) { factor_.at(node) = factor; }

void SimulatedFleet::break_link(std::size_t a, std::size_t b) {
  links_.insert({std::min(a, b), std::max(a, b)});
}

std::vector<std::string> SimulatedFleet::faulty_names() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (factor_[i] < 0.95) out.push_back(names_[i]);
  }
  return out;
}

bool SimulatedFleet::run(const std::vector<std::string>& group) {
  std::vector<std::size_t> idx;
  double worst = 1.0;
  for (const std::string& n : group) {
    // Names are node-NNNNN, so the index is the number.
    std::size_t i = std::stoul(n.substr(5));
    idx.push_back(i);
    worst = std::min(worst, factor_.at(i));
  }
  for (const auto& [a, b] : links_) {
    if (std::find(idx.begin(), idx.end(), a) != idx.end() &&
        std::find(idx.begin(), idx.end(), b) != idx.end()) {
      worst = std::min(worst, 0.5);
    }
  }
  double measured = worst;
  if (jitter_ > 0) measured *= 1.0 + std::normal_distribution<double>(0.0, jitter_ / 2)(rng_);
  return measured >= 0.95;
}

IsolationRun run_isolation(IsolationPlanner& planner, SimulatedFleet& fleet) {
  IsolationRun r;
  while (const Round* round = planner.pending()) {
    // Copy: recording the last result replaces the pending round.
    std::vector<GroupTest> tests = round->tests;
    r.max_tests_in_round = std::max(r.max_tests_in_round, static_cast<int>(tests.size()));
    for (const GroupTest& t : tests) planner.record(t.id, fleet.run(t.nodes));
  }
  r.verdict = planner.verdict();
  return r;
}

}  // namespace gpufleet::certify
