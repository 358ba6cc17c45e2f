// Which nodes a Certification tests: the targets' named and selected nodes, minus those that
// cannot take a workload now, each listed with the reason:
//   Cordoned  spec.unschedulable (someone took it out: a quarantine, a maintenance)
//   NotReady  the Ready condition is not True
//   Tainted   a NoSchedule/NoExecute taint the targets' tolerations do not tolerate
//   NotFound  named in nodeNames but absent
// Pure (no API calls): the controller passes the Nodes from its cache.
#pragma once

#include <string>
#include <vector>

#include "certify/run_spec.h"
#include "kube/api/objects.h"
#include "kube/api/store.h"

namespace gpufleet::certify {

struct NodeInfo {
  std::string name;
  std::string gpu_product;   // label nvidia.com/gpu.product
  std::string gpu_family;    // label nvidia.com/gpu.family
  std::string clique;        // label nvidia.com/gpu.clique: the NVLink domain ("" = the node)
  int gpu_count = 0;         // label nvidia.com/gpu.count
  int gpu_allocatable = -1;  // status.allocatable nvidia.com/gpu (-1: not reported)
};

struct Exclusion {
  std::string node;
  std::string reason;  // Cordoned, NotReady, Tainted, NotFound
  std::string message;
};

struct Selection {
  std::vector<NodeInfo> nodes;      // sorted by name
  std::vector<Exclusion> excluded;  // sorted by name
};

// Kubernetes' toleration semantics (v1.Toleration.ToleratesTaint).
bool tolerates(const core::Value& tolerations, const kube::Taint& taint);
NodeInfo node_info(const core::Value& node);
Selection select_nodes(const Targets& targets, const std::vector<kube::ObjectPtr>& nodes);

}  // namespace gpufleet::certify
