#include "controller/work_pool.h"

#include <exception>
#include <stdexcept>
#include <utility>

namespace gpufleet::controller {

WorkPool::WorkPool(std::size_t threads, std::function<void(const std::string&)> done,
                   std::function<void(const std::string&, const std::string&)> failed)
    : done_(std::move(done)), failed_(std::move(failed)) {
  if (threads == 0) throw std::invalid_argument("WorkPool: threads must be at least 1");
  threads_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this](std::stop_token stop) { run(stop); });
}

WorkPool::~WorkPool() {
  for (auto& t : threads_) t.request_stop();
  cv_.notify_all();
  threads_.clear();  // joins
}

bool WorkPool::submit(const std::string& key, std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (!keys_.insert(key).second) return false;
    queue_.push_back({key, std::move(task)});
  }
  cv_.notify_one();
  return true;
}

bool WorkPool::busy(const std::string& key) const {
  std::lock_guard lock(mu_);
  return keys_.contains(key);
}

std::size_t WorkPool::pending() const {
  std::lock_guard lock(mu_);
  return keys_.size();
}

void WorkPool::run(std::stop_token stop) {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [this] { return !queue_.empty(); });
      if (stop.stop_requested()) return;  // queued tasks are dropped
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      item.task();
    } catch (const std::exception& e) {
      if (failed_) failed_(item.key, e.what());
    } catch (...) {
      if (failed_) failed_(item.key, "unknown error");
    }
    {
      std::lock_guard lock(mu_);
      keys_.erase(item.key);
    }
    if (done_) done_(item.key);
  }
}

}  // namespace gpufleet::controller
