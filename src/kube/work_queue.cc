#include "kube/work_queue.h"

#include <algorithm>

namespace gpufleet::kube {

WorkQueue::WorkQueue(WorkQueueOptions options)
    : options_(options), bucket_(options.qps, options.burst) {}

WorkQueue::~WorkQueue() { shut_down(); }

void WorkQueue::add_locked(const std::string& key) {
  if (shutting_down_ || draining_) return;
  if (!dirty_.insert(key).second) return;  // already queued
  if (processing_.contains(key)) return;   // re-queued by done()
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mu_);
  add_locked(key);
}

void WorkQueue::add_after(const std::string& key, Clock::duration delay) {
  std::lock_guard lock(mu_);
  if (shutting_down_ || draining_) return;
  if (delay <= Clock::duration::zero()) {
    add_locked(key);
    return;
  }
  Clock::time_point at = Clock::now() + delay;
  // Keep only the earliest pending time per key.
  auto it = delayed_at_.find(key);
  if (it != delayed_at_.end() && it->second <= at) return;
  delayed_at_[key] = at;
  delayed_.push({at, seq_++, key});
  cv_.notify_all();  // a waiter may need to wake earlier
}

void WorkQueue::add_rate_limited(const std::string& key) {
  Clock::duration per_key;
  {
    std::lock_guard lock(mu_);
    int n = failures_[key]++;
    auto d = options_.base_delay;
    for (int i = 0; i < n && d < options_.max_delay; ++i) d *= 2;
    per_key = std::min(d, options_.max_delay);
  }
  Clock::duration overall = bucket_.reserve();
  add_after(key, std::max(per_key, overall));
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
}

int WorkQueue::num_requeues(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::promote_ready_locked(Clock::time_point now) {
  while (!delayed_.empty() && delayed_.top().at <= now) {
    Delayed d = delayed_.top();
    delayed_.pop();
    auto it = delayed_at_.find(d.key);
    if (it == delayed_at_.end() || it->second != d.at) continue;  // superseded by an earlier one
    delayed_at_.erase(it);
    add_locked(d.key);
  }
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mu_);
  for (;;) {
    promote_ready_locked(Clock::now());
    if (!queue_.empty()) break;
    if (shutting_down_) return std::nullopt;
    if (delayed_.empty()) {
      cv_.wait(lock);
    } else {
      // A copy: wait_until reads the deadline again after waking, by which time another
      // thread's add_after may have reallocated the heap under a reference.
      const Clock::time_point until = delayed_.top().at;
      cv_.wait_until(lock, until);
    }
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(mu_);
  processing_.erase(key);
  if (dirty_.contains(key)) {
    // Added again while being processed: hand it out once more.
    queue_.push_back(key);
    cv_.notify_one();
  }
  if (processing_.empty()) cv_.notify_all();  // a drain may be waiting
}

void WorkQueue::shut_down() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
  cv_.notify_all();
}

void WorkQueue::shut_down_and_drain() {
  std::unique_lock lock(mu_);
  draining_ = true;
  cv_.wait(lock, [&] { return processing_.empty(); });
  shutting_down_ = true;
  cv_.notify_all();
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

std::size_t WorkQueue::size() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace gpufleet::kube
