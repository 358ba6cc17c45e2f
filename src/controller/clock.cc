#include "controller/clock.h"

#include "core/time.h"

namespace gpufleet::controller {

namespace {

std::int64_t to_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

core::Timestamp Clock::timestamp() const { return core::Timestamp::from_time_point(now()); }

std::int64_t Clock::unix_seconds() const {
  return std::chrono::floor<std::chrono::seconds>(now().time_since_epoch()).count();
}

std::chrono::system_clock::time_point SystemClock::now() const {
  return std::chrono::system_clock::now();
}

std::chrono::steady_clock::time_point SystemClock::steady_now() const {
  return std::chrono::steady_clock::now();
}

Clock& system_clock() {
  static SystemClock clock;
  return clock;
}

FakeClock::FakeClock() : FakeClock(std::chrono::system_clock::now()) {}

FakeClock::FakeClock(std::chrono::system_clock::time_point start) : wall_ns_(to_ns(start)) {}

FakeClock::FakeClock(const core::Timestamp& start)
    : wall_ns_(start.seconds * 1'000'000'000 + start.nanos) {}

std::chrono::system_clock::time_point FakeClock::now() const {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(wall_ns_.load())));
}

std::chrono::steady_clock::time_point FakeClock::steady_now() const {
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::nanoseconds(steady_ns_.load())));
}

void FakeClock::set(std::chrono::system_clock::time_point t) {
  const std::int64_t to = to_ns(t);
  const std::int64_t from = wall_ns_.exchange(to);
  if (to > from) steady_ns_.fetch_add(to - from);
}

void FakeClock::advance(std::chrono::nanoseconds d) {
  wall_ns_.fetch_add(d.count());
  if (d.count() > 0) steady_ns_.fetch_add(d.count());
}

}  // namespace gpufleet::controller
