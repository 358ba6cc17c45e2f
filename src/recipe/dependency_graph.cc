#include "recipe/dependency_graph.h"

#include <algorithm>
#include <functional>

#include "core/errors.h"

namespace gpufleet::recipe {

namespace {

// Finds one cycle with a depth-first search, for the error message.
std::vector<std::string> find_cycle(const std::map<std::string, std::vector<std::string>>& deps) {
  std::map<std::string, int> state;  // 0 new, 1 on stack, 2 done
  std::vector<std::string> stack;
  std::vector<std::string> cycle;
  std::function<bool(const std::string&)> visit = [&](const std::string& n) {
    state[n] = 1;
    stack.push_back(n);
    for (const std::string& d : deps.at(n)) {
      if (state[d] == 1) {
        auto it = std::find(stack.begin(), stack.end(), d);
        cycle.assign(it, stack.end());
        cycle.push_back(d);
        return true;
      }
      if (state[d] == 0 && visit(d)) return true;
    }
    stack.pop_back();
    state[n] = 2;
    return false;
  };
  for (const auto& [n, _] : deps) {
    if (state[n] == 0 && visit(n)) break;
  }
  return cycle;
}

}  // namespace

DeploymentPlan plan_deployment(const std::map<std::string, std::vector<std::string>>& deps) {
  for (const auto& [name, ds] : deps) {
    for (const std::string& d : ds) {
      if (!deps.count(d)) {
        throw core::InvalidInput("component '" + name + "' depends on '" + d +
                                 "', which is not part of the recipe; enable '" + d +
                                 "' in an overlay or remove the dependency");
      }
    }
  }
  DeploymentPlan plan;
  // Longest-path levels, computed in rounds: deterministic because std::map iterates sorted.
  std::map<std::string, int> remaining;
  for (const auto& [name, ds] : deps) remaining[name] = static_cast<int>(ds.size());
  std::map<std::string, std::vector<std::string>> dependents;
  for (const auto& [name, ds] : deps) {
    for (const std::string& d : ds) dependents[d].push_back(name);
  }
  std::vector<std::string> ready;
  for (const auto& [name, n] : remaining) {
    if (n == 0) ready.push_back(name);
  }
  while (!ready.empty()) {
    int level = static_cast<int>(plan.levels.size());
    std::sort(ready.begin(), ready.end());
    plan.levels.push_back(ready);
    std::vector<std::string> next;
    for (const std::string& n : ready) {
      plan.order.push_back(n);
      plan.level_of[n] = level;
      for (const std::string& m : dependents[n]) {
        if (--remaining[m] == 0) next.push_back(m);
      }
    }
    ready = std::move(next);
  }
  if (plan.order.size() != deps.size()) {
    std::vector<std::string> cycle = find_cycle(deps);
    std::string text;
    for (const std::string& c : cycle) text += (text.empty() ? "" : " -> ") + c;
    throw core::InvalidInput("dependency cycle: " + text +
                             "; remove one of these dependencies in the registry or an overlay");
  }
  return plan;
}

}  // namespace gpufleet::recipe
