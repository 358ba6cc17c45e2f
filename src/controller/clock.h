// The time a reconciler sees. Reconcilers never read the wall clock themselves: they ask the
// Manager's Clock (Manager::clock()), so a test can hand the Manager a FakeClock and move
// time on (a deadline passed, a retention over) without sleeping. Waits on the API server
// (a cache catching up with a write) are real waits and keep to std::chrono directly.
//
//   controller::FakeClock clock(core::Timestamp::parse_rfc3339("2025-03-01T10:00:00Z"));
//   controller::Manager mgr(client, {.clock = &clock});
//   clock.advance(std::chrono::hours(2));   // the next reconcile sees two hours later
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpufleet::core {
struct Timestamp;
}

namespace gpufleet::controller {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall time: what is compared with and written into API objects (deadlines,
  // lastTransitionTime, startTime).
  [[nodiscard]] virtual std::chrono::system_clock::time_point now() const = 0;
  // Monotonic time, for measuring how long something took.
  [[nodiscard]] virtual std::chrono::steady_clock::time_point steady_now() const = 0;

  // now() as a core::Timestamp (core/time.h), e.g. for its whole seconds.
  [[nodiscard]] core::Timestamp timestamp() const;
  // now() in whole seconds since 1970 (UTC).
  [[nodiscard]] std::int64_t unix_seconds() const;
};

// The real clocks (std::chrono::system_clock and steady_clock).
class SystemClock final : public Clock {
 public:
  [[nodiscard]] std::chrono::system_clock::time_point now() const override;
  [[nodiscard]] std::chrono::steady_clock::time_point steady_now() const override;
};

// The process's SystemClock: what a Manager without ManagerOptions::clock uses.
Clock& system_clock();

// A clock that moves only when told; safe to read and move from any thread. Its steady time
// moves with its wall time (advance) but never backwards (set to an earlier time leaves it).
class FakeClock final : public Clock {
 public:
  // Starts at `start` (default: the real time at construction, so objects the test creates
  // with real timestamps look fresh).
  FakeClock();
  explicit FakeClock(std::chrono::system_clock::time_point start);
  explicit FakeClock(const core::Timestamp& start);

  [[nodiscard]] std::chrono::system_clock::time_point now() const override;
  [[nodiscard]] std::chrono::steady_clock::time_point steady_now() const override;

  void set(std::chrono::system_clock::time_point t);
  // Moves both clocks on by `d` (negative: ignored for the steady clock).
  void advance(std::chrono::nanoseconds d);

 private:
  // Nanoseconds since the epoch of each clock; atomics, so readers never take a lock.
  std::atomic<std::int64_t> wall_ns_;
  std::atomic<std::int64_t> steady_ns_{0};
};

}  // namespace gpufleet::controller
