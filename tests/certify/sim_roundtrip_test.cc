// The simulator's generators read back by certify's parsers: nccl-tests text, DCGM JSON of
// both layouts, and training lines, from healthy and faulty nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certify/dcgm_parser.h"
#include "certify/judge.h"
#include "certify/nccl_parser.h"
#include "certify/training_parser.h"
#include "core/yaml.h"
#include "sim/behaviour.h"
#include "sim/dcgm_output.h"
#include "sim/fault.h"
#include "sim/fleet_spec.h"
#include "sim/nccl_output.h"
#include "sim/node_model.h"
#include "sim/training_output.h"
#include "support/source_paths.h"

namespace gpufleet::certify {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SimRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    fleet_ = sim::load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  }
  sim::NodeModel node(int index) {
    return sim::NodeModel(fleet_, sim::make_node_identity(fleet_, 0, index), 0);
  }
  void apply(sim::NodeModel& n, const std::string& yaml) {
    n.apply(sim::parse_fault(core::parse_yaml(yaml), "test", "fault"), 1);
  }
  sim::GroupMember member(const sim::NodeModel& n) {
    sim::GroupMember m;
    m.host = n.identity().name;
    m.pool = &fleet_.pools[0];
    m.nvlink_domain = n.identity().name;
    m.gpu_pci = n.identity().gpu_pci;
    m.health = n.link_health();
    return m;
  }
  sim::FleetSpec fleet_;
};

TEST_F(SimRoundTrip, NcclTextFromTheBandwidthModel) {
  auto a = node(0), b = node(1);
  sim::NcclTestResult r = sim::run_allreduce_test({member(a), member(b)}, sim::NcclTestConfig{});
  NcclResult parsed = parse_nccl(r.output);
  EXPECT_EQ(parsed.ranks, 16);
  EXPECT_EQ(parsed.hosts.size(), 2u);
  EXPECT_EQ(parsed.rows.size(), 31u);
  EXPECT_TRUE(parsed.concluded);
  NcclMetrics m = nccl_metrics(parsed);
  EXPECT_EQ(m.size, 8ULL << 30);
  EXPECT_GT(m.bus_bandwidth_gbs, 100.0);
  // The average line includes latency-bound sizes, so it sits well below the large rows.
  EXPECT_LT(*parsed.avg_busbw_gbs, m.bus_bandwidth_gbs);

  apply(b, "{type: nvlinkDegraded, factor: 0.5}");
  apply(b, "{type: networkDegraded, factor: 0.5}");
  NcclResult slow =
      parse_nccl(sim::run_allreduce_test({member(a), member(b)}, sim::NcclTestConfig{}).output);
  EXPECT_LT(nccl_metrics(slow).bus_bandwidth_gbs, 0.7 * m.bus_bandwidth_gbs);

  auto broken = node(2);
  apply(broken, "{type: xid, gpu: 3, code: 79}");
  sim::NcclTestResult fail =
      sim::run_allreduce_test({member(a), member(broken)}, sim::NcclTestConfig{});
  Judgement j = judge_output(OutputKind::Nccl, fail.output, fail.exit_code, ThresholdSet{}, {});
  EXPECT_EQ(j.reason, Reason::WorkloadFailed);
  EXPECT_THAT(j.message, HasSubstr("Test CUDA failure"));
}

// Issue 31: a node whose NCCL fell back to sockets (the simulator's socketFallback fault)
// prints the Socket transport lines and a few GB/s; certify's judge fails it naming the host.
TEST_F(SimRoundTrip, NcclSocketFallbackFailsOnItsTransportLines) {
  auto a = node(0), b = node(1);
  sim::NcclTestConfig info;
  info.nccl_info = true;  // NCCL_DEBUG=INFO, as the catalog's NCCL templates set
  sim::NcclTestResult ok = sim::run_allreduce_test({member(a), member(b)}, info);
  Judgement pass = judge_output(OutputKind::Nccl, ok.output, ok.exit_code, ThresholdSet{}, {});
  EXPECT_TRUE(pass.passed) << pass.message;
  ASSERT_EQ(pass.transports.size(), 2u);
  for (const NcclHostTransport& h : pass.transports) {
    EXPECT_EQ(h.network, NcclNetwork::InfiniBand) << h.host;
    EXPECT_TRUE(h.gpu_direct_rdma) << h.host;
  }
  EXPECT_EQ(parse_nccl(ok.output).rows.size(), 31u);  // the table reads around the INFO lines

  apply(b, "{type: socketFallback}");
  sim::NcclTestResult slow = sim::run_allreduce_test({member(a), member(b)}, info);
  EXPECT_EQ(slow.exit_code, 0);
  Judgement j = judge_output(OutputKind::Nccl, slow.output, slow.exit_code,
                             ThresholdSet::compile({{"busBandwidthGBps", "value >= 300.0"}}),
                             {.group_size = 2, .gpu_product = "NVIDIA-H100-80GB-HBM3"});
  EXPECT_FALSE(j.passed);
  EXPECT_EQ(j.reason, Reason::ThresholdViolated);
  EXPECT_THAT(j.message, HasSubstr("wrong NCCL transport: host " + b.identity().name +
                                   " used Socket (TCP) between nodes where RDMA (IB, RoCE or "
                                   "EFA) is expected (expectTransport: rdma); bus bandwidth "));
  EXPECT_THAT(j.message, HasSubstr("RDMA device plugin"));
  EXPECT_LT(j.metrics.at("busBandwidthGBps"), 5.0);
  // The healthy end stays IB; only the node that fell back is named.
  EXPECT_THAT(j.message, ::testing::Not(HasSubstr(a.identity().name)));

  JudgeOptions any;
  any.transport = TransportExpectation::Any;
  EXPECT_TRUE(judge_output(OutputKind::Nccl, slow.output, 0, ThresholdSet{}, {}, any).passed);
  // Without INFO lines the transport is unknown: only a bandwidth threshold can catch it.
  sim::NcclTestResult quiet = sim::run_allreduce_test({member(a), member(b)}, {});
  EXPECT_TRUE(judge_output(OutputKind::Nccl, quiet.output, 0, ThresholdSet{}, {}).passed);

  apply(b, "{type: socketFallback, active: false}");
  sim::NcclTestResult back = sim::run_allreduce_test({member(a), member(b)}, info);
  EXPECT_TRUE(judge_output(OutputKind::Nccl, back.output, 0, ThresholdSet{}, {}).passed);
}

TEST_F(SimRoundTrip, DcgmBothLayoutsFromTheFaultModel) {
  for (int major : {3, 4}) {
    auto healthy = node(0);
    sim::DcgmDiagResult ok = sim::run_dcgm_diag(healthy, {.level = 3, .major_version = major});
    DcgmReport r = parse_dcgm(ok.output);
    EXPECT_EQ(r.major_version, major);
    EXPECT_EQ(r.failures(), 0);
    EXPECT_EQ(r.warnings(), 0);
    EXPECT_GT(r.results.size(), 8u * 5);
    EXPECT_TRUE(judge_output(OutputKind::Dcgm, ok.output, ok.exit_code, ThresholdSet{}, {}).passed);

    auto sick = node(1);
    apply(sick, "{type: ecc, gpu: 2, kind: doubleBit}");
    apply(sick, "{type: thermal, gpu: 5}");
    sim::DcgmDiagResult bad = sim::run_dcgm_diag(sick, {.level = 3, .major_version = major});
    DcgmReport br = parse_dcgm(bad.output);
    EXPECT_THAT(br.failed_gpus(), ElementsAre(2)) << major;
    EXPECT_EQ(br.warnings(), 1) << major;
    Judgement j = judge_output(OutputKind::Dcgm, bad.output, bad.exit_code, ThresholdSet{}, {});
    EXPECT_EQ(j.reason, Reason::HardwareFailure);
    EXPECT_THAT(j.message, HasSubstr("GPU 2"));
    if (major == 4) {
      EXPECT_THAT(j.message, HasSubstr("(error 4)"));
    }
  }
  // Level 4 adds memtest and the pulse test in both layouts: memtest fails the GPU with
  // uncorrected ECC errors (beside the memory test), pulse warns on the thermally slowed one.
  for (int major : {3, 4}) {
    auto healthy = node(4);
    DcgmReport ok =
        parse_dcgm(sim::run_dcgm_diag(healthy, {.level = 4, .major_version = major}).output);
    EXPECT_EQ(ok.failures() + ok.warnings(), 0) << major;
    // The deployment checks (nine named tests in 3.x, one "software" in 4.x), then 8 per-GPU
    // tests.
    EXPECT_EQ(ok.results.size(), (major == 3 ? 9u : 1u) + 8u * 8) << major;
    if (major == 3) {
      std::vector<std::string> deployment;
      for (const DcgmResult& r : ok.results)
        if (r.gpus.size() == 8) deployment.push_back(r.test);
      EXPECT_THAT(deployment, ElementsAre("Denylist", "NVML Library", "CUDA Main Library",
                                          "Permissions and OS Blocks", "Persistence Mode",
                                          "Environment Variables", "Page Retirement/Row Remap",
                                          "Graphics Processes", "Inforom"));
    }
    auto sick = node(5);
    apply(sick, "{type: ecc, gpu: 2, kind: doubleBit}");
    apply(sick, "{type: thermal, gpu: 5}");
    DcgmReport br =
        parse_dcgm(sim::run_dcgm_diag(sick, {.level = 4, .major_version = major}).output);
    std::vector<std::string> failed, warned;
    for (const DcgmResult& r : br.results) {
      if (r.status == DcgmStatus::Fail)
        failed.push_back(r.test + "@" + std::to_string(r.gpus.at(0)));
      if (r.status == DcgmStatus::Warn)
        warned.push_back(r.test + "@" + std::to_string(r.gpus.at(0)));
    }
    if (major == 3) {
      EXPECT_THAT(failed, ElementsAre("GPU Memory@2", "Memtest@2"));
      EXPECT_THAT(warned, ElementsAre("Targeted Power@5", "Pulse Test@5"));
    } else {
      EXPECT_THAT(failed, ElementsAre("memory@2", "memtest@2"));
      EXPECT_THAT(warned, ElementsAre("targeted_power@5", "pulse_test@5"));
    }
    Judgement j = judge_output(
        OutputKind::Dcgm, sim::run_dcgm_diag(sick, {.level = 4, .major_version = major}).output, 0,
        ThresholdSet{}, {});
    EXPECT_EQ(j.reason, Reason::HardwareFailure) << major;
    EXPECT_THAT(j.message, HasSubstr("GPU 2")) << major;
  }
  EXPECT_EQ(sim::dcgm_major_from_image("nvcr.io/nvidia/cloud-native/dcgm:3.3.9-1-ubuntu22.04"), 3);
  EXPECT_EQ(sim::dcgm_major_from_image("nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"), 4);
  EXPECT_EQ(sim::dcgm_major_from_image("registry:5000/dcgm"), 4);  // a port is not a tag
  EXPECT_EQ(sim::dcgm_major_from_image("dcgm"), 4);

  auto remap = node(3);
  apply(remap, "{type: rowRemap, gpu: 6, kind: pending}");
  DcgmReport level1 = parse_dcgm(sim::run_dcgm_diag(remap, {.level = 1}).output);
  EXPECT_EQ(level1.warnings(), 0);  // r1 runs the deployment checks only
  DcgmReport level2 = parse_dcgm(sim::run_dcgm_diag(remap, {.level = 2}).output);
  EXPECT_EQ(level2.warnings(), 1);
  EXPECT_THROW(sim::run_dcgm_diag(remap, {.level = 5}), core::InvalidInput);
}

TEST_F(SimRoundTrip, TrainingLinesFromTheModel) {
  auto a = node(0), b = node(1);
  sim::TrainingRunResult r =
      sim::run_training({member(a), member(b)}, {.model = "llm-8b", .iterations = 50});
  ASSERT_EQ(r.exit_code, 0);
  TrainingMetrics m = parse_training(r.output);
  EXPECT_EQ(m.intervals.size(), 5u);
  EXPECT_TRUE(m.completed());
  EXPECT_NEAR(*m.avg_tflops_per_gpu(), r.tflops_per_gpu, 0.5);
  EXPECT_NEAR(m.avg_step_time_sec(), r.step_time_sec, r.step_time_sec * 0.02);
  EXPECT_DOUBLE_EQ(m.goodput_ratio(), 1.0);

  apply(b, "{type: thermal, gpu: 0}");
  sim::TrainingRunResult hot =
      sim::run_training({member(a), member(b)}, {.model = "llm-8b", .iterations = 50});
  EXPECT_LT(*parse_training(hot.output).avg_tflops_per_gpu(), *m.avg_tflops_per_gpu());

  sim::TrainingRunResult odd =
      sim::run_training({member(a)}, {.model = "llm-56b", .iterations = 25});
  EXPECT_EQ(parse_training(odd.output).last_iteration, 25);

  auto broken = node(2);
  apply(broken, "{type: xid, gpu: 1, code: 79}");
  sim::TrainingRunResult died = sim::run_training({member(a), member(broken)}, {});
  Judgement j = judge_output(OutputKind::Training, died.output, died.exit_code, ThresholdSet{}, {});
  EXPECT_EQ(j.reason, Reason::WorkloadFailed);
  EXPECT_THAT(j.message, HasSubstr("line 2"));
}

// What the certify controller reads on the simulator is the termination message: the last
// 4096 bytes of the output (sim::termination_tail). DCGM levels 1 and 2 fit (compacted);
// levels 3 and 4 of 8 GPUs do not (10 and 13 KB as printed, still over 4 KB compacted: the
// controller reads the pod log instead, on a cluster and on the simulator's kubelet endpoint).
TEST_F(SimRoundTrip, TerminationMessagesJudgeLikeTheFullOutput) {
  auto healthy = node(0);
  for (int level = 1; level <= 2; ++level) {
    sim::DcgmDiagResult r = sim::run_dcgm_diag(healthy, {.level = level});
    std::string tail = sim::termination_tail(sim::compact_json_output(r.output));
    Judgement j = judge_output(OutputKind::Dcgm, tail, r.exit_code, ThresholdSet{}, {});
    EXPECT_TRUE(j.passed) << "level " << level << " (" << r.output.size()
                          << " bytes): " << j.message;
  }
  auto broken = node(1);
  apply(broken, "{type: xid, gpu: 2, code: 79}");
  sim::DcgmDiagResult bad = sim::run_dcgm_diag(broken, {.level = 2});
  Judgement jb =
      judge_output(OutputKind::Dcgm, sim::termination_tail(sim::compact_json_output(bad.output)),
                   bad.exit_code, {}, {});
  EXPECT_EQ(jb.reason, Reason::HardwareFailure) << jb.message;

  sim::NcclTestResult n = sim::run_allreduce_test({member(healthy)}, sim::NcclTestConfig{});
  Judgement jn = judge_output(OutputKind::Nccl, sim::termination_tail(n.output), n.exit_code,
                              ThresholdSet::compile({{"busBandwidthGBps", "value >= 300"}}), {});
  EXPECT_TRUE(jn.passed) << jn.message;
}

}  // namespace
}  // namespace gpufleet::certify
