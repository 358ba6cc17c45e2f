#include "sim/gpu_catalog.h"

#include <array>

namespace gpufleet::sim {
namespace {

// Bandwidth figures are public, typical nccl-tests all_reduce_perf results for large
// messages (NVLS/ring, bf16/float), rounded; see docs/sim.md "Bandwidth model".
constexpr std::array kModels{
    GpuModel{"a100", "NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "ampere", 81920, 8, 0, true,
             "amd64", 12, 25.0, 6, 230.0, 12.0},
    GpuModel{"h100", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", "hopper", 81559, 9, 0, true,
             "amd64", 18, 26.562, 4, 480.0, 10.0},
    GpuModel{"h200", "NVIDIA-H200", "NVIDIA H200", "hopper", 143771, 9, 0, true, "amd64", 18,
             26.562, 4, 485.0, 10.0},
    GpuModel{"b200", "NVIDIA-B200", "NVIDIA B200", "blackwell", 183359, 10, 0, true, "amd64", 18,
             53.125, 2, 860.0, 9.0},
    GpuModel{"gb200", "NVIDIA-GB200", "NVIDIA GB200", "blackwell", 189471, 10, 0, true, "arm64", 18,
             53.125, 0, 850.0, 12.0},
};

}  // namespace

std::span<const GpuModel> gpu_models() { return kModels; }

const GpuModel* find_gpu_model(std::string_view key_or_product) {
  for (const auto& m : kModels) {
    if (m.key == key_or_product || m.product == key_or_product) return &m;
  }
  return nullptr;
}

}  // namespace gpufleet::sim
