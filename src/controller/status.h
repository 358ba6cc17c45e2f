// Writing status the way controllers should: server-side apply on the status subresource
// with one field manager per controller (so two controllers setting different conditions on
// the same object never overwrite each other), forced (a controller owns what it writes),
// skipped when nothing would change, and retried on transient errors; plus a conflict-retry
// loop for the read-modify-write updates that cannot be applies.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "kube/api/conditions.h"
#include "kube/client.h"

namespace gpufleet::controller {

class StatusWriter {
 public:
  // `field_manager`: one per controller, e.g. "gpufleet-certify".
  StatusWriter(kube::Client& client, kube::ResourceId resource, std::string kind,
               std::string field_manager);

  // Applies `status` (the content of .status) to the object's status subresource. Retries
  // retryable errors (throttling, timeouts, 5xx) up to 5 times; throws the last error.
  core::Value apply(std::string_view ns, std::string_view name, const core::Value& status);

  // Sets `conditions` on the object whose current state is `current` (usually the cached
  // object): lastTransitionTime kept unless the status changes, observedGeneration filled
  // from metadata.generation when 0. Writes only this manager's conditions, and only when
  // one of them changed; returns true when it wrote. Throws core::InvalidInput for an invalid
  // condition (validated before anything is sent).
  bool apply_conditions(
      const core::Value& current, const std::vector<kube::Condition>& conditions,
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  [[nodiscard]] const std::string& field_manager() const noexcept { return field_manager_; }

 private:
  kube::Client& client_;
  kube::ResourceId resource_;
  std::string kind_;
  std::string field_manager_;
};

// Read-modify-write with optimistic concurrency: gets the object, calls `mutate` (which
// returns false when there is nothing to change), updates; on 409 Conflict (someone wrote in
// between) reads again and retries, up to `attempts` times. Returns the stored object.
core::Value update_with_conflict_retry(kube::Client& client, const kube::ResourceId& resource,
                                       std::string_view ns, std::string_view name,
                                       const std::function<bool(core::Value&)>& mutate,
                                       int attempts = 5);

}  // namespace gpufleet::controller
