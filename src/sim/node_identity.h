// The fixed identity of one simulated node, derived only from the fleet seed, its pool and
// its index: names, rack, zone, NVLink clique, IP, machine IDs, GPU and NIC addresses.
// Scaling a pool adds or removes indices without changing any other node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/fleet_spec.h"

namespace gpufleet::sim {

struct NodeIdentity {
  std::string name;
  std::size_t pool = 0;  // index into FleetSpec::pools
  int index = 0;         // within the pool
  int rack = 0;          // within the pool
  int slot = 0;          // within the rack
  std::string rack_name;
  std::string zone;
  std::string clique;  // nvidia.com/gpu.clique, empty when the NVLink domain is one node
  std::string internal_ip;
  std::string machine_id;             // 32 hex digits, like /etc/machine-id
  std::string system_uuid;            // SMBIOS UUID
  std::vector<std::string> gpu_pci;   // "00000000:18:00.0" (nvidia-smi pci.bus_id form)
  std::vector<std::string> gpu_uuid;  // "GPU-xxxxxxxx-..."
  std::vector<std::string> nvswitch_pci;
  std::vector<std::string> ib_devices;  // mlx5_0 ...
  std::uint64_t seed = 0;               // this node's own seed
};

NodeIdentity make_node_identity(const FleetSpec& fleet, std::size_t pool, int index);
// Every node of every pool, pool by pool.
std::vector<NodeIdentity> expand_fleet(const FleetSpec& fleet);

// "00000000:18:00.0" -> "0000:18:00" as the NVRM Xid prefix prints it (domain:bus:dev).
std::string xid_pci_address(const std::string& bus_id);

}  // namespace gpufleet::sim
