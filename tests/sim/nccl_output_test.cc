// Re-parses the generated all_reduce_perf text and checks its math.
#include "sim/nccl_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "core/errors.h"
#include "core/yaml.h"
#include "sim/node_model.h"
#include "support/source_paths.h"

namespace gpufleet::sim {
namespace {

using ::testing::HasSubstr;

struct Row {
  std::uint64_t size = 0;
  std::uint64_t count = 0;
  double time[2] = {0, 0};
  double algbw[2] = {0, 0};
  double busbw[2] = {0, 0};
  std::string wrong[2];
};

struct Parsed {
  std::vector<std::string> rank_lines;
  std::vector<Row> rows;
  double avg_busbw = -1;
  bool concluded = false;
  std::vector<std::string> failures;
};

Parsed parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#  Rank", 0) == 0) {
      p.rank_lines.push_back(line);
    } else if (line.rfind("# Avg bus bandwidth", 0) == 0) {
      p.avg_busbw = std::stod(line.substr(line.find(':') + 1));
    } else if (line.rfind("# Collective test concluded: all_reduce_perf", 0) == 0) {
      p.concluded = true;
    } else if (line.find("Test NCCL failure") != std::string::npos ||
               line.find("Test CUDA failure") != std::string::npos) {
      p.failures.push_back(line);
    } else if (!line.empty() && line[0] != '#' && line.find(" .. ") != 0) {
      std::istringstream f(line);
      Row r;
      std::string type, op;
      int root = 0;
      f >> r.size >> r.count >> type >> op >> root;
      for (int i = 0; i < 2; ++i) f >> r.time[i] >> r.algbw[i] >> r.busbw[i] >> r.wrong[i];
      EXPECT_TRUE(f) << line;
      EXPECT_EQ(type, "float");
      EXPECT_EQ(op, "sum");
      EXPECT_EQ(root, -1);
      p.rows.push_back(r);
    }
  }
  return p;
}

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h100_ = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
    gb200_ = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-gb200.yaml");
  }
  static GroupMember member(const FleetSpec& f, int index, const LinkHealth& h = {}) {
    NodeIdentity id = make_node_identity(f, 0, index);
    GroupMember m;
    m.host = id.name;
    m.pool = &f.pools[0];
    m.nvlink_domain = f.pools[0].nodes_per_domain() > 1 ? id.rack_name : id.name;
    m.gpu_pci = id.gpu_pci;
    m.health = h;
    return m;
  }
  FleetSpec h100_;
  FleetSpec gb200_;
};

void check_math(const Parsed& p, int ranks) {
  ASSERT_FALSE(p.rows.empty());
  double sum = 0;
  for (const Row& r : p.rows) {
    EXPECT_EQ(r.count * 4, r.size);
    for (int i = 0; i < 2; ++i) {
      double alg = static_cast<double>(r.size) / (r.time[i] * 1e3);
      // The printed time is rounded; allow its rounding error plus the printed rounding.
      double tol = alg * (0.006 / r.time[i]) + 0.006;
      EXPECT_NEAR(r.algbw[i], alg, tol) << r.size;
      double factor = 2.0 * (ranks - 1) / ranks;
      double bus = r.algbw[i] * factor;
      // algbw printed to 0.005, busbw too: both roundings bound the difference.
      EXPECT_NEAR(r.busbw[i], bus, 0.0051 * factor + 0.0051 + bus * 1e-3) << r.size;
      EXPECT_EQ(r.wrong[i], "0");
      sum += r.busbw[i];
    }
  }
  EXPECT_NEAR(p.avg_busbw, sum / (2.0 * p.rows.size()), 0.01);
  EXPECT_TRUE(p.concluded);
}

TEST_F(NcclTest, SingleHgxNodeReachesNvlinkBandwidthAndHasALatencyFloor) {
  NcclTestResult r = run_allreduce_test({member(h100_, 0)}, NcclTestConfig{});
  EXPECT_EQ(r.exit_code, 0);
  Parsed p = parse(r.output);
  ASSERT_EQ(p.rank_lines.size(), 8u);
  EXPECT_THAT(p.rank_lines[3],
              ::testing::MatchesRegex("#  Rank  3 Group  0 Pid +[0-9]+ on +h100-00-00 device  3 "
                                      "\\[0000:5d:00\\] NVIDIA H100 80GB HBM3"));
  ASSERT_EQ(p.rows.size(), 31u);  // 8 B .. 8 GiB
  EXPECT_EQ(p.rows.front().size, 8u);
  EXPECT_EQ(p.rows.back().size, 8ULL << 30);
  check_math(p, 8);
  // Latency floor: tiny messages all take about the same time (>= 10 us).
  EXPECT_GT(p.rows[0].time[0], 10.0);
  EXPECT_LT(std::abs(p.rows[0].time[0] - p.rows[5].time[0]), 1.0);
  // Large messages approach the H100 NVLink figure.
  EXPECT_GT(p.rows.back().busbw[0], 460.0);
  EXPECT_LT(p.rows.back().busbw[0], 490.0);
  EXPECT_THAT(r.output, HasSubstr("# nccl-tests version"));
  EXPECT_THAT(r.output, HasSubstr("# Out of bounds values : 0 OK\n"));
  // Deterministic for a seed.
  EXPECT_EQ(run_allreduce_test({member(h100_, 0)}, NcclTestConfig{}).output, r.output);
}

TEST_F(NcclTest, CrossNodeIsBoundByTheNicsAndTheWorstMember) {
  NcclTestConfig c =
      parse_nccl_test_args({"all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"});
  std::vector<GroupMember> healthy{member(h100_, 0), member(h100_, 1), member(h100_, 2),
                                   member(h100_, 3)};
  Parsed good = parse(run_allreduce_test(healthy, c).output);
  check_math(good, 32);
  double good_bus = good.rows.back().busbw[0];
  EXPECT_GT(good_bus, 330.0);  // 8 x 400G NDR x 0.92
  EXPECT_LT(good_bus, 375.0);

  // One node with two ports down (6/8 of the network) drags the whole group.
  FleetSpec& f = h100_;
  NodeModel sick(f, make_node_identity(f, 0, 2), 0);
  Fault down;
  down.type = FaultType::IbPortDown;
  down.device = "mlx5_0";
  sick.apply(down, 1);
  down.device = "mlx5_1";
  sick.apply(down, 1);
  auto degraded = healthy;
  degraded[2].health = sick.link_health();
  BandwidthEstimate e = estimate_allreduce(degraded);
  EXPECT_EQ(e.limited_by, degraded[2].host);
  Parsed slow = parse(run_allreduce_test(degraded, c).output);
  check_math(slow, 32);
  EXPECT_NEAR(slow.rows.back().busbw[0] / good_bus, 0.75, 0.03);
}

TEST_F(NcclTest, ADegradedLinkSlowsOnlyGroupsHoldingBothEnds) {
  const std::string a = member(h100_, 1).host, b = member(h100_, 3).host;
  LinkHealth to_b, to_a;
  to_b.links = {{b, 0.4}};
  to_a.links = {{a, 0.4}};
  auto with_link = [&](std::vector<int> idx) {
    std::vector<GroupMember> g;
    for (int i : idx) g.push_back(member(h100_, i, i == 1 ? to_b : i == 3 ? to_a : LinkHealth{}));
    return estimate_allreduce(g);
  };
  auto plain = [&](std::vector<int> idx) {
    std::vector<GroupMember> g;
    for (int i : idx) g.push_back(member(h100_, i));
    return estimate_allreduce(g).peak_busbw_gbs;
  };
  BandwidthEstimate both = with_link({0, 1, 2, 3});
  EXPECT_NEAR(both.peak_busbw_gbs / plain({0, 1, 2, 3}), 0.4, 1e-9);
  EXPECT_EQ(both.limited_by, a);
  EXPECT_NEAR(with_link({3, 1}).peak_busbw_gbs / plain({3, 1}), 0.4, 1e-9);
  // One end (either) or none: unaffected; a node alone never uses the link.
  EXPECT_DOUBLE_EQ(with_link({0, 1, 2}).peak_busbw_gbs, plain({0, 1, 2}));
  EXPECT_DOUBLE_EQ(with_link({2, 3, 4}).peak_busbw_gbs, plain({2, 3, 4}));
  EXPECT_EQ(with_link({0, 1, 2}).limited_by, "");
  EXPECT_DOUBLE_EQ(with_link({1}).peak_busbw_gbs, plain({1}));
  // A slower member and the link: the worse of the two sets the pace (no compounding).
  LinkHealth half = to_b;
  half.network_factor = 0.5;
  std::vector<GroupMember> g{member(h100_, 0), member(h100_, 1, half), member(h100_, 3, to_a)};
  EXPECT_NEAR(estimate_allreduce(g).peak_busbw_gbs / plain({0, 1, 3}), 0.4, 1e-9);
}

TEST_F(NcclTest, Gb200RackStaysOnNvlinkAndCrossRackDropsToTheNetwork) {
  std::vector<GroupMember> rack;
  for (int i = 0; i < 18; ++i) rack.push_back(member(gb200_, i));
  BandwidthEstimate in_rack = estimate_allreduce(rack);
  EXPECT_EQ(in_rack.domains, 1);
  EXPECT_EQ(in_rack.ranks, 72);
  EXPECT_GT(in_rack.peak_busbw_gbs, 750.0);
  std::vector<GroupMember> two_racks{member(gb200_, 0), member(gb200_, 18)};
  BandwidthEstimate cross = estimate_allreduce(two_racks);
  EXPECT_EQ(cross.domains, 2);
  EXPECT_LT(cross.peak_busbw_gbs, 200.0);  // 4 x 400G per tray
  check_math(parse(run_allreduce_test(rack, NcclTestConfig{}).output), 72);
}

TEST_F(NcclTest, BrokenMemberFailsTheWayNcclTestsFails) {
  NodeModel bad(h100_, make_node_identity(h100_, 0, 1), 0);
  Fault xid;
  xid.type = FaultType::Xid;
  xid.gpu = 5;
  xid.code = 79;
  bad.apply(xid, 1);
  std::vector<GroupMember> group{member(h100_, 0), member(h100_, 1, bad.link_health())};
  NcclTestResult r = run_allreduce_test(group, NcclTestConfig{});
  EXPECT_NE(r.exit_code, 0);
  Parsed p = parse(r.output);
  ASSERT_EQ(p.failures.size(), 1u);
  EXPECT_EQ(p.failures[0].rfind(group[1].host + ": Test CUDA failure common.cu:", 0), 0u);
  EXPECT_TRUE(p.rows.empty());
  EXPECT_FALSE(p.concluded);

  // A flapping port only breaks runs that leave the node.
  NodeModel flappy(h100_, make_node_identity(h100_, 0, 2), 0);
  Fault flap;
  flap.type = FaultType::IbPortFlap;
  flap.device = "mlx5_0";
  flap.count = 5;
  flappy.apply(flap, 1);
  EXPECT_EQ(run_allreduce_test({member(h100_, 2, flappy.link_health())}, {}).exit_code, 0);
  NcclTestResult cross =
      run_allreduce_test({member(h100_, 0), member(h100_, 2, flappy.link_health())}, {});
  EXPECT_NE(cross.exit_code, 0);
  EXPECT_THAT(cross.output, HasSubstr("remote process exited or there was a network error"));
}

TEST_F(NcclTest, ArgumentsAndCheckOff) {
  NcclTestConfig c = parse_nccl_test_args({"-b", "1M", "-e", "64M", "-f", "4", "-c", "0"});
  EXPECT_EQ(c.min_bytes, 1u << 20);
  EXPECT_EQ(c.max_bytes, 64u << 20);
  NcclTestResult r = run_allreduce_test({member(h100_, 0)}, c);
  Parsed p = parse(r.output);
  ASSERT_EQ(p.rows.size(), 4u);  // 1M 4M 16M 64M
  EXPECT_EQ(p.rows[1].size, 4u << 20);
  EXPECT_EQ(p.rows[0].wrong[0], "N/A");
  EXPECT_THROW(parse_nccl_test_args({"-b", "8X"}), core::InvalidInput);
  EXPECT_THROW(parse_nccl_test_args({"-b", "64", "-e", "8"}), core::InvalidInput);
  EXPECT_THROW(parse_nccl_test_args({"-e"}), core::InvalidInput);
}

TEST(NcclInfo, FollowsNcclDebugAndItsSubsystems) {
  EXPECT_FALSE(nccl_info_env("", ""));
  EXPECT_FALSE(nccl_info_env("WARN", ""));
  EXPECT_TRUE(nccl_info_env("INFO", ""));
  EXPECT_TRUE(nccl_info_env("info", "INIT,NET"));
  EXPECT_TRUE(nccl_info_env("TRACE", "ALL"));
  EXPECT_FALSE(nccl_info_env("INFO", "COLL,P2P"));
  EXPECT_FALSE(nccl_info_env("INFO", "^INIT,NET"));
  EXPECT_TRUE(nccl_info_env("INFO", "^COLL"));
}

TEST_F(NcclTest, SocketFallbackRunsAtSocketSpeedAndSaysSoInItsInfoLines) {
  NcclTestConfig c;
  std::vector<GroupMember> group{member(h100_, 0), member(h100_, 1)};
  c.nccl_info = true;
  std::string healthy = run_allreduce_test(group, c).output;
  EXPECT_THAT(healthy, HasSubstr(group[0].host + ":"));
  EXPECT_THAT(healthy, HasSubstr("] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB"));
  EXPECT_THAT(healthy, HasSubstr("] NCCL INFO Using network IB\n"));
  EXPECT_THAT(healthy, HasSubstr("[send] via NET/IB/"));
  EXPECT_THAT(healthy, HasSubstr("/GDRDMA\n"));
  EXPECT_THAT(healthy, HasSubstr("via P2P/CUMEM\n"));
  EXPECT_THAT(healthy, ::testing::Not(HasSubstr("Socket")));

  NodeModel b(h100_, make_node_identity(h100_, 0, 1), 0);
  b.apply(parse_fault(core::parse_yaml("{type: socketFallback}"), "t", "f"), 1);
  group[1].health = b.link_health();
  EXPECT_TRUE(group[1].health.socket_fallback);
  BandwidthEstimate e = estimate_allreduce(group);
  EXPECT_TRUE(e.sockets);
  EXPECT_EQ(e.limited_by, group[1].host);
  EXPECT_LT(e.peak_busbw_gbs, 5.0);  // a few GB/s where RDMA gives ~350
  std::string out = run_allreduce_test(group, c).output;
  const std::string b_prefix = group[1].host + ":";
  EXPECT_THAT(out, HasSubstr("] NCCL INFO NET/IB : No device found.\n"));
  EXPECT_THAT(out, HasSubstr("] NCCL INFO NET/Socket : Using [0]eth0:"));
  EXPECT_THAT(out, HasSubstr("] NCCL INFO Using network Socket\n"));
  EXPECT_THAT(out, HasSubstr("via NET/Socket/0\n"));
  // Without NCCL_DEBUG=INFO the output is the plain table: no INFO line at all.
  c.nccl_info = false;
  Parsed plain = parse(run_allreduce_test(group, c).output);
  check_math(plain, 16);
  EXPECT_LT(plain.rows.back().busbw[0], 5.0);
  // A single node runs on NVLink: the fallback changes nothing there.
  EXPECT_GT(estimate_allreduce({group[1]}).peak_busbw_gbs, 400.0);
  b.apply(parse_fault(core::parse_yaml("{type: socketFallback, active: false}"), "t", "f"), 2);
  EXPECT_FALSE(b.link_health().socket_fallback);
  b.apply(parse_fault(core::parse_yaml("{type: socketFallback}"), "t", "f"), 3);
  b.apply(parse_fault(core::parse_yaml("{type: clear}"), "t", "f"), 4);
  EXPECT_FALSE(b.link_health().socket_fallback);
  EXPECT_THAT(
      [] { (void)parse_fault(core::parse_yaml("{type: socketFallback, gpu: 1}"), "t", "f"); },
      ::testing::ThrowsMessage<core::InvalidInput>(
          HasSubstr("does not apply to a socketFallback fault")));
}

}  // namespace
}  // namespace gpufleet::sim
