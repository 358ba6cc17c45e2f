#include "api/resources.h"

#include <string>

namespace gpufleet::api {

namespace {
kube::ResourceId gpufleet_resource(const char* plural, bool namespaced) {
  return {std::string(kGroup), std::string(kVersion), plural, namespaced};
}
}  // namespace

const kube::ResourceId& node_healths() {
  static const kube::ResourceId r = gpufleet_resource("nodehealths", false);
  return r;
}
const kube::ResourceId& remediations() {
  static const kube::ResourceId r = gpufleet_resource("remediations", false);
  return r;
}
const kube::ResourceId& sentinel_policies() {
  static const kube::ResourceId r = gpufleet_resource("sentinelpolicies", false);
  return r;
}
const kube::ResourceId& validation_requests() {
  static const kube::ResourceId r = gpufleet_resource("validationrequests", false);
  return r;
}
const kube::ResourceId& host_package_sets() {
  static const kube::ResourceId r = gpufleet_resource("hostpackagesets", false);
  return r;
}
const kube::ResourceId& deployment_policies() {
  static const kube::ResourceId r = gpufleet_resource("deploymentpolicies", false);
  return r;
}
const kube::ResourceId& disruption_budgets() {
  static const kube::ResourceId r = gpufleet_resource("disruptionbudgets", false);
  return r;
}
const kube::ResourceId& certifications() {
  static const kube::ResourceId r = gpufleet_resource("certifications", true);
  return r;
}
const kube::ResourceId& workload_runs() {
  static const kube::ResourceId r = gpufleet_resource("workloadruns", true);
  return r;
}

}  // namespace gpufleet::api
