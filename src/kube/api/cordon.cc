#include "kube/api/cordon.h"

#include <algorithm>

#include "core/errors.h"
#include "core/text.h"
#include "kube/api/meta.h"
#include "kube/api/names.h"
#include "kube/api/objects.h"

namespace gpufleet::kube {
namespace {

std::string join_owners(const std::vector<std::string>& owners) { return core::join(owners, ","); }

// {"metadata": {"resourceVersion": rv, "annotations": {key: value-or-null}}, "spec": ...}
core::Value base_patch(const core::Value& node) {
  core::Value patch = core::Value::map();
  std::string_view rv = resource_version_of(node);
  if (!rv.empty()) patch["metadata"]["resourceVersion"] = core::Value(rv);
  return patch;
}

}  // namespace

bool CordonState::owned_by(std::string_view owner) const noexcept {
  return std::binary_search(owners.begin(), owners.end(), owner);
}

bool CordonState::held_by_other(std::string_view owner) const noexcept {
  return unschedulable && std::any_of(owners.begin(), owners.end(),
                                      [&](const std::string& o) { return o != owner; });
}

void check_cordon_owner(std::string_view owner) {
  std::string problem = check_dns_label(owner);
  if (!problem.empty())
    throw core::InvalidInput("cordon owner " + core::quoted(owner) + " is not valid: " + problem +
                             "; use a component name such as \"hostpkg\" or \"sentinel\"");
}

CordonState cordon_state(const core::Value& node) {
  CordonState s;
  s.unschedulable = node::unschedulable(node);
  std::string_view raw = annotation_of(node, kCordonOwnersAnnotation);
  for (std::string_view owner : core::split_trimmed(raw, ',')) {
    if (owner.empty()) continue;
    std::string problem = check_dns_label(owner);
    if (!problem.empty())
      throw core::InvalidInput("node " + core::quoted(name_of(node)) + ": annotation " +
                               std::string(kCordonOwnersAnnotation) + "=" + core::quoted(raw) +
                               " holds " + core::quoted(owner) +
                               ", which is not a component name (" + problem +
                               "); fix or remove the annotation");
    s.owners.emplace_back(owner);
  }
  std::sort(s.owners.begin(), s.owners.end());
  s.owners.erase(std::unique(s.owners.begin(), s.owners.end()), s.owners.end());
  return s;
}

std::optional<core::Value> cordon_patch(const core::Value& node, std::string_view owner) {
  check_cordon_owner(owner);
  CordonState s = cordon_state(node);
  if (s.foreign() || (s.unschedulable && s.owned_by(owner))) return std::nullopt;
  std::vector<std::string> owners = s.unschedulable ? s.owners : std::vector<std::string>{};
  owners.emplace_back(owner);
  std::sort(owners.begin(), owners.end());
  core::Value patch = base_patch(node);
  patch["metadata"]["annotations"][kCordonOwnersAnnotation] = core::Value(join_owners(owners));
  if (!s.unschedulable) patch["spec"]["unschedulable"] = core::Value(true);
  return patch;
}

std::optional<core::Value> uncordon_patch(const core::Value& node, std::string_view owner) {
  check_cordon_owner(owner);
  CordonState s = cordon_state(node);
  if (!s.owned_by(owner)) return std::nullopt;
  std::vector<std::string> rest;
  for (const auto& o : s.owners)
    if (o != owner) rest.push_back(o);
  core::Value patch = base_patch(node);
  if (rest.empty()) {
    // The last holder leaves: drop the mark and uncordon (a merge-patch null removes the
    // field, i.e. schedulable). A node someone else uncordoned already is left as it is.
    patch["metadata"]["annotations"][kCordonOwnersAnnotation] = core::Value(nullptr);
    if (s.unschedulable) patch["spec"]["unschedulable"] = core::Value(nullptr);
  } else {
    patch["metadata"]["annotations"][kCordonOwnersAnnotation] = core::Value(join_owners(rest));
  }
  return patch;
}

}  // namespace gpufleet::kube
