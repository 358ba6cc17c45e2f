// The GPU products the simulator knows: the names GPU feature discovery and nvidia-smi
// print, memory, NVLink shape and the bandwidth figures the bandwidth model starts from.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace gpufleet::sim {

struct GpuModel {
  std::string_view key;       // what a fleet file names: "h100", "gb200", ...
  std::string_view product;   // label nvidia.com/gpu.product
  std::string_view smi_name;  // nvidia-smi "name"
  std::string_view family;    // label nvidia.com/gpu.family
  std::int64_t memory_mib;    // label nvidia.com/gpu.memory, nvidia-smi memory.total
  int compute_major;          // nvidia.com/gpu.compute.major|minor
  int compute_minor;
  bool mig_capable;
  std::string_view arch;    // kubernetes.io/arch of the host: amd64 or arm64 (Grace)
  int nvlinks_per_gpu;      // links shown by `nvidia-smi nvlink -s`
  double nvlink_link_gbs;   // per-link speed shown there (GB/s, one direction)
  int nvswitches_per_node;  // NVSwitch chips on the baseboard (0: switches are off-node)
  // All-reduce bus bandwidth (GB/s) NCCL reaches for large messages when every rank is
  // inside one NVLink domain, and the small-message latency floor there (microseconds).
  double nvlink_busbw_gbs;
  double nvlink_latency_us;
};

// Every known model, in a stable order.
std::span<const GpuModel> gpu_models();
// By key ("h100") or by product label ("NVIDIA-H100-80GB-HBM3"); nullptr when unknown.
const GpuModel* find_gpu_model(std::string_view key_or_product);

}  // namespace gpufleet::sim
