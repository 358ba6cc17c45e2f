#include "kube/rate_limit.h"

#include <gtest/gtest.h>

namespace gpufleet::kube {
namespace {

using std::chrono::milliseconds;

TEST(TokenBucket, BurstIsFreeThenPacedAtQps) {
  TokenBucket b(10, 3);  // 10/s: one token per 100 ms
  Clock::time_point t0 = Clock::now();
  EXPECT_EQ(b.reserve(t0), Clock::duration::zero());
  EXPECT_EQ(b.reserve(t0), Clock::duration::zero());
  EXPECT_EQ(b.reserve(t0), Clock::duration::zero());
  // Fourth and fifth wait one and two token periods: waiters queue in order.
  EXPECT_NEAR(std::chrono::duration<double>(b.reserve(t0)).count(), 0.1, 1e-6);
  EXPECT_NEAR(std::chrono::duration<double>(b.reserve(t0)).count(), 0.2, 1e-6);
  // After a second the debt is repaid and the bucket refilled, but never beyond the burst.
  Clock::time_point t1 = t0 + std::chrono::seconds(10);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b.reserve(t1), Clock::duration::zero());
  EXPECT_GT(b.reserve(t1), Clock::duration::zero());
}

TEST(TokenBucket, ZeroQpsDisablesLimiting) {
  TokenBucket b(0, 1);
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(b.reserve(t0), Clock::duration::zero());
}

TEST(Backoff, DoublesWithJitterUpToTheCap) {
  Backoff b(milliseconds(100), milliseconds(1000));
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto ceiling = std::min(milliseconds(100) * (1 << attempt), milliseconds(1000));
    auto d = b.next();
    EXPECT_GE(d, ceiling / 2) << attempt;
    EXPECT_LE(d, ceiling) << attempt;
  }
  b.reset();
  EXPECT_LE(b.next(), milliseconds(100));
}

}  // namespace
}  // namespace gpufleet::kube
