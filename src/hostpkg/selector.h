// Kubernetes label selectors (matchLabels + matchExpressions) evaluated against a node's
// labels. hostpkg needs them for HostPackageSet.nodeSelector, DeploymentPolicy compartments
// and protected pods, and evaluates them thousands of times per planning pass, so parsing
// happens once and matching does no allocation.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::hostpkg {

using Labels = std::map<std::string, std::string, std::less<>>;

class LabelSelector {
 public:
  enum class Op : unsigned char { In, NotIn, Exists, DoesNotExist };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;  // sorted; empty for Exists / DoesNotExist
  };

  // An empty selector matches every node (as in Kubernetes).
  LabelSelector() = default;

  // Reads {matchLabels: {k: v}, matchExpressions: [{key, operator, values}]}. `field` is the
  // path used in error messages ("spec.nodeSelector"). Throws core::InvalidInput naming the
  // field, the value and the fix; unknown keys are errors too.
  static LabelSelector parse(const core::Value& v, const std::string& field);

  [[nodiscard]] bool matches(const Labels& labels) const noexcept;
  [[nodiscard]] bool empty() const noexcept { return requirements_.empty(); }
  [[nodiscard]] const std::vector<Requirement>& requirements() const noexcept {
    return requirements_;
  }
  // Kubernetes string form, "a=b,c in (d,e),!f", for messages and list calls.
  [[nodiscard]] std::string to_string() const;

 private:
  std::vector<Requirement> requirements_;
};

}  // namespace gpufleet::hostpkg
