// A package's `resources`: the requests and limits its stage pods carry (every stage, the
// uninstall of a package that left the set included, so they are kept in the node record
// too). Quantities are checked when the set is read, and a request above its limit is refused
// there, with the field, both values and the fix, instead of by the API server when the first
// stage pod is created mid-rollout.
#pragma once

#include <map>
#include <string>

#include "core/value.h"

namespace gpufleet::hostpkg {

struct PodResources {
  std::map<std::string, std::string> requests;  // resource name -> canonical quantity
  std::map<std::string, std::string> limits;
  [[nodiscard]] bool empty() const noexcept { return requests.empty() && limits.empty(); }
  friend bool operator==(const PodResources&, const PodResources&) = default;
};

// Reads {requests: {cpu: 100m}, limits: {...}} at `field` ("spec.packages.x.resources").
// Throws core::InvalidInput naming the field, the value and the fix.
PodResources parse_pod_resources(const core::Value& v, const std::string& field);

// {requests: {...}, limits: {...}} with only the non-empty parts; the pod's container form.
core::Value pod_resources_to_value(const PodResources& r);

// The resources of one pod that does the work of several packages (the coalesced interrupt):
// the largest request and the largest limit of each resource, a limit raised to the request
// where another package asked for more than it, so the result is always admissible.
PodResources merge_pod_resources(const PodResources& a, const PodResources& b);

}  // namespace gpufleet::hostpkg
