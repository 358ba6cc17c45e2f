// What a controller's author writes: a Reconciler takes the key of one object and converges
// the world towards what that object asks for. It is level-triggered: it is told only *which*
// object to look at, never *what changed*, so it reads the current state (from a cache) and
// acts on it. It may be called any number of times for the same state and must then do
// nothing new (idempotent), and it is never called concurrently for the same key.
#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "kube/api/meta.h"

namespace gpufleet::controller {

// The object to reconcile: namespace ("" for cluster-scoped objects) and name.
struct Request {
  std::string namespace_;
  std::string name;

  // "ns/name" or "name", the cache and work-queue key.
  [[nodiscard]] std::string key() const { return kube::object_key(namespace_, name); }
  static Request from_key(std::string_view key) {
    auto [ns, name] = kube::split_object_key(key);
    return {std::string(ns), std::string(name)};
  }
  friend bool operator==(const Request&, const Request&) = default;
  friend auto operator<=>(const Request&, const Request&) = default;
};

// What to do with the key after a successful reconcile.
struct Result {
  // > 0: look again after this long (polling something outside the API, a timeout).
  std::chrono::milliseconds requeue_after{0};
  // Look again after the key's backoff, without counting an error (waiting for something).
  bool requeue = false;
};

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  // Converges the object named by `request`. Throwing is an error: the key is retried with
  // per-key exponential backoff (reset after the next success). `stop` is requested when
  // the process loses leadership or its shutdown grace period ends: return soon, leaving
  // nothing half-done that a later reconcile could not finish.
  virtual Result reconcile(const Request& request, std::stop_token stop) = 0;
};

}  // namespace gpufleet::controller
