// A controller's work queue of object keys ("ns/name"), as in client-go:
//  - de-duplicating: a key queued twice is processed once; a key queued while a worker holds
//    it is processed again after done(), never by two workers at once;
//  - delaying: add_after() queues a key later;
//  - rate limited: add_rate_limited() delays a failing key by per-key exponential backoff and
//    all keys by an overall token bucket (the larger delay wins); forget() resets the backoff;
//  - graceful shutdown: shut_down() wakes every worker; shut_down_and_drain() first waits for
//    keys being processed to be done.
// Thread-safe; any number of workers may call get() concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kube/rate_limit.h"

namespace gpufleet::kube {

struct WorkQueueOptions {
  std::chrono::milliseconds base_delay{5};  // first retry of a failing key
  std::chrono::milliseconds max_delay{1000 * 1000};
  double qps = 10;  // overall retry rate (token bucket) ...
  int burst = 100;  // ... and burst
};

class WorkQueue {
 public:
  explicit WorkQueue(WorkQueueOptions options = {});
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void add(const std::string& key);
  void add_after(const std::string& key, Clock::duration delay);
  // For a key whose processing failed: queue it after its backoff.
  void add_rate_limited(const std::string& key);
  // The key succeeded: reset its backoff.
  void forget(const std::string& key);
  [[nodiscard]] int num_requeues(const std::string& key) const;

  // Blocks for the next key; nullopt once the queue is shut down.
  std::optional<std::string> get();
  // The worker finished `key` (successfully or not). Must follow every get().
  void done(const std::string& key);

  void shut_down();
  // Stops accepting keys, waits until every key handed out is done(), then shuts down.
  void shut_down_and_drain();
  [[nodiscard]] bool shutting_down() const;
  // Keys ready to be handed out (not counting delayed or in-process keys).
  [[nodiscard]] std::size_t size() const;

 private:
  struct Delayed {
    Clock::time_point at;
    std::uint64_t seq;
    std::string key;
    bool operator>(const Delayed& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void add_locked(const std::string& key);
  void promote_ready_locked(Clock::time_point now);

  WorkQueueOptions options_;
  TokenBucket bucket_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;       // queued (or to re-queue after done)
  std::unordered_set<std::string> processing_;  // handed out, not yet done
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<>> delayed_;
  std::unordered_map<std::string, Clock::time_point> delayed_at_;  // earliest per key
  std::unordered_map<std::string, int> failures_;
  std::uint64_t seq_ = 0;
  bool shutting_down_ = false;
  bool draining_ = false;
};

}  // namespace gpufleet::kube
