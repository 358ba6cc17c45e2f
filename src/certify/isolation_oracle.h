// A simulated fleet that answers group tests, for measuring and testing the isolation
// planner without a cluster (bench/certify_bench.cc, tests/certify).
//
// Each node has a bandwidth factor (1.0 healthy; a degraded node 0.80-0.93, the range of a
// slow link or a throttling GPU); a faulty link between two nodes halves the factor of any
// test holding both. A test measures the smallest factor of its members times (1 + e), e
// normal with sigma = jitter / 2 (so +-jitter is two sigma), and passes at >= 0.95 of the
// expected bandwidth. With jitter 0 a test passes exactly when it holds no faulty node and
// no faulty link.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "certify/isolation_planner.h"

namespace gpufleet::certify {

class SimulatedFleet {
 public:
  SimulatedFleet(std::size_t nodes, std::uint64_t seed, double jitter = 0.0);
  // Makes `count` distinct random nodes faulty (degraded); returns their indices, sorted.
  std::vector<std::size_t> degrade_random(std::size_t count);
  void degrade(std::size_t node, double factor);
  void break_link(std::size_t a, std::size_t b);

  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
  [[nodiscard]] std::vector<std::string> faulty_names() const;
  // One run of a group test over node names.
  bool run(const std::vector<std::string>& group);

 private:
  std::vector<std::string> names_;
  std::vector<double> factor_;
  std::set<std::pair<std::size_t, std::size_t>> links_;
  std::mt19937_64 rng_;
  double jitter_;
};

struct IsolationRun {
  IsolationVerdict verdict;
  int max_tests_in_round = 0;
};

// Drives `planner` against `fleet` until the verdict.
IsolationRun run_isolation(IsolationPlanner& planner, SimulatedFleet& fleet);

}  // namespace gpufleet::certify
