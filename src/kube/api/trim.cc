#include "kube/api/trim.h"

namespace gpufleet::kube {

Projection::Projection(const std::vector<std::string>& paths) {
  for (const auto& p : paths) keep(p);
}

Projection& Projection::keep(std::string_view dotted_path) {
  // Copy-on-write so that copies of a Projection (informer options) stay independent.
  if (root_.use_count() > 1) {
    // Rebuilding is simplest: projections are small and built once.
    auto fresh = std::make_shared<Node>();
    struct Copier {
      static void copy(const Node& from, Node& to) {
        to.whole = from.whole;
        for (const auto& [k, child] : from.children) {
          auto c = std::make_unique<Node>();
          copy(*child, *c);
          to.children.emplace(k, std::move(c));
        }
      }
    };
    Copier::copy(*root_, *fresh);
    root_ = fresh;
  }
  Node* node = root_.get();
  while (!dotted_path.empty()) {
    std::size_t dot = dotted_path.find('.');
    std::string_view key = dotted_path.substr(0, dot);
    auto it = node->children.find(key);
    if (it == node->children.end()) {
      it = node->children.emplace(std::string(key), std::make_unique<Node>()).first;
    }
    node = it->second.get();
    dotted_path = dot == std::string_view::npos ? std::string_view{} : dotted_path.substr(dot + 1);
  }
  node->whole = true;
  return *this;
}

core::Value Projection::apply_node(core::Value&& v, const Node& node) {
  if (node.whole) return std::move(v);
  if (core::List* list = v.if_list()) {
    core::List out;
    out.reserve(list->size());
    for (core::Value& item : *list) out.push_back(apply_node(std::move(item), node));
    return core::Value(std::move(out));
  }
  core::Map* map = v.if_map();
  if (map == nullptr) return core::Value();
  // Reserve exactly what is present: cached objects live long, slack capacity adds up.
  std::size_t present = 0;
  for (const auto& [key, child] : node.children) present += map->contains(key) ? 1 : 0;
  core::Map out;
  out.reserve(present);
  for (const auto& [key, child] : node.children) {
    core::Value* member = map->find(key);
    if (member == nullptr) continue;
    core::Value kept = apply_node(std::move(*member), *child);
    if (kept.is_null() && !member->is_null() && !child->whole) continue;
    out.append_unsorted(key, std::move(kept));
  }
  out.seal();
  return core::Value(std::move(out));
}

core::Value Projection::apply(core::Value&& obj) const {
  return apply_node(std::move(obj), *root_);
}

const std::vector<std::string>& node_cache_fields() {
  static const std::vector<std::string> fields{
      "apiVersion",
      "kind",
      "metadata.name",
      "metadata.uid",
      "metadata.resourceVersion",
      "metadata.labels",
      "metadata.annotations",
      "metadata.deletionTimestamp",
      "spec.unschedulable",
      "spec.taints",
      "status.conditions.type",
      "status.conditions.status",
      "status.conditions.reason",
      "status.allocatable",
      "status.nodeInfo.kubeletVersion",
  };
  return fields;
}

const std::vector<std::string>& node_health_fields() {
  static const std::vector<std::string> fields{
      "metadata.name",
      "metadata.uid",
      "metadata.resourceVersion",
      "spec.unschedulable",
      "spec.taints",
      "status.conditions.type",
      "status.conditions.status",
      "status.conditions.reason",
  };
  return fields;
}

const std::vector<std::string>& node_prune_paths() {
  static const std::vector<std::string> paths{"metadata.managedFields", "status.images"};
  return paths;
}

}  // namespace gpufleet::kube
