// Helpers shared by the hostpkg unit tests.
#pragma once

#include <string>

#include "core/yaml.h"
#include "hostpkg/spec.h"

namespace gpufleet::hostpkg::testing {

inline HostPackageSet set_from_yaml(const std::string& spec_yaml) {
  std::string doc =
      "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: test}\nspec:\n" +
      spec_yaml;
  return parse_host_package_set(core::parse_yaml(doc));
}

inline DeploymentPolicy policy_from_yaml(const std::string& spec_yaml) {
  std::string doc =
      "apiVersion: gpufleet.io/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: p}\nspec:\n" +
      spec_yaml;
  return parse_deployment_policy(core::parse_yaml(doc));
}

}  // namespace gpufleet::hostpkg::testing
