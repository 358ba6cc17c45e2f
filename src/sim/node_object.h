// Kubernetes Node objects for simulated nodes: labels as GPU feature discovery and node
// feature discovery publish them, capacity/allocatable, nodeInfo, addresses, conditions.
#pragma once

#include <string>
#include <string_view>

#include "core/value.h"
#include "sim/fleet_spec.h"
#include "sim/node_identity.h"

namespace gpufleet::sim {

// What changes over a node's life; everything else comes from the fleet and the identity.
struct NodeRuntime {
  std::string boot_id;
  int gpus_present = 0;  // capacity nvidia.com/gpu (a lost GPU leaves the PCI bus)
  int gpus_healthy = 0;  // allocatable nvidia.com/gpu (fallen-off GPUs are unhealthy)
  int rdma_healthy = 0;  // allocatable of the RDMA resource (ports up)
  bool ready = true;
  std::string ready_reason = "KubeletReady";
  std::string ready_message = "kubelet is posting ready status";
  std::string ready_transition;  // RFC 3339 time of the last Ready flip
  std::string kernel_version;    // changes after a kernel package and a reboot
  std::string driver_version;    // changes after a driver package and a reboot
  // Where the API server reaches this node's kubelet (pods/log): advertised as an
  // ExternalIP beside the made-up InternalIP, and the daemon endpoint's port. Empty: no
  // kubelet endpoint is served, and the Node carries the default port only.
  std::string kubelet_address;
  int kubelet_port = 10250;
};

// The runtime a node starts with: every GPU and port healthy, Ready since `now`.
NodeRuntime initial_runtime(const FleetSpec& fleet, const NodeIdentity& id,
                            std::string_view boot_id, std::string_view now);

// A boot ID (UUID) for the node's n-th boot; deterministic from the node seed.
std::string boot_id_for(const NodeIdentity& id, int boot_number);

// Labels: kubernetes.io/*, topology, GFD nvidia.com/*, NFD feature.node.kubernetes.io/*,
// gpufleet.io/* (pool, rack, simulated), then the pool's own labels (which win).
core::Value node_labels(const FleetSpec& fleet, const NodeIdentity& id, const NodeRuntime& rt);

// The node's `status` (capacity, allocatable, conditions with heartbeat `now`, nodeInfo,
// addresses, daemonEndpoints).
core::Value node_status(const FleetSpec& fleet, const NodeIdentity& id, const NodeRuntime& rt,
                        std::string_view now);

// A full v1 Node (metadata, spec with the pool's taints and providerID, status).
core::Value node_object(const FleetSpec& fleet, const NodeIdentity& id, const NodeRuntime& rt,
                        std::string_view now);

// Annotation and label the simulator puts on every Node it owns.
inline constexpr std::string_view kSimulatedLabel = "gpufleet.io/simulated";
inline constexpr std::string_view kFleetLabel = "gpufleet.io/fleet";
inline constexpr std::string_view kPoolLabel = "gpufleet.io/pool";
inline constexpr std::string_view kRackLabel = "gpufleet.io/rack";

}  // namespace gpufleet::sim
