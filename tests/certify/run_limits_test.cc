// The platform team's bounds on one run (run_limits.h): the settings read strictly, the
// footprint refusal by nodes and by GPUs, and spec.maxDuration against the policy.
#include "certify/run_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "core/errors.h"
#include "core/yaml.h"

namespace gpufleet::certify {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

RunLimits limits_from(const std::map<std::string, std::string>& settings) {
  return parse_run_limits([&](std::string_view key, std::string_view fallback) {
    auto it = settings.find(std::string(key));
    return it == settings.end() ? std::string(fallback) : it->second;
  });
}

std::string refused(const std::map<std::string, std::string>& settings) {
  try {
    (void)limits_from(settings);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "";
}

Selection nodes(int n, int gpus_label, int allocatable = -1) {
  Selection s;
  for (int i = 0; i < n; ++i)
    s.nodes.push_back({"gpu-" + std::to_string(i), "H100", "hopper", "", gpus_label, allocatable});
  return s;
}

TEST(RunLimits, DefaultsAndSettings) {
  RunLimits d = limits_from({});
  EXPECT_EQ(d.max_nodes, 5000);
  EXPECT_EQ(d.max_gpus, 40000);
  EXPECT_EQ(d.max_duration, 24h);
  RunLimits s = limits_from(
      {{"certify.max-nodes", "64"}, {"certify.max-gpus", "512"}, {"certify.max-duration", "90m"}});
  EXPECT_EQ(s.max_nodes, 64);
  EXPECT_EQ(s.max_gpus, 512);
  EXPECT_EQ(s.max_duration, 90min);
}

TEST(RunLimits, BadSettingsNameTheSettingTheValueAndTheFix) {
  for (const char* bad : {"0", "-5", "many", "12x", "99999999999"}) {
    std::string e = refused({{"certify.max-nodes", bad}});
    EXPECT_THAT(e, HasSubstr("setting certify.max-nodes: value \"" + std::string(bad) + "\""));
    EXPECT_THAT(e, HasSubstr("whole number from 1 to 10000000"));
  }
  EXPECT_THAT(refused({{"certify.max-gpus", ""}}), HasSubstr("setting certify.max-gpus"));
  for (const char* bad : {"soon", "30s", "-1h", "0s"}) {
    std::string e = refused({{"certify.max-duration", bad}});
    EXPECT_THAT(e, HasSubstr("setting certify.max-duration: value \"" + std::string(bad) + "\""));
    EXPECT_THAT(e, HasSubstr("at least 1m"));
  }
}

TEST(RunLimits, FootprintRefusedByNodesThenByGpus) {
  RunLimits l;
  l.max_nodes = 4;
  l.max_gpus = 24;
  EXPECT_FALSE(footprint_refusal(nodes(3, 8), l).has_value());  // 3 nodes, 24 GPUs: at the cap
  auto by_nodes = footprint_refusal(nodes(5, 1), l);
  ASSERT_TRUE(by_nodes.has_value());
  EXPECT_THAT(*by_nodes, HasSubstr("spec.targets selects 5 nodes, over certify.max-nodes 4"));
  EXPECT_THAT(*by_nodes, HasSubstr("narrow spec.targets"));
  EXPECT_THAT(*by_nodes, HasSubstr("controllers.certify.settings"));
  auto by_gpus = footprint_refusal(nodes(4, 8), l);
  ASSERT_TRUE(by_gpus.has_value());
  EXPECT_THAT(*by_gpus, HasSubstr("32 GPUs (4 nodes), over certify.max-gpus 24"));
  // No gpu.count label: the node's allocatable GPUs count; neither: nothing.
  EXPECT_EQ(selection_gpus(nodes(2, 0, 4)), 8);
  EXPECT_EQ(selection_gpus(nodes(2, 0, -1)), 0);
  EXPECT_FALSE(footprint_refusal(Selection{}, l).has_value());
}

TEST(RunLimits, MaxDurationDefaultsToAndIsCappedByThePolicy) {
  RunLimits l;
  l.max_duration = 2h;
  RunSpec spec;
  EXPECT_EQ(run_duration_bound(spec, l), 2h);
  spec.max_duration = 45min;
  EXPECT_EQ(run_duration_bound(spec, l), 45min);
  spec.max_duration = 2h + 1s;
  try {
    (void)run_duration_bound(spec, l);
    FAIL() << "a maxDuration over the policy was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.reason(), "DurationExceedsPolicy");
    EXPECT_THAT(e.what(), HasSubstr("spec.maxDuration: 2h1s is over this cluster's "
                                    "certify.max-duration 2h"));
  }
}

TEST(RunLimits, SpecMaxDurationIsParsedForBothKinds) {
  const auto cert = core::parse_yaml(
      "{maxDuration: 90m, targets: {nodeNames: [a]}, categories: [{name: diagnostics/dcgm-r1}]}");
  EXPECT_EQ(parse_certification_spec(cert, Catalog::builtin()).max_duration, 90min);
  const auto run = core::parse_yaml("{maxDuration: 30s, targets: {nodeNames: [a]}, image: x}");
  EXPECT_EQ(parse_workload_run_spec(run).max_duration, 30s);
  const auto none = core::parse_yaml("{targets: {nodeNames: [a]}, image: x}");
  EXPECT_EQ(parse_workload_run_spec(none).max_duration, 0s);
  try {
    (void)parse_workload_run_spec(
        core::parse_yaml("{maxDuration: forever, targets: {nodeNames: [a]}, image: x}"));
    FAIL() << "a bad maxDuration was accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("spec.maxDuration: value \"forever\" is not a positive "
                                    "duration"));
  }
}

TEST(RunLimits, DurationText) {
  EXPECT_EQ(duration_text(0s), "0s");
  EXPECT_EQ(duration_text(45s), "45s");
  EXPECT_EQ(duration_text(90min), "1h30m");
  EXPECT_EQ(duration_text(2h + 1s), "2h1s");
  EXPECT_EQ(duration_text(24h), "24h");
}

}  // namespace
}  // namespace gpufleet::certify
