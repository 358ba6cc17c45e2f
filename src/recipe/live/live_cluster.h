// Snapshots of a live cluster: the objects snapshot_from_objects reads, fetched through the
// Kubernetes client instead of kubectl dumps.
#pragma once

#include <string>

#include "recipe/snapshot.h"

namespace gpufleet::kube {
class Client;
}

namespace gpufleet::recipe {

// Where the cluster is: --kubeconfig (empty: $KUBECONFIG, then ~/.kube/config, then the
// in-cluster service account) and --context (empty: current-context).
struct LiveClusterOptions {
  std::string kubeconfig;
  std::string context;
};

// Lists, across all namespaces and following pagination: /version, Nodes, Helm release
// Secrets (label owner=helm, type helm.sh/release.v1), CRDs, Deployments, DaemonSets,
// StatefulSets and Pods. Fields a snapshot never reads (managedFields, node images, CRD and
// Pod specs) are pruned while decoding. Client errors propagate unchanged.
ClusterObjects cluster_objects_from_client(kube::Client& client);

// Loads the configuration, fetches the objects and builds the Snapshot. Throws
// core::InvalidInput for an unusable kubeconfig, and std::runtime_error with a message naming
// the server and the cause when the cluster cannot be reached, and the verb, resource and the
// RBAC rule needed when a request is forbidden.
Snapshot snapshot_from_live_cluster(const LiveClusterOptions& options);

}  // namespace gpufleet::recipe
