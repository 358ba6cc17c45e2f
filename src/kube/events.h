// Records Kubernetes Events (events.k8s.io/v1) about objects, aggregating repeats: the same
// event (same object, type, reason, action, note) seen again within the series window becomes
// a series count on the first Event instead of a new object, so a flapping condition cannot
// flood etcd.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "kube/client.h"

namespace gpufleet::kube {

enum class EventType { Normal, Warning };

struct EventSource {
  std::string controller;  // reportingController, e.g. "gpufleet.io/sentinel"
  std::string instance;    // reportingInstance, e.g. the pod name
};

class EventRecorder {
 public:
  EventRecorder(Client& client, EventSource source,
                std::chrono::seconds series_window = std::chrono::minutes(6));

  // Records an event about `regarding` (any object with apiVersion, kind, metadata). Never
  // throws on API errors: events are best effort; returns false and keeps the error in
  // last_error(). Throws core::InvalidInput for a missing reason/action (a programming error).
  bool record(const core::Value& regarding, EventType type, std::string_view reason,
              std::string_view action, std::string_view note);

  [[nodiscard]] std::string last_error() const;

 private:
  struct Series {
    std::string namespace_;
    std::string name;
    std::int64_t count = 1;
    std::chrono::steady_clock::time_point last_seen;
  };

  Client& client_;
  EventSource source_;
  std::chrono::seconds window_;
  mutable std::mutex mu_;
  std::map<std::string, Series> series_;
  std::string last_error_;
};

}  // namespace gpufleet::kube
