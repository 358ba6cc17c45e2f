// Cluster objects from kubectl dumps, so that a snapshot can be made without the client.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "core/yaml.h"
#include "recipe/snapshot.h"

namespace gpufleet::recipe {

namespace {

// The items of a List, or the object itself; empty when the file does not exist.
std::vector<core::Value> items_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<core::Value> out;
  for (core::Value& doc : core::parse_yaml_documents(text.str(), path.string())) {
    if (doc.is_null()) continue;
    if (!doc.is_map())
      throw core::InvalidInput(path.string() + ": expected Kubernetes objects or a List");
    if (const core::Value* items = doc.find("items")) {
      if (!items->is_list()) throw core::InvalidInput(path.string() + ": items: expected a list");
      for (const core::Value& i : items->as_list()) out.push_back(i);
    } else {
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
  o.nodes = items_of(d / "nodes.json");
  o.helm_release_secrets = items_of(d / "helm-releases.json");
  o.crds = items_of(d / "crds.json");
  o.deployments = items_of(d / "deployments.json");
  o.daemon_sets = items_of(d / "daemonsets.json");
  o.stateful_sets = items_of(d / "statefulsets.json");
  o.pods = items_of(d / "pods.json");
  if (o.kubernetes_version.empty() && o.nodes.empty()) {
    throw core::InvalidInput("--from-dir '" + dir +
                             "': neither version.json nor nodes.json is there; "
                             "see docs/recipe.md for the kubectl commands that write them");
  }
  return o;
}

}  // namespace gpufleet::recipe
