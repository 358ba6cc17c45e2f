// Resource identities and object shapes: what a request names, without the HTTP client, so
// that caches, the simulator's model and recipe can use them without pulling in libcurl.
#pragma once

#include <string>
#include <vector>

namespace gpufleet::kube {

// A resource collection: {"", "v1", "pods"}, {"coordination.k8s.io", "v1", "leases"}.
struct ResourceId {
  std::string group;  // "" for the core group
  std::string version;
  std::string resource;  // lower-case plural
  bool namespaced = true;

  [[nodiscard]] std::string api_version() const {
    return group.empty() ? version : group + "/" + version;
  }
  // "pods", "leases.coordination.k8s.io": the spelling RBAC and kubectl use.
  [[nodiscard]] std::string qualified_name() const {
    return group.empty() ? resource : resource + "." + group;
  }
  friend bool operator==(const ResourceId&, const ResourceId&) = default;
};

// The built-in resources gpufleet acts on.
namespace resources {
ResourceId nodes();
ResourceId pods();
ResourceId namespaces();
ResourceId config_maps();
ResourceId events();  // events.k8s.io/v1
ResourceId leases();
ResourceId jobs();
ResourceId deployments();
ResourceId pod_disruption_budgets();
ResourceId service_accounts();
ResourceId custom_resource_definitions();
}  // namespace resources

// Shapes the objects the server returns: metadata-only (PartialObjectMetadata) and/or with
// paths pruned while decoding (e.g. "status.images", "metadata.managedFields"), so that large
// fields never reach memory.
struct ObjectShape {
  bool metadata_only = false;
  std::vector<std::string> prune;  // dotted paths inside each object
};

}  // namespace gpufleet::kube
