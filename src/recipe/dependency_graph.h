// Deployment order of components: a deterministic topological order and levels (components
// in one level only depend on earlier levels, so they can be deployed in parallel).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpufleet::recipe {

struct DeploymentPlan {
  std::vector<std::string> order;                // level by level, names sorted in a level
  std::vector<std::vector<std::string>> levels;  // levels[i] sorted by name
  std::map<std::string, int> level_of;
};

// `deps` maps each component to its dependencies. Throws core::InvalidInput for a dependency
// that is not in the graph ("gpu-operator depends on 'foo', which is not enabled") and for
// cycles, printing the cycle ("a -> b -> c -> a").
DeploymentPlan plan_deployment(const std::map<std::string, std::vector<std::string>>& deps);

}  // namespace gpufleet::recipe
