// The fleet file: node pools of a simulated GPU cluster (see docs/sim.md "Fleet file").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "sim/gpu_catalog.h"

namespace gpufleet::sim {

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
};

struct OsImage {
  std::string id;           // os_release ID: ubuntu, rhel, ...
  std::string version_id;   // os_release VERSION_ID: 22.04
  std::string pretty_name;  // nodeInfo.osImage: "Ubuntu 22.04.5 LTS"
};

struct NetworkSpec {
  std::string resource = "rdma/ib";  // extended resource advertised per node
  int devices = 8;                   // HCAs: mlx5_0 .. mlx5_<devices-1>
  int ports_per_device = 1;
  int rate_gbps = 400;  // per port
  std::string link_layer = "InfiniBand";
};

struct PoolSpec {
  std::string name;
  int count = 0;
  std::string name_pattern;  // placeholders {pool} {index} {rack} {slot}, e.g. {index:03}
  const GpuModel* gpu = nullptr;
  int gpus_per_node = 8;
  std::string driver_version;  // 570.148.08
  std::string cuda_version;    // 12.8
  int nvlink_domain_gpus = 0;  // GPUs per NVLink domain; 0 = one domain per node (HGX)
  int nodes_per_rack = 4;
  std::vector<std::string> zones;
  int cpu_cores = 0;
  std::int64_t memory_gib = 0;
  int max_pods = 110;
  std::int64_t ephemeral_storage_gib = 3500;
  NetworkSpec network;
  std::string kernel_version;
  OsImage os;
  std::string container_runtime;  // containerd://1.7.27
  std::vector<Taint> taints;
  core::Map labels;
  core::Map annotations;
  core::Map sysctls;        // initial host sysctls beyond the defaults
  std::string kernel_args;  // extra kernel command-line arguments at first boot

  // Nodes sharing one NVLink domain (1 for HGX pools).
  [[nodiscard]] int nodes_per_domain() const {
    return nvlink_domain_gpus > 0 ? nvlink_domain_gpus / gpus_per_node : 1;
  }
};

struct FleetSpec {
  std::string name;
  std::uint64_t seed = 1;
  std::string kubelet_version = "v1.32.4";
  std::vector<PoolSpec> pools;
  std::string source;  // where it was read from, for error messages

  [[nodiscard]] const PoolSpec* find_pool(std::string_view pool) const;
  [[nodiscard]] std::size_t node_count() const;
};

// Validates a parsed fleet document; throws core::InvalidInput naming field, value and fix.
FleetSpec parse_fleet(const core::Value& doc, std::string_view source);
// Reads and validates a fleet file (YAML).
FleetSpec load_fleet_file(const std::string& path);
// The fleet spec's `spec` part back as a document (for status output and round trips).
core::Value fleet_to_value(const FleetSpec& fleet);

// Expands a name pattern for one node; throws InvalidInput on an unknown placeholder.
std::string expand_name_pattern(std::string_view pattern, std::string_view pool, int index,
                                int rack, int slot);

}  // namespace gpufleet::sim
