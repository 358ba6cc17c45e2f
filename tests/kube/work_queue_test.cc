#include "kube/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueue, DeduplicatesQueuedKeys) {
  WorkQueue q;
  q.add("a");
  q.add("b");
  q.add("a");
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.get(), "a");
  EXPECT_EQ(q.get(), "b");
  q.done("a");
  q.done("b");
  EXPECT_EQ(q.size(), 0u);
}

TEST(WorkQueue, KeyAddedWhileProcessingIsRequeuedAfterDone) {
  WorkQueue q;
  q.add("a");
  auto k = q.get();
  ASSERT_EQ(k, "a");
  q.add("a");  // must not be handed to another worker now
  EXPECT_EQ(q.size(), 0u);
  q.add("a");
  q.done("a");
  EXPECT_EQ(q.size(), 1u);  // once, however many adds
  EXPECT_EQ(q.get(), "a");
  q.done("a");
}

TEST(WorkQueue, AddAfterDelaysAndKeepsTheEarliest) {
  WorkQueue q;
  auto start = Clock::now();
  q.add_after("late", 200ms);
  q.add_after("soon", 30ms);
  q.add_after("soon", 500ms);  // later duplicate ignored
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.get(), "soon");
  EXPECT_GE(Clock::now() - start, 30ms);
  q.done("soon");
  EXPECT_EQ(q.get(), "late");
  EXPECT_GE(Clock::now() - start, 200ms);
  q.done("late");
}

TEST(WorkQueue, RateLimitedBackoffGrowsPerKeyAndForgetResets) {
  WorkQueueOptions o;
  o.base_delay = 10ms;
  o.max_delay = 80ms;
  o.qps = 0;  // only the per-key backoff here
  WorkQueue q(o);
  for (int i = 0; i < 5; ++i) q.add_rate_limited("k");
  EXPECT_EQ(q.num_requeues("k"), 5);
  // One pending entry (the earliest time wins): take it out first, or the next add keeps its
  // time (the first add + 10 ms), which is earlier than `start` below + 10 ms.
  EXPECT_EQ(q.get(), "k");
  q.done("k");
  q.forget("k");
  EXPECT_EQ(q.num_requeues("k"), 0);
  auto start = Clock::now();
  q.add_rate_limited("k");
  EXPECT_EQ(q.get(), "k");
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, 10ms);
  q.done("k");
}

TEST(WorkQueue, OverallTokenBucketLimitsRetries) {
  WorkQueueOptions o;
  o.base_delay = 1ms;
  o.qps = 20;
  o.burst = 1;
  WorkQueue q(o);
  auto start = Clock::now();
  for (int i = 0; i < 5; ++i) q.add_rate_limited("key" + std::to_string(i));
  for (int i = 0; i < 5; ++i) {
    auto k = q.get();
    ASSERT_TRUE(k);
    q.done(*k);
  }
  // Five distinct keys, each with a 1 ms backoff, still paced at 20/s after the first.
  EXPECT_GE(Clock::now() - start, 190ms);
}

TEST(WorkQueue, ShutDownWakesWorkers) {
  WorkQueue q;
  std::thread worker([&] { EXPECT_EQ(q.get(), std::nullopt); });
  std::this_thread::sleep_for(20ms);
  q.shut_down();
  worker.join();
  q.add("x");  // ignored after shutdown
  EXPECT_EQ(q.get(), std::nullopt);
}

TEST(WorkQueue, DrainWaitsForKeysInProcess) {
  WorkQueue q;
  q.add("a");
  auto k = q.get();
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    q.shut_down_and_drain();
    drained = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(drained.load());
  q.done(*k);
  drainer.join();
  EXPECT_TRUE(drained.load());
}

// Many producers and workers: every key is processed, never by two workers at once, and the
// last add of a key is always followed by a processing of it.
TEST(WorkQueue, ConcurrentWorkersNeverShareAKey) {
  WorkQueue q;
  std::mutex mu;
  std::set<std::string> in_flight;
  std::map<std::string, int> processed;
  std::atomic<bool> overlap{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto k = q.get()) {
        {
          std::lock_guard lock(mu);
          if (!in_flight.insert(*k).second) overlap = true;
        }
        std::this_thread::yield();
        {
          std::lock_guard lock(mu);
          in_flight.erase(*k);
          ++processed[*k];
        }
        q.done(*k);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < 2000; ++i) q.add("key-" + std::to_string((i * 7 + p) % 50));
    });
  }
  for (auto& t : producers) t.join();
  // Wait until idle, then stop.
  for (int i = 0; i < 500 && q.size() > 0; ++i) std::this_thread::sleep_for(5ms);
  q.shut_down_and_drain();
  for (auto& t : workers) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(processed.size(), 50u);
}

}  // namespace
}  // namespace gpufleet::kube
