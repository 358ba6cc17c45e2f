// controller::WorkPool: one task per key at a time, every task run, done after each task (also
// after a failed one), and queued tasks dropped at destruction without running.
#include "controller/work_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;

bool wait_for(const std::function<bool()>& f) {
  for (int i = 0; i < 500; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return f();
}

TEST(WorkPool, RunsEveryTaskOncePerKeyAndSaysDone) {
  std::mutex mu;
  std::map<std::string, int> done;
  std::atomic<int> ran{0};
  WorkPool pool(
      4,
      [&](const std::string& k) {
        std::lock_guard l(mu);
        ++done[k];
      },
      nullptr);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.submit("k" + std::to_string(i), [&] { ++ran; }));
  ASSERT_TRUE(wait_for([&] { return pool.pending() == 0; }));
  EXPECT_EQ(ran.load(), 100);
  std::lock_guard l(mu);
  EXPECT_EQ(done.size(), 100u);
  for (const auto& [k, n] : done) EXPECT_EQ(n, 1) << k;
}

TEST(WorkPool, ASecondTaskForABusyKeyIsRefusedUntilTheFirstIsDone) {
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  WorkPool pool(2, nullptr, nullptr);
  ASSERT_TRUE(pool.submit("node-a", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
    ++ran;
  }));
  EXPECT_TRUE(pool.busy("node-a"));
  EXPECT_FALSE(pool.submit("node-a", [&] { ran += 100; }));
  EXPECT_FALSE(pool.busy("node-b"));
  release = true;
  ASSERT_TRUE(wait_for([&] { return !pool.busy("node-a"); }));
  EXPECT_EQ(ran.load(), 1);
  EXPECT_TRUE(pool.submit("node-a", [&] { ++ran; }));
  ASSERT_TRUE(wait_for([&] { return ran.load() == 2; }));
}

TEST(WorkPool, AFailingTaskIsReportedAndFreesItsKey) {
  std::mutex mu;
  std::string why;
  std::atomic<int> done{0};
  WorkPool pool(
      1, [&](const std::string&) { ++done; },
      [&](const std::string& k, const std::string& what) {
        std::lock_guard l(mu);
        why = k + ": " + what;
      });
  ASSERT_TRUE(pool.submit("n", [] { throw std::runtime_error("409 Conflict"); }));
  ASSERT_TRUE(wait_for([&] { return done.load() == 1; }));
  EXPECT_FALSE(pool.busy("n"));
  std::lock_guard l(mu);
  EXPECT_EQ(why, "n: 409 Conflict");
}

TEST(WorkPool, DestructionDropsQueuedTasksAndWaitsForRunningOnes) {
  std::atomic<bool> started{false}, finished{false};
  std::atomic<int> others{0};
  {
    WorkPool pool(1, nullptr, nullptr);
    pool.submit("slow", [&] {
      started = true;
      std::this_thread::sleep_for(100ms);
      finished = true;
    });
    ASSERT_TRUE(wait_for([&] { return started.load(); }));
    for (int i = 0; i < 10; ++i) pool.submit("q" + std::to_string(i), [&] { ++others; });
  }
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(others.load(), 0);
}

TEST(WorkPool, ZeroThreadsIsRefused) {
  EXPECT_THROW(WorkPool(0, nullptr, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace gpufleet::controller
