// Work a reconciler hands off so that its worker is free for the next object: a fixed set of
// threads running tasks keyed by object, at most one task per key at a time. A reconciler asks
// busy(key) and looks again later while its object's task is queued or running, so it never
// races its own hand-off. Tasks are lost when the process stops; what they write must be
// recoverable by a later reconcile (level-triggered), which is how sentinel uses it: the
// cordon is the worker's only write, the incident's bookkeeping follows here.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace gpufleet::controller {

class WorkPool {
 public:
  // `threads` >= 1. `done(key)` runs on the pool's thread after each task (exceptions from
  // the task are caught and passed to `failed(key, what)` first).
  WorkPool(std::size_t threads, std::function<void(const std::string&)> done,
           std::function<void(const std::string&, const std::string&)> failed);
  ~WorkPool();  // drops queued tasks, waits for running ones
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `task` for `key`; false (and nothing queued) when a task for `key` is already
  // queued or running.
  bool submit(const std::string& key, std::function<void()> task);
  [[nodiscard]] bool busy(const std::string& key) const;
  [[nodiscard]] std::size_t pending() const;

 private:
  struct Item {
    std::string key;
    std::function<void()> task;
  };
  void run(std::stop_token stop);

  std::function<void(const std::string&)> done_;
  std::function<void(const std::string&, const std::string&)> failed_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Item> queue_;
  std::set<std::string, std::less<>> keys_;  // queued or running
  std::vector<std::jthread> threads_;        // last: joined before the rest goes
};

}  // namespace gpufleet::controller
