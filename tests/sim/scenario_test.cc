#include "sim/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"
#include "sim/fleet_model.h"

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
    parse_scenario(core::parse_yaml(doc), "s.yaml", GPUFLEET_SOURCE_DIR "/examples");
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(Scenario, ReadsTheExample) {
  Scenario sc = load_scenario_file(GPUFLEET_SOURCE_DIR "/examples/scenario-faults.yaml");
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

TEST(FleetModel, PlaysTheExampleTimelineDeterministically) {
  auto run = [] {
    Scenario sc = load_scenario_file(GPUFLEET_SOURCE_DIR "/examples/scenario-faults.yaml");
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
  FleetSpec spec = load_fleet_file(GPUFLEET_SOURCE_DIR "/examples/fleet-h100.yaml");
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
  EXPECT_THROW(fleet.group({"h100-07-03"}), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::sim
