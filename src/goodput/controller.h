// The goodput controller (`gpufleet controller --controllers=goodput`, docs/goodput.md): per
// job (job.h's group_jobs over the Manager's shared Pod cache) it feeds the job's Ledger an
// Observation of its pods and an InterruptionEvent for every Remediation on a node the job
// runs or ran on, and keeps the ledger in one ConfigMap per job in its namespace (data key
// ledger.json). The persisted ledger is read back before every pass, so a restart at any
// moment loses and double-counts nothing (the ledger is idempotent). Fleet metrics
// (gpufleet_goodput_*) on the Manager's /metrics.
//
// observe → decide → act: decide_job below is the pure step, unit-tested in tests/goodput.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "goodput/job.h"
#include "goodput/ledger.h"

namespace gpufleet::controller {
class Manager;
struct Context;
}  // namespace gpufleet::controller

namespace gpufleet::goodput {

// The ledger ConfigMap: its data key, labels (label-value safe forms of the job's namespace
// and name) and annotations (the exact "<namespace>/<name>" of the job, for mapping back, and
// the digest of the last observation fed).
inline constexpr std::string_view kLedgerDataKey = "ledger.json";
inline constexpr std::string_view kLedgerJobNamespaceLabel = "goodput.gpufleet.io/job-namespace";
inline constexpr std::string_view kLedgerJobLabel = "goodput.gpufleet.io/job";
inline constexpr std::string_view kLedgerJobKeyAnnotation = "goodput.gpufleet.io/job-key";
inline constexpr std::string_view kLedgerObservedAnnotation = "goodput.gpufleet.io/observed";
inline constexpr std::string_view kDefaultNamespace = "gpufleet-system";
inline constexpr std::int64_t kDefaultRetentionSeconds = 7 * 86400;

// "goodput-<namespace>-<name>-<8 hex of SHA-256 over namespace, label and name>", lower-cased,
// characters outside [a-z0-9-] as '-', cut so the whole is a DNS-1123 label (63 at most):
// deterministic, distinct for jobs that differ only in their gang label.
std::string ledger_configmap_name(const JobKey& key);
// `v` when it is a valid label value, else a cut, cleaned form ending in "-<8 hex>".
std::string label_value_safe(std::string_view v);
// What an observation says, without its time: two observations with the same digest show the
// same job, so the later one need not be fed (the state holds until the next change).
std::string observation_digest(const Observation& o);
// "7d", "36h", "90m" (a Go duration, or whole days with 'd'); throws core::InvalidInput
// naming the setting, the value and the fix.
std::int64_t parse_retention(std::string_view text);

// What one reconcile knows of one job.
struct JobFacts {
  JobKey key;
  std::optional<Job> job;                 // its pods now; nullopt: none left
  std::vector<InterruptionEvent> events;  // incidents on nodes it runs or ran on
  std::optional<Ledger> persisted;        // read back from its ConfigMap
  std::string persisted_json;             // the ConfigMap's ledger.json ("" when none)
  std::string persisted_digest;           // its observed annotation
};

struct JobDecision {
  Ledger ledger;        // the ledger after this pass
  std::string json;     // its persisted form (to_value as compact JSON)
  std::string digest;   // of the observation fed (or the persisted one)
  bool write = false;   // the ConfigMap must be written (new, or changed)
  bool remove = false;  // the job's pods are gone and its retention has passed
  // When to look again: the end of its retention (pods gone), else nullopt.
  std::optional<std::int64_t> look_again_at;
};

// The pure step: the persisted ledger (or a new one) fed the pods' observation (only when it
// differs from the last one fed) and then every event; written when anything changed. A job
// whose pods are all gone keeps its ledger `retention_seconds` after its last observation,
// then is removed. A gang that is interrupted (or has an incident open) and shows Running on
// fewer GPUs than it ran with is observed Interrupted: a member is missing (an evicted pod
// whose replacement is not created yet).
JobDecision decide_job(const JobFacts& facts, std::int64_t now, std::int64_t retention_seconds);

// Adds the goodput controller to `manager`. Settings: goodput.namespace (default
// gpufleet-system), goodput.retention (default 7d).
void setup_goodput(controller::Manager& manager, const controller::Context& context);

}  // namespace gpufleet::goodput
