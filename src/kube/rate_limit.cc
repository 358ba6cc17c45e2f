#include "kube/rate_limit.h"

#include <algorithm>
#include <random>
#include <thread>

namespace gpufleet::kube {

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps), burst_(std::max(burst, 1)), tokens_(std::max(burst, 1)), last_(Clock::now()) {}

Clock::duration TokenBucket::reserve(Clock::time_point now) {
  if (qps_ <= 0) return Clock::duration::zero();
  std::lock_guard lock(mu_);
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min<double>(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1.0;
  if (tokens_ >= 0) return Clock::duration::zero();
  // In debt: the token is paid for once the bucket refills to zero.
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(-tokens_ / qps_));
}

void TokenBucket::acquire() {
  Clock::duration wait = reserve();
  if (wait > Clock::duration::zero()) std::this_thread::sleep_for(wait);
}

Clock::duration Backoff::next() {
  Clock::duration ceiling = base_;
  for (int i = 0; i < attempt_ && ceiling < max_; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, max_);
  if (attempt_ < 62) ++attempt_;
  auto half = ceiling / 2;
  return half + std::chrono::duration_cast<Clock::duration>(half * random_fraction());
}

double random_fraction() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

}  // namespace gpufleet::kube
