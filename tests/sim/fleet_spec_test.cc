#include "sim/fleet_spec.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"
#include "sim/node_identity.h"
#include "support/source_paths.h"

namespace gpufleet::sim {
namespace {

using ::testing::HasSubstr;

FleetSpec parse(const std::string& yaml) { return parse_fleet(core::parse_yaml(yaml), "t.yaml"); }

std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

const char* kMinimal = R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - name: a
    count: 3
    gpu: {product: h100}
)";

TEST(FleetSpec, ReadsTheExampleFiles) {
  FleetSpec h100 = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  EXPECT_EQ(h100.name, "h100-demo");
  EXPECT_EQ(h100.seed, 42u);
  ASSERT_EQ(h100.pools.size(), 2u);
  EXPECT_EQ(h100.pools[0].gpu->key, "h100");
  EXPECT_EQ(h100.pools[0].network.devices, 8);
  EXPECT_EQ(h100.pools[0].taints.size(), 1u);
  EXPECT_EQ(h100.node_count(), 40u);

  FleetSpec gb = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-gb200.yaml");
  EXPECT_EQ(gb.pools[0].nodes_per_rack, 18);
  EXPECT_EQ(gb.pools[0].nodes_per_domain(), 18);
  EXPECT_EQ(gb.pools[0].gpus_per_node, 4);
}

TEST(FleetSpec, DefaultsFillAMinimalPool) {
  FleetSpec f = parse(kMinimal);
  const PoolSpec& p = f.pools[0];
  EXPECT_EQ(p.gpus_per_node, 8);
  EXPECT_EQ(p.driver_version, "570.148.08");
  EXPECT_EQ(p.name_pattern, "{pool}-{index:04}");
  EXPECT_EQ(p.os.pretty_name, "Ubuntu 22.04 LTS");
  EXPECT_EQ(p.zones, std::vector<std::string>{"t-zone-a"});
}

TEST(FleetSpec, FileErrorsCarryLineColumnAndNearMiss) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fleet-typo-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << kMinimal << "    coutn: 4\n";
  std::string e;
  try {
    load_fleet_file(path.string());
  } catch (const core::InvalidInput& ex) {
    e = ex.what();
  }
  std::filesystem::remove(path);
  EXPECT_THAT(e, HasSubstr(path.string() + ":9:5: spec.pools[0].coutn: is not a known field"));
  EXPECT_THAT(e, HasSubstr("did you mean \"count\"?"));
}

TEST(FleetSpec, ErrorsNameFieldValueAndFix) {
  std::string e = error_of(std::string(kMinimal) + "    bogus: 1\n");
  EXPECT_THAT(e, HasSubstr("spec.pools[0].bogus"));
  EXPECT_THAT(e, HasSubstr("not a known field"));
  EXPECT_THAT(e, HasSubstr("namePattern"));  // lists the accepted keys

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 1, gpu: {product: h1000}})");
  EXPECT_THAT(e, HasSubstr("spec.pools[0].gpu.product"));
  EXPECT_THAT(e, HasSubstr("\"h1000\""));
  EXPECT_THAT(e, HasSubstr("h100, h200"));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: -3, gpu: {product: h100}})");
  EXPECT_THAT(e, HasSubstr("spec.pools[0].count: value -3 is out of range"));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 1, gpu: {product: gb200, count: 4}, nvlinkDomain: {gpus: 70}})");
  EXPECT_THAT(e, HasSubstr("nvlinkDomain.gpus: value 70 is not a multiple of the 4 GPUs"));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 2, namePattern: "node-x", gpu: {product: h100}})");
  EXPECT_THAT(e, HasSubstr("would give every node the same name"));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 2, namePattern: "{pool}_{index}", gpu: {product: h100}})");
  EXPECT_THAT(e, HasSubstr("gives node name \"a_0\""));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 2, gpu: {product: h100, cuda: 12.8}})");
  EXPECT_THAT(e, HasSubstr("spec.pools[0].gpu.cuda"));
  EXPECT_THAT(e, HasSubstr("quote"));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 2, gpu: {product: h100}, taints: [{key: x, effect: NoRun}]})");
  EXPECT_THAT(e, HasSubstr("taints[0].effect: value \"NoRun\" is not supported"));
  EXPECT_THAT(e, HasSubstr("NoSchedule"));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 2, namePattern: "n-{index}", gpu: {product: h100}}
  - {name: b, count: 2, namePattern: "n-{index}", gpu: {product: h100}})");
  EXPECT_THAT(e, HasSubstr("spec.pools[1].namePattern"));
  EXPECT_THAT(e, HasSubstr("another pool also uses"));

  e = error_of(R"(apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  pools:
  - {name: a, count: 2, gpu: {product: h100}, labels: {"bad key!": x}})");
  EXPECT_THAT(e, HasSubstr("spec.pools[0].labels.bad key!"));

  EXPECT_THAT(error_of("apiVersion: v1\nkind: Fleet\n"), HasSubstr("apiVersion: value \"v1\""));
}

TEST(FleetSpec, NamePatternsExpandWithWidths) {
  EXPECT_EQ(expand_name_pattern("{pool}-{index:04}", "h100", 7, 1, 3), "h100-0007");
  EXPECT_EQ(expand_name_pattern("r{rack:2}-s{slot}", "p", 0, 4, 11), "r04-s11");
  EXPECT_THROW(expand_name_pattern("{nope}", "p", 0, 0, 0), core::InvalidInput);
  EXPECT_THROW(expand_name_pattern("{index", "p", 0, 0, 0), core::InvalidInput);
}

TEST(NodeIdentity, DeterministicAndStableUnderScaling) {
  FleetSpec f = parse(kMinimal);
  auto a = expand_fleet(f);
  auto b = expand_fleet(f);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1].machine_id, b[1].machine_id);
  EXPECT_EQ(a[1].gpu_uuid, b[1].gpu_uuid);
  f.pools[0].count = 10;
  auto c = expand_fleet(f);
  EXPECT_EQ(c[2].system_uuid, a[2].system_uuid);  // scaling keeps existing identities
  EXPECT_NE(c[2].machine_id, c[3].machine_id);
  f.seed = 99;
  EXPECT_NE(expand_fleet(f)[0].machine_id, a[0].machine_id);
  EXPECT_EQ(a[0].gpu_pci[0], "00000000:18:00.0");
  EXPECT_EQ(xid_pci_address("00000000:DB:00.0"), "0000:db:00");
  EXPECT_EQ(a[0].ib_devices.size(), 8u);
  EXPECT_EQ(a[0].nvswitch_pci.size(), 4u);
}

TEST(NodeIdentity, Gb200RacksShareACliqueAndGraceAddresses) {
  FleetSpec f = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-gb200.yaml");
  auto nodes = expand_fleet(f);
  ASSERT_EQ(nodes.size(), 36u);
  EXPECT_EQ(nodes[0].name, "gb200-r00-t00");
  EXPECT_EQ(nodes[17].name, "gb200-r00-t17");
  EXPECT_EQ(nodes[18].name, "gb200-r01-t00");
  EXPECT_EQ(nodes[0].clique, nodes[17].clique);
  EXPECT_NE(nodes[0].clique, nodes[18].clique);
  EXPECT_THAT(nodes[0].clique, ::testing::MatchesRegex("[0-9a-f-]{36}\\.1"));
  EXPECT_EQ(nodes[0].gpu_pci[0], "00000008:01:00.0");
  EXPECT_EQ(xid_pci_address(nodes[0].gpu_pci[0]), "0008:01:00");
  EXPECT_TRUE(nodes[0].nvswitch_pci.empty());
}

}  // namespace
}  // namespace gpufleet::sim
