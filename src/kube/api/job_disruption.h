// Job-aware disruption: one decision per training job when a controller takes a node away
// (sentinel's drain, hostpkg's drain), shared by every controller that evicts pods
// (docs/goodput.md "Job-aware disruption"). Pure: pods, what the controller recorded for this
// disruption and the clock in, one decision per job out; the controller persists the record
// before it acts, so a restart resumes the same wait and disrupts each job once.
//
// A job is the gang of pods that share a gang label (the keys of default_gang_label_keys, the
// same as goodput's), in one namespace, with at least two live pods: a synchronous job dies with
// any one of them, so its pods are evicted together, on every node. A pod outside such a gang
// is drained as before, pod by pod.
//
// The checkpoint contract, on the job's pods (every gang kind has pods, whatever owns them, and
// a pod reads its own annotations through the downward API):
//  - the job opts in with the annotation `goodput.gpufleet.io/checkpoint: on-request`;
//  - gpufleet asks with `goodput.gpufleet.io/checkpoint-requested: <request id>` and
//    `goodput.gpufleet.io/checkpoint-deadline: <RFC 3339>`;
//  - the job answers with `goodput.gpufleet.io/checkpoint-acknowledged: <request id>`, or by
//    writing `goodput.gpufleet.io/last-checkpoint` at or after the request's time;
//  - without an answer the deadline ends the wait. A job that did not opt in is not waited for,
//    nor any job when the controller's checkpoint timeout is 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::kube {

inline constexpr std::string_view kCheckpointContractAnnotation = "goodput.gpufleet.io/checkpoint";
inline constexpr std::string_view kCheckpointOnRequest = "on-request";
inline constexpr std::string_view kCheckpointRequestedAnnotation =
    "goodput.gpufleet.io/checkpoint-requested";
inline constexpr std::string_view kCheckpointDeadlineAnnotation =
    "goodput.gpufleet.io/checkpoint-deadline";
inline constexpr std::string_view kCheckpointAckAnnotation =
    "goodput.gpufleet.io/checkpoint-acknowledged";
inline constexpr std::string_view kLastCheckpointAnnotation = "goodput.gpufleet.io/last-checkpoint";

// The gang label keys, first match wins: gpufleet's own label, JobSet, Kubeflow training jobs,
// a plain batch Job (goodput groups its jobs by the same list).
std::vector<std::string> default_gang_label_keys();
// gpufleet's own GPU workloads (certify's test pods, hostpkg's stage pods): never a job here.
std::vector<std::string> default_excluded_job_label_keys();

struct GangKey {
  std::string ns;
  std::string label;  // the gang label key
  std::string name;   // its value
  [[nodiscard]] std::string display() const { return ns + "/" + name; }
  // "<namespace>/<label>=<name>": the value of a cache index over pods (gang_index).
  [[nodiscard]] std::string index() const { return ns + "/" + label + "=" + name; }
  friend auto operator<=>(const GangKey&, const GangKey&) = default;
  friend bool operator==(const GangKey&, const GangKey&) = default;
};

// The pod's gang (nullopt: none, or one of gpufleet's own workloads).
std::optional<GangKey> gang_key_of(const core::Value& pod);
// For Cache::add_index: the pod's GangKey::index(), or nothing.
std::vector<std::string> gang_index(const core::Value& pod);

struct PodRef {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
  friend bool operator==(const PodRef&, const PodRef&) = default;
};

// What the controller persisted for one job of this disruption (the incident's or the node
// record's), before acting on it.
struct JobRecord {
  GangKey key;
  std::string request_id;         // "" when no checkpoint was requested
  std::int64_t requested_ms = 0;  // 0: no request
  std::int64_t deadline_ms = 0;
  std::int64_t disrupted_ms = 0;  // 0: the gang is not disrupted yet
  std::string reason;             // Acknowledged | DeadlineExceeded | NoContract | NoWait
  std::vector<PodRef> pods;       // the gang as it was disrupted (evicted once each)
};

enum class JobAction {
  RequestCheckpoint,  // record the request, then annotate `annotate`; hold the node's pods
  Wait,               // until the ack or the deadline; hold the node's pods
  DrainGang,          // record the disruption, then evict `evict` (the whole gang)
  Disrupted,          // done before: evict only `evict`, the recorded pods still standing
};
std::string_view job_action_name(JobAction a) noexcept;

struct JobDecision {
  GangKey key;
  JobAction action = JobAction::Disrupted;
  std::string reason;            // DrainGang: Acknowledged | DeadlineExceeded | NoContract | NoWait
  std::string request_id;        // RequestCheckpoint, Wait: the id the pods are asked with
  std::int64_t deadline_ms = 0;  // RequestCheckpoint, Wait
  std::vector<PodRef> annotate;  // RequestCheckpoint, Wait: live pods without the request
  std::vector<PodRef> evict;     // DrainGang, Disrupted: recorded, live, not terminating
  std::vector<std::string> held_uids;  // RequestCheckpoint, Wait: the node's pods not to drain
};

struct JobDisruptionInput {
  std::string node;                          // the node being taken away
  std::vector<const core::Value*> pods;      // the node's pods and every pod of their gangs
  std::vector<JobRecord> records;            // persisted for this disruption
  std::string request_id;                    // the id a new request carries
  std::int64_t checkpoint_timeout_s = 300;   // policy: how long a job may take to checkpoint (0:
                                             // none is asked, the job is drained at once)
  std::vector<std::string> skip_namespaces;  // never drained (system namespaces)
  std::int64_t now_ms = 0;
};

// One decision per job with a live pod on the node, sorted by key; jobs of one pod, and pods
// in no gang, get none (the caller drains them as before). A job recorded as disrupted is
// Disrupted even when its pods changed since (the replacements are never evicted again).
std::vector<JobDecision> decide_jobs(const JobDisruptionInput& in);

// The record a decision leads to (RequestCheckpoint, DrainGang), merged into `records`
// (replacing the job's): what the controller persists before acting.
void record_decision(std::vector<JobRecord>& records, const JobDecision& d,
                     const JobDisruptionInput& in);

// Records as a JSON list (status.jobs, a hostpkg node record's jobs) and back; read_job_records
// skips malformed entries (a record is gpufleet's own writing).
core::Value job_records_value(const std::vector<JobRecord>& records);
std::vector<JobRecord> read_job_records(const core::Value* list);

// The metadata patch that asks a pod to checkpoint (merge patch body).
core::Value checkpoint_request_patch(std::string_view request_id, std::int64_t deadline_ms);

// The earliest time a waiting job needs another look (its deadline), or 0 when none waits.
std::int64_t next_job_deadline(const std::vector<JobDecision>& decisions);

}  // namespace gpufleet::kube
