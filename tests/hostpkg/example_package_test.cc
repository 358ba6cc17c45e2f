// The example package (examples/hostpkg/sysctl) end to end on a real (chrooted) host root:
// its objects validate, and the stage planner drives its real scripts through the step
// runner, with a stand-in systemctl that loads /etc/sysctl.d into a plain /proc/sys tree the
// way systemd-sysctl does, so the post-interrupt check has something true to verify.
#include <gtest/gtest.h>
#include <unistd.h>

#include "core/yaml.h"
#include "host_root.h"
#include "hostpkg/reverify.h"
#include "hostpkg/stage_plan.h"
#include "hostpkg/step_runner.h"
#include "support/source_paths.h"

namespace gpufleet::hostpkg {
namespace {

namespace fs = std::filesystem;
using testing::install_binary;
using testing::read;
using testing::write;

const fs::path kExample = fs::path(GPUFLEET_SOURCE_DIR) / "examples/hostpkg/sysctl";

// "restart systemd-sysctl.service" loads every sysctl.d file into /proc/sys.
const char* kSystemctl = R"(#!/bin/sh
echo "$@" >> /systemctl.log
[ "$1 $2" = "restart systemd-sysctl.service" ] || exit 0
for f in /etc/sysctl.d/*.conf; do
  [ -e "$f" ] || continue
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in '' | '#'*) continue ;; esac
    key=$(echo ${line%%=*}); value=$(echo ${line#*=}); path=""; rest=$key
    while [ "${rest#*.}" != "$rest" ]; do path="$path${rest%%.*}/"; rest=${rest#*.}; done
    mkdir -p "/proc/sys/$path"
    echo "$value" > "/proc/sys/$path$rest"
  done < "$f"
done
)";

class ExamplePackage : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for chroot";
    base_ = fs::temp_directory_path() / ("hostpkg-example-" + std::to_string(getpid()));
    fs::remove_all(base_);
    root_ = base_ / "host";
    for (const char* b : {"/bin/sh", "/bin/cat", "/bin/mkdir", "/bin/mv", "/bin/rm"})
      install_binary(root_, b);
    write(root_ / "bin/systemctl", kSystemctl);
    fs::permissions(root_ / "bin/systemctl", fs::perms::owner_all);
  }
  void TearDown() override {
    if (!base_.empty()) fs::remove_all(base_);
  }

  // Converges one node through every planned step; returns "package:stage=status" lines.
  std::vector<std::string> converge(const HostPackageSet& set, NodeRecord& rec) {
    DesiredState d = digest(set);
    std::vector<std::string> ran;
    for (int guard = 0; guard < 20; ++guard) {
      NodePlan plan = plan_node(d, rec);
      if (plan.steps.empty()) {
        mark_node_done(rec, d);
        return ran;
      }
      const PlannedStep& s = plan.steps.front();
      StepRequest req;
      req.package = s.package.empty() ? "node" : s.package;
      req.version = s.version;
      req.from_version = s.from_version;
      req.stage = s.stage;
      req.config_hash = s.config_hash;
      req.change = s.change();
      req.changed_keys = s.changed_keys;
      req.interrupt = s.interrupt;
      req.host_root = root_.string();
      req.package_dir = (kExample / "pkg").string();
      fs::remove_all(base_ / "config");
      fs::create_directories(base_ / "config");
      if (const Package* p = set.find(s.package)) {
        for (const auto& [k, v] : p->config_map) write(base_ / "config" / k, v);
      }
      req.config_dir = (base_ / "config").string();
      req.history_path = (root_ / "var/lib/gpufleet/hostpkg/history.jsonl").string();
      req.timeout = std::chrono::seconds(30);
      StepResult r = run_step(req);
      ran.push_back(req.package + ":" + std::string(stage_name(s.stage)) + "=" +
                    std::string(step_status_name(r.status)));
      if (!r.ok()) {
        ADD_FAILURE() << r.message << "\n" << r.output << r.check_output;
        return ran;
      }
      NodeRecord update = rec;  // written back the way the controller does
      record_step_done(update, d, s);
      commit(rec, std::move(update));
    }
    ADD_FAILURE() << "did not converge";
    return ran;
  }

  fs::path base_, root_;
};

TEST(ExampleObjects, Validate) {
  HostPackageSet set =
      parse_host_package_set(core::parse_yaml(read(kExample / "hostpackageset.yaml")));
  EXPECT_EQ(set.deployment_policy, "rack-safe");
  EXPECT_EQ(set.packages.at(0).image, "registry.example/gpufleet/sysctl:1.0.0");
  DeploymentPolicy p =
      parse_deployment_policy(core::parse_yaml(read(kExample / "deploymentpolicy.yaml")));
  EXPECT_EQ(p.name, set.deployment_policy);
  for (const char* stage : {"apply", "upgrade", "uninstall", "config", "post-interrupt"}) {
    EXPECT_TRUE(fs::exists(kExample / "pkg" / (std::string(stage) + ".sh"))) << stage;
    EXPECT_TRUE(fs::exists(kExample / "pkg" / (std::string(stage) + "-check.sh"))) << stage;
  }
}

TEST_F(ExamplePackage, InstallsChangesAndUninstallsOnARealRoot) {
  std::string yaml = read(kExample / "hostpackageset.yaml");
  HostPackageSet set = parse_host_package_set(core::parse_yaml(yaml));
  NodeRecord rec;
  rec.set = set.name;
  EXPECT_EQ(
      converge(set, rec),
      (std::vector<std::string>{"sysctl:apply=succeeded", "sysctl:config=succeeded",
                                "node:interrupt=succeeded", "sysctl:post-interrupt=succeeded"}));
  EXPECT_EQ(read(root_ / "proc/sys/vm/max_map_count"), "1048576\n");
  EXPECT_EQ(read(root_ / "proc/sys/net/core/wmem_max"), "67108864\n");
  EXPECT_EQ(read(root_ / "systemctl.log"), "restart systemd-sysctl.service\n");

  // Config-only change: a value changes and a key goes away.
  std::string changed = yaml;
  changed.replace(changed.find("1048576"), 7, "2097152");
  changed.erase(changed.find("        91-net.conf"),
                changed.find("      configInterrupts") - changed.find("        91-net.conf"));
  HostPackageSet set2 = parse_host_package_set(core::parse_yaml(changed));
  EXPECT_EQ(converge(set2, rec),
            (std::vector<std::string>{"sysctl:config=succeeded", "node:interrupt=succeeded",
                                      "sysctl:post-interrupt=succeeded"}));
  EXPECT_EQ(read(root_ / "proc/sys/vm/max_map_count"), "2097152\n");
  EXPECT_FALSE(fs::exists(root_ / "etc/sysctl.d/60-sysctl-91-net.conf"));

  // Re-verification (reverify.h) runs the package's checks on the finished node: they pass
  // while the host holds...
  StepRequest verify;
  verify.package = "sysctl";
  verify.version = "1.0.0";
  verify.verify = verify_stages(*set2.find("sysctl"));
  EXPECT_EQ(verify.verify, (std::vector<Stage>{Stage::Apply, Stage::Config, Stage::PostInterrupt}));
  verify.config_hash = digest(set2).package_config_hash[0];
  verify.change = "r1";
  verify.host_root = root_.string();
  verify.package_dir = (kExample / "pkg").string();
  verify.history_path = (root_ / "var/lib/gpufleet/hostpkg/history.jsonl").string();
  verify.timeout = std::chrono::seconds(30);
  StepResult held = run_step(verify);
  EXPECT_EQ(held.status, StepStatus::Succeeded) << held.message << held.check_output;

  // A post-interrupt check that finds the kernel disagreeing fails the step.
  write(root_ / "proc/sys/vm/max_map_count", "65530\n");
  // ... and catch the drift (the same key runs again: checks are never skipped).
  StepResult drifted = run_step(verify);
  EXPECT_EQ(drifted.status, StepStatus::CheckFailed);
  EXPECT_NE(drifted.message.find("the post-interrupt check of sysctl 1.0.0 failed"),
            std::string::npos)
      << drifted.message;
  EXPECT_NE(drifted.check_output.find("vm.max_map_count is 65530, want 2097152"), std::string::npos)
      << drifted.check_output;
  StepRequest check;
  check.package = "sysctl";
  check.version = "1.0.0";
  check.stage = Stage::PostInterrupt;
  check.config_hash = "drift";
  check.host_root = root_.string();
  check.package_dir = (kExample / "pkg").string();
  check.config_dir = (base_ / "config").string();
  StepResult drift = run_step(check);
  EXPECT_EQ(drift.status, StepStatus::CheckFailed);
  EXPECT_NE(drift.check_output.find("vm.max_map_count is 65530, want 2097152"), std::string::npos);

  // The package leaves the set: uninstalled (it supports it), files gone.
  HostPackageSet other = parse_host_package_set(core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: HostPackageSet
metadata: {name: gpu-sysctl}
spec:
  packages:
    marker: {version: 1.0.0, image: r/marker}
)"));
  NodeRecord only_uninstall = rec;
  DesiredState d = digest(other);
  NodePlan p = plan_node(d, only_uninstall);
  ASSERT_FALSE(p.steps.empty());
  EXPECT_EQ(p.steps[0].stage, Stage::Uninstall);
  StepRequest un;
  un.package = "sysctl";
  un.version = p.steps[0].version;
  un.stage = Stage::Uninstall;
  un.host_root = root_.string();
  un.package_dir = (kExample / "pkg").string();
  StepResult u = run_step(un);
  EXPECT_EQ(u.status, StepStatus::Succeeded) << u.output << u.check_output;
  EXPECT_FALSE(fs::exists(root_ / "etc/sysctl.d/60-sysctl-90-gpu.conf"));
}

}  // namespace
}  // namespace gpufleet::hostpkg
