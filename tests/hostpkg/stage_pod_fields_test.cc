// A package's resources, env and image on every stage pod it runs — apply, config, interrupt,
// post-interrupt, upgrade, the uninstall of a downgrade and of a package that left the set (from
// the node record), and the verify pod — and the admission rules for its resources.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/node_record.h"
#include "hostpkg/stage_plan.h"

namespace gpufleet::hostpkg {
namespace {

HostPackageSet set_of(const std::string& packages) {
  return parse_host_package_set(core::parse_yaml(
      "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: s1}\nspec:\n"
      "  packages:\n" +
      packages));
}

std::string pkg(const std::string& version) {
  return "    p:\n      version: " + version +
         "\n      image: r.example/p\n      env: {LEVEL: \"3\"}\n"
         "      resources: {requests: {cpu: 100m}, limits: {cpu: 200m, memory: 1Gi}}\n"
         "      configMap: {a.conf: \"x\"}\n      interrupt: {type: restartServices, services: "
         "[a.service]}\n      uninstall: {supported: true}\n      downgrade: uninstallFirst\n";
}

// Runs every planned step of `set` on `record`, as the controller does, returning the pods.
std::vector<core::Value> roll(const HostPackageSet& set, NodeRecord& record) {
  DesiredState d = digest(set);
  std::vector<core::Value> pods;
  for (NodePlan plan = plan_node(d, record); !plan.steps.empty(); plan = plan_node(d, record)) {
    pods.push_back(stage_pod(set, "n1", plan.steps.front(), {"ns", "runner:1", "cm"}));
    record_step_done(record, d, plan.steps.front());
    record = record_from_value(record_to_value(record)).record.value();  // as stored on the Node
  }
  mark_node_done(record, d);
  return pods;
}

std::string key_of(const core::Value& pod) {
  return std::string(pod.get_string({"metadata", "labels", "hostpkg.gpufleet.io/stage"})) + "/" +
         std::string(pod.get_string({"metadata", "labels", "hostpkg.gpufleet.io/package"}));
}

TEST(StagePodFields, EveryStageCarriesTheResourcesEnvAndImage) {
  NodeRecord record;
  record.set = "s1";
  std::vector<core::Value> pods = roll(set_of(pkg("1.0.0")), record);  // apply, config, ...
  for (auto& p : roll(set_of(pkg("1.1.0")), record)) pods.push_back(std::move(p));  // upgrade
  for (auto& p : roll(set_of(pkg("1.0.5")), record)) pods.push_back(std::move(p));  // downgrade
  const HostPackageSet without = set_of("    other: {version: 1.0.0, image: r.example/o}\n");
  for (auto& p : roll(without, record)) pods.push_back(std::move(p));  // uninstall from record
  const HostPackageSet last = set_of(pkg("1.0.0"));
  pods.push_back(verify_pod(last, digest(last), "n1", last.packages.front(), 7, {"ns", "r", ""}));

  const core::Value want =
      core::parse_json(R"({"requests":{"cpu":"100m"},"limits":{"cpu":"200m","memory":"1Gi"}})");
  struct Case {
    std::string key, image;
  };
  // The first pod of each stage, in the order they ran; the interrupt has no package image.
  const std::vector<Case> cases = {
      {"apply/p", "r.example/p:1.0.0"},
      {"config/p", "r.example/p:1.0.0"},
      {"interrupt/", ""},
      {"post-interrupt/p", "r.example/p:1.0.0"},
      {"upgrade/p", "r.example/p:1.1.0"},
      {"uninstall/p", "r.example/p:1.1.0"},
      {"verify/p", "r.example/p:1.0.0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    const core::Value* pod = nullptr;
    for (const auto& p : pods)
      if (pod == nullptr && key_of(p) == c.key) pod = &p;
    ASSERT_NE(pod, nullptr);
    const core::Value& step = pod->get({"spec", "containers"})->as_list().front();
    ASSERT_NE(step.get({"resources"}), nullptr);
    EXPECT_EQ(*step.get({"resources"}), want) << core::to_json(*step.get({"resources"}));
    EXPECT_NE(core::to_json(*step.get({"args"})).find("\"--env\",\"LEVEL=3\""), std::string::npos);
    const core::Value* init = pod->get({"spec", "initContainers"});
    EXPECT_EQ(init ? std::string(init->as_list().front().get_string({"image"})) : "", c.image);
    // Every stage pod tolerates every taint (cordoned, not-yet-ready, sentinel-tainted nodes).
    EXPECT_EQ((*pod->get({"spec", "tolerations"}))[0].get_string({"operator"}), "Exists");
    EXPECT_EQ((*pod->get({"spec", "tolerations"}))[0].get({"key"}), nullptr);
  }
  // The uninstall of the package that left the set ran the recorded 1.0.5 with its fields.
  int uninstalls_from_record = 0;
  for (const auto& p : pods) {
    if (key_of(p) != "uninstall/p") continue;
    const core::Value& init = p.get({"spec", "initContainers"})->as_list().front();
    if (init.get_string({"image"}) != "r.example/p:1.0.5") continue;
    ++uninstalls_from_record;
    const core::Value& step = p.get({"spec", "containers"})->as_list().front();
    EXPECT_EQ(*step.get({"resources"}), want);
    EXPECT_NE(core::to_json(*step.get({"args"})).find("LEVEL=3"), std::string::npos);
  }
  EXPECT_EQ(uninstalls_from_record, 1);
  // A package without resources gets none.
  for (const auto& p : pods) {
    if (key_of(p) != "apply/other") continue;
    EXPECT_EQ(p.get({"spec", "containers"})->as_list().front().get({"resources"}), nullptr);
  }
}

TEST(StagePodFields, InterruptMergesThePackagesResources) {
  HostPackageSet set = set_of(
      "    a: {version: 1.0.0, image: r/a, interrupt: {type: reboot}, env: {X: a},\n"
      "        resources: {requests: {cpu: \"1\"}, limits: {cpu: \"2\"}}}\n"
      "    b: {version: 1.0.0, image: r/b, env: {X: b, Y: b},\n"
      "        resources: {requests: {cpu: \"3\", memory: 1Gi}}}\n");
  NodePlan plan = plan_node(digest(set), NodeRecord{});
  const PlannedStep& i =
      plan.steps.back().stage == Stage::Interrupt ? plan.steps.back() : plan.steps[2];
  ASSERT_EQ(i.stage, Stage::Interrupt);
  EXPECT_EQ(i.resources.requests.at("cpu"), "3");
  EXPECT_EQ(i.resources.limits.at("cpu"), "3") << "a limit below another package's request";
  EXPECT_EQ(i.resources.requests.at("memory"), "1Gi");
  EXPECT_EQ(i.env.at("X"), "a");
  EXPECT_EQ(i.env.at("Y"), "b");
}

TEST(StagePodFields, RequestOverLimitRefusedNamingFieldValuesAndFix) {
  auto error = [](const std::string& resources) {
    try {
      set_of("    p: {version: 1.0.0, image: r/p, resources: " + resources + "}\n");
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("{requests: {cpu: \"2\"}, limits: {cpu: 1500m}}"),
            "spec.packages.p.resources.requests.cpu: \"2\" is more than limits.cpu \"1500m\"; a "
            "request must not exceed its limit: lower the request or raise the limit to at least "
            "\"2\"");
  EXPECT_NE(error("{requests: {memory: lots}}").find("spec.packages.p.resources.requests.memory"),
            std::string::npos);
  EXPECT_NE(error("{requests: {cpu: \"-1\"}}").find("is negative"), std::string::npos);
  EXPECT_NE(error("{request: {cpu: 1}}").find("request"), std::string::npos);
  EXPECT_EQ(error("{requests: {cpu: 1500m}, limits: {cpu: \"2\"}}"), "");
  EXPECT_EQ(error("{requests: {cpu: \"1\"}, limits: {cpu: 1000m}}"), "") << "equal is fine";
}

TEST(StagePodFields, RecordKeepsEnvAndResourcesOnlyWhenSet) {
  NodeRecord r;
  r.set = "s1";
  InstalledPackage& p = r.installed["p"];
  p.version = "1.0.0";
  p.env["A"] = "1";
  p.resources.requests["cpu"] = "100m";
  r.installed["q"].version = "2.0.0";
  core::Value v = record_to_value(r);
  EXPECT_EQ(v.get({"installed", "q", "env"}), nullptr);
  EXPECT_EQ(v.get({"installed", "q", "resources"}), nullptr);
  RecordRead back = record_from_value(core::parse_json(core::to_json(v)));
  ASSERT_TRUE(back.record) << back.error;
  EXPECT_EQ(*back.record, r);
  v["installed"]["p"]["resources"]["requests"]["cpu"] = "much";
  EXPECT_NE(record_from_value(v).error.find("record.installed.p.resources.requests.cpu"),
            std::string::npos);
}

}  // namespace
}  // namespace gpufleet::hostpkg
