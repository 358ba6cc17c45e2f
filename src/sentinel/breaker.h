// The quarantine circuit breaker: a rule bug or a fault storm must not cordon half the fleet.
// Pure logic over explicit times (milliseconds since the epoch), serialisable to and from
// core::Value so the controller keeps it in the API (a status field) and it survives restarts.
//
// - Counts UNIQUE nodes admitted to quarantine within a sliding window (a node quarantined
//   twice in the window counts once).
// - Trips when that count reaches the threshold: the smaller of `max_nodes` and
//   ceil(`max_fraction` x GPU nodes), each when set. Exactly `threshold` nodes are admitted;
//   the next new quarantine is refused and the breaker is Tripped.
// - Tripped blocks NEW quarantines only. It is not asked about releases, recoveries or
//   drains already under way (the controller goes on with those): see docs/sentinel.md.
// - Stays Tripped when the window empties (a storm that stopped still needs a human look),
//   until reset() or, when `quiet_reset_ms` > 0, that long without any quarantine attempt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::sentinel {

struct BreakerPolicy {
  std::int64_t window_ms = 10 * 60 * 1000;
  double max_fraction = 0.0;        // 0: not used; else (0, 1]
  std::size_t max_nodes = 0;        // 0: not used
  std::int64_t quiet_reset_ms = 0;  // 0: only an explicit reset closes a tripped breaker
  // Bound on remembered nodes; beyond it the oldest entries go (the count saturates there,
  // which keeps the breaker tripped rather than forgetting a storm).
  std::size_t max_tracked = 100'000;

  // Throws core::InvalidInput naming the field, value and fix.
  void validate() const;
  // {windowSeconds, maxFraction, maxNodes, quietResetSeconds}; absent keys keep defaults.
  static BreakerPolicy from_value(const core::Value& v);
};

struct BreakerDecision {
  bool admitted = false;
  std::string reason;  // why refused, for the event and the Remediation's status
};

class CircuitBreaker {
 public:
  explicit CircuitBreaker(BreakerPolicy policy = {});

  // Asks to quarantine `node` now; `gpu_nodes` is the fleet size the fraction applies to.
  BreakerDecision admit(std::string_view node, std::int64_t now_ms, std::size_t gpu_nodes);
  // Expires the window and applies the quiet-period reset. admit() and status() call it.
  void tick(std::int64_t now_ms);
  // Counts an admission known from elsewhere: a quarantine the Nodes or the Remediations
  // record, which a crash may have kept out of the saved state (sentinel saves the breaker
  // after the cordon, off the fault -> cordon path). Never trips or refuses; ignored when
  // `at_ms` is out of the window or older than the last reset.
  void remember(std::string_view node, std::int64_t at_ms, std::int64_t now_ms);
  // The explicit verb (`gpufleet sentinel breaker reset`): closes and forgets the window.
  void reset(std::int64_t now_ms, std::string_view by);

  [[nodiscard]] bool tripped() const noexcept { return tripped_; }
  // Whether `node` was admitted within the window (a quarantine admitted but not yet applied,
  // e.g. its write conflicted, is not asked about again: it already counts).
  [[nodiscard]] bool counts(std::string_view node) const {
    return nodes_.find(node) != nodes_.end();
  }
  [[nodiscard]] std::size_t unique_nodes() const noexcept { return nodes_.size(); }
  // 0 when no limit is set (the breaker never trips).
  [[nodiscard]] std::size_t threshold(std::size_t gpu_nodes) const noexcept;

  // For a condition and metrics: {state: Closed|Tripped, uniqueNodes, threshold, trippedAtMs,
  // refused, message}.
  [[nodiscard]] core::Value status(std::size_t gpu_nodes) const;

  // Durable state (not the policy: that comes from the SentinelPolicy on every start).
  [[nodiscard]] core::Value to_value() const;
  // Throws core::InvalidInput naming the bad field.
  static CircuitBreaker from_value(BreakerPolicy policy, const core::Value& v);

 private:
  BreakerPolicy policy_;
  std::map<std::string, std::int64_t, std::less<>> nodes_;  // node -> last admitted (ms)
  bool tripped_ = false;
  std::int64_t tripped_at_ms_ = 0;
  std::int64_t last_attempt_ms_ = 0;
  std::uint64_t refused_ = 0;
  std::string last_reset_by_;
  std::int64_t reset_at_ms_ = 0;  // the last reset (explicit or quiet period)
};

}  // namespace gpufleet::sentinel
