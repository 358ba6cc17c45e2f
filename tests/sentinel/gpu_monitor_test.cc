#include "sentinel/gpu_monitor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/nodehealth.h"

namespace gpufleet::sentinel {
namespace {

namespace fs = std::filesystem;

struct Collect final : agent::Emitter {
  std::vector<core::Value> health;
  void emit(std::string_view kind, const core::Value& payload) override {
    if (kind == agent::kHealthKind) health.push_back(payload);
  }
};

// The header and rows exactly as the simulator renders run/nvidia-smi/query-gpu.csv.
const std::string kHeader =
    "index, pci.bus_id, uuid, name, memory.total [MiB], temperature.gpu, "
    "clocks_event_reasons.hw_thermal_slowdown, ecc.errors.corrected.volatile.total, "
    "ecc.errors.uncorrected.volatile.total, remapped_rows.correctable, "
    "remapped_rows.uncorrectable, remapped_rows.pending, remapped_rows.failure\n";
std::string row(int i, const std::string& uuid, const std::string& tail) {
  return std::to_string(i) + ", 00000000:1" + std::to_string(i) + ":00.0, " + uuid +
         ", NVIDIA H100 80GB HBM3, 81559 MiB, 40, " + tail + "\n";
}
const std::string kOk = "Not Active, 0, 0, 0, 0, No, No";

TEST(SmiCsv, ParsesTheSimulatorsColumns) {
  auto s = parse_smi_csv(kHeader + row(0, "GPU-a", kOk) +
                         row(1, "GPU-b", "Active, 5, 1, 0, 0, Yes, No") +
                         "2, 00000000:30:00.0, GPU-c, NVIDIA H100 80GB HBM3, [Unknown Error], "
                         "[Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error], "
                         "[Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error]\n"
                         "junk\n");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].pci, "0000:10:00");
  EXPECT_EQ(judge(s[0]), (std::pair<std::string, std::string>{"Healthy", "GpuHealthy"}));
  EXPECT_EQ(s[1].ecc_corrected, 5u);
  EXPECT_EQ(judge(s[1]).second, "UncorrectedEcc");
  EXPECT_TRUE(s[2].lost);
  EXPECT_EQ(judge(s[2]).second, "GpuLost");
  auto na = parse_smi_csv(kHeader + row(0, "GPU-a", "[N/A], N/A, [Not Supported], 0, 0, No, Yes"));
  ASSERT_EQ(na.size(), 1u);
  EXPECT_FALSE(na[0].ecc_corrected);
  EXPECT_EQ(judge(na[0]).second, "RowRemapFailure");
}

TEST(GpuMonitor, CsvSourceReportsChangesAndLostGpus) {
  std::string tmpl = (fs::temp_directory_path() / "sentinel-gpu-XXXXXX").string();
  fs::path root = ::mkdtemp(tmpl.data());
  agent::NodeContext ctx;
  ctx.host_root = root;
  fs::create_directories(root / "run/nvidia-smi");
  auto write = [&](const std::string& s) {
    std::ofstream(root / "run/nvidia-smi/query-gpu.csv", std::ios::trunc) << s;
  };
  write(kHeader + row(0, "GPU-a", kOk) + row(1, "GPU-b", kOk));
  GpuMonitor m(ctx);
  EXPECT_EQ(m.source(), "csv");
  Collect c1;
  m.poll(c1);
  EXPECT_EQ(c1.health.size(), 2u);
  Collect c2;
  m.poll(c2);
  EXPECT_TRUE(c2.health.empty());
  write(kHeader + row(0, "GPU-a", "Not Active, 0, 0, 0, 0, Yes, No"));  // GPU-b left the bus
  Collect c3;
  m.poll(c3);
  ASSERT_EQ(c3.health.size(), 2u);
  EXPECT_EQ(c3.health[0].get_string({"reason"}), "RowRemapPending");
  EXPECT_EQ(c3.health[1].get_string({"entity"}), "GPU-b");
  EXPECT_EQ(c3.health[1].get_string({"reason"}), "GpuLost");
  fs::remove_all(root);
}

TEST(GpuMonitor, AbsentLibraryDisablesWithAReasonOnce) {
  agent::NodeContext ctx;
  ctx.host_root = fs::temp_directory_path() / "sentinel-no-gpu-root";
  GpuMonitorOptions o;
  o.library = "libnvidia-ml-not-here.so.1";
  GpuMonitor m(ctx, o);
  EXPECT_EQ(m.source(), "disabled");
  EXPECT_NE(m.disabled_reason().find("libnvidia-ml-not-here.so.1 cannot be loaded"),
            std::string::npos);
  Collect c;
  m.poll(c);
  m.poll(c);
  ASSERT_EQ(c.health.size(), 1u);
  EXPECT_EQ(c.health[0].get_string({"state"}), "Unknown");
  EXPECT_EQ(c.health[0].get_string({"reason"}), "NvmlUnavailable");
  // The real library name: on a machine without the driver this is the same path; with one,
  // NVML initialises. Either way no crash.
  GpuMonitor real(ctx);
  Collect r;
  real.poll(r);
  EXPECT_TRUE(real.source() == "disabled" || real.source() == "nvml");
}

}  // namespace
}  // namespace gpufleet::sentinel
