// Predicates filter the events that reach a controller's queue. They only save work: a
// reconciler must stay correct if every event passed (level-triggered), so a predicate may
// drop an event only when it knows the reconcile would do nothing new.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::controller {

struct WatchEvent {
  enum class Type { Add, Update, Delete };
  Type type;
  const core::Value* old_obj;  // Update only; nullptr otherwise
  const core::Value& obj;      // the new object (Delete: the last state known)
};

// True: the event goes on (is mapped to keys and queued).
using Predicate = std::function<bool(const WatchEvent&)>;

namespace predicates {
// Updates pass when metadata.generation changed (spec changes on objects that have a
// generation: CRDs, Deployments; status-only writes and resyncs are dropped). Adds and
// deletes pass.
Predicate generation_changed();
// Updates pass when metadata.labels changed.
Predicate labels_changed();
// Updates pass when metadata.annotations changed.
Predicate annotations_changed();
// Updates pass when the object changed at all (resourceVersion moved): drops resyncs.
Predicate resource_version_changed();
// Updates pass when the value at any of `paths` (map keys from the root, e.g.
// {"spec", "taints"}) changed, appeared or went.
Predicate fields_changed(std::vector<std::vector<std::string>> paths);
// Updates pass when an annotation whose key starts with one of `prefixes` (a whole key is its
// own prefix) changed, appeared or went; other annotations are ignored.
Predicate annotations_changed_with_prefix(std::vector<std::string> prefixes);
// Updates pass when the status.conditions entry of `type` changed in one of `fields`
// (e.g. "status"), appeared or went; heartbeat timestamps are ignored unless named.
Predicate condition_changed(std::string type, std::vector<std::string> fields);
// Combinators.
Predicate any_of(std::vector<Predicate> ps);
Predicate all_of(std::vector<Predicate> ps);
Predicate negate(Predicate p);
}  // namespace predicates

// True when every predicate passes (an empty list passes everything).
bool passes(const std::vector<Predicate>& ps, const WatchEvent& ev);

}  // namespace gpufleet::controller
