#include "sim/node_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/errors.h"
#include "core/xid_catalog.h"
#include "core/yaml.h"
#include "sim/xid_text.h"
#include "support/source_paths.h"

namespace gpufleet::sim {
namespace {

using ::testing::HasSubstr;

class NodeModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fleet_ = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  }
  NodeModel node(int index = 0) {
    return NodeModel(fleet_, make_node_identity(fleet_, 0, index), 0);
  }
  Fault fault(const std::string& yaml) {
    return parse_fault(core::parse_yaml(yaml), "test", "fault");
  }
  static std::vector<std::string> kmsg_texts(const NodeModel& n) {
    std::vector<std::string> out;
    for (const auto& r : n.kmsg().records()) out.push_back(r.text);
    return out;
  }
  FleetSpec fleet_;
};

TEST_F(NodeModelTest, Xid79WritesTheDriverLineAndTakesTheGpuOff) {
  NodeModel n = node();
  n.apply(fault("{type: xid, gpu: 3, code: 79, pid: 1234, process: python3}"), 12.5);
  auto texts = kmsg_texts(n);
  EXPECT_THAT(texts, ::testing::Contains(
                         "NVRM: Xid (PCI:0000:5d:00): 79, pid=1234, name=python3, GPU has fallen "
                         "off the bus."));
  EXPECT_THAT(texts, ::testing::Contains(
                         "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 "
                         "(None) to 0x2 (Node Reboot Required)"));
  EXPECT_EQ(n.gpus_present(), 8);
  EXPECT_EQ(n.gpus_healthy(), 7);
  LinkHealth h = n.link_health();
  EXPECT_TRUE(h.broken);
  EXPECT_THAT(h.failure, HasSubstr("Test CUDA failure"));
  EXPECT_THAT(n.render_gpu_query_csv(), HasSubstr("00000000:5D:00.0"));
  EXPECT_THAT(n.render_gpu_query_csv(), HasSubstr("[Unknown Error]"));

  std::string old_boot = n.boot_id();
  n.reboot(100);
  EXPECT_NE(n.boot_id(), old_boot);
  EXPECT_EQ(n.gpus_healthy(), 8);
  EXPECT_FALSE(n.link_health().broken);
  EXPECT_EQ(n.kmsg().records().front().seq, 0u);  // a new boot, a new ring
  EXPECT_THAT(n.kmsg().records().front().text, HasSubstr("Linux version 5.15.0-1063-nvidia"));
}

TEST_F(NodeModelTest, UnknownPidAndSeqAndUsecIncrease) {
  NodeModel n = node();
  n.apply(fault("{type: xid, gpu: 0, code: 13}"), 5);
  n.apply(fault("{type: xid, gpu: 1, code: 31}"), 6);
  const auto& recs = n.kmsg().records();
  ASSERT_GE(recs.size(), 6u);
  for (std::size_t i = 1; i < recs.size(); ++i) {
    EXPECT_EQ(recs[i].seq, recs[i - 1].seq + 1);
    EXPECT_GE(recs[i].usec, recs[i - 1].usec);
  }
  std::regex xid13(
      R"(NVRM: Xid \(PCI:0000:18:00\): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on \(GPC \d, TPC \d, SM \d\): Out Of Range Address)");
  EXPECT_TRUE(std::regex_match(recs[recs.size() - 2].text, xid13)) << recs[recs.size() - 2].text;
}

TEST_F(NodeModelTest, EccAndRowRemappingFlowThroughResetAndReboot) {
  NodeModel n = node();
  n.apply(fault("{type: ecc, gpu: 2, kind: singleBit, count: 17}"), 1);
  n.apply(fault("{type: ecc, gpu: 2, kind: doubleBit}"), 2);
  EXPECT_EQ(n.gpus()[2].ecc_corrected, 17u);
  EXPECT_EQ(n.gpus()[2].ecc_uncorrected, 1u);
  EXPECT_TRUE(n.gpus()[2].remap_pending);
  EXPECT_EQ(n.gpus()[2].recovery, RecoveryAction::GpuReset);
  auto texts = kmsg_texts(n);
  EXPECT_THAT(texts, ::testing::Contains(HasSubstr("): 48, pid='<unknown>'")));
  EXPECT_THAT(texts, ::testing::Contains(
                         HasSubstr("): 63, pid='<unknown>', name=<unknown>, Row Remapper")));
  // nvidia-smi row: corrected, uncorrected, remapped corr/uncorr, pending, failure.
  EXPECT_THAT(n.render_gpu_query_csv(), HasSubstr(", 17, 1, 0, 0, Yes, No\n"));
  n.apply(fault("{type: gpuReset, gpu: 2}"), 3);
  EXPECT_FALSE(n.gpus()[2].remap_pending);
  EXPECT_EQ(n.gpus()[2].remapped_uncorrectable, 1);
  EXPECT_EQ(n.gpus()[2].recovery, RecoveryAction::None);
  EXPECT_THAT(n.render_gpu_query_csv(), HasSubstr(", 0, 0, 0, 1, No, No\n"));
  n.apply(fault("{type: rowRemap, gpu: 2, kind: failure}"), 4);
  EXPECT_TRUE(n.link_health().broken);
}

// Sentinel names the faulty GPUs by UUID: only those recover, another GPU's fault stays, and a
// GPU named that is healthy is left as it is (its counters are not thrown away).
TEST_F(NodeModelTest, GpuResetByUuidResetsOnlyThatFaultyGpu) {
  NodeModel n = node();
  const auto& uuids = n.identity().gpu_uuid;
  n.apply(fault("{type: ecc, gpu: 2, kind: doubleBit}"), 1);
  n.apply(fault("{type: ecc, gpu: 5, kind: doubleBit}"), 1);
  n.apply(fault("{type: ecc, gpu: 6, kind: singleBit, count: 4}"), 1);
  n.apply(fault("{type: gpuReset, uuid: " + uuids[2] + "}"), 2);
  EXPECT_EQ(n.gpus()[2].recovery, RecoveryAction::None);
  EXPECT_EQ(n.gpus()[2].ecc_uncorrected, 0u);
  EXPECT_EQ(n.gpus()[5].recovery, RecoveryAction::GpuReset);  // not named: still faulty
  EXPECT_EQ(n.gpus()[5].ecc_uncorrected, 1u);
  EXPECT_THAT(kmsg_texts(n), ::testing::Contains(HasSubstr("to 0x0 (None)")));
  // GPU 6 only has corrected errors: not faulty, so a reset naming it changes nothing.
  n.apply(fault("{type: gpuReset, uuid: " + uuids[6] + "}"), 3);
  EXPECT_EQ(n.gpus()[6].ecc_corrected, 4u);
  // A UUID the node does not have, and both ways of naming a GPU at once, are refused.
  try {
    n.apply(fault("{type: gpuReset, uuid: GPU-00000000-0000-0000-0000-000000000000}"), 4);
    FAIL() << "an unknown UUID was accepted";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a GPU of node " + n.identity().name));
  }
  try {
    (void)fault("{type: gpuReset, gpu: 1, uuid: " + uuids[1] + "}");
    FAIL() << "gpu and uuid together were accepted";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("uuid"));
    EXPECT_THAT(e.what(), HasSubstr("is set together with gpu"));
  }
  try {
    (void)fault("{type: gpuReset, uuid: '3'}");
    FAIL() << "a malformed UUID was accepted";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a GPU UUID"));
  }
}

TEST_F(NodeModelTest, IbPortDownFlapAndCountersSaturate) {
  NodeModel n = node();
  n.apply(fault("{type: ibPortDown, device: mlx5_3}"), 1);
  auto files = n.signal_files();
  EXPECT_EQ(files["sys/class/infiniband/mlx5_3/ports/1/state"], "1: DOWN\n");
  EXPECT_EQ(files["sys/class/infiniband/mlx5_3/ports/1/phys_state"], "2: Polling\n");
  EXPECT_EQ(files["sys/class/infiniband/mlx5_3/ports/1/counters/link_downed"], "1\n");
  EXPECT_EQ(files["sys/class/infiniband/mlx5_0/ports/1/state"], "4: ACTIVE\n");
  EXPECT_EQ(files["sys/class/infiniband/mlx5_0/ports/1/rate"], "400 Gb/sec (4X NDR)\n");
  EXPECT_EQ(files["sys/class/infiniband/mlx5_0/ports/1/link_layer"], "InfiniBand\n");
  EXPECT_DOUBLE_EQ(n.link_health().network_factor, 7.0 / 8.0);
  n.apply(fault("{type: ibPortUp, device: mlx5_3}"), 2);
  EXPECT_EQ(n.ports_active(), 8);

  n.apply(fault("{type: ibPortFlap, device: mlx5_1, count: 3, period: 10}"), 100);
  EXPECT_EQ(n.ports()[1].state, 1);  // first transition at once
  EXPECT_TRUE(n.link_health().network_broken);
  n.tick(104);
  EXPECT_EQ(n.ports()[1].state, 1);
  n.tick(105);
  EXPECT_EQ(n.ports()[1].state, 4);
  n.tick(200);
  EXPECT_EQ(n.ports()[1].state, 4);
  EXPECT_EQ(n.ports()[1].link_downed, 3u);
  EXPECT_FALSE(n.link_health().network_broken);

  n.apply(fault("{type: ibErrors, device: mlx5_2, count: 900000}"), 300);
  EXPECT_EQ(n.ports()[2].symbol_error, 65535u);  // 16-bit counter saturates
  for (int i = 0; i < 300; ++i)
    n.apply(fault("{type: ibPortFlap, device: mlx5_4, count: 1, period: 1}"), 400 + i);
  n.tick(1000);
  EXPECT_EQ(n.ports()[4].link_downed, 255u);  // 8-bit counter saturates

  n.apply(fault("{type: networkDegraded, device: mlx5_5, factor: 0.5}"), 2000);
  EXPECT_EQ(n.signal_files()["sys/class/infiniband/mlx5_5/ports/1/rate"], "200 Gb/sec (2X NDR)\n");

  EXPECT_THROW(n.apply(fault("{type: ibPortDown, device: mlx5_9}"), 1), core::InvalidInput);
}

TEST_F(NodeModelTest, GpuLostDropsCountAndCsvRows) {
  NodeModel n = node();
  n.apply(fault("{type: gpuLost, gpu: 7}"), 1);
  EXPECT_EQ(n.gpus_present(), 7);
  std::string csv = n.render_gpu_query_csv();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 8);  // header + 7 rows
  EXPECT_THAT(csv, ::testing::Not(HasSubstr("00000000:DB:00.0")));
  EXPECT_THAT(n.render_nvlink_status(), ::testing::Not(HasSubstr("GPU 7:")));
  EXPECT_THROW(n.apply(fault("{type: xid, gpu: 7, code: 13}"), 2), core::InvalidInput);
  n.reboot(10);
  EXPECT_EQ(n.gpus_present(), 7);  // a lost GPU stays lost until repaired
  n.apply(fault("{type: clear}"), 20);
  EXPECT_EQ(n.gpus_present(), 8);
}

TEST_F(NodeModelTest, ThermalNvlinkAndSxid) {
  NodeModel n = node();
  n.apply(fault("{type: thermal, gpu: 4}"), 1);
  EXPECT_THAT(n.render_gpu_query_csv(), HasSubstr(", Active, "));
  EXPECT_DOUBLE_EQ(n.link_health().compute_factor, 0.85);
  n.apply(fault("{type: nvlinkDegraded, gpu: 1, count: 9}"), 2);
  EXPECT_DOUBLE_EQ(n.link_health().nvlink_factor, 0.5);
  EXPECT_THAT(n.render_nvlink_status(), HasSubstr("\t Link 9: <inactive>\n"));
  EXPECT_THAT(n.render_nvlink_status(), HasSubstr("\t Link 8: 26.562 GB/s\n"));
  n.apply(fault("{type: sxid, code: 20009, nvswitch: 0, link: 4}"), 3);
  EXPECT_EQ(n.kmsg().records().back().text,
            "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20009, Non-fatal, Link 04 RX Short Error "
            "Rate");
  EXPECT_THROW(n.apply(fault("{type: sxid, code: 20009, nvswitch: 6}"), 3), core::InvalidInput);

  FleetSpec gb = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-gb200.yaml");
  NodeModel tray(gb, make_node_identity(gb, 0, 0), 0);
  try {
    tray.apply(fault("{type: sxid, code: 20009}"), 1);
    FAIL() << "GB200 trays have no NVSwitch";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("outside the node"));
  }
}

TEST_F(NodeModelTest, FaultParsingNamesTheField) {
  try {
    fault("{type: xid, gpu: 3}");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("fault.code: is required"));
  }
  try {
    fault("{type: xidd, gpu: 3}");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("fault.type: value \"xidd\" is not a fault type"));
  }
  try {
    fault("{type: xid, gpu: 3, code: 154}");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("fault.action: is required for Xid 154"));
  }
  try {
    fault("{type: ibPortDown, device: mlx5_0, gpu: 99}");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("fault.gpu: value 99 is out of range"));
  }
  Fault f = fault("{type: xid, gpu: 0, code: 154, action: DrainAndReset}");
  NodeModel n = node();
  n.apply(f, 1);
  EXPECT_EQ(n.kmsg().records().back().text,
            "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 "
            "(Drain and Reset)");
}

TEST_F(NodeModelTest, SignalFilesAreWrittenAtomicallyAndOnlyWhenChanged) {
  auto root =
      std::filesystem::temp_directory_path() / ("sim-signals-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  NodeModel n = node(2);
  std::size_t first = n.write_signal_files(root.string());
  EXPECT_GT(first, 80u);
  EXPECT_EQ(n.write_signal_files(root.string()), 0u);
  n.apply(fault("{type: xid, gpu: 0, code: 43}"), 1);
  EXPECT_EQ(n.write_signal_files(root.string()), 1u);  // only dev/kmsg changed
  std::string node_dir = (root / n.identity().name).string();
  std::ifstream kmsg(node_dir + "/dev/kmsg");
  std::stringstream buf;
  buf << kmsg.rdbuf();
  EXPECT_THAT(buf.str(), HasSubstr("): 43, pid='<unknown>', name=<unknown>, Ch "));
  std::ifstream boot(node_dir + "/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  boot >> boot_id;
  EXPECT_EQ(boot_id, n.boot_id());
  EXPECT_TRUE(std::filesystem::exists(node_dir + "/run/nvidia-smi/query-gpu.csv"));
  EXPECT_TRUE(std::filesystem::exists(node_dir + "/proc/cmdline"));
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpufleet::sim

namespace gpufleet::sim {
namespace {

// Every Xid the simulator prints comes from the catalog: the ones faults name and the ones
// it emits on its own (48 and 63 for ECC, 64 for a remap failure, 154 for recovery actions).
TEST(XidCatalogInSimulator, EveryEmittedCodeIsInTheCatalog) {
  const auto& catalog = core::XidCatalog::builtin();
  for (int code : {48, 63, 64, 154}) EXPECT_NE(catalog.find(code), nullptr) << code;
  Rng rng(7);
  for (const core::XidInfo& x : catalog.xids()) {
    if (x.code == 154) continue;  // its text names recovery actions: xid154_message
    const std::string m = xid_message(x.code, rng);
    EXPECT_EQ(m.find('{'), std::string::npos) << x.code << ": " << m;
    EXPECT_EQ(m.find('?'), std::string::npos) << x.code << ": " << m;
  }
  EXPECT_EQ(xid_message(74, rng, 14),
            "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)");
  EXPECT_EQ(xid154_message(RecoveryAction::None, RecoveryAction::GpuReset),
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)");
  EXPECT_EQ(sxid_line(0, "0000:06:00.0", 20009, 4, ""),
            "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error "
            "Rate");
  // The codes of the example scenario's faults.
  const core::Value sc = core::parse_yaml(
      [] {
        std::ifstream in(GPUFLEET_SOURCE_DIR + "/examples/scenario-faults.yaml");
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
      }(),
      "scenario-faults.yaml");
  for (const core::Value& e : sc.get({"spec", "timeline"})->as_list()) {
    if (e.get_string({"type"}) == "xid") {
      EXPECT_NE(catalog.find(static_cast<int>(e.find("code")->as_int())), nullptr);
    }
  }
}

}  // namespace
}  // namespace gpufleet::sim
