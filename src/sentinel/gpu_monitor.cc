#include "sentinel/gpu_monitor.h"

#include <dlfcn.h>

#include <charconv>
#include <filesystem>

#include "agent/nodehealth.h"
#include "core/file_reader.h"
#include "core/text.h"
#include "sentinel/kmsg.h"

namespace gpufleet::sentinel {
namespace {

bool absent(std::string_view v) {
  return v.empty() || v == "N/A" || v == "[N/A]" || v == "[Not Supported]";
}

std::optional<std::uint64_t> number(std::string_view v) {
  if (absent(v)) return std::nullopt;
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
  return n;
}

std::optional<bool> flag(std::string_view v) {
  if (v == "Yes" || v == "Active") return true;
  if (v == "No" || v == "Not Active") return false;
  return std::nullopt;
}

// The NVML ABI this monitor uses (documented C API; declared here, no header needed).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDeviceOpaque*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlGpuIsLost = 15;
constexpr unsigned long long kThrottleHwThermal = 0x40;

}  // namespace

struct GpuMonitor::Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*remapped)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*throttle)(nvmlDevice_t, unsigned long long*) = nullptr;
  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (handle != nullptr) ::dlclose(handle);
  }
};

std::vector<GpuSample> parse_smi_csv(std::string_view csv) {
  std::vector<GpuSample> out;
  std::map<std::string, std::size_t, std::less<>> col;
  bool header = true;
  while (!csv.empty()) {
    auto nl = csv.find('\n');
    std::string_view line = csv.substr(0, nl);
    csv = nl == std::string_view::npos ? std::string_view{} : csv.substr(nl + 1);
    if (core::trim(line).empty()) continue;
    auto cells = core::split_trimmed(line);
    if (header) {
      header = false;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        col[std::string(cells[i].substr(0, cells[i].find(' ')))] = i;
      }
      if (!col.contains("uuid")) return out;
      continue;
    }
    auto cell = [&](std::string_view name) -> std::string_view {
      auto it = col.find(name);
      return it == col.end() || it->second >= cells.size() ? std::string_view{} : cells[it->second];
    };
    GpuSample s;
    s.uuid = std::string(cell("uuid"));
    if (!s.uuid.starts_with("GPU-")) continue;
    if (auto i = number(cell("index")); i && *i < 1024) s.index = static_cast<int>(*i);
    s.pci = normalise_pci(cell("pci.bus_id"));
    for (const auto& c : cells) {
      if (c == "[Unknown Error]" || c == "[GPU is lost]") s.lost = true;
    }
    s.ecc_corrected = number(cell("ecc.errors.corrected.volatile.total"));
    s.ecc_uncorrected = number(cell("ecc.errors.uncorrected.volatile.total"));
    s.remap_pending = flag(cell("remapped_rows.pending"));
    s.remap_failure = flag(cell("remapped_rows.failure"));
    s.thermal_slowdown = flag(cell("clocks_event_reasons.hw_thermal_slowdown"));
    if (!s.thermal_slowdown)
      s.thermal_slowdown = flag(cell("clocks_throttle_reasons.hw_thermal_slowdown"));
    out.push_back(std::move(s));
  }
  return out;
}

std::pair<std::string, std::string> judge(const GpuSample& s) {
  if (s.lost) return {"Fatal", "GpuLost"};
  if (s.remap_failure.value_or(false)) return {"Fatal", "RowRemapFailure"};
  if (s.ecc_uncorrected.value_or(0) > 0) return {"Fatal", "UncorrectedEcc"};
  if (s.remap_pending.value_or(false)) return {"Warning", "RowRemapPending"};
  if (s.thermal_slowdown.value_or(false)) return {"Warning", "ThermalSlowdown"};
  return {"Healthy", "GpuHealthy"};
}

GpuMonitor::GpuMonitor(const agent::NodeContext& node, GpuMonitorOptions options)
    : node_(node), options_(std::move(options)) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(node_.host_path("/run/nvidia-smi/query-gpu.csv"), ec)) {
    source_ = "csv";
    return;
  }
  void* h = ::dlopen(options_.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = ::dlerror();
    source_ = "disabled";
    disabled_reason_ = options_.library + " cannot be loaded (" +
                       std::string(err != nullptr ? err : "unknown error") +
                       "); GPU health from NVML is off. Install the NVIDIA driver on the node "
                       "or mount its libraries into the agent";
    return;
  }
  auto nvml = std::make_unique<Nvml>();
  nvml->handle = h;
  auto sym = [&](const char* name) { return ::dlsym(h, name); };
  nvml->init = reinterpret_cast<nvmlReturn_t (*)()>(sym("nvmlInit_v2"));
  nvml->count = reinterpret_cast<nvmlReturn_t (*)(unsigned*)>(sym("nvmlDeviceGetCount_v2"));
  nvml->by_index = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      sym("nvmlDeviceGetHandleByIndex_v2"));
  nvml->uuid =
      reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(sym("nvmlDeviceGetUUID"));
  nvml->ecc = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*)>(
      sym("nvmlDeviceGetTotalEccErrors"));
  nvml->remapped =
      reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*)>(
          sym("nvmlDeviceGetRemappedRows"));
  nvml->throttle = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
      sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
  if (nvml->init == nullptr || nvml->count == nullptr || nvml->by_index == nullptr ||
      nvml->uuid == nullptr) {
    source_ = "disabled";
    disabled_reason_ = options_.library +
                       " lacks nvmlInit_v2/nvmlDeviceGetCount_v2/"
                       "nvmlDeviceGetHandleByIndex_v2/nvmlDeviceGetUUID (driver too old)";
    return;
  }
  if (const nvmlReturn_t r = nvml->init(); r != kNvmlSuccess) {
    source_ = "disabled";
    disabled_reason_ = "nvmlInit_v2 failed with NVML error " + std::to_string(r);
    return;
  }
  nvml->shutdown = reinterpret_cast<nvmlReturn_t (*)()>(sym("nvmlShutdown"));
  nvml_ = std::move(nvml);
  source_ = "nvml";
}

GpuMonitor::~GpuMonitor() = default;

std::vector<GpuSample> GpuMonitor::sample_nvml() {
  std::vector<GpuSample> out;
  unsigned n = 0;
  if (nvml_->count(&n) != kNvmlSuccess) return out;
  for (unsigned i = 0; i < n && i < 64; ++i) {
    GpuSample s;
    s.index = static_cast<int>(i);
    nvmlDevice_t dev = nullptr;
    const nvmlReturn_t r = nvml_->by_index(i, &dev);
    char uuid[96] = {};
    if (r != kNvmlSuccess || nvml_->uuid(dev, uuid, sizeof uuid) != kNvmlSuccess) {
      // Without a UUID the GPU is named by index; NVML says "lost" with its own error code.
      s.uuid = "index:" + std::to_string(i);
      s.lost = r == kNvmlGpuIsLost || r != kNvmlSuccess;
      out.push_back(std::move(s));
      continue;
    }
    s.uuid = uuid;
    if (nvml_->ecc != nullptr) {
      unsigned long long c = 0;
      const nvmlReturn_t e = nvml_->ecc(dev, 1 /* uncorrected */, 0 /* volatile */, &c);
      if (e == kNvmlSuccess) s.ecc_uncorrected = c;
      if (e == kNvmlGpuIsLost) s.lost = true;
      if (nvml_->ecc(dev, 0, 0, &c) == kNvmlSuccess) s.ecc_corrected = c;
    }
    if (nvml_->remapped != nullptr) {
      unsigned corr = 0;
      unsigned unc = 0;
      unsigned pending = 0;
      unsigned failure = 0;
      if (nvml_->remapped(dev, &corr, &unc, &pending, &failure) == kNvmlSuccess) {
        s.remap_pending = pending != 0;
        s.remap_failure = failure != 0;
      }
    }
    if (nvml_->throttle != nullptr) {
      unsigned long long reasons = 0;
      if (nvml_->throttle(dev, &reasons) == kNvmlSuccess) {
        s.thermal_slowdown = (reasons & kThrottleHwThermal) != 0;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

void GpuMonitor::poll(agent::Emitter& out) {
  if (source_ == "disabled") {
    if (disabled_reported_) return;
    disabled_reported_ = true;
    core::Value h = core::Value::map();
    h["check"] = kGpuCheck;
    h["state"] = "Unknown";
    h["reason"] = "NvmlUnavailable";
    h["message"] = disabled_reason_;
    out.emit(agent::kHealthKind, h);
    return;
  }
  std::vector<GpuSample> samples;
  if (source_ == "csv") {
    core::InputLimits limits;
    limits.max_bytes = std::size_t{1} << 20;
    samples = parse_smi_csv(
        core::read_file(node_.host_path("/run/nvidia-smi/query-gpu.csv").string(), limits));
  } else {
    samples = sample_nvml();
  }
  std::map<std::string, bool> seen;
  auto report = [&](const std::string& uuid, const std::string& state, const std::string& reason,
                    const std::string& message) {
    const std::string key = state + "/" + reason;
    auto it = last_.find(uuid);
    if (it != last_.end() && it->second == key) return;  // change only
    last_[uuid] = key;
    core::Value h = core::Value::map();
    h["check"] = kGpuCheck;
    h["entity"] = uuid;
    h["entityKind"] = "GPU";
    h["state"] = state;
    h["reason"] = reason;
    h["message"] = message;
    out.emit(agent::kHealthKind, h);
  };
  for (const auto& s : samples) {
    seen[s.uuid] = true;
    auto [state, reason] = judge(s);
    std::string message = "GPU " + std::to_string(s.index) + " " + s.uuid + ": " + reason;
    if (s.ecc_uncorrected) message += ", uncorrected ECC " + std::to_string(*s.ecc_uncorrected);
    report(s.uuid, state, reason, message);
  }
  // A GPU that was listed and is no longer: it left the bus (nvidia-smi drops it).
  for (const auto& [uuid, key] : std::map<std::string, std::string>(last_)) {
    if (!seen.contains(uuid) && last_.size() <= 64) {
      report(uuid, "Fatal", "GpuLost", "GPU " + uuid + " is no longer listed by the driver");
    }
  }
}

std::unique_ptr<agent::Monitor> make_gpu_monitor(const agent::NodeContext& node) {
  return std::make_unique<GpuMonitor>(node);
}

}  // namespace gpufleet::sentinel
