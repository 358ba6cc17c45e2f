// The GPU driver of a recipe as a hostpkg rollout, where the host image owns the driver
// (nodePool.driver.managedBy: host; the GPU Operator's driver container is off). The recipe
// pins the version; this renders one HostPackageSet per such pool, so that a new pin reaches
// the nodes through hostpkg's safe path: batches, the disruption budget, a reboot, and
// certify's validation before each node's uncordon (docs/lifecycle.md). `gpufleet diff -r`
// shows the nodes that still run another version.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/value.h"
#include "recipe/recipe.h"

namespace gpufleet::recipe {

struct DriverSetOptions {
  // The driver package's repository (the site's image that installs the driver on the host:
  // its apply stage); hostpkg pulls REPOSITORY:<version>. No tag, no digest.
  std::string image;
  // certify categories each rebooted node must pass before its uncordon.
  std::vector<std::string> categories{"diagnostics/dcgm-r2"};
  std::string deployment_policy;  // a DeploymentPolicy name; empty: hostpkg's conservative one
  std::int64_t priority = 20;     // ahead of ordinary host packages (100)
};

// One HostPackageSet object per host-managed pool that pins a driver version, in pool order.
// Throws core::InvalidInput (naming the flag or recipe field, the value and the fix) for a bad
// image, or when no pool qualifies (the GPU Operator or the cloud rolls that driver out).
std::vector<core::Value> driver_package_sets(const Recipe& recipe, const DriverSetOptions& o);

}  // namespace gpufleet::recipe
