// The Snapshot document (apiVersion gpufleet.io/v1alpha1, kind Snapshot): the facts of a
// cluster that validate and diff compare with a recipe. `gpufleet snapshot` records it from a
// live cluster; snapshot_from_objects builds it from the Kubernetes objects it lists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::recipe {

struct NodeFacts {
  std::string name;
  core::Value labels = core::Value::map();
  // spec.providerID (aws:///us-west-2a/i-0abc, gce://project/zone/name, azure:///...): which
  // cloud runs the node, so that `recipe --snapshot` can tell the Kubernetes service.
  std::string provider_id;
  std::string instance_type;      // node.kubernetes.io/instance-type (p5.48xlarge)
  std::string os;                 // os-release ID: ubuntu, rhel, cos, ...
  std::string os_version;         // os-release VERSION_ID: 24.04
  std::string os_image;           // nodeInfo.osImage
  std::string kernel;             // nodeInfo.kernelVersion
  std::string container_runtime;  // nodeInfo.containerRuntimeVersion: containerd://2.0.4
  std::string kubelet;            // nodeInfo.kubeletVersion
  std::string gpu_product;        // nvidia.com/gpu.product
  std::string gpu_family;         // nvidia.com/gpu.family
  std::string gpu_driver;         // nvidia.com/cuda.driver.major.minor.rev
  std::int64_t gpu_count = 0;     // nvidia.com/gpu.count, else capacity nvidia.com/gpu

  // The value of a constraint fact (node.os, gpu.driver, ...); empty when unknown.
  std::string fact(std::string_view name) const;
};

// An installed Helm release.
struct InstalledComponent {
  std::string name;
  std::string namespace_;
  std::string chart;
  std::string version;
  std::string app_version;
  std::string status;  // deployed, failed, pending-install, ...
  std::int64_t revision = 0;
  core::Value values = core::Value::map();  // user-supplied values of the release
};

// The state of an object a health check looks at.
struct WorkloadState {
  std::string kind;  // CustomResourceDefinition, Deployment, DaemonSet, StatefulSet
  std::string namespace_;
  std::string name;
  std::int64_t desired = 0;  // replicas / desiredNumberScheduled
  std::int64_t ready = 0;    // availableReplicas / numberReady / readyReplicas
  std::int64_t updated = 0;  // updatedReplicas / updatedNumberScheduled
  bool established = false;  // CRDs: condition Established is True
};

// A container or init container waiting for a reason that means it will not start by itself.
struct PodProblem {
  std::string namespace_;
  std::string pod;
  std::string phase;
  std::string container;
  bool init = false;
  std::string
      reason;  // CrashLoopBackOff, ImagePullBackOff, ErrImagePull, CreateContainerConfigError
};

// An operator's own resource that says whether the operator finished its work (a GPU
// Operator ClusterPolicy with status.state ready). Which kinds are read: kOperatorResources.
struct CustomResourceState {
  std::string kind;
  std::string namespace_;  // empty for cluster-scoped kinds
  std::string name;
  std::string state;  // status.state; empty when the operator has not reported one
};

struct OperatorResource {
  std::string_view component;  // the registry component whose readiness it reports
  std::string_view group, version, plural, kind;
  bool namespaced;
};

// The operators whose custom resource validate's deployment phase checks: the GPU Operator's
// ClusterPolicy and the Network Operator's NicClusterPolicy both report status.state "ready"
// only when every operand they manage on every node is up.
inline constexpr OperatorResource kOperatorResources[] = {
    {"gpu-operator", "nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", false},
    {"network-operator", "mellanox.com", "v1alpha1", "nicclusterpolicies", "NicClusterPolicy",
     false},
};

// A pod volume that mounts GPU device files straight from the host, bypassing the device
// plugin / DRA allocation (a hostPath of /dev, /dev/nvidia*, /dev/dri).
struct HostPathDevice {
  std::string namespace_;
  std::string pod;
  std::string volume;
  std::string path;
};

// A DRA ResourceSlice (resource.k8s.io): which driver publishes how many devices on a node.
struct ResourceSliceFacts {
  std::string node;  // empty for slices not bound to one node
  std::string driver;
  std::int64_t devices = 0;
};

struct Snapshot {
  std::string kubernetes_version;
  std::vector<NodeFacts> nodes;                       // sorted by name
  std::vector<InstalledComponent> components;         // sorted by namespace, name
  std::vector<WorkloadState> workloads;               // sorted by kind, namespace, name
  std::vector<PodProblem> pod_problems;               // sorted
  std::vector<CustomResourceState> custom_resources;  // sorted by kind, namespace, name
  std::vector<HostPathDevice> host_path_devices;      // sorted
  std::vector<std::string> device_classes;            // DRA DeviceClass names, sorted
  std::vector<ResourceSliceFacts> resource_slices;    // sorted by node, driver
};

core::Value snapshot_to_value(const Snapshot& s);
std::string snapshot_to_yaml(const Snapshot& s);
// Throws core::InvalidInput naming the field on a malformed document.
Snapshot snapshot_from_value(const core::Value& doc, std::string_view source);
// YAML or JSON (JSON is YAML).
Snapshot snapshot_from_text(std::string_view text, std::string_view source);

// The Kubernetes objects a snapshot is made from, as the API returns them.
struct ClusterObjects {
  std::string kubernetes_version;  // /version gitVersion
  std::vector<core::Value> nodes;
  std::vector<core::Value> helm_release_secrets;  // type helm.sh/release.v1
  std::vector<core::Value> crds, deployments, daemon_sets, stateful_sets, pods;
  std::vector<core::Value> operator_resources;               // the kinds of kOperatorResources
  std::vector<core::Value> device_classes, resource_slices;  // resource.k8s.io
};

// Reads node facts from labels, nodeInfo and capacity; decodes Helm release records (the
// latest revision of each release); records workload states and pods whose containers wait
// in CrashLoopBackOff, ImagePullBackOff, ErrImagePull or CreateContainerConfigError, whatever
// the pod phase. Throws core::InvalidInput on an undecodable Helm release record.
Snapshot snapshot_from_objects(const ClusterObjects& objects);

// Reads the objects from kubectl dumps in `dir` (each a List or a single object, JSON or
// YAML; a missing file means none): version.json (`kubectl version -o json`), nodes.json,
// helm-releases.json (`kubectl get secrets -A --field-selector type=helm.sh/release.v1`),
// crds.json, deployments.json, daemonsets.json, statefulsets.json, pods.json, operators.json
// (the custom resources of kOperatorResources), deviceclasses.json, resourceslices.json.
ClusterObjects cluster_objects_from_dir(const std::string& dir);

// Decodes the `release` field of a Helm release Secret (base64 of the gzip'd JSON release,
// itself base64 in the Secret's data) into the release JSON.
core::Value decode_helm_release(std::string_view secret_data_release);

}  // namespace gpufleet::recipe
