// The controller's work loop: de-duplication, one worker per key, backoff on errors,
// requeue_after, graceful drain and immediate stop. Runs under ThreadSanitizer too.
#include "controller/controller.h"
#include "core/errors.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A reconciler whose behaviour is a function; it records every call.
class FuncReconciler : public Reconciler {
 public:
  explicit FuncReconciler(std::function<Result(const Request&, std::stop_token)> f)
      : f_(std::move(f)) {}
  Result reconcile(const Request& r, std::stop_token stop) override {
    {
      std::lock_guard lock(mu_);
      calls_[r.key()].push_back(Clock::now());
    }
    return f_(r, stop);
  }
  std::vector<Clock::time_point> calls(const std::string& key) {
    std::lock_guard lock(mu_);
    return calls_[key];
  }
  std::size_t total() {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (auto& [k, v] : calls_) n += v.size();
    return n;
  }

 private:
  std::function<Result(const Request&, std::stop_token)> f_;
  std::mutex mu_;
  std::map<std::string, std::vector<Clock::time_point>> calls_;
};

bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds timeout = 10s) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

ControllerOptions opts(int workers, std::chrono::milliseconds base = 5ms) {
  ControllerOptions o;
  o.max_concurrent_reconciles = workers;
  o.queue.base_delay = base;
  o.queue.qps = 1000;
  o.queue.burst = 1000;
  return o;
}

TEST(ControllerLoop, KeysQueuedManyTimesBeforeStartAreReconciledOnce) {
  core::metrics::Registry reg;
  auto rec =
      std::make_shared<FuncReconciler>([](const Request&, std::stop_token) { return Result{}; });
  Controller c("dedup", rec, opts(2), reg);
  for (int i = 0; i < 100; ++i) c.enqueue({"ns", "a"});
  c.enqueue({"ns", "b"});
  c.start();
  ASSERT_TRUE(wait_until([&] { return rec->total() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rec->calls("ns/a").size(), 1u);
  EXPECT_EQ(rec->calls("ns/b").size(), 1u);
  c.stop_now();
  std::string text = reg.render();
  EXPECT_NE(
      text.find("gpufleet_controller_reconcile_total{controller=\"dedup\",result=\"success\"} 2"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("gpufleet_controller_workqueue_latency_seconds_count{controller=\"dedup\"} 2"),
      std::string::npos)
      << text;
}

TEST(ControllerLoop, NeverTwoWorkersOnOneKeyButDistinctKeysRunInParallel) {
  core::metrics::Registry reg;
  std::mutex mu;
  std::map<std::string, int> active;
  int running = 0, max_running = 0;
  bool overlap = false;
  auto rec = std::make_shared<FuncReconciler>([&](const Request& r, std::stop_token) {
    {
      std::lock_guard lock(mu);
      overlap |= ++active[r.key()] > 1;
      max_running = std::max(max_running, ++running);
    }
    std::this_thread::sleep_for(2ms);
    std::lock_guard lock(mu);
    --active[r.key()];
    --running;
    return Result{};
  });
  Controller c("parallel", rec, opts(4), reg);
  c.start();
  for (int round = 0; round < 30; ++round) {
    for (int k = 0; k < 8; ++k) c.enqueue({"ns", "k" + std::to_string(k)});
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(wait_until([&] { return c.stats().depth == 0; }));
  c.drain(5s);
  std::lock_guard lock(mu);
  EXPECT_FALSE(overlap);
  EXPECT_GT(max_running, 1);
  EXPECT_LE(max_running, 4);
}

TEST(ControllerLoop, ErrorsBackOffExponentiallyAndSuccessResets) {
  core::metrics::Registry reg;
  std::atomic<int> failures{0};
  auto rec = std::make_shared<FuncReconciler>([&](const Request&, std::stop_token) -> Result {
    if (failures.fetch_add(1) < 4) throw std::runtime_error("api down");
    return {};
  });
  Controller c("backoff", rec, opts(1, 40ms), reg);
  c.start();
  c.enqueue({"", "n1"});
  ASSERT_TRUE(wait_until([&] { return rec->calls("n1").size() == 5; }));
  auto t = rec->calls("n1");
  // Delays 40, 80, 160, 320 ms: each gap at least its backoff, each longer than the last.
  for (std::size_t i = 1; i < t.size(); ++i) {
    auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(t[i] - t[i - 1]);
    EXPECT_GE(gap, 40ms * (1 << (i - 1)) - 5ms) << "retry " << i;
  }
  auto s = c.stats();
  EXPECT_EQ(s.errors, 4u);
  EXPECT_EQ(s.retries, 4u);
  // Succeeded: a new failure starts again from the base delay (40 ms). Without the reset the
  // retry would wait at least the next step, 640 ms, so that is the bound, not a guess at how
  // fast a loaded (TSan) machine wakes a timer.
  failures = 3;
  c.enqueue({"", "n1"});
  ASSERT_TRUE(wait_until([&] { return rec->calls("n1").size() == 7; }));
  auto again = rec->calls("n1");
  EXPECT_LT(again[6] - again[5], 640ms);
  c.stop_now();
  EXPECT_NE(
      reg.render().find("gpufleet_controller_reconcile_errors_total{controller=\"backoff\"} 5"),
      std::string::npos);
}

TEST(ControllerLoop, RequeueAfterLooksAgainLater) {
  core::metrics::Registry reg;
  std::atomic<int> n{0};
  auto rec = std::make_shared<FuncReconciler>([&](const Request&, std::stop_token) {
    return n.fetch_add(1) == 0 ? Result{150ms, false} : Result{};
  });
  Controller c("poll", rec, opts(1), reg);
  c.start();
  c.enqueue({"", "x"});
  ASSERT_TRUE(wait_until([&] { return rec->calls("x").size() == 2; }));
  auto t = rec->calls("x");
  EXPECT_GE(t[1] - t[0], 145ms);
  c.stop_now();
}

TEST(ControllerLoop, StopNowInterruptsReconcilesAndStartsNoNewKey) {
  core::metrics::Registry reg;
  std::atomic<bool> interrupted{false};
  auto rec = std::make_shared<FuncReconciler>([&](const Request&, std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, 60s, [] { return false; });
    interrupted = stop.stop_requested();
    return Result{};
  });
  Controller c("lease-lost", rec, opts(1), reg);
  c.start();
  for (int i = 0; i < 5; ++i) c.enqueue({"", "k" + std::to_string(i)});
  ASSERT_TRUE(wait_until([&] { return rec->total() == 1; }));
  auto t0 = Clock::now();
  c.stop_now();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_TRUE(interrupted);
  EXPECT_EQ(rec->total(), 1u);  // the four other keys were not started
  c.enqueue({"", "late"});      // ignored after stop
  EXPECT_EQ(c.stats().active_workers, 0);
}

TEST(ControllerLoop, DrainFinishesQueuedKeysThenStops) {
  core::metrics::Registry reg;
  auto rec = std::make_shared<FuncReconciler>([](const Request&, std::stop_token) {
    std::this_thread::sleep_for(3ms);
    return Result{};
  });
  Controller c("drain", rec, opts(2), reg);
  for (int i = 0; i < 40; ++i) c.enqueue({"", "k" + std::to_string(i)});
  c.start();
  c.drain(10s);
  EXPECT_EQ(rec->total(), 40u);
}

TEST(ControllerLoop, DrainGraceExpiryAsksReconcilesToStop) {
  core::metrics::Registry reg;
  auto rec = std::make_shared<FuncReconciler>([](const Request&, std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, 60s, [] { return false; });
    return Result{};
  });
  Controller c("grace", rec, opts(1), reg);
  c.enqueue({"", "slow"});
  c.start();
  ASSERT_TRUE(wait_until([&] { return rec->total() == 1; }));
  auto t0 = Clock::now();
  c.drain(100ms);
  auto took = Clock::now() - t0;
  EXPECT_GE(took, 95ms);
  EXPECT_LT(took, 5s);
}

TEST(ControllerLoop, RejectsBadOptions) {
  core::metrics::Registry reg;
  auto rec =
      std::make_shared<FuncReconciler>([](const Request&, std::stop_token) { return Result{}; });
  EXPECT_THROW(Controller("Bad Name", rec, opts(1), reg), core::InvalidInput);
  EXPECT_THROW(Controller("ok", rec, opts(0), reg), core::InvalidInput);
  EXPECT_THROW(Controller("ok", nullptr, opts(1), reg), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::controller
