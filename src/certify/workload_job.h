// The Kubernetes objects one group test runs as: a Job pinned to the group's nodes (one pod
// per node; several nodes: an Indexed Job with one index per node, placed by the scheduler
// with node affinity to exactly those nodes and anti-affinity between its own pods, plus a
// headless Service so rank i reaches rank 0 at <job>-0.<job>, MPI-style), and the reading
// of its outcome back from the pods.
#pragma once

#include <map>
#include <optional>
#include <string>
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

// "<name up to 30>-<uid 5>-<category>-<group>", then "-a<attempt>" from the second attempt
// on: a DNS label under 63 characters. The first attempt keeps the name Jobs had before
// retries existed, so a run under way when the controller is upgraded resumes.
std::string job_name(std::string_view owner_name, std::string_view owner_uid, int category,
                     std::uint32_t group, int attempt = 1);

// The command with the iteration count replaced (nccl-tests -n, trainer --max-steps).
std::vector<std::string> with_iterations(std::vector<std::string> command, int iterations);

}  // namespace gpufleet::certify
