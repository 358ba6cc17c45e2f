// Goodput of the fleet: many jobs' ledgers summed (ETTR weighted by GPU-seconds, GPU-hours
// lost by cause, how many jobs each incident disrupted), and node reliability from incident
// records (incidents in a window, mean time between incidents, lemon nodes). Also the reading
// of sentinel's Remediation objects into incident records and ledger events. Pure functions;
// definitions in docs/goodput.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "goodput/ledger.h"

namespace gpufleet::goodput {

struct IncidentImpact {
  std::string incident;
  Cause cause = Cause::Unknown;
  std::string node;
  std::int64_t jobs = 0;         // distinct jobs it interrupted (as cause or `also`)
  std::int64_t gpu_seconds = 0;  // lost by the jobs it caused (detection..redone), x GPUs
};

struct FleetSummary {
  std::int64_t jobs = 0;  // ledgers of jobs that started
  std::int64_t wall_gpu_seconds = 0;
  std::int64_t productive_gpu_seconds = 0;
  double ettr = 1.0;  // productive / wall GPU-seconds (1 when nothing ran)
  std::array<double, kCauseCount> gpu_hours_lost{};  // by cause, index static_cast<size_t>
  std::int64_t interruptions = 0;
  std::int64_t redone_unknown = 0;  // interruptions whose redone work is unknown
  // Sorted by jobs disrupted (most first), then GPU-seconds lost, then incident name.
  std::vector<IncidentImpact> incidents;
};

// The fleet at `now`. Each job weighs by its GPUs (the last Running observation's count).
FleetSummary summarize_fleet(const std::vector<Ledger>& ledgers, std::int64_t now);

// One incident on one node, as node reliability counts it.
struct IncidentRecord {
  std::string id;  // unique: the same id twice is one incident
  std::string node;
  std::int64_t at = 0;  // when the fault was detected
  Cause cause = Cause::Unknown;
};

struct LemonPolicy {
  std::int64_t window_seconds = 30 * 86400;  // look back 30 days
  std::int64_t min_incidents = 3;            // a node with 3 or more in the window is a lemon
};

struct NodeReliability {
  std::string node;
  std::int64_t incidents = 0;  // fault incidents in the window
  std::array<std::int64_t, kCauseCount> by_cause{};
  std::int64_t last_at = 0;
  double mtbi_seconds = 0;  // observed window / incidents
  bool lemon = false;
};

// Per node with at least one fault incident in [now - window, now]: hostpkg rollouts and
// user actions are not faults and do not count. The observed window is the policy's window,
// cut to start at `observed_since` when gpufleet has watched for less (MTBI of a young fleet
// is not stretched over time nobody saw). Sorted: lemons first, then most incidents, then the
// latest incident first, then node name. Throws core::InvalidInput for a policy with a
// window or minimum below 1.
std::vector<NodeReliability> node_reliability(const std::vector<IncidentRecord>& incidents,
                                              std::int64_t now, const LemonPolicy& policy,
                                              std::optional<std::int64_t> observed_since = {});

// The cause of a sentinel incident from its entities ("<check>/<entity>"): a GPU check (xid,
// gpu) → GpuXid, ib-port → Nic, anything else → SentinelRemediation.
Cause cause_of_entities(const std::vector<std::string>& entities);

// A Remediation (deploy/crds/remediation.yaml) as an interruption event: the incident is its
// name, the fault spec.detectedAt (else metadata.creationTimestamp), gpufleet acted at
// status.quarantinedAt (else drainStartedAt), the end status.completedAt in a final phase.
// nullopt for a NewNode validation (no fault). Throws core::InvalidInput naming `source` and
// the field for a missing name or node, or a time that is not RFC 3339.
std::optional<InterruptionEvent> event_from_remediation(const core::Value& rem,
                                                        std::string_view source);
// The same Remediation as a node reliability record.
std::optional<IncidentRecord> incident_from_remediation(const core::Value& rem,
                                                        std::string_view source);

}  // namespace gpufleet::goodput
