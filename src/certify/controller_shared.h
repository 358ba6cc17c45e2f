// What the certify controller's files share (controller.cc: ValidationRequests, stored
// results, wiring; run_reconciler.cc: Certifications and WorkloadRuns; category_step.cc: the
// category step's decisions). Internal to the certify module.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "certify/node_selection.h"
#include "certify/run_spec.h"
#include "core/value.h"
#include "kube/client.h"

namespace gpufleet::controller {
class Cache;
class Clock;
}  // namespace gpufleet::controller

namespace gpufleet::certify::detail {

inline constexpr auto kPoll = std::chrono::seconds(5);

// The clock's time as status fields write it.
std::string now_rfc3339(const controller::Clock& clock);
// `s` cut to at most n bytes, ending in "..." when cut (status fields, Event notes).
std::string cut(std::string s, std::size_t n);
// What an Event is about: cached objects may lack apiVersion/kind, the recorder needs them.
core::Value regarding(const core::Value& obj, const kube::ResourceId& r, std::string_view kind);

// ---- ConfigMaps holding state ----

struct StoredMap {
  core::Value data;  // parsed JSON of kStateKey; null when the map does not exist
  std::string resource_version;
};
StoredMap read_map(kube::Client& client, std::string_view ns, const std::string& name);

// ---- the frozen target set ----

// The nodes a run over `targets` tests, as they stand in `nodes`. A ValidationRequest's run
// (`validation`) tests its nodes although their requester cordoned them.
Selection select_run_nodes(Targets targets, bool validation, const controller::Cache& nodes);

core::Value nodes_to_value(const Selection& s);
Selection nodes_from_value(const core::Value& v);

}  // namespace gpufleet::certify::detail
