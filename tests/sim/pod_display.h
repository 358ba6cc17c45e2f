// kubectl's STATUS column for a pod (kubectl printPod, v1.32), reduced to what the
// simulator reports: Init:N/M, Init:<reason>, the container's reason, or the phase. Tests
// judge init progress the way a person at `kubectl get pods` would.
#pragma once

#include <string>

#include "core/value.h"

namespace gpufleet::sim::testing {

inline std::string kubectl_status(const core::Value& pod) {
  std::string reason(pod.get_string({"status", "phase"}));
  const core::Value* spec_init = pod.get({"spec", "initContainers"});
  const core::Value* inits = pod.get({"status", "initContainerStatuses"});
  if (inits != nullptr && inits->is_list()) {
    std::size_t total =
        spec_init != nullptr && spec_init->is_list() ? spec_init->size() : inits->size();
    for (std::size_t i = 0; i < inits->size(); ++i) {
      const core::Value& c = (*inits)[i];
      bool sidecar = spec_init != nullptr && i < spec_init->size() &&
                     (*spec_init)[i].get_string({"restartPolicy"}) == "Always";
      const core::Value* term = c.get({"state", "terminated"});
      if (term != nullptr && term->get({"exitCode"})->as_int() == 0) continue;
      const core::Value* started = c.find("started");
      if (sidecar && started != nullptr && started->is_bool() && started->as_bool()) continue;
      if (term != nullptr) {
        return "Init:" + std::string(term->get_string({"reason"}));
      }
      std::string waiting(c.get_string({"state", "waiting", "reason"}));
      if (!waiting.empty() && waiting != "PodInitializing") return "Init:" + waiting;
      return "Init:" + std::to_string(i) + "/" + std::to_string(total);
    }
  }
  const core::Value* cs = pod.get({"status", "containerStatuses"});
  if (cs != nullptr && cs->is_list()) {
    std::string last;
    for (const auto& c : cs->as_list()) {
      std::string waiting(c.get_string({"state", "waiting", "reason"}));
      std::string term(c.get_string({"state", "terminated", "reason"}));
      if (!waiting.empty()) return waiting;
      if (!term.empty()) last = term;
    }
    if (!last.empty() && reason != "Running") return last;
  }
  return reason;
}

}  // namespace gpufleet::sim::testing
