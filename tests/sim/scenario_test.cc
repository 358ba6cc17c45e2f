#include "sim/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"
#include "sim/fleet_model.h"
#include "support/source_paths.h"

namespace gpufleet::sim {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& timeline) {
  std::string doc = R"(apiVersion: gpufleet.io/v1alpha1
kind: Scenario
metadata: {name: t}
spec:
  fleet: fleet-h100.yaml
  timeline:
)" + timeline;
  try {
    parse_scenario(core::parse_yaml(doc), "s.yaml", GPUFLEET_SOURCE_DIR + "/examples");
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(Scenario, ReadsTheExample) {
  Scenario sc = load_scenario_file(GPUFLEET_SOURCE_DIR + "/examples/scenario-faults.yaml");
  EXPECT_EQ(sc.name, "faults");
  EXPECT_EQ(sc.fleet.name, "h100-demo");
  EXPECT_EQ(sc.duration_s, 600.0);
  ASSERT_EQ(sc.timeline.size(), 9u);
  EXPECT_EQ(sc.timeline[0].at_s, 30.0);
  EXPECT_EQ(sc.timeline[0].fault.code, 79);
  EXPECT_EQ(sc.timeline[0].fault.pid, 4242);
  EXPECT_EQ(sc.timeline[1].fault.type, FaultType::IbPortFlap);
  EXPECT_EQ(sc.timeline[1].fault.period_s, 6.0);
  EXPECT_EQ(sc.timeline[3].kind, EventKind::Reboot);
  EXPECT_EQ(sc.timeline[3].down_s, 45.0);
  EXPECT_EQ(sc.timeline[4].pick, 2);
  EXPECT_EQ(sc.timeline[5].kind, EventKind::Host);
  EXPECT_EQ(sc.timeline[5].host.kernel_args_add.size(), 2u);
  EXPECT_EQ(sc.timeline[7].kind, EventKind::Scale);
  EXPECT_EQ(sc.behaviours.behaviours().front().name, "train-step");
}

TEST(Scenario, ErrorsNameTheEventField) {
  EXPECT_THAT(error_of("  - {at: 10s, node: h100-00-00, type: xid, gpu: 3}\n"),
              HasSubstr("spec.timeline[0].code: is required"));
  EXPECT_THAT(error_of("  - {at: 10s, node: nope, type: xid, gpu: 3, code: 13}\n"),
              HasSubstr("spec.timeline[0].node: value \"nope\" is not a node of the fleet"));
  EXPECT_THAT(error_of("  - {node: h100-00-00, type: reboot}\n"),
              HasSubstr("spec.timeline[0].at: is required"));
  EXPECT_THAT(error_of("  - {at: later, node: h100-00-00, type: reboot}\n"),
              HasSubstr("spec.timeline[0].at: value \"later\" is not a duration"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: explode}\n"),
              HasSubstr("spec.timeline[0].type: value \"explode\" is not an event type"));
  EXPECT_THAT(
      error_of("  - {at: 1, node: h100-00-00, type: ibPortDown, device: mlx5_0, code: 3}\n"),
      HasSubstr("spec.timeline[0].code: is not a known field"));
  EXPECT_THAT(error_of("  - {at: 1, type: scale, pool: h900, count: 3}\n"),
              HasSubstr("spec.timeline[0].pool: value \"h900\" is not a pool"));
  EXPECT_THAT(error_of("  - {at: 1, type: xid, gpu: 1, code: 13}\n"),
              HasSubstr("spec.timeline[0].node: is required"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: host}\n"),
              HasSubstr("changes nothing"));
  EXPECT_EQ(error_of("  - {at: 1, type: scale, pool: h200, count: 10}\n"
                     "  - {at: 2, node: h200-0009, type: thermal}\n"),
            "no error");
}

TEST(Scenario, ReadsALinkFaultAndRefusesBadOnes) {
  EXPECT_EQ(error_of("  - {at: 1, node: h100-00-00, type: linkDegraded, peer: h100-00-01, "
                     "factor: 0.5}\n"),
            "no error");
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: linkDegraded, factor: 0.5}\n"),
              HasSubstr("spec.timeline[0].peer: is required"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: linkDegraded, peer: h100-00-01}\n"),
              HasSubstr("spec.timeline[0].factor: is required"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: linkDegraded, peer: h100-00-01, "
                       "factor: 1.5}\n"),
              HasSubstr("spec.timeline[0].factor"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: linkDegraded, peer: h100-00-00, "
                       "factor: 0.5}\n"),
              HasSubstr("spec.timeline[0].peer: value \"h100-00-00\" is the node itself"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: linkDegraded, peer: nope, "
                       "factor: 0.5}\n"),
              HasSubstr("spec.timeline[0].peer: value \"nope\" is not a node of the fleet"));
  EXPECT_THAT(error_of("  - {at: 1, pool: h100, type: linkDegraded, peer: h100-00-01, "
                       "factor: 0.5}\n"),
              HasSubstr("spec.timeline[0].pool: does not apply to linkDegraded"));
  EXPECT_THAT(error_of("  - {at: 1, nodes: [h100-00-00, h100-00-02], type: linkDegraded, "
                       "peer: h100-00-01, factor: 0.5}\n"),
              HasSubstr("spec.timeline[0].nodes: does not apply to linkDegraded"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: linkDegraded, gpu: 1, "
                       "peer: h100-00-01, factor: 0.5}\n"),
              HasSubstr("spec.timeline[0].gpu: does not apply to a linkDegraded fault"));
  EXPECT_THAT(error_of("  - {at: 1, node: h100-00-00, type: networkDegraded, peer: h100-00-01, "
                       "factor: 0.5}\n"),
              HasSubstr("spec.timeline[0].peer: is not a known field"));
}

TEST(FleetModel, ALinkFaultSlowsOnlyGroupsHoldingBothEnds) {
  Scenario sc = load_scenario_file(GPUFLEET_SOURCE_DIR + "/examples/scenario-faults.yaml");
  FleetModel fleet(sc.fleet, 0);
  auto busbw = [&](const std::vector<std::string>& hosts) {
    return estimate_allreduce(fleet.group(hosts)).peak_busbw_gbs;
  };
  const std::vector<std::string> both{"h100-00-00", "h100-00-01", "h100-00-02", "h100-00-03"};
  const double healthy = busbw(both);
  SimEvent e = parse_event(core::parse_yaml("{node: h100-00-01, type: linkDegraded, "
                                            "peer: h100-00-03, factor: 0.5}"),
                           "inject", "event", false);
  EXPECT_EQ(core::Value(event_to_value(e)).get_string({"peer"}), "h100-00-03");
  auto applied = fleet.apply(e, 1);
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].what, "linkDegraded to h100-00-03 factor 0.50");
  ASSERT_EQ(fleet.degraded_links().size(), 1u);

  // Both ends in the group: the group runs at half its bandwidth, the link's end named.
  BandwidthEstimate slow = estimate_allreduce(fleet.group(both));
  EXPECT_NEAR(slow.peak_busbw_gbs / healthy, 0.5, 1e-9);
  EXPECT_EQ(slow.limited_by, "h100-00-01");
  EXPECT_NEAR(busbw({"h100-00-03", "h100-00-01"}) / busbw({"h100-01-00", "h100-01-01"}), 0.5, 1e-9);
  // One end only, or neither: healthy.
  EXPECT_DOUBLE_EQ(busbw({"h100-00-00", "h100-00-01", "h100-00-02"}),
                   busbw({"h100-01-00", "h100-01-01", "h100-01-02"}));
  EXPECT_DOUBLE_EQ(busbw({"h100-00-03", "h100-01-00"}), busbw({"h100-01-01", "h100-01-02"}));
  // A node alone never crosses the link.
  EXPECT_DOUBLE_EQ(busbw({"h100-00-01"}), busbw({"h100-01-01"}));
  // The summary lists it; both ends' health does not change.
  core::Value summary = fleet.summary(1);
  EXPECT_EQ(summary.find("degradedLinks")->size(), 1u);
  EXPECT_EQ(summary.find("degradedNodes")->size(), 0u);

  // Refused: the peer is the node, or not a node; clearing an end repairs the link.
  SimEvent self = e;
  self.fault.peer = "h100-00-01";
  EXPECT_THROW(fleet.apply(self, 2), core::InvalidInput);
  SimEvent gone = e;
  gone.fault.peer = "h100-99-99";
  EXPECT_THROW(fleet.apply(gone, 2), core::InvalidInput);
  fleet.apply(
      parse_event(core::parse_yaml("{node: h100-00-03, type: clear}"), "inject", "event", false),
      3);
  EXPECT_TRUE(fleet.degraded_links().empty());
  EXPECT_DOUBLE_EQ(busbw(both), healthy);
  // factor 1 repairs it too.
  fleet.apply(e, 4);
  SimEvent repair = e;
  repair.fault.factor = 1.0;
  fleet.apply(repair, 5);
  EXPECT_TRUE(fleet.degraded_links().empty());
}

TEST(FleetModel, PlaysTheExampleTimelineDeterministically) {
  auto run = [] {
    Scenario sc = load_scenario_file(GPUFLEET_SOURCE_DIR + "/examples/scenario-faults.yaml");
    FleetModel fleet(sc.fleet, 0);
    for (auto& e : sc.timeline) fleet.schedule(e);
    std::vector<std::string> log;
    for (double t = 0; t <= 600; t += 5) {
      for (const auto& ev : fleet.advance(t)) {
        log.push_back(std::to_string(static_cast<int>(ev.at_s)) + " " + ev.node + " " + ev.what +
                      (ev.error.empty() ? "" : " ERROR " + ev.error));
      }
    }
    std::string kmsg = fleet.find("h100-00-01")->kmsg().render();
    return std::make_tuple(log, kmsg, fleet.size(), core::Value(fleet.summary(600)));
  };
  auto [log, kmsg, size, summary] = run();
  auto [log2, kmsg2, size2, summary2] = run();
  EXPECT_EQ(log, log2);
  EXPECT_EQ(kmsg, kmsg2);
  EXPECT_EQ(size, 44u);  // 32 + 8 grown to 12
  EXPECT_THAT(log, ::testing::Contains("30 h100-00-01 xid 79 gpu 3"));
  EXPECT_THAT(log, ::testing::Contains("90 h100-00-01 reboot, down 45s"));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("135 h100-00-01 boot ")));
  EXPECT_THAT(log, ::testing::Contains("300  scale h200 8 -> 12"));
  EXPECT_THAT(log, ::testing::Contains("360 h200-0011 thermal gpu 2"));
  int picked = 0;
  for (const auto& l : log) picked += l.rfind("120 ", 0) == 0 ? 1 : 0;
  EXPECT_EQ(picked, 2);
  for (const auto& l : log) EXPECT_EQ(l.find("ERROR"), std::string::npos) << l;
  // After the reboot the Xid 79 is gone from the new boot's ring.
  EXPECT_EQ(kmsg.find("Xid"), std::string::npos);
  EXPECT_EQ(summary.get_string({"fleet"}), "h100-demo");
}

TEST(FleetModel, RebootWaitsDownTimeAndHostChangesApplyAtBoot) {
  FleetSpec spec = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  FleetModel fleet(spec, 0);
  auto ev = [](const std::string& yaml) {
    return parse_event(core::parse_yaml(yaml), "t", "e", false);
  };
  fleet.apply(ev("{node: h100-00-00, type: host, kernelArgs: {add: [iommu=off]}}"), 1);
  EXPECT_TRUE(fleet.find("h100-00-00")->host().reboot_required());
  std::string boot = fleet.find("h100-00-00")->boot_id();
  fleet.apply(ev("{node: h100-00-00, type: reboot, down: 30s}"), 10);
  EXPECT_TRUE(fleet.is_down("h100-00-00"));
  fleet.advance(39);
  EXPECT_TRUE(fleet.is_down("h100-00-00"));
  EXPECT_EQ(fleet.find("h100-00-00")->boot_id(), boot);
  auto events = fleet.advance(40);
  EXPECT_FALSE(fleet.is_down("h100-00-00"));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(fleet.find("h100-00-00")->boot_id(), boot);
  EXPECT_THAT(*fleet.find("h100-00-00")->host().read("/proc/cmdline"), HasSubstr("iommu=off"));
  EXPECT_FALSE(fleet.find("h100-00-00")->host().reboot_required());

  EXPECT_THROW(fleet.apply(ev("{node: ghost, type: reboot}"), 1), core::InvalidInput);
  auto scaled = fleet.apply(ev("{type: scale, pool: h100, count: 30}"), 50);
  EXPECT_EQ(scaled[0].removed.size(), 2u);
  EXPECT_EQ(fleet.find("h100-07-03"), nullptr);
  EXPECT_EQ(fleet.size(), 38u);
  auto members = fleet.group({"h100-00-00", "h100-00-01"});
  EXPECT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].gpu_pci.size(), 8u);
  EXPECT_THROW((void)fleet.group({"h100-07-03"}), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::sim
