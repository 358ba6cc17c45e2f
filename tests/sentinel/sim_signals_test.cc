// The monitors against the simulator's own signal files: faults injected into a FleetModel,
// written with write_signals() exactly as `gpufleet sim` writes them, read by the monitors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "agent/nodehealth.h"
#include "core/yaml.h"
#include "sentinel/gpu_monitor.h"
#include "sentinel/ib_monitor.h"
#include "sentinel/kmsg_monitor.h"
#include "sim/fleet_model.h"
#include "sim/fleet_spec.h"
#include "sim/scenario.h"
#include "support/source_paths.h"

namespace gpufleet::sentinel {
namespace {

namespace fs = std::filesystem;

struct Collect final : agent::Emitter {
  std::vector<std::pair<std::string, core::Value>> items;
  void emit(std::string_view kind, const core::Value& payload) override {
    items.emplace_back(std::string(kind), payload);
  }
  std::vector<core::Value> of(std::string_view kind) const {
    std::vector<core::Value> out;
    for (const auto& [k, v] : items) {
      if (k == kind) out.push_back(v);
    }
    return out;
  }
};

class SimNode : public ::testing::Test {
 protected:
  SimNode() : fleet_(sim::load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml"), 0) {
    std::string tmpl = (fs::temp_directory_path() / "sentinel-sim-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    ctx_.identity.node_name = "h100-00-01";
    ctx_.host_root = root_ / "h100-00-01";
    ctx_.state_dir = root_ / "state";
    fs::create_directories(ctx_.state_dir);
    fleet_.write_signals(root_.string());
  }
  ~SimNode() override { fs::remove_all(root_); }
  void inject(const std::string& yaml, double at) {
    fleet_.apply(sim::parse_event(core::parse_yaml(yaml), "test", "event", false), at);
    fleet_.advance(at);
    fleet_.write_signals(root_.string());
  }

  sim::FleetModel fleet_;
  fs::path root_;
  agent::NodeContext ctx_;
};

TEST_F(SimNode, XidFellOffBusThenRebootClears) {
  KmsgMonitor m(ctx_);
  Collect boot;
  m.poll(boot);
  EXPECT_TRUE(boot.of(kKernelEventKind).empty());  // a clean boot log: no GPU signal
  EXPECT_EQ(m.stats().malformed, 0u);
  EXPECT_GT(m.stats().records, 0u);

  inject("{node: h100-00-01, type: xid, gpu: 3, code: 79}", 10);
  Collect out;
  m.poll(out);
  auto ev = out.of(kKernelEventKind);
  ASSERT_GE(ev.size(), 1u);
  EXPECT_EQ(ev[0].get_string({"type"}), "Xid");
  EXPECT_EQ(ev[0].find("code")->as_int(), 79);
  ASSERT_NE(ev[0].find("gpu"), nullptr);
  EXPECT_EQ(ev[0].find("gpu")->as_int(), 3);
  EXPECT_EQ(ev[0].get_string({"uuid"}).substr(0, 4), "GPU-");
  auto h = out.of(agent::kHealthKind);
  ASSERT_GE(h.size(), 1u);
  EXPECT_EQ(h[0].get_string({"state"}), "Fatal");
  EXPECT_EQ(m.stats().malformed, 0u);

  Collect quiet;
  m.poll(quiet);
  EXPECT_TRUE(quiet.items.empty());

  inject("{node: h100-00-01, type: reboot, down: 1s}", 20);
  fleet_.advance(30);
  fleet_.write_signals(root_.string());
  Collect after;
  m.poll(after);
  EXPECT_TRUE(after.of(kKernelEventKind).empty());  // the old boot's Xid is not replayed
  for (const auto& v : after.of(agent::kHealthKind)) {
    EXPECT_EQ(v.get_string({"state"}), "Healthy");
    EXPECT_EQ(v.get_string({"reason"}), "NodeRebooted");
  }
  EXPECT_EQ(m.stats().reboots, 1u);
}

TEST_F(SimNode, DoubleBitEccThenGpuResetCancels) {
  KmsgMonitor m(ctx_);
  Collect boot;
  m.poll(boot);
  inject("{node: h100-00-01, type: ecc, gpu: 2, kind: doubleBit, count: 1}", 10);
  Collect out;
  m.poll(out);
  auto h = out.of(agent::kHealthKind);
  ASSERT_FALSE(h.empty());
  EXPECT_EQ(h.back().get_string({"state"}), "Fatal");
  const std::string gpu(h.back().get_string({"entity"}));

  GpuMonitor g(ctx_);
  EXPECT_EQ(g.source(), "csv");
  Collect gc;
  g.poll(gc);
  bool fatal = false;
  for (const auto& v : gc.of(agent::kHealthKind)) {
    if (v.get_string({"entity"}) == gpu) fatal = v.get_string({"state"}) == "Fatal";
  }
  EXPECT_TRUE(fatal) << "the CSV shows the uncorrected ECC error on " << gpu;

  inject("{node: h100-00-01, type: gpuReset, gpu: 2}", 20);
  Collect reset;
  m.poll(reset);
  h = reset.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].get_string({"entity"}), gpu);
  EXPECT_EQ(h[0].get_string({"state"}), "Healthy");
  EXPECT_EQ(h[0].get_string({"reason"}), "GpuResetSucceeded");
}

TEST_F(SimNode, IbPortDownAndUp) {
  IbMonitorOptions o;
  std::int64_t now = 0;
  o.now_ms = [&] { return now; };
  IbMonitor m(ctx_, o);
  Collect base;
  m.poll(base);
  EXPECT_EQ(base.of(agent::kHealthKind).size(), 8u);  // mlx5_0..7, port 1
  inject("{node: h100-00-01, type: ibPortDown, device: mlx5_2, port: 1}", 10);
  now += 1000;
  Collect down;
  m.poll(down);
  auto ev = down.of(kPortEventKind);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].get_string({"type"}), "PortDown");
  EXPECT_EQ(ev[0].get_string({"entity"}), "mlx5_2/1");
  EXPECT_EQ(ev[0].get({"deltas", "link_downed"})->as_uint(), 1u);
  inject("{node: h100-00-01, type: ibPortUp, device: mlx5_2, port: 1}", 20);
  now += 1000;
  Collect up;
  m.poll(up);
  ASSERT_EQ(up.of(kPortEventKind).size(), 1u);
  EXPECT_EQ(up.of(kPortEventKind)[0].get_string({"type"}), "PortUp");
  EXPECT_EQ(up.of(agent::kHealthKind)[0].get_string({"state"}), "Healthy");
}

}  // namespace
}  // namespace gpufleet::sentinel
