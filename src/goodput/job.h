// Training jobs as goodput sees them: Pod objects (the Kubernetes Pod JSON, as core::Value)
// grouped into gangs by a label, with the GPUs they ask for, the nodes they run on, a state,
// and the checkpoint contract (docs/goodput.md "Job contracts"). Pure functions of the pods:
// no API calls, no clock. The ledger (ledger.h) turns a job's states over time into goodput.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::goodput {

// gpufleet's own gang label: the user's explicit word on which pods are one job.
inline constexpr std::string_view kJobLabel = "goodput.gpufleet.io/job";
// The job's checkpoint contract, as pod annotations: the RFC 3339 time its last completed
// checkpoint was written ("none": the job reports checkpoints and has written none yet), and
// optionally how long one training step takes.
inline constexpr std::string_view kCheckpointAnnotation = "goodput.gpufleet.io/last-checkpoint";
inline constexpr std::string_view kStepTimeAnnotation = "goodput.gpufleet.io/step-time-seconds";
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";

// The gang label keys, first match wins: gpufleet's own label, then JobSet (whose child Jobs'
// pods also carry the batch Job label: the JobSet is the job), Kubeflow training jobs
// (PyTorchJob, MPIJob v2, ...: kubeflow/common's JobNameLabel), then a plain batch Job.
std::vector<std::string> default_gang_label_keys();

enum class JobState : std::uint8_t {
  Pending,      // no pod of the gang has run yet (queueing)
  Running,      // every live pod is Running and Ready
  Interrupted,  // some pods are not running after the job had run
  Succeeded,    // every pod finished, the last attempt succeeded
  Failed,       // every pod finished and the last attempt failed
};
std::string_view state_name(JobState s) noexcept;
std::optional<JobState> parse_state(std::string_view name) noexcept;

// A job's identity: its namespace, the gang label key that grouped it ("" for a GPU pod
// without a gang label, a job of its own) and that label's value (or the pod's name).
struct JobKey {
  std::string ns;
  std::string label;
  std::string name;

  // "<namespace>/<name>", for messages and views.
  [[nodiscard]] std::string display() const { return ns + "/" + name; }
  friend auto operator<=>(const JobKey&, const JobKey&) = default;
  friend bool operator==(const JobKey&, const JobKey&) = default;
};

struct Job {
  JobKey key;
  std::vector<std::string> pods;   // names, sorted
  std::vector<std::string> nodes;  // spec.nodeName of the live pods, sorted, once each
  std::int64_t gpus = 0;           // effective GPU requests of the live pods (of all when none)
  JobState state = JobState::Pending;
  // The newest checkpoint any pod reports (unix seconds); `reports_checkpoints` is true when a
  // pod carries the checkpoint annotation at all (also "none").
  std::optional<std::int64_t> last_checkpoint;
  bool reports_checkpoints = false;
  std::optional<double> step_time_seconds;
  // Bad fields of the job's pods, one message each naming the pod, the field and the value;
  // the field is then left out (a bad checkpoint annotation is no checkpoint, a bad GPU
  // quantity counts no GPUs).
  std::vector<std::string> errors;
};

// Labels of gpufleet's own GPU workloads, which are not users' work: certify's test pods
// (gpufleet.io/certify-run, also the runs that answer ValidationRequests) and hostpkg's stage
// pods (hostpkg.gpufleet.io/stage). Their time is the cost of certification and maintenance,
// which the interruptions of the users' jobs already count.
std::vector<std::string> default_excluded_label_keys();

struct GroupOptions {
  std::vector<std::string> gang_label_keys = default_gang_label_keys();
  std::vector<std::string> excluded_label_keys = default_excluded_label_keys();  // any of them
};

// The pod's effective GPU request, as the scheduler counts it: per container the limit of
// nvidia.com/gpu (else its request), over the pod max(sum of containers + restartable init
// containers (sidecars), the largest init container plus the sidecars started before it).
// Throws core::InvalidInput naming the pod, the field and the value for a quantity that is not
// a whole non-negative number.
std::int64_t pod_gpus(const core::Value& pod);

// The checkpoint annotation of a pod: nullopt when absent or "none"; throws
// core::InvalidInput naming the pod, the annotation and the value when it is not RFC 3339.
std::optional<std::int64_t> pod_last_checkpoint(const core::Value& pod);

// The pod's gang label (the first of `keys` it carries), or nullopt.
std::optional<std::pair<std::string, std::string>> gang_of(const core::Value& pod,
                                                           const std::vector<std::string>& keys);

// Groups pods into jobs, sorted by key. A pod without a gang label and without GPUs is no job,
// nor is a pod carrying one of the excluded labels.
// Pods that are not maps or have no metadata.name are skipped.
std::vector<Job> group_jobs(const std::vector<core::Value>& pods, const GroupOptions& options);

}  // namespace gpufleet::goodput
