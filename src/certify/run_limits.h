// The platform team's bounds on one Certification or WorkloadRun (controller settings, chart
// values certify.*): how many nodes and GPUs it may occupy and how long it may run. Checked by
// the admission webhook when the run is created and again by the controller when the run
// starts (a run stored while no webhook served, or a selector that grew since), so no run
// can take more of the fleet, or hold it longer, than the policy allows.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "certify/node_selection.h"
#include "certify/run_spec.h"

namespace gpufleet::certify {

struct RunLimits {
  std::int64_t max_nodes = 5000;  // certify.max-nodes
  std::int64_t max_gpus = 40000;  // certify.max-gpus (the nodes' nvidia.com/gpu.count)
  std::chrono::seconds max_duration = std::chrono::hours(24);  // certify.max-duration
};

// Reads the certify.max-* settings through `setting(key, default)`; a bad value throws
// core::InvalidInput naming the setting, the value and what is allowed.
RunLimits parse_run_limits(
    const std::function<std::string(std::string_view key, std::string_view fallback)>& setting);

// The GPUs a selection occupies: each node's nvidia.com/gpu.count label, else its
// allocatable nvidia.com/gpu.
std::int64_t selection_gpus(const Selection& selection);

// Why a run over `selection` may not start (nullopt: within the limits); the message names
// the counts, the settings that bound them and the fix.
std::optional<std::string> footprint_refusal(const Selection& selection, const RunLimits& limits);

// The run's wall-time bound: spec.maxDuration when given, else the policy's; a maxDuration
// over the policy throws SpecError (reason DurationExceedsPolicy) naming both.
std::chrono::seconds run_duration_bound(const RunSpec& spec, const RunLimits& limits);

// "1h30m", "45s": a bound as a Go-style duration for messages.
std::string duration_text(std::chrono::seconds d);

}  // namespace gpufleet::certify
