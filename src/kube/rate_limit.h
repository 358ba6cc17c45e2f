// Rate limiting and backoff shared by the REST client and the work queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace gpufleet::kube {

using Clock = std::chrono::steady_clock;

// Token bucket: `qps` tokens per second, at most `burst` saved up. Thread-safe.
// reserve() takes a token now (going into debt if needed) and says how long the caller must
// wait before using it, so waiters queue fairly in arrival order without a thread per waiter.
class TokenBucket {
 public:
  // qps <= 0 disables limiting (every reservation is free).
  TokenBucket(double qps, int burst);

  [[nodiscard]] Clock::duration reserve(Clock::time_point now = Clock::now());
  // Blocks the calling thread for the reserved delay.
  void acquire();
  [[nodiscard]] double qps() const noexcept { return qps_; }
  [[nodiscard]] int burst() const noexcept { return burst_; }

 private:
  double qps_;
  int burst_;
  std::mutex mu_;
  double tokens_;
  Clock::time_point last_;
};

// Exponential backoff with full jitter: attempt n waits a random time in
// [base*2^n / 2, base*2^n], capped at `max`. Not thread-safe (one per retry loop).
class Backoff {
 public:
  Backoff(Clock::duration base, Clock::duration max) : base_(base), max_(max) {}
  // Delay before the next attempt; each call doubles the ceiling.
  Clock::duration next();
  void reset() noexcept { attempt_ = 0; }
  [[nodiscard]] int attempts() const noexcept { return attempt_; }

 private:
  Clock::duration base_;
  Clock::duration max_;
  int attempt_ = 0;
};

// A uniformly random fraction in [0, 1), from a per-thread generator.
double random_fraction();

}  // namespace gpufleet::kube
