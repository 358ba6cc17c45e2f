// The reconcilers' clock: SystemClock follows the real clocks, FakeClock moves only when told
// (from any thread), and a Manager hands its reconcilers the clock it was given.
#include "controller/clock.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/time.h"

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;

const core::Timestamp kStart = core::Timestamp::parse_rfc3339("2025-03-01T10:00:00.5Z");

TEST(Clock, SystemClockReadsTheRealClocks) {
  const auto before = std::chrono::system_clock::now();
  const auto steady_before = std::chrono::steady_clock::now();
  Clock& c = system_clock();
  const auto wall = c.now();
  const auto steady = c.steady_now();
  EXPECT_GE(wall, before);
  EXPECT_LE(wall, std::chrono::system_clock::now());
  EXPECT_GE(steady, steady_before);
  EXPECT_LE(steady, std::chrono::steady_clock::now());
  EXPECT_EQ(&system_clock(), &c) << "one process-wide instance";
}

TEST(Clock, FakeClockStandsStillUntilMoved) {
  FakeClock c(kStart);
  EXPECT_EQ(c.timestamp().to_rfc3339(core::TimestampPrecision::Nanos), "2025-03-01T10:00:00.5Z");
  EXPECT_EQ(c.unix_seconds(), 1740823200);
  const auto t0 = c.now();
  const auto s0 = c.steady_now();
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(c.now(), t0);
  EXPECT_EQ(c.steady_now(), s0);

  c.advance(90min);
  EXPECT_EQ(c.now() - t0, 90min);
  EXPECT_EQ(c.steady_now() - s0, 90min);
  EXPECT_EQ(c.timestamp().to_rfc3339(core::TimestampPrecision::Seconds), "2025-03-01T11:30:00Z");
}

TEST(Clock, FakeClockSetMovesTheWallTimeAndTheSteadyTimeNeverBack) {
  FakeClock c(kStart);
  const auto s0 = c.steady_now();
  c.set(c.now() + 1h);
  EXPECT_EQ(c.unix_seconds(), 1740823200 + 3600);
  EXPECT_EQ(c.steady_now() - s0, 1h);
  // Back in wall time (a clock step): durations measured across it stay non-negative.
  c.set(c.now() - 2h);
  EXPECT_EQ(c.unix_seconds(), 1740823200 - 3600);
  EXPECT_EQ(c.steady_now() - s0, 1h);
  c.advance(-10s);
  EXPECT_EQ(c.unix_seconds(), 1740823200 - 3610);
  EXPECT_EQ(c.steady_now() - s0, 1h);
}

TEST(Clock, FakeClockDefaultsToTheRealTimeNow) {
  const auto before = std::chrono::system_clock::now();
  FakeClock c;
  EXPECT_GE(c.now(), before);
  EXPECT_LE(c.now(), std::chrono::system_clock::now());
}

TEST(Clock, FakeClockIsSafeToMoveAndReadFromManyThreads) {
  FakeClock c(kStart);
  const auto t0 = c.now();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 1000; ++k) c.advance(1ms);
    });
    threads.emplace_back([&] {
      auto last = c.now();
      for (int k = 0; k < 1000; ++k) {
        const auto t = c.now();
        EXPECT_GE(t, last);  // only advanced forward here: never seen going back
        last = t;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.now() - t0, 4000ms);
}

}  // namespace
}  // namespace gpufleet::controller
