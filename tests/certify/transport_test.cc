// The NCCL transport check (issue 31): the transport lines of NCCL_DEBUG=INFO output, read
// per host from real-format logs of many interleaved ranks (tests/certify/testdata/
// nccl_transport_*.txt: IB, RoCE, EFA through aws-ofi-nccl, a fallback to sockets), and the
// judge failing a run over the wrong transport with a reason that says so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "certify/catalog.h"
#include "certify/judge.h"
#include "certify/nccl_parser.h"
#include "certify/nccl_transport.h"
#include "certify/run_spec.h"
#include "core/errors.h"
#include "core/yaml.h"
#include "support/source_paths.h"

namespace gpufleet::certify {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string testdata(const std::string& name) {
  std::ifstream in(GPUFLEET_SOURCE_DIR + "/tests/certify/testdata/" + name);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

std::vector<NcclHostTransport> transports_of(const std::string& file) {
  return parse_nccl_text(testdata(file)).transports;
}

TEST(NcclTransport, InfiniBandPerHostWithGpuDirect) {
  NcclResult r = parse_nccl_text(testdata("nccl_transport_ib.txt"));
  // The table still reads around the INFO lines (and the Destroy lines after it).
  EXPECT_EQ(r.ranks, 8);
  EXPECT_EQ(r.rows.size(), 4u);
  EXPECT_TRUE(r.concluded);
  EXPECT_TRUE(r.failures.empty());
  ASSERT_EQ(r.transports.size(), 2u);
  for (const NcclHostTransport& h : r.transports) {
    EXPECT_EQ(h.network, NcclNetwork::InfiniBand) << h.host;
    EXPECT_TRUE(h.gpu_direct_rdma) << h.host;
    EXPECT_TRUE(h.uses_network()) << h.host;
    // Ranks 0 and 3 of each host: one receive and one send per channel, two channels.
    EXPECT_EQ(h.network_channels, 4) << h.host;
    EXPECT_EQ(h.local_channels, 6) << h.host;  // 3 intra-node sends per channel
    EXPECT_THAT(h.via, HasSubstr("NET/IB/"));
  }
  EXPECT_EQ(r.transports[0].host, "gpu-node-a");
  EXPECT_EQ(r.transports[1].host, "gpu-node-b");
}

TEST(NcclTransport, RoceFromTheDeviceListsLinkLayerAndHostsStartingWithDigits) {
  // Host names like 10-0-3-17 start with a digit: their INFO lines are not table rows.
  auto t = transports_of("nccl_transport_roce.txt");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].host, "10-0-3-17");
  for (const auto& h : t) {
    EXPECT_EQ(h.network, NcclNetwork::RoCE) << h.host;
    EXPECT_TRUE(h.gpu_direct_rdma);
  }
}

TEST(NcclTransport, EfaThroughTheAwsOfiPlugin) {
  auto t = transports_of("nccl_transport_efa.txt");
  ASSERT_EQ(t.size(), 2u);
  for (const auto& h : t) {
    EXPECT_EQ(h.network, NcclNetwork::Efa) << h.host;
    EXPECT_TRUE(h.gpu_direct_rdma);
    EXPECT_THAT(h.via, HasSubstr("NET/AWS Libfabric/"));
  }
}

TEST(NcclTransport, SocketFallback) {
  auto t = transports_of("nccl_transport_socket.txt");
  ASSERT_EQ(t.size(), 2u);
  for (const auto& h : t) {
    EXPECT_EQ(h.network, NcclNetwork::Socket) << h.host;
    EXPECT_FALSE(h.gpu_direct_rdma);
    EXPECT_EQ(h.network_channels, 4);
  }
}

TEST(NcclTransport, NoInfoLinesMeansUnknown) {
  NcclResult r = parse_nccl_text(testdata("nccl_allreduce_2node.txt"));
  EXPECT_TRUE(r.transports.empty());
  EXPECT_EQ(r.hosts.size(), 2u);
}

// Lines one at a time: the evidence order (channels, then "Using network", then the device
// lists) and tolerance of other lines.
std::vector<NcclHostTransport> scan(const std::vector<std::string>& lines) {
  NcclTransportScanner s;
  for (const auto& l : lines) s.add_line(l);
  return s.hosts();
}

TEST(NcclTransport, EvidenceWithoutChannelLines) {
  auto t = scan({"a:1:2 [0] NCCL INFO NET/IB : No device found.",
                 "a:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
                 "b:5:6 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0>",
                 "c:7:8 [0] NCCL INFO Using network Socket",
                 "d:9:9 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
                 "e:3:3 [0] NCCL INFO NET/OFI Selected Provider is tcp",
                 "e:3:3 [0] NCCL INFO Using network Libfabric",
                 "f:1:1 [0] NCCL INFO NET/IB : No device found.",
                 "f:1:1 [0] NCCL INFO something new in a later NCCL"});
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].network, NcclNetwork::Socket);
  EXPECT_EQ(t[1].network, NcclNetwork::InfiniBand);
  EXPECT_EQ(t[2].network, NcclNetwork::Socket);
  EXPECT_EQ(t[3].network, NcclNetwork::Efa);
  EXPECT_EQ(t[4].network, NcclNetwork::Socket);   // libfabric's TCP provider
  EXPECT_EQ(t[5].network, NcclNetwork::Unknown);  // no IB device, but nothing says what it used
  EXPECT_FALSE(t[5].uses_network());
}

TEST(NcclTransport, ChannelsDecideAndLauncherTagsAreRead) {
  auto t = scan({
      // mpirun --tag-output puts its tag before the NCCL prefix.
      "[1,0]<stdout>:a:10:11 [0] NCCL INFO Using network IB",
      "[1,0]<stdout>:a:10:11 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0",
      "[1,0]<stdout>:a:10:11 [0] NCCL INFO Channel 00/02 :    0   1   2   3",
      "b:20:21 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
      "b:20:21 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via SHM/direct/direct",
      "b:20:21 [0] NCCL INFO Using network IB",
      "c:30:31 [2] NCCL INFO Channel 01/1 : 2[2] -> 10[2] [send] via "
      "NET/IBext_v8/2(1)/GDRDMA/Shared",
      "no prefix NCCL INFO Using network Socket",
  });
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].host, "a");
  EXPECT_EQ(t[0].network, NcclNetwork::Socket);  // the channel, not "Using network"
  EXPECT_EQ(t[0].network_channels, 1);
  // NVLink across trays: channels, none on the network: the host used none.
  EXPECT_EQ(t[1].local_channels, 2);
  EXPECT_FALSE(t[1].uses_network());
  EXPECT_EQ(t[2].network, NcclNetwork::InfiniBand);  // the SHARP plugin's IB
  EXPECT_TRUE(t[2].gpu_direct_rdma);
}

TEST(NcclTransport, ExpectationIsValidated) {
  EXPECT_EQ(parse_transport_expectation("rdma", "f"), TransportExpectation::Rdma);
  EXPECT_EQ(parse_transport_expectation("any", "f"), TransportExpectation::Any);
  EXPECT_THAT(
      [] { (void)parse_transport_expectation("tcp", "spec.categories[1].expectTransport"); },
      ::testing::ThrowsMessage<core::InvalidInput>(
          HasSubstr("spec.categories[1].expectTransport: value \"tcp\" is not one of "
                    "rdma, ib, roce, efa, any")));
  EXPECT_TRUE(satisfies(NcclNetwork::Efa, TransportExpectation::Rdma));
  EXPECT_FALSE(satisfies(NcclNetwork::Socket, TransportExpectation::Rdma));
  EXPECT_FALSE(satisfies(NcclNetwork::RoCE, TransportExpectation::InfiniBand));
}

Judgement judge(const std::string& file, JudgeOptions options = {},
                const ThresholdSet& thresholds = {}) {
  return judge_output(OutputKind::Nccl, testdata(file), 0, thresholds,
                      {.group_size = 2, .gpu_product = "NVIDIA-H100-80GB-HBM3"}, options);
}

TEST(Judge, SocketFallbackFailsSayingSo) {
  Judgement j = judge("nccl_transport_socket.txt");
  EXPECT_FALSE(j.passed);
  EXPECT_EQ(j.reason, Reason::ThresholdViolated);
  EXPECT_THAT(j.message, HasSubstr("wrong NCCL transport: hosts gpu-node-a, gpu-node-b used "
                                   "Socket (TCP) between nodes where RDMA (IB, RoCE or EFA) is "
                                   "expected (expectTransport: rdma); bus bandwidth 3.01 GB/s"));
  EXPECT_THAT(j.message, HasSubstr("RDMA device plugin"));
  EXPECT_THAT(j.message, HasSubstr("NCCL_IB_HCA"));
  ASSERT_EQ(j.transports.size(), 2u);
  // The transport says why the bandwidth threshold also failed, so its message comes first.
  Judgement both = judge("nccl_transport_socket.txt", {},
                         ThresholdSet::compile({{"busBandwidthGBps", "value >= 300.0"}}));
  EXPECT_THAT(both.message, HasSubstr("wrong NCCL transport"));
  // Pods' hostnames are named with their nodes.
  JudgeOptions named;
  named.host_nodes = {{"gpu-node-b", "h100-00-07"}};
  EXPECT_THAT(judge("nccl_transport_socket.txt", named).message,
              HasSubstr("gpu-node-a, gpu-node-b (node h100-00-07) used"));
}

TEST(Judge, RdmaTransportsPass) {
  for (const char* file :
       {"nccl_transport_ib.txt", "nccl_transport_roce.txt", "nccl_transport_efa.txt"}) {
    Judgement j = judge(file);
    EXPECT_TRUE(j.passed) << file << ": " << j.message;
  }
}

TEST(Judge, NarrowerExpectationsAndAny) {
  JudgeOptions ib;
  ib.transport = TransportExpectation::InfiniBand;
  EXPECT_TRUE(judge("nccl_transport_ib.txt", ib).passed);
  Judgement roce = judge("nccl_transport_roce.txt", ib);
  EXPECT_FALSE(roce.passed);
  EXPECT_THAT(roce.message, HasSubstr("used RoCE between nodes where IB is expected"));
  EXPECT_THAT(roce.message, Not(HasSubstr("(TCP)")));
  JudgeOptions efa;
  efa.transport = TransportExpectation::Efa;
  EXPECT_FALSE(judge("nccl_transport_ib.txt", efa).passed);
  EXPECT_TRUE(judge("nccl_transport_efa.txt", efa).passed);
  JudgeOptions any;
  any.transport = TransportExpectation::Any;
  EXPECT_TRUE(judge("nccl_transport_socket.txt", any).passed);
}

TEST(Judge, UnknownTransportAndSingleNodesAreNotChecked) {
  // No INFO lines: unknown, not a failure.
  EXPECT_TRUE(judge("nccl_allreduce_2node.txt").passed);
  // One host: no network between nodes to check, whatever NCCL said it would use.
  std::string one = testdata("nccl_transport_socket.txt");
  std::string kept;
  std::istringstream in(one);
  for (std::string line; std::getline(in, line);) {
    if (line.find("gpu-node-b") == std::string::npos) kept += line + "\n";
  }
  Judgement j = judge_output(OutputKind::Nccl, kept, 0, {}, {});
  EXPECT_TRUE(j.passed) << j.message;
  ASSERT_EQ(j.transports.size(), 1u);
  EXPECT_EQ(j.transports[0].network, NcclNetwork::Socket);
}

TEST(Catalog, NcclTemplatesExpectRdmaAndPrintTheTransport) {
  for (const char* id : {"communication/nccl-all-reduce", "communication/nccl-all-gather",
                         "communication/nccl-reduce-scatter", "communication/nccl-alltoall"}) {
    const WorkloadTemplate& t = Catalog::builtin().get(id);
    EXPECT_EQ(t.transport, TransportExpectation::Rdma) << id;
    EXPECT_EQ(t.env.at("NCCL_DEBUG"), "INFO") << id;
    EXPECT_EQ(t.env.at("NCCL_DEBUG_SUBSYS"), "INIT,NET") << id;
  }
  auto error = [](const std::string& yaml) {
    try {
      (void)parse_template(yaml, "test.yaml", "");
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string base =
      "name: x\ncategory: communication\ndescription: d\nimage: i\ncommand: [a]\n";
  EXPECT_EQ(parse_template(base + "output: nccl\nexpectTransport: any\n", "t", "").transport,
            TransportExpectation::Any);
  EXPECT_THAT(error(base + "output: nccl\nexpectTransport: tcp\n"),
              HasSubstr("test.yaml: expectTransport: value \"tcp\" is not one of rdma, ib, roce, "
                        "efa, any"));
  EXPECT_THAT(error(base + "output: dcgm\nexpectTransport: rdma\n"),
              HasSubstr("expectTransport applies to output: nccl only"));
}

TEST(RunSpec, ExpectTransportOverridesTheTemplateAndIsValidated) {
  auto spec = [](const std::string& category) {
    return parse_certification_spec(
        core::parse_yaml("{targets: {nodeNames: [n1]}, categories: [" + category + "]}"),
        Catalog::builtin());
  };
  EXPECT_EQ(spec("{name: communication/nccl-all-reduce}").categories[0].workload.transport,
            TransportExpectation::Rdma);
  EXPECT_EQ(spec("{name: communication/nccl-all-reduce, expectTransport: any}")
                .categories[0]
                .workload.transport,
            TransportExpectation::Any);
  auto error = [&](const std::string& category) {
    try {
      (void)spec(category);
    } catch (const SpecError& e) {
      return e.reason() + ": " + e.what();
    }
    return std::string("no error");
  };
  EXPECT_THAT(error("{name: communication/nccl-all-reduce, expectTransport: tcp}"),
              HasSubstr("InvalidSpec: spec.categories[0].expectTransport: value \"tcp\" is not "
                        "one of rdma, ib, roce, efa, any"));
  EXPECT_THAT(error("{name: diagnostics/dcgm-r1, expectTransport: rdma}"),
              HasSubstr("spec.categories[0].expectTransport: applies to NCCL categories only"));
}

}  // namespace
}  // namespace gpufleet::certify
