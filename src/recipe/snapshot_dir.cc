// Cluster objects from kubectl dumps, so that a snapshot can be made without the client.
#include <filesystem>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/yaml.h"
#include "recipe/snapshot.h"

namespace gpufleet::recipe {

namespace {

// An object whose kind is not the one its file is for (a Secret in nodes.json), or one with
// no name, means a wrong file, not a node with nothing set. Objects without a kind are taken
// as they are (kubectl always writes one, hand-written dumps may not).
void check_kind(const core::Value& obj, const std::filesystem::path& path, std::string_view kind) {
  if (kind.empty()) return;
  if (obj.get_string({"metadata", "name"}).empty()) {
    throw core::InvalidInput(path.string() + ": holds an object without metadata.name where " +
                             std::string(kind) + " objects belong; write it with kubectl get " +
                             "<resource> -o json as docs/recipe.md shows");
  }
  std::string_view got = obj.get_string({"kind"});
  if (got.empty() || got == kind) return;
  throw core::InvalidInput(path.string() + ": holds a " + std::string(got) + " where " +
                           std::string(kind) + " objects belong; write it with kubectl get " +
                           "<resource> -o json as docs/recipe.md shows");
}

// The items of a List, or the object itself; empty when the file does not exist.
std::vector<core::Value> items_of(const std::filesystem::path& path, std::string_view kind = {}) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  std::string text = core::read_file(path.string());
  std::vector<core::Value> out;
  for (core::Value& doc : core::parse_yaml_documents(text, path.string())) {
    if (doc.is_null()) continue;
    if (!doc.is_map())
      throw core::InvalidInput(path.string() + ": expected Kubernetes objects or a List");
    if (const core::Value* items = doc.find("items")) {
      if (!items->is_list()) throw core::InvalidInput(path.string() + ": items: expected a list");
      for (const core::Value& i : items->as_list()) {
        check_kind(i, path, kind);
        out.push_back(i);
      }
    } else {
      check_kind(doc, path, kind);
      out.push_back(std::move(doc));
    }
  }
  return out;
}

}  // namespace

ClusterObjects cluster_objects_from_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw core::InvalidInput("--from-dir '" + dir + "': not a directory of kubectl dumps");
  }
  fs::path d(dir);
  ClusterObjects o;
  std::vector<core::Value> version = items_of(d / "version.json");
  if (!version.empty())
    o.kubernetes_version = std::string(version.front().get_string({"serverVersion", "gitVersion"}));
  o.nodes = items_of(d / "nodes.json", "Node");
  o.helm_release_secrets = items_of(d / "helm-releases.json", "Secret");
  o.crds = items_of(d / "crds.json", "CustomResourceDefinition");
  o.deployments = items_of(d / "deployments.json", "Deployment");
  o.daemon_sets = items_of(d / "daemonsets.json", "DaemonSet");
  o.stateful_sets = items_of(d / "statefulsets.json", "StatefulSet");
  o.pods = items_of(d / "pods.json", "Pod");
  o.operator_resources = items_of(d / "operators.json");
  for (const core::Value& r : o.operator_resources) {
    std::string_view kind = r.get_string({"kind"});
    bool known = false;
    std::string kinds;
    for (const OperatorResource& op : kOperatorResources) {
      known = known || op.kind == kind;
      kinds += (kinds.empty() ? "" : " or ") + std::string(op.kind);
    }
    if (!known) {
      throw core::InvalidInput(
          (d / "operators.json").string() + ": holds a " + std::string(kind) + " where " + kinds +
          " objects belong; write it with kubectl get as docs/recipe.md shows");
    }
  }
  o.device_classes = items_of(d / "deviceclasses.json", "DeviceClass");
  o.resource_slices = items_of(d / "resourceslices.json", "ResourceSlice");
  if (o.kubernetes_version.empty() && o.nodes.empty()) {
    throw core::InvalidInput("--from-dir '" + dir +
                             "': neither version.json nor nodes.json is there; "
                             "see docs/recipe.md for the kubectl commands that write them");
  }
  return o;
}

}  // namespace gpufleet::recipe
