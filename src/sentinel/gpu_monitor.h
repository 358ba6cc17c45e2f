// The GPU monitor ("gpu-nvml"): per-GPU health from NVML, loaded with dlopen so the agent
// has no link-time dependency on the driver. Sources, in order:
// 1. nvidia-smi's CSV at <host root>/run/nvidia-smi/query-gpu.csv when it exists (the
//    simulator writes it: `index, pci.bus_id, uuid, ..., ecc.errors.uncorrected.volatile.total,
//    ..., remapped_rows.pending, remapped_rows.failure`);
// 2. libnvidia-ml.so.1 through dlopen;
// 3. neither: the monitor reports its check "gpu" Unknown ONCE with the reason
//    (NvmlUnavailable: the dlerror text) and stays quiet — never a crash.
// Per GPU (entity = UUID, kind GPU) it reports, on change only: Fatal GpuLost (an error
// reading it, "[Unknown Error]", or gone from the list it was in), Fatal RowRemapFailure,
// Fatal UncorrectedEcc (volatile count > 0), Warning RowRemapPending, Warning
// ThermalSlowdown, else Healthy.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/plugin.h"

namespace gpufleet::sentinel {

inline constexpr std::string_view kGpuCheck = "gpu";

struct GpuSample {
  int index = -1;
  std::string uuid;
  std::string pci;
  bool lost = false;
  std::optional<std::uint64_t> ecc_corrected;
  std::optional<std::uint64_t> ecc_uncorrected;
  std::optional<bool> remap_pending;
  std::optional<bool> remap_failure;
  std::optional<bool> thermal_slowdown;
};

// nvidia-smi --query-gpu CSV (columns located by header name; N/A, [N/A], [Not Supported]
// are absent; [Unknown Error] marks a lost GPU). Malformed rows are skipped.
std::vector<GpuSample> parse_smi_csv(std::string_view csv);

// The state and reason a sample maps to ("Fatal", "GpuLost").
std::pair<std::string, std::string> judge(const GpuSample& s);

struct GpuMonitorOptions {
  std::chrono::milliseconds interval{2000};
  std::string library = "libnvidia-ml.so.1";
};

class GpuMonitor final : public agent::Monitor {
 public:
  explicit GpuMonitor(const agent::NodeContext& node, GpuMonitorOptions options = {});
  ~GpuMonitor() override;
  [[nodiscard]] std::chrono::milliseconds interval() const override { return options_.interval; }
  void poll(agent::Emitter& out) override;

  // "csv", "nvml" or "disabled".
  [[nodiscard]] std::string_view source() const noexcept { return source_; }
  [[nodiscard]] const std::string& disabled_reason() const noexcept { return disabled_reason_; }

 private:
  struct Nvml;
  std::vector<GpuSample> sample_nvml();

  agent::NodeContext node_;
  GpuMonitorOptions options_;
  std::string source_;
  std::string disabled_reason_;
  bool disabled_reported_ = false;
  std::unique_ptr<Nvml> nvml_;
  std::map<std::string, std::string> last_;  // uuid -> "state/reason" reported
};

std::unique_ptr<agent::Monitor> make_gpu_monitor(const agent::NodeContext& node);

}  // namespace gpufleet::sentinel
