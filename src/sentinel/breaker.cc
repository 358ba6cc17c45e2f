#include "sentinel/breaker.h"

#include <algorithm>

#include <cmath>

#include "core/errors.h"

namespace gpufleet::sentinel {
namespace {

std::int64_t int_field(const core::Value& v, std::string_view key, std::int64_t fallback,
                       std::string_view where) {
  const core::Value* f = v.find(key);
  if (f == nullptr || f->is_null()) return fallback;
  if (f->is_int()) return f->as_int();
  if (f->is_uint() && f->as_uint() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(f->as_uint());
  }
  throw core::InvalidInput(std::string(where) + "." + std::string(key) +
                           ": must be an integer; fix the value or remove the key");
}

}  // namespace

void BreakerPolicy::validate() const {
  if (window_ms <= 0) {
    throw core::InvalidInput("breaker.windowSeconds: " + std::to_string(window_ms / 1000) +
                             " is not positive; use e.g. 600");
  }
  if (!(max_fraction >= 0.0 && max_fraction <= 1.0)) {
    throw core::InvalidInput("breaker.maxFraction: " + std::to_string(max_fraction) +
                             " is outside [0, 1]; use e.g. 0.05 (5 % of the GPU nodes), or 0 for "
                             "no fraction limit");
  }
  if (quiet_reset_ms < 0) {
    throw core::InvalidInput(
        "breaker.quietResetSeconds: negative; use 0 (explicit reset only) or "
        "a positive number of seconds");
  }
  if (max_tracked == 0) throw core::InvalidInput("breaker.maxTracked: 0; use a positive bound");
}

BreakerPolicy BreakerPolicy::from_value(const core::Value& v) {
  BreakerPolicy p;
  if (!v.is_map()) throw core::InvalidInput("breaker: must be a map");
  for (const auto& e : v.as_map()) {
    if (e.key != "windowSeconds" && e.key != "maxFraction" && e.key != "maxNodes" &&
        e.key != "quietResetSeconds") {
      throw core::InvalidInput("breaker." + e.key +
                               ": unknown key; use windowSeconds, maxFraction, maxNodes, "
                               "quietResetSeconds");
    }
  }
  const std::int64_t window = int_field(v, "windowSeconds", p.window_ms / 1000, "breaker");
  const std::int64_t quiet = int_field(v, "quietResetSeconds", 0, "breaker");
  const std::int64_t nodes = int_field(v, "maxNodes", 0, "breaker");
  // Seconds beyond ~292 years would overflow as milliseconds.
  constexpr std::int64_t kMaxSeconds = INT64_MAX / 1000;
  if (window > kMaxSeconds || quiet > kMaxSeconds) {
    throw core::InvalidInput(
        "breaker: windowSeconds/quietResetSeconds too large; use seconds "
        "below " +
        std::to_string(kMaxSeconds));
  }
  if (nodes < 0) {
    throw core::InvalidInput("breaker.maxNodes: " + std::to_string(nodes) +
                             " is negative; use 0 (no count limit) or a node count");
  }
  p.window_ms = window * 1000;
  p.quiet_reset_ms = quiet * 1000;
  p.max_nodes = static_cast<std::size_t>(nodes);
  if (const core::Value* f = v.find("maxFraction"); f != nullptr && !f->is_null()) {
    if (!f->is_number()) {
      throw core::InvalidInput("breaker.maxFraction: must be a number in [0, 1], e.g. 0.05");
    }
    p.max_fraction = f->as_double();
  }
  p.validate();
  return p;
}

CircuitBreaker::CircuitBreaker(BreakerPolicy policy) : policy_(policy) { policy_.validate(); }

std::size_t CircuitBreaker::threshold(std::size_t gpu_nodes) const noexcept {
  std::size_t t = 0;
  if (policy_.max_nodes > 0) t = policy_.max_nodes;
  if (policy_.max_fraction > 0.0) {
    // At least one node: 5 % of 10 nodes still allows one quarantine before tripping.
    auto f =
        static_cast<std::size_t>(std::ceil(policy_.max_fraction * static_cast<double>(gpu_nodes)));
    if (f == 0) f = 1;
    t = t == 0 ? f : std::min(t, f);
  }
  return t;
}

void CircuitBreaker::tick(std::int64_t now_ms) {
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    it = now_ms - it->second >= policy_.window_ms ? nodes_.erase(it) : std::next(it);
  }
  if (tripped_ && policy_.quiet_reset_ms > 0 &&
      now_ms - last_attempt_ms_ >= policy_.quiet_reset_ms) {
    tripped_ = false;
    last_reset_by_ = "quiet period";
    reset_at_ms_ = now_ms;
    nodes_.clear();
  }
}

void CircuitBreaker::remember(std::string_view node, std::int64_t at_ms, std::int64_t now_ms) {
  // Before a reset (which forgot it) or already out of the window: not counted.
  if (at_ms <= 0 || at_ms < reset_at_ms_ || now_ms - at_ms >= policy_.window_ms) return;
  auto it = nodes_.find(node);
  if (it != nodes_.end()) {
    it->second = std::max(it->second, at_ms);
    return;
  }
  if (nodes_.size() >= policy_.max_tracked) return;
  nodes_.emplace(std::string(node), at_ms);
}

BreakerDecision CircuitBreaker::admit(std::string_view node, std::int64_t now_ms,
                                      std::size_t gpu_nodes) {
  tick(now_ms);
  last_attempt_ms_ = now_ms;
  const std::size_t limit = threshold(gpu_nodes);
  if (tripped_) {
    ++refused_;
    return {false, "circuit breaker tripped: " + std::to_string(nodes_.size()) +
                       " unique node(s) quarantined in the window, threshold " +
                       std::to_string(limit) + "; reset it after checking the fleet"};
  }
  auto it = nodes_.find(node);
  const bool counted = it != nodes_.end();
  if (!counted && limit > 0 && nodes_.size() >= limit) {
    // The threshold was reached by earlier admissions, e.g. after a smaller fleet size.
    tripped_ = true;
    tripped_at_ms_ = now_ms;
    ++refused_;
    return {false, "circuit breaker tripped at " + std::to_string(nodes_.size()) +
                       " unique node(s) in the window (threshold " + std::to_string(limit) + ")"};
  }
  if (counted) {
    it->second = now_ms;
  } else {
    if (nodes_.size() >= policy_.max_tracked) {
      auto oldest = nodes_.begin();
      for (auto i = nodes_.begin(); i != nodes_.end(); ++i) {
        if (i->second < oldest->second) oldest = i;
      }
      nodes_.erase(oldest);
    }
    nodes_.emplace(std::string(node), now_ms);
  }
  if (limit > 0 && nodes_.size() >= limit && !tripped_) {
    tripped_ = true;
    tripped_at_ms_ = now_ms;
  }
  return {true, ""};
}

void CircuitBreaker::reset(std::int64_t now_ms, std::string_view by) {
  tripped_ = false;
  nodes_.clear();
  last_attempt_ms_ = now_ms;
  reset_at_ms_ = now_ms;
  last_reset_by_ = std::string(by);
}

core::Value CircuitBreaker::status(std::size_t gpu_nodes) const {
  core::Value s = core::Value::map();
  const std::size_t limit = threshold(gpu_nodes);
  s["state"] = tripped_ ? "Tripped" : "Closed";
  s["uniqueNodes"] = nodes_.size();
  s["threshold"] = limit;
  s["refused"] = refused_;
  if (tripped_) s["trippedAtMs"] = tripped_at_ms_;
  if (!last_reset_by_.empty()) s["lastResetBy"] = last_reset_by_;
  s["message"] = tripped_ ? "new quarantines blocked: " + std::to_string(nodes_.size()) +
                                " unique node(s) in the window reached the threshold " +
                                std::to_string(limit)
                 : limit == 0 ? std::string("no limit configured")
                              : std::to_string(nodes_.size()) + " of " + std::to_string(limit) +
                                    " unique node(s) in the window";
  return s;
}

core::Value CircuitBreaker::to_value() const {
  core::Value v = core::Value::map();
  v["tripped"] = tripped_;
  v["trippedAtMs"] = tripped_at_ms_;
  v["lastAttemptMs"] = last_attempt_ms_;
  v["refused"] = refused_;
  if (!last_reset_by_.empty()) v["lastResetBy"] = last_reset_by_;
  if (reset_at_ms_ > 0) v["lastResetMs"] = reset_at_ms_;
  core::Value nodes = core::Value::map();
  for (const auto& [n, t] : nodes_) nodes[n] = t;
  v["nodes"] = std::move(nodes);
  return v;
}

CircuitBreaker CircuitBreaker::from_value(BreakerPolicy policy, const core::Value& v) {
  CircuitBreaker b(policy);
  if (v.is_null()) return b;
  if (!v.is_map()) throw core::InvalidInput("breakerState: must be a map");
  if (const core::Value* t = v.find("tripped"); t != nullptr) {
    if (!t->is_bool()) throw core::InvalidInput("breakerState.tripped: must be true or false");
    b.tripped_ = t->as_bool();
  }
  b.tripped_at_ms_ = int_field(v, "trippedAtMs", 0, "breakerState");
  b.last_attempt_ms_ = int_field(v, "lastAttemptMs", 0, "breakerState");
  const std::int64_t refused = int_field(v, "refused", 0, "breakerState");
  b.refused_ = refused < 0 ? 0 : static_cast<std::uint64_t>(refused);
  b.last_reset_by_ = std::string(v.get_string({"lastResetBy"}));
  b.reset_at_ms_ = int_field(v, "lastResetMs", 0, "breakerState");
  if (const core::Value* n = v.find("nodes"); n != nullptr && !n->is_null()) {
    if (!n->is_map()) throw core::InvalidInput("breakerState.nodes: must be a map node -> ms");
    for (const auto& e : n->as_map()) {
      if (b.nodes_.size() >= policy.max_tracked) break;
      b.nodes_[e.key] = int_field(*n, e.key, 0, "breakerState.nodes");
    }
  }
  return b;
}

}  // namespace gpufleet::sentinel
