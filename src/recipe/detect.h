// Criteria from a cluster: what `gpufleet recipe --snapshot FILE` (or --from-cluster) reads
// off a Snapshot. The Kubernetes service from the nodes' provider IDs, the accelerator from
// GPU feature discovery's product label, the OS from NFD's os-release ID, node pools from
// node groups whose GPUs differ, and the components someone else already runs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "recipe/criteria.h"
#include "recipe/library.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"

namespace gpufleet::recipe {

struct DetectedCriteria {
  Query query;  // criteria left "any" where the cluster does not tell
  // How each value was found, one line each, for the user ("service eks: provider ID
  // aws:///us-west-2a/i-0abc (3 nodes)").
  std::vector<std::string> notes;
  // Per dimension, why it could not be detected: the cluster shows something the library has
  // no value for (a GPU product it does not know) or one recipe cannot serve (GPU nodes with
  // different OSes). The message names the nodes, the value and the flag that overrides it;
  // it is an error only when the user does not give that dimension (flags win).
  std::array<std::string, kDimensions> problems;
};

DetectedCriteria detect_criteria(const Library& lib, const Snapshot& s);

// The library accelerator a GPU product label names ("NVIDIA-H100-80GB-HBM3" -> h100,
// "NVIDIA-GB200" -> gb200): the longest library value the product starts with, after the
// "NVIDIA-" prefix, followed by '-' or the end. Empty when none does.
std::string accelerator_of_product(const Library& lib, const std::string& product);

// The Kubernetes service a provider ID names (aws:// -> eks, gce:// -> gke, azure:// -> aks,
// oci:// or ocid1. -> oke, kind:// -> kind); empty when it names no managed service.
std::string service_of_provider_id(const std::string& provider_id);

// Components of `r` that the cluster already runs, installed by someone else: a Helm release
// of the component's chart under another release name or namespace than the bundle would
// use (a release where the bundle installs it is the bundle's own, upgraded in place), or,
// with no release of the chart at all, every Deployment, DaemonSet, StatefulSet and CRD of
// its health checks present. Component -> what was found.
std::map<std::string, std::string> running_components(const Recipe& r, const Snapshot& s);

}  // namespace gpufleet::recipe
