#include "certify/node_selection.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/api/selector.h"

namespace gpufleet::certify {
namespace {

int to_int(std::string_view s, int fallback) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() ? v : fallback;
}

}  // namespace

bool tolerates(const core::Value& tolerations, const kube::Taint& taint) {
  if (!tolerations.is_list()) return false;
  for (const auto& t : tolerations.as_list()) {
    std::string_view effect = t.get_string({"effect"});
    if (!effect.empty() && effect != taint.effect) continue;
    std::string_view key = t.get_string({"key"});
    std::string_view op = t.get_string({"operator"}, "Equal");
    if (key.empty()) {
      if (op == "Exists") return true;  // an empty key with Exists tolerates everything
      continue;
    }
    if (key != taint.key) continue;
    if (op == "Exists" || t.get_string({"value"}) == taint.value) return true;
  }
  return false;
}

NodeInfo node_info(const core::Value& node) {
  NodeInfo i;
  i.name = std::string(kube::name_of(node));
  i.gpu_product = std::string(kube::label_of(node, "nvidia.com/gpu.product"));
  i.gpu_family = std::string(kube::label_of(node, "nvidia.com/gpu.family"));
  i.clique = std::string(kube::label_of(node, "nvidia.com/gpu.clique"));
  i.gpu_count = to_int(kube::label_of(node, "nvidia.com/gpu.count"), 0);
  std::string_view alloc = kube::node::allocatable(node, "nvidia.com/gpu");
  i.gpu_allocatable = alloc.empty() ? -1 : to_int(alloc, -1);
  return i;
}

Selection select_nodes(const Targets& targets, const std::vector<kube::ObjectPtr>& nodes) {
  Selection sel;
  std::set<std::string> named(targets.node_names.begin(), targets.node_names.end());
  std::set<std::string> seen;
  for (const auto& n : nodes) {
    if (n == nullptr) continue;
    std::string name(kube::name_of(*n));
    bool wanted = named.count(name) > 0;
    if (!wanted && !targets.node_selector.is_null()) {
      const core::Value* labels = n->get({"metadata", "labels"});
      wanted = kube::selector_matches(targets.node_selector, labels ? *labels : core::Value());
    }
    if (!wanted) continue;
    seen.insert(name);
    if (kube::node::unschedulable(*n)) {
      sel.excluded.push_back({name, "Cordoned", "node is cordoned (spec.unschedulable)"});
      continue;
    }
    if (!kube::node::ready(*n)) {
      sel.excluded.push_back({name, "NotReady", "node's Ready condition is not True"});
      continue;
    }
    std::string untolerated;
    for (const kube::Taint& t : kube::node::taints(*n)) {
      if (t.effect == "PreferNoSchedule") continue;
      if (!tolerates(targets.tolerations, t)) {
        untolerated = t.key + (t.value.empty() ? "" : "=" + t.value) + ":" + t.effect;
        break;
      }
    }
    if (!untolerated.empty()) {
      sel.excluded.push_back(
          {name, "Tainted",
           "taint " + untolerated + " is not tolerated (add it to spec.targets.tolerations)"});
      continue;
    }
    sel.nodes.push_back(node_info(*n));
  }
  for (const auto& name : named)
    if (seen.count(name) == 0) sel.excluded.push_back({name, "NotFound", "no such node"});
  std::sort(sel.nodes.begin(), sel.nodes.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.name < b.name; });
  std::sort(sel.excluded.begin(), sel.excluded.end(),
            [](const Exclusion& a, const Exclusion& b) { return a.node < b.node; });
  return sel;
}

}  // namespace gpufleet::certify
