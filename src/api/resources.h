// The gpufleet.io API (deploy/crds/): the resource ids of every gpufleet CRD, defined once,
// the way kube/api/resource.h defines the built-in kinds. Every module that reads or writes a
// gpufleet object names it from here, so the subsystems meet through the API, not through
// each other's libraries (certify reads sentinel's ValidationRequests, hostpkg its
// Remediations).
#pragma once

#include <string_view>

#include "kube/api/resource.h"

namespace gpufleet::api {

inline constexpr std::string_view kGroup = "gpufleet.io";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "gpufleet.io/v1alpha1";

// Cluster-scoped.
const kube::ResourceId& node_healths();         // NodeHealth: the agent's view of a node
const kube::ResourceId& remediations();         // Remediation: one sentinel incident
const kube::ResourceId& sentinel_policies();    // SentinelPolicy
const kube::ResourceId& validation_requests();  // ValidationRequest: "certify these nodes"
const kube::ResourceId& host_package_sets();    // HostPackageSet
const kube::ResourceId& deployment_policies();  // DeploymentPolicy: hostpkg's rollout rules
const kube::ResourceId& disruption_budgets();   // DisruptionBudget: nodes out, fleet-wide
// Namespaced.
const kube::ResourceId& certifications();  // Certification: one certify run
const kube::ResourceId& workload_runs();   // WorkloadRun: a training workload as a test

}  // namespace gpufleet::api
