#include "hostpkg/controller/policy_admission.h"

#include <vector>

#include "api/resources.h"
#include "kube/api/meta.h"

namespace gpufleet::hostpkg {

controller::AdmissionResult policy_delete_admission(kube::Client& client,
                                                    const std::string& policy) {
  std::vector<std::string> users;
  for (const core::Value& set : client.list(api::host_package_sets(), "").items) {
    if (set.get_string({"spec", "deploymentPolicy"}) == policy)
      users.push_back("HostPackageSet " + std::string(kube::name_of(set)));
  }
  if (users.empty()) return controller::AdmissionResult::allow();
  constexpr std::size_t kNamed = 10;
  std::string list;
  for (std::size_t i = 0; i < users.size() && i < kNamed; ++i)
    list += (i > 0 ? ", " : "") + users[i];
  if (users.size() > kNamed) list += " and " + std::to_string(users.size() - kNamed) + " more";
  return controller::AdmissionResult::deny(
      "DeploymentPolicy " + policy + " is still named by spec.deploymentPolicy of " + list +
      "; point those sets at another policy (or remove the field) first, then delete it");
}

}  // namespace gpufleet::hostpkg
