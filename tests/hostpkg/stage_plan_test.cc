#include <gtest/gtest.h>

#include "hostpkg/stage_plan.h"
#include "test_util.h"

namespace gpufleet::hostpkg {
namespace {

using testing::set_from_yaml;

std::string describe(const PlannedStep& s) {
  std::string out = (s.package.empty() ? "*" : s.package) + ":" + std::string(stage_name(s.stage));
  if (s.stage == Stage::Interrupt) {
    out += "(" + std::string(interrupt_name(s.interrupt.kind));
    for (const std::string& svc : s.interrupt.services) out += " " + svc;
    out += ")";
  }
  return out;
}

// Runs a node to completion the way the controller does: plan, run steps[0], record it,
// re-plan (as after a restart). Returns every step run, in order.
std::vector<std::string> converge(const HostPackageSet& set, NodeRecord& rec) {
  DesiredState d = digest(set);
  std::vector<std::string> ran;
  for (int guard = 0; guard < 100; ++guard) {
    NodePlan p = plan_node(d, rec);
    EXPECT_TRUE(p.blocked.empty());
    // The allocation-free answer the rollout planner uses agrees with the full plan.
    EXPECT_EQ(node_need(d, rec, nullptr), p.steps.empty() ? NodeNeed::UpToDate : NodeNeed::Work);
    if (p.steps.empty()) {
      mark_node_done(rec, d);
      return ran;
    }
    ran.push_back(describe(p.steps.front()));
    record_step_done(rec, d, p.steps.front());
  }
  ADD_FAILURE() << "did not converge";
  return ran;
}

const char* kBase = R"(
  packages:
    base:
      version: 1.0.0
      image: r/base
      interrupt: {type: restartServices, services: [containerd.service]}
      uninstall: {supported: true}
    tuning:
      version: 1.0.0
      image: r/tuning
      dependsOn: [base]
      configMap: {net.conf: "a=1", vm.conf: "b=1", motd: "hi"}
      configInterrupts:
        "net.*": {type: restartServices, services: [systemd-sysctl.service]}
        "vm.conf": {type: reboot}
)";

TEST(StagePlan, FreshNodeRunsEverythingInDependencyOrderWithOneInterrupt) {
  HostPackageSet set = set_from_yaml(kBase);
  NodeRecord rec;
  rec.set = "test";
  EXPECT_EQ(converge(set, rec),
            (std::vector<std::string>{"base:apply", "tuning:apply", "tuning:config",
                                      "*:interrupt(reboot)", "base:post-interrupt",
                                      "tuning:post-interrupt"}));
  EXPECT_EQ(rec.installed.at("tuning").config_hashes.size(), 3u);
  EXPECT_EQ(rec.state, NodeState::Done);
  // Converged: nothing more, ever.
  EXPECT_TRUE(plan_node(digest(set), rec).up_to_date());
  EXPECT_TRUE(converge(set, rec).empty());
}

TEST(StagePlan, ConfigOnlyChangeRunsConfigAndOnlyTheChangedKeysInterrupts) {
  HostPackageSet set = set_from_yaml(kBase);
  NodeRecord rec;
  converge(set, rec);
  std::string changed = kBase;
  changed.replace(changed.find("a=1"), 3, "a=2");
  HostPackageSet set2 = set_from_yaml(changed);
  NodePlan p = plan_node(digest(set2), rec);
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].stage, Stage::Config);
  EXPECT_EQ(p.steps[0].changed_keys, (std::vector<std::string>{"net.conf"}));
  EXPECT_EQ(converge(set2, rec),
            (std::vector<std::string>{"tuning:config",
                                      "*:interrupt(restartServices systemd-sysctl.service)",
                                      "tuning:post-interrupt"}));
  // A key with no matching configInterrupt changes without any interrupt.
  std::string motd = changed;
  motd.replace(motd.find("hi"), 2, "hello");
  HostPackageSet set3 = set_from_yaml(motd);
  EXPECT_EQ(converge(set3, rec), (std::vector<std::string>{"tuning:config"}));
  EXPECT_TRUE(rec.pending_post.empty());
}

TEST(StagePlan, VersionIncreaseUpgradesAndInterruptsCoalesce) {
  HostPackageSet set = set_from_yaml(kBase);
  NodeRecord rec;
  converge(set, rec);
  std::string up = kBase;
  up.replace(up.find("version: 1.0.0"), 14, "version: 1.1.0");  // base
  std::string both = up;
  both.replace(both.find("b=1"), 3, "b=2");  // tuning's vm.conf: reboot
  HostPackageSet set2 = set_from_yaml(both);
  NodePlan p = plan_node(digest(set2), rec);
  ASSERT_FALSE(p.steps.empty());
  EXPECT_EQ(p.steps[0].stage, Stage::Upgrade);
  EXPECT_EQ(p.steps[0].from_version, "1.0.0");
  EXPECT_EQ(p.interrupt.kind, InterruptKind::Reboot);  // the reboot subsumes the restart
  EXPECT_EQ(converge(set2, rec),
            (std::vector<std::string>{"base:upgrade", "tuning:config", "*:interrupt(reboot)",
                                      "base:post-interrupt", "tuning:post-interrupt"}));
  EXPECT_EQ(rec.installed.at("base").version, "1.1.0");
}

TEST(StagePlan, ServiceRestartsOfSeveralPackagesMerge) {
  HostPackageSet set = set_from_yaml(R"(
  packages:
    a: {version: 1.0.0, image: r/a, interrupt: {type: restartServices, services: [x.service]}}
    b: {version: 1.0.0, image: r/b, interrupt: {type: restartServices, services: [y.service, x.service]}}
)");
  NodeRecord rec;
  EXPECT_EQ(converge(set, rec),
            (std::vector<std::string>{"a:apply", "b:apply",
                                      "*:interrupt(restartServices x.service y.service)",
                                      "a:post-interrupt", "b:post-interrupt"}));
}

TEST(StagePlan, DowngradeRules) {
  auto with = [](const std::string& version, const std::string& extra) {
    return set_from_yaml("  packages:\n    a: {version: " + version + ", image: r/a" + extra +
                         "}\n");
  };
  NodeRecord rec;
  converge(with("2.0.0", ", uninstall: {supported: true}"), rec);
  // uninstallFirst (the default where uninstall is supported): uninstall 2.0.0, apply 1.0.0.
  HostPackageSet down = with("1.0.0", ", uninstall: {supported: true}");
  NodePlan p = plan_node(digest(down), rec);
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].stage, Stage::Uninstall);
  EXPECT_EQ(p.steps[0].version, "2.0.0");
  EXPECT_TRUE(p.steps[0].downgrade);
  EXPECT_EQ(p.steps[1].stage, Stage::Apply);
  EXPECT_EQ(p.steps[1].from_version, "2.0.0");
  converge(down, rec);
  EXPECT_EQ(rec.installed.at("a").version, "1.0.0");
  // inPlace: the upgrade stage with a lower version.
  NodeRecord rec2;
  converge(with("2.0.0", ""), rec2);
  NodePlan q = plan_node(digest(with("1.5.0", ", downgrade: inPlace")), rec2);
  ASSERT_EQ(q.steps.size(), 1u);
  EXPECT_EQ(q.steps[0].stage, Stage::Upgrade);
  EXPECT_TRUE(q.steps[0].downgrade);
  // refuse (the default without uninstall): blocked, nothing runs, the reason says the fix.
  NodePlan r = plan_node(digest(with("1.5.0", "")), rec2);
  EXPECT_TRUE(r.steps.empty());
  ASSERT_EQ(r.blocked.size(), 1u);
  EXPECT_NE(r.blocked[0].find("downgrade rule is refuse"), std::string::npos);
  std::string reason;
  EXPECT_EQ(node_need(digest(with("1.5.0", "")), rec2, &reason), NodeNeed::Blocked);
  EXPECT_EQ(reason, r.blocked[0]);
  EXPECT_EQ(node_need(digest(with("1.5.0", ", downgrade: inPlace")), rec2, nullptr),
            NodeNeed::Work);
  EXPECT_FALSE(r.up_to_date());
}

TEST(StagePlan, RemovedPackagesUninstallWhereSupportedAndAreKeptOtherwise) {
  HostPackageSet set = set_from_yaml(R"(
  packages:
    keep: {version: 1.0.0, image: r/keep}
    gone: {version: 1.0.0, image: r/gone, uninstall: {supported: true}, interrupt: {type: reboot}}
    stuck: {version: 1.0.0, image: r/stuck}
)");
  NodeRecord rec;
  converge(set, rec);
  HostPackageSet after = set_from_yaml("  packages:\n    keep: {version: 1.0.0, image: r/keep}\n");
  NodePlan p = plan_node(digest(after), rec);
  EXPECT_EQ(p.kept, (std::vector<std::string>{"stuck"}));
  EXPECT_EQ(converge(after, rec),
            (std::vector<std::string>{"gone:uninstall", "*:interrupt(reboot)"}));
  EXPECT_FALSE(rec.installed.contains("gone"));
  EXPECT_TRUE(rec.installed.contains("stuck"));  // its record is kept
}

TEST(StagePlan, RestartBetweenStepsNeverRepeatsTheInterrupt) {
  HostPackageSet set = set_from_yaml(kBase);
  DesiredState d = digest(set);
  NodeRecord rec;
  rec.set = "test";
  // Run up to and including the interrupt, then "restart": serialise and read the record.
  for (;;) {
    NodePlan p = plan_node(d, rec);
    Stage s = p.steps.front().stage;
    record_step_done(rec, d, p.steps.front());
    if (s == Stage::Interrupt) break;
  }
  RecordRead back = record_from_value(record_to_value(rec));
  ASSERT_TRUE(back.record) << back.error;
  NodePlan rest = plan_node(d, *back.record);
  for (const PlannedStep& s : rest.steps) EXPECT_EQ(s.stage, Stage::PostInterrupt);
  EXPECT_EQ(rest.steps.size(), 2u);
}

TEST(StagePlan, StepKeysAndTargetAreStable) {
  HostPackageSet set = set_from_yaml(kBase);
  DesiredState a = digest(set), b = digest(set_from_yaml(kBase));
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.target.size(), 16u);
  std::string changed = kBase;
  changed.replace(changed.find("a=1"), 3, "a=2");
  EXPECT_NE(digest(set_from_yaml(changed)).target, a.target);
  NodePlan p = plan_node(a, NodeRecord{});
  EXPECT_EQ(p.steps[0].key(), "base/apply/1.0.0//g0");
  NodeRecord later;
  later.generation = 7;
  EXPECT_EQ(plan_node(a, later).steps[0].key(), "base/apply/1.0.0//g7");
  EXPECT_EQ(p.steps[2].key().rfind("tuning/config/1.0.0/", 0), 0u);
  EXPECT_EQ(p.steps[2].timeout.count(), 300);
}

// NVIDIA pads a driver version's last part (535.230.02, 570.148.08): such a version is a
// package's version like any other, ordered numerically (08 < 10), and a lower one is still
// refused.
TEST(StagePlan, ZeroPaddedDriverVersionsUpgradeAndRefuseDowngrade) {
  auto driver = [](const std::string& version) {
    return set_from_yaml("  packages:\n    nvidia-driver: {version: " + version +
                         ", image: r/driver, interrupt: {type: reboot}}\n");
  };
  NodeRecord rec;
  converge(driver("570.148.08"), rec);
  EXPECT_EQ(rec.installed.at("nvidia-driver").version, "570.148.08");
  NodePlan up = plan_node(digest(driver("570.148.10")), rec);
  ASSERT_FALSE(up.steps.empty());
  EXPECT_EQ(up.steps[0].stage, Stage::Upgrade);
  EXPECT_EQ(up.steps[0].from_version, "570.148.08");
  EXPECT_EQ(up.interrupt.kind, InterruptKind::Reboot);
  EXPECT_EQ(driver("570.148.10").packages[0].image, "r/driver:570.148.10");
  converge(driver("570.148.10"), rec);
  NodePlan down = plan_node(digest(driver("570.148.09")), rec);
  EXPECT_TRUE(down.steps.empty());
  ASSERT_EQ(down.blocked.size(), 1u);
  EXPECT_NE(down.blocked[0].find("downgrade rule is refuse"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet::hostpkg
