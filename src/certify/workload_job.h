// The Kubernetes objects one group test runs as: a Job pinned to the group's nodes (one pod
// per node; several nodes: an Indexed Job with one index per node, placed by the scheduler
// with node affinity to exactly those nodes and anti-affinity between its own pods, plus a
// headless Service so rank i reaches rank 0 at <job>-0.<job>, MPI-style), and the reading
// of its outcome back from the pods.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certify/node_selection.h"
#include "certify/run_spec.h"
#include "core/value.h"

namespace gpufleet::certify {

inline constexpr const char* kRunLabel = "gpufleet.io/certify-run";  // owner's uid
inline constexpr const char* kCategoryLabel = "gpufleet.io/certify-category";
inline constexpr const char* kJobLabel = "gpufleet.io/certify-job";
inline constexpr const char* kContainerName = "workload";
// Pod annotation: the group's attempt (1-based; retries run a new Job per attempt).
inline constexpr const char* kAttemptAnnotation = "gpufleet.io/certify-attempt";

struct JobRequest {
  std::string ns;
  std::string name;       // the Job's (and Service's) name
  core::Value owner_ref;  // ownerReferences entry (controller: true)
  std::string run_uid;
  int category = 0;
  std::vector<std::string> nodes;
  const CategoryPlan* plan = nullptr;
  std::string gpu_family;  // the group's (first node's): selects the template override
  int gpus_per_node = 0;
  core::Value tolerations = core::Value::list();  // the targets'
  bool tolerate_unschedulable = false;            // cordoned nodes are tested (ValidationRequests)
  int attempt = 1;
};

core::Value build_job(const JobRequest& r);
core::Value build_service(const JobRequest& r);  // only for groups of 2 or more

// Where a group's workload object (a Job, or an MPIJob: mpijob.h) stands, read from its
// conditions: Job Complete/Failed, MPIJob Succeeded/Failed.
struct WorkloadProgress {
  bool finished = false;
  std::string failure_reason;  // the Failed condition's reason ("DeadlineExceeded"), if failed
  std::string failure_message;
  std::optional<std::chrono::system_clock::time_point> finished_at;
  // A Job is acted on by the Job controller every cluster runs; an MPIJob only once an MPI
  // operator has given it a condition.
  bool acknowledged = true;
};
WorkloadProgress progress_of(const core::Value& workload);

// The pieces both launchers build their pods from.
core::Value workload_labels(const JobRequest& r);
// The group's object: name, namespace, labels and the owner reference.
core::Value workload_object(const JobRequest& r, std::string_view api_version,
                            std::string_view kind);
// The "workload" container: `launch` (mpirun and its flags, or nothing) + the template's
// command with the plan's iterations; the plan's args; the template's env and the rendezvous
// contract; the termination message settings.
core::Value workload_container(const JobRequest& r, const std::vector<std::string>& launch);
void add_env(core::Value& container, const std::string& name, const std::string& value);
void request_gpus(core::Value& container, int gpus_per_node);
core::Value workload_tolerations(const JobRequest& r);
// Required node affinity to exactly the group's nodes and anti-affinity between the pods
// `peers` (matchLabels) selects: one pod per node.
void place_on_group(core::Value& pod_spec, const JobRequest& r, const core::Value& peers);

// "<name up to 30>-<uid 5>-<category>-<group>", then "-a<attempt>" from the second attempt
// on: a DNS label under 63 characters. The first attempt keeps the name Jobs had before
// retries existed, so a run under way when the controller is upgraded resumes.
std::string job_name(std::string_view owner_name, std::string_view owner_uid, int category,
                     std::uint32_t group, int attempt = 1);

// The command with the iteration count replaced (nccl-tests -n, trainer --max-steps).
std::vector<std::string> with_iterations(std::vector<std::string> command, int iterations);

}  // namespace gpufleet::certify
