// Fetching the snapshot's objects from the API server, and turning client failures into
// messages an operator can act on (which server, which permission).
#include "recipe/live/live_cluster.h"

#include <algorithm>
#include <stdexcept>

#include "core/json.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"

namespace gpufleet::recipe {

namespace {

const kube::ResourceId kSecrets{"", "v1", "secrets", true};
const kube::ResourceId kDaemonSets{"apps", "v1", "daemonsets", true};
const kube::ResourceId kStatefulSets{"apps", "v1", "statefulsets", true};

std::vector<core::Value> list_all(kube::Client& client, const kube::ResourceId& r,
                                  const std::string& label_selector,
                                  std::vector<std::string> prune) {
  kube::ListOptions options;
  options.label_selector = label_selector;
  prune.emplace_back("metadata.managedFields");
  kube::ObjectShape shape;
  shape.prune = std::move(prune);
  return client.list(r, "", options, shape).items;
}

// The ClusterRole rule that grants the request ("deployments.apps" -> apiGroups ["apps"]).
std::string rbac_rule(const kube::RequestInfo& req) {
  if (!req.resource.empty() && req.resource.front() == '/') {
    return "a ClusterRole rule {nonResourceURLs: [\"" + req.resource +
           "\"], verbs: [\"get\"]} bound to this user with a ClusterRoleBinding";
  }
  std::string resource = req.resource;
  std::string group;
  if (auto dot = resource.find('.'); dot != std::string::npos) {
    group = resource.substr(dot + 1);
    resource = resource.substr(0, dot);
  }
  std::string verb = req.verb.empty() ? "list" : req.verb;
  return "a ClusterRole rule {apiGroups: [\"" + group + "\"], resources: [\"" + resource +
         "\"], verbs: [\"" + verb + "\"]} bound to this user with a ClusterRoleBinding";
}

std::string where(const kube::RequestInfo& req) {
  return req.namespace_.empty() ? "across the cluster" : "in namespace " + req.namespace_;
}

// The version the API server prefers for `group`, or empty when it does not serve the group
// (resource.k8s.io moved from v1beta1 to v1 across the releases a cluster may run).
std::string preferred_version(kube::Client& client, const std::string& group) {
  try {
    core::Value g = core::parse_json(client.get_raw("/apis/" + group), "/apis/" + group);
    return std::string(g.get_string({"preferredVersion", "version"}));
  } catch (const kube::ApiError& e) {
    if (e.is(kube::Reason::NotFound)) return {};
    throw;
  }
}

}  // namespace

ClusterObjects cluster_objects_from_client(kube::Client& client) {
  ClusterObjects o;
  core::Value version = core::parse_json(client.get_raw("/version"), "/version");
  o.kubernetes_version = std::string(version.get_string({"gitVersion"}));
  o.nodes = list_all(client, kube::resources::nodes(), "", {"status.images"});
  for (core::Value& s : list_all(client, kSecrets, "owner=helm", {})) {
    if (s.get_string({"type"}) == "helm.sh/release.v1")
      o.helm_release_secrets.push_back(std::move(s));
  }
  o.crds = list_all(client, kube::resources::custom_resource_definitions(), "", {"spec"});
  o.deployments = list_all(client, kube::resources::deployments(), "", {});
  o.daemon_sets = list_all(client, kDaemonSets, "", {});
  o.stateful_sets = list_all(client, kStatefulSets, "", {});
  // Pod specs are big; only the volumes are read (hostPath device mounts).
  o.pods = list_all(client, kube::resources::pods(), "",
                    {"spec.containers", "spec.initContainers", "spec.ephemeralContainers",
                     "spec.affinity", "spec.tolerations", "spec.topologySpreadConstraints"});
  // Operator resources only where their CRD exists: listing an unknown kind is a 404.
  for (const OperatorResource& op : kOperatorResources) {
    std::string crd = std::string(op.plural) + "." + std::string(op.group);
    bool present = std::any_of(o.crds.begin(), o.crds.end(), [&](const core::Value& c) {
      return c.get_string({"metadata", "name"}) == crd;
    });
    if (!present) continue;
    kube::ResourceId id{std::string(op.group), std::string(op.version), std::string(op.plural),
                        op.namespaced};
    for (core::Value& r : list_all(client, id, "", {"spec"})) {
      if (r.get_string({"kind"}).empty()) r["kind"] = std::string(op.kind);
      o.operator_resources.push_back(std::move(r));
    }
  }
  if (std::string v = preferred_version(client, "resource.k8s.io"); !v.empty()) {
    o.device_classes =
        list_all(client, {"resource.k8s.io", v, "deviceclasses", false}, "", {"spec"});
    o.resource_slices = list_all(client, {"resource.k8s.io", v, "resourceslices", false}, "", {});
  }
  return o;
}

Snapshot snapshot_from_live_cluster(const LiveClusterOptions& options) {
  kube::ClientConfig config = kube::load_default_config(options.kubeconfig, options.context);
  std::string server = config.server;
  std::string source = config.source;
  try {
    kube::Client client(std::move(config));
    return snapshot_from_objects(cluster_objects_from_client(client));
  } catch (const kube::TransportError& e) {
    throw std::runtime_error("cannot reach the Kubernetes API server " + server + " (from " +
                             source + "): " + e.what() +
                             "; check that the cluster is up and --kubeconfig/--context");
  } catch (const kube::ApiError& e) {
    const kube::RequestInfo& req = e.request();
    if (e.is(kube::Reason::Forbidden)) {
      throw std::runtime_error("forbidden: cannot " + req.verb + " " + req.resource + " " +
                               where(req) + " on " + server + " (" + e.server_message() +
                               "); a snapshot needs " + rbac_rule(req));
    }
    if (e.is(kube::Reason::Unauthorized)) {
      throw std::runtime_error("unauthorized: " + server + " rejected the credentials from " +
                               source + " (" + e.server_message() + ")");
    }
    throw std::runtime_error("cannot " + req.verb + " " + req.resource + " on " + server + ": " +
                             std::string(kube::reason_name(e.reason())) + " (HTTP " +
                             std::to_string(e.code()) + "): " + e.server_message());
  }
}

}  // namespace gpufleet::recipe
