// `gpufleet goodput`: the fleet, its jobs and its lemon nodes as the ledger ConfigMaps (written
// by the goodput controller, controller.h) and sentinel's Remediations show them. Pure: the
// objects and `now` in, a document or a table out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::goodput {

// "45s", "12m05s", "2h03m", "3d04h": the two largest units, the second zero-padded.
std::string human_seconds(std::int64_t seconds);

// The document `-o json` prints:
//   fleet:  {jobs, ettr, wallGpuSeconds, productiveGpuSeconds, interruptions, redoneUnknown,
//            gpuHoursLost: {<cause>: hours, ...}}
//   jobs:   [{namespace, name, label, configMap, state, gpus, wallSeconds, productiveSeconds,
//             lostSeconds, queuedSeconds, ettr, interruptions, redoneUnknown, lastCause,
//             lostSecondsByCause: {<cause>: seconds}}], sorted by namespace and name
//   nodes:  [{node, incidents, lemon, mtbiSeconds, lastAt}] with at least one incident
//   lemonNodes: [names]
//   errors: ["configmap ns/name: ...", ...]  (a ledger that cannot be read is left out)
core::Value goodput_document(const std::vector<core::Value>& configmaps,
                             const std::vector<core::Value>& remediations, std::int64_t now);
// The table view of goodput_document's document.
std::string render_goodput(const core::Value& doc);

}  // namespace gpufleet::goodput
