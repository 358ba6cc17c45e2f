// validate's performance phase without a cluster: the library's bandwidth floors (strict
// reading, per accelerator and fabric, in the Recipe document), the Certification a pool gets
// (deterministic name, thresholds as certify's CEL), the per-node report read from its status,
// and the missing-CRD error. The run against a cluster is recipe_performance_live.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"
#include "recipe/library.h"
#include "recipe/live/performance_run.h"
#include "recipe/performance.h"
#include "recipe/recipe.h"
#include "recipe/resolver.h"

namespace gpufleet::recipe {
namespace {

using ::testing::HasSubstr;

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

const Library& builtin() {
  static const Library lib = load_library(builtin_library_files());
  return lib;
}

Recipe resolve_for(std::string service, std::string accelerator, std::string os,
                   std::string intent = "training") {
  Query q;
  q.criteria = {service, accelerator, os, intent, std::string(kAny)};
  return resolve(builtin(), q);
}

TEST(PerformanceFloorsTest, ReadStrictly) {
  auto floors = performance_from_value(
      core::parse_yaml("{nccl-all-reduce: {busBandwidthGBps: {node: 400, fabric: 310.5}}}"), "p");
  ASSERT_EQ(floors.size(), 1u);
  EXPECT_EQ(floors[0].category, "nccl-all-reduce");
  EXPECT_EQ(*floors[0].node_gbps, 400.0);
  EXPECT_EQ(*floors[0].fabric_gbps, 310.5);
  EXPECT_EQ(core::to_json(performance_to_value(floors)),
            R"({"nccl-all-reduce":{"busBandwidthGBps":{"fabric":310.5,"node":400.0}}})");
  EXPECT_THAT(error_of([] {
                performance_from_value(
                    core::parse_yaml("{nccl-allreduce: {busBandwidthGBps: {node: 1}}}"), "p");
              }),
              HasSubstr("p.nccl-allreduce: 'nccl-allreduce' is not an NCCL category of certify; "
                        "use one of nccl-all-gather, nccl-all-reduce"));
  EXPECT_THAT(error_of([] {
                performance_from_value(
                    core::parse_yaml("{nccl-all-reduce: {busBandwidthGBps: {node: -3}}}"), "p");
              }),
              HasSubstr("p.nccl-all-reduce.busBandwidthGBps.node: -3 is not a bandwidth; give a "
                        "positive number"));
  EXPECT_THAT(error_of([] {
                performance_from_value(
                    core::parse_yaml("{nccl-all-reduce: {busBandwidthGBps: {nodes: 3}}}"), "p");
              }),
              HasSubstr("nodes"));
  EXPECT_THAT(
      error_of([] { performance_from_value(core::parse_yaml("{nccl-all-reduce: {}}"), "p"); }),
      HasSubstr("needs busBandwidthGBps"));
}

TEST(PerformanceFloorsTest, ThresholdsAreGroupSizeAware) {
  BandwidthFloor f{"nccl-all-reduce", 400.0, 310.0};
  EXPECT_EQ(bandwidth_threshold(f), "value >= (groupSize > 1 ? 310.0 : 400.0)");
  f.fabric_gbps.reset();
  EXPECT_EQ(bandwidth_threshold(f), "groupSize > 1 || value >= 400.0");
  f.node_gbps.reset();
  f.fabric_gbps = 155.25;
  EXPECT_EQ(bandwidth_threshold(f), "groupSize == 1 || value >= 155.25");
}

// Per accelerator (NVLink) and fabric (GKE A3 Mega's 8 x 200G); none for PCIe GPUs yet.
TEST(PerformanceFloorsTest, LibraryFloorsPerAcceleratorAndFabric) {
  auto floor_of = [](const Recipe& r) {
    EXPECT_EQ(r.pools.size(), 1u);
    return r.pools.at(0).performance;
  };
  auto h100 = floor_of(resolve_for("kind", "h100", "ubuntu"));
  ASSERT_EQ(h100.size(), 1u);
  EXPECT_EQ(*h100[0].node_gbps, 400.0);
  EXPECT_EQ(*h100[0].fabric_gbps, 310.0);
  auto tcpxo = floor_of(resolve_for("gke", "h100", "cos"));
  ASSERT_EQ(tcpxo.size(), 1u);
  EXPECT_EQ(*tcpxo[0].node_gbps, 400.0);
  EXPECT_EQ(*tcpxo[0].fabric_gbps, 155.0);
  auto gb200 = floor_of(resolve_for("kind", "gb200", "ubuntu"));
  ASSERT_EQ(gb200.size(), 1u);
  EXPECT_EQ(*gb200[0].node_gbps, 720.0);
  EXPECT_TRUE(floor_of(resolve_for("kind", "l40s", "ubuntu")).empty());
  // The floors travel in the Recipe document and are not settings.
  Recipe r = resolve_for("kind", "h100", "ubuntu");
  EXPECT_EQ(r.pools[0].settings.find("performance"), nullptr);
  Recipe back = recipe_from_yaml(recipe_to_yaml(r), "r.yaml");
  ASSERT_EQ(back.pools[0].performance.size(), 1u);
  EXPECT_EQ(*back.pools[0].performance[0].fabric_gbps, 310.0);
  EXPECT_EQ(recipe_to_yaml(back), recipe_to_yaml(r));
}

TEST(PerformanceCertificationTest, DeterministicSpec) {
  Recipe r = resolve_for("kind", "h100", "ubuntu");
  PerformanceOptions o;
  o.namespace_ = "ops";
  core::Value c = pool_certification(r, r.pools[0], {"n-2", "n-1"}, o);
  std::string name = certification_name(r, r.pools[0]);
  EXPECT_THAT(name, ::testing::MatchesRegex("validate-default-[0-9a-f]{8}"));
  EXPECT_EQ(c.get_string({"metadata", "name"}), name);
  EXPECT_EQ(c.get_string({"metadata", "namespace"}), "ops");
  EXPECT_EQ(
      core::to_json(*c.find("spec")),
      R"({"categories":[{"name":"communication/nccl-all-reduce","scale":"diagnose",)"
      R"j("thresholds":{"busBandwidthGBps":"value >= (groupSize > 1 ? 310.0 : 400.0)"}}],)j"
      R"("targets":{"nodeNames":["n-1","n-2"],"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists"}]}})");
  // Another recipe or pool: another name; the same: the same name.
  Recipe other = resolve_for("kind", "h100", "ubuntu", "inference");
  EXPECT_NE(certification_name(other, other.pools[0]), name);
  EXPECT_EQ(certification_name(r, r.pools[0]), name);
}

core::Value cert(const std::string& status_yaml) {
  core::Value c = core::parse_yaml("{metadata: {name: validate-default-1, namespace: ops}}");
  c["status"] = core::parse_yaml(status_yaml);
  return c;
}

const CheckResult* row(const ValidationReport& r, const std::string& subject) {
  for (const CheckResult& c : r.results)
    if (c.subject == subject) return &c;
  return nullptr;
}

TEST(PerformanceReportTest, NamesTheFailedNodes) {
  Recipe r = resolve_for("kind", "h100", "ubuntu");
  const NodePool& pool = r.pools[0];
  std::vector<std::string> nodes{"a", "b", "c", "d"};
  ValidationReport rep;
  report_certification(
      rep, pool, nodes,
      cert("{phase: Failed, nodeCount: 3, passedCount: 2, failedCount: 1, excludedCount: 1, "
           "failedNodes: [{node: b, category: communication/nccl-all-reduce, reason: "
           "ThresholdViolated, message: 'busBandwidthGBps = 183.9 violates value >= 310.0'}], "
           "excluded: [{node: d, reason: Cordoned}]}"),
      true, "30m");
  ASSERT_EQ(rep.results.size(), 5u);
  EXPECT_EQ(rep.results[0].name, "Certification ops/validate-default-1");
  EXPECT_EQ(rep.results[0].actual, "Failed: 2 passed, 1 failed, 1 excluded of 3");
  EXPECT_FALSE(rep.results[0].passed);
  EXPECT_TRUE(row(rep, "a (pool default)")->passed);
  EXPECT_TRUE(row(rep, "c (pool default)")->passed);
  const CheckResult* b = row(rep, "b (pool default)");
  EXPECT_FALSE(b->passed);
  EXPECT_EQ(b->actual,
            "ThresholdViolated in communication/nccl-all-reduce: busBandwidthGBps = 183.9 "
            "violates value >= 310.0");
  EXPECT_EQ(b->expected, "nccl-all-reduce >= 400 GB/s on one node, >= 310 GB/s across nodes");
  EXPECT_EQ(row(rep, "d (pool default)")->actual, "not tested: Cordoned");
  EXPECT_EQ(rep.failures(), 3u);
}

TEST(PerformanceReportTest, PassedUnfinishedRejectedAndTruncated) {
  Recipe r = resolve_for("kind", "h100", "ubuntu");
  const NodePool& pool = r.pools[0];
  ValidationReport ok;
  report_certification(ok, pool, {"a"},
                       cert("{phase: Passed, nodeCount: 1, passedCount: 1, failedCount: 0}"), true,
                       "30m");
  EXPECT_TRUE(ok.passed());

  ValidationReport late;
  report_certification(late, pool, {"a"}, cert("{phase: Running, currentCategory: x}"), false,
                       "5m");
  EXPECT_THAT(late.results[0].actual,
              HasSubstr("not finished within 5m (phase Running, category x); it keeps running: "
                        "run validate again to wait for it, or gpufleet certify report "
                        "validate-default-1 -n ops"));
  EXPECT_EQ(late.results[1].actual,
            "not measured yet: Certification ops/validate-default-1 is Running");
  ValidationReport idle;
  report_certification(idle, pool, {"a"}, cert("{}"), false, "5m");
  EXPECT_THAT(idle.results[0].actual, HasSubstr("is the certify controller running?"));

  ValidationReport rejected;
  report_certification(
      rejected, pool, {"a"},
      cert("{phase: Failed, message: bad threshold, conditions: [{type: Accepted, status: "
           "'False', reason: InvalidThreshold}]}"),
      true, "5m");
  EXPECT_EQ(rejected.results[1].actual,
            "not tested: Certification ops/validate-default-1 was not accepted (bad threshold)");
  EXPECT_FALSE(rejected.results[1].passed);

  // status lists the first 100 failed nodes: an unlisted node is not known good.
  ValidationReport many;
  report_certification(many, pool, {"a", "z"},
                       cert("{phase: Failed, failedCount: 101, failedNodes: [{node: a, reason: "
                            "HardwareFailure, category: c, message: m}]}"),
                       true, "5m");
  EXPECT_THAT(row(many, "z (pool default)")->actual, HasSubstr("unknown: more nodes failed"));
  EXPECT_FALSE(row(many, "z (pool default)")->passed);
}

TEST(PerformancePhaseTest, MissingCertifyResourceIsNamed) {
  Recipe r = resolve_for("kind", "h100", "ubuntu");
  Snapshot s;  // no CRDs: nothing is contacted before the check
  ValidationReport rep;
  std::ostringstream progress;
  try {
    run_performance_phase(rep, r, s, {}, {}, progress);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CRD certifications.gpufleet.io is missing or not "
                                    "Established"));
    EXPECT_THAT(e.what(), HasSubstr("gpufleet controller --controllers=certify"));
  }
  // Only the live cluster can run it: from a snapshot, validate_phases refuses.
  EXPECT_THAT(error_of([&] { validate_phases(r, s, {Phase::Performance}); }),
              HasSubstr("cannot be judged from --snapshot"));
}

}  // namespace
}  // namespace gpufleet::recipe
