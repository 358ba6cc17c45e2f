// Admission of a DeploymentPolicy's deletion: refused while a HostPackageSet names it, since
// such a set would go Blocked mid-rollout (docs/hostpkg.md "Admission").
#pragma once

#include <string>

#include "controller/admission.h"
#include "kube/client.h"

namespace gpufleet::hostpkg {

// Lists the sets from the API server (the webhook answers on every replica, leader or not, so
// it cannot rely on a cache the leader fills). Denies naming up to 10 sets and the fix.
controller::AdmissionResult policy_delete_admission(kube::Client& client,
                                                    const std::string& policy);

}  // namespace gpufleet::hostpkg
