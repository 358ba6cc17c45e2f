// What a Certification or a WorkloadRun asks for, read from its spec into one shape the
// certify controller executes: the targets (which nodes) and the categories in order, each a
// resolved workload template with its scale, options and compiled thresholds. A WorkloadRun
// is a run of one category whose template is the user's container and whose output is the
// result contract (judge.h).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "certify/catalog.h"
#include "certify/thresholds.h"
#include "core/value.h"

namespace gpufleet::certify {

struct Targets {
  core::Value node_selector;  // metav1.LabelSelector; null = none given
  std::vector<std::string> node_names;
  core::Value tolerations = core::Value::list();  // core/v1 tolerations, copied to the pods
};

struct CategoryPlan {
  std::string name;  // catalog id, or "workload" for a WorkloadRun
  WorkloadTemplate workload;
  Scale scale = Scale::PerNode;
  int nodes_per_job = 0;  // 0: no split
  int iterations = 0;     // 0: the template's
  std::chrono::seconds timeout{600};
  std::map<std::string, std::string> threshold_text;
  ThresholdSet thresholds;
  int gpus_per_node = -1;         // -1: the node's nvidia.com/gpu.count label
  std::string result_file;        // WorkloadRun: terminationMessagePath
  std::vector<std::string> args;  // WorkloadRun: the container's args
};

struct RunSpec {
  Targets targets;
  std::vector<CategoryPlan> categories;
  // spec.maxDuration: the whole run's wall-time bound from its creation (0: the controller's
  // certify.max-duration, which also caps it; run_limits.h).
  std::chrono::seconds max_duration{0};
};

// Thrown for a spec the API server accepted but certify cannot run (an expression that does
// not compile); `reason` is the condition reason (InvalidThreshold, InvalidSpec).
class SpecError : public core::InvalidInput {
 public:
  SpecError(std::string reason, const std::string& message)
      : core::InvalidInput(message), reason_(std::move(reason)) {}
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

// Throws SpecError naming the field (for a threshold: the category, metric and expression).
RunSpec parse_certification_spec(const core::Value& spec, const Catalog& catalog);
RunSpec parse_workload_run_spec(const core::Value& spec);

std::string_view spec_scale_name(Scale s) noexcept;  // perNode, perNVLinkDomain, ...

}  // namespace gpufleet::certify
