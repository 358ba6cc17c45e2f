// Trimming objects to the fields a controller needs before they are cached. Pruning
// (ObjectShape::prune) drops named paths while decoding; projection keeps only named paths and
// drops everything else. Together they keep caches of large kinds (Nodes with image lists and
// managedFields) small.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::kube {

// A set of dotted paths to keep ("metadata.name", "status.conditions.type"). A path ends at a
// whole subtree; lists apply the rest of the path to each element.
class Projection {
 public:
  Projection() = default;
  explicit Projection(const std::vector<std::string>& paths);
  Projection& keep(std::string_view dotted_path);

  // Moves the kept parts of `obj` into a new value (the rest is freed).
  [[nodiscard]] core::Value apply(core::Value&& obj) const;

 private:
  struct Node {
    bool whole = false;
    std::map<std::string, std::unique_ptr<Node>, std::less<>> children;
  };
  static core::Value apply_node(core::Value&& v, const Node& node);
  std::shared_ptr<Node> root_ = std::make_shared<Node>();
};

// The Node fields gpufleet's controllers read: identity, labels, annotations, unschedulable,
// taints, the type/status/reason of each condition, allocatable resources and the kubelet
// version. Everything else (images, managedFields, nodeInfo details, addresses, heartbeat
// times) is dropped.
const std::vector<std::string>& node_cache_fields();
// What a node-health controller reads: identity, unschedulable, taints and the type/status/
// reason of each condition (no labels, annotations or resources).
const std::vector<std::string>& node_health_fields();
// Paths worth pruning from Nodes while decoding (the bulk of a Node's bytes).
const std::vector<std::string>& node_prune_paths();

}  // namespace gpufleet::kube
