// The step runner for real: shell steps chrooted into a minimal host root built from this
// machine's /bin/sh (and the few tools the steps use) with their libraries. Needs root (for
// chroot), as CI has.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "core/json.h"
#include "host_root.h"
#include "hostpkg/step_runner.h"

namespace gpufleet::hostpkg {
namespace {

namespace fs = std::filesystem;
using testing::install_binary;
using testing::read;
using testing::write;

class StepRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for chroot";
    base_ = fs::temp_directory_path() /
            ("hostpkg-step-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    root_ = base_ / "host";
    pkg_ = base_ / "pkg";
    for (const char* b : {"/bin/sh", "/bin/sleep", "/bin/cat", "/bin/mkdir"})
      install_binary(root_, b);
    fs::create_directories(root_ / "etc");
    // systemctl in the host root records what it was asked, so interrupts can be checked.
    write(root_ / "bin/systemctl", "#!/bin/sh\necho \"$@\" >> /systemctl.log\n");
    fs::permissions(root_ / "bin/systemctl", fs::perms::owner_all);
    req_.package = "sysctl";
    req_.version = "1.0.0";
    req_.stage = Stage::Apply;
    req_.config_hash = "abc";
    req_.host_root = root_.string();
    req_.package_dir = pkg_.string();
    req_.history_path = (root_ / "var/lib/gpufleet/hostpkg/history.jsonl").string();
    req_.result_path = (base_ / "termination-log").string();
    req_.timeout = std::chrono::seconds(20);
  }
  void TearDown() override {
    if (!base_.empty()) fs::remove_all(base_);
  }
  void script(const std::string& name, const std::string& body) {
    write(pkg_ / name, "#!/bin/sh\n" + body);
  }
  core::Value result() { return core::parse_json(read(base_ / "termination-log")); }

  fs::path base_, root_, pkg_;
  StepRequest req_;
};

TEST_F(StepRunner, AppliesInsideTheHostRootAndChecks) {
  script(
      "apply.sh",
      "mkdir -p /etc/sysctl.d && cat $GPUFLEET_CONFIG_DIR/90-gpu.conf > /etc/sysctl.d/90-gpu.conf\n"
      "echo applied $GPUFLEET_PACKAGE $GPUFLEET_VERSION $LEVEL\n");
  script("apply-check.sh", "test \"$(cat /etc/sysctl.d/90-gpu.conf)\" = vm.max_map_count=1\n");
  write(base_ / "config/90-gpu.conf", "vm.max_map_count=1");
  req_.config_dir = (base_ / "config").string();
  req_.env = {{"LEVEL", "3"}};
  StepResult r = run_step(req_);
  EXPECT_EQ(r.status, StepStatus::Succeeded) << r.message << r.output << r.check_output;
  EXPECT_EQ(read(root_ / "etc/sysctl.d/90-gpu.conf"), "vm.max_map_count=1");  // inside the root
  EXPECT_FALSE(fs::exists("/etc/sysctl.d/90-gpu.conf") &&
               read("/etc/sysctl.d/90-gpu.conf") == "vm.max_map_count=1");
  EXPECT_NE(r.output.find("applied sysctl 1.0.0 3"), std::string::npos);
  core::Value v = result();
  EXPECT_EQ(v.get_string({"status"}), "succeeded");
  EXPECT_EQ(v.get_string({"key"}), "sysctl/apply/1.0.0/abc/");
  EXPECT_TRUE(fs::exists(root_ / "var/lib/gpufleet/hostpkg/sysctl/1.0.0/apply.sh"));

  // Re-run (the pod ran again): skipped, nothing executed twice.
  write(root_ / "etc/sysctl.d/90-gpu.conf", "changed by hand");
  StepResult again = run_step(req_);
  EXPECT_EQ(again.status, StepStatus::Skipped);
  EXPECT_EQ(read(root_ / "etc/sysctl.d/90-gpu.conf"), "changed by hand");
  EXPECT_EQ(result().get_string({"status"}), "skipped");
  // A new config hash is a new step.
  req_.config_hash = "def";
  EXPECT_EQ(run_step(req_).status, StepStatus::Succeeded);
}

TEST_F(StepRunner, FailureIsReportedWithOutputAndExitCode) {
  script("apply.sh", "echo disk full >&2\nexit 3\n");
  script("apply-check.sh", "exit 0\n");
  StepResult r = run_step(req_);
  EXPECT_EQ(r.status, StepStatus::Failed);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("disk full"), std::string::npos);
  core::Value v = result();
  EXPECT_EQ(v.get_string({"status"}), "failed");
  EXPECT_NE(v.get_string({"message"}).find("exit code 3"), std::string::npos);
  // A failed step is not "done": the next run tries again, as attempt 2.
  StepResult r2 = run_step(req_);
  EXPECT_EQ(r2.status, StepStatus::Failed);
  EXPECT_EQ(r2.attempt, 2);
}

TEST_F(StepRunner, TimeoutKillsTheWholeProcessGroup) {
  script("apply.sh", "sleep 30 &\nsleep 30\n");
  script("apply-check.sh", "exit 0\n");
  req_.timeout = std::chrono::milliseconds(700);
  auto t0 = std::chrono::steady_clock::now();
  StepResult r = run_step(req_);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status, StepStatus::TimedOut);
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_NE(result().get_string({"message"}).find("did not finish within"), std::string::npos);
}

TEST_F(StepRunner, CheckThatFailsAfterApply) {
  script("apply.sh", "echo ok\n");
  script("apply-check.sh", "echo setting not applied; exit 1\n");
  StepResult r = run_step(req_);
  EXPECT_EQ(r.status, StepStatus::CheckFailed);
  EXPECT_NE(r.check_output.find("setting not applied"), std::string::npos);
  EXPECT_EQ(result().get_string({"status"}), "check-failed");
  EXPECT_FALSE(r.ok());
}

TEST_F(StepRunner, RerunAfterACrashRunsTheStepAgain) {
  // A runner that died mid-step left only a "started" line (and a torn one) in the history.
  write(
      req_.history_path,
      "{\"key\":\"sysctl/apply/1.0.0/abc/\",\"event\":\"started\",\"attempt\":1}\n{\"key\":\"sysc");
  script("apply.sh", "mkdir -p /etc/x && echo $GPUFLEET_ATTEMPT >> /etc/x/attempts\n");
  script("apply-check.sh", "test -s /etc/x/attempts\n");
  StepResult r = run_step(req_);
  EXPECT_EQ(r.status, StepStatus::Succeeded) << r.output;
  EXPECT_EQ(r.attempt, 2);
  EXPECT_EQ(read(root_ / "etc/x/attempts"), "2\n");
  EXPECT_EQ(run_step(req_).status, StepStatus::Skipped);
}

TEST_F(StepRunner, InterruptRestartsServicesInTheHost) {
  req_.stage = Stage::Interrupt;
  req_.interrupt = Interrupt{InterruptKind::RestartServices, {"a.service", "b.service"}};
  StepResult r = run_step(req_);
  EXPECT_EQ(r.status, StepStatus::Succeeded) << r.output;
  EXPECT_EQ(read(root_ / "systemctl.log"), "restart a.service b.service\n");
  // A reboot is recorded as requested before it is issued (it takes the runner with it).
  req_.interrupt = Interrupt{InterruptKind::Reboot, {}};
  req_.config_hash = "reboot";
  StepResult rb = run_step(req_);
  EXPECT_EQ(rb.status, StepStatus::Succeeded);
  EXPECT_EQ(rb.message, "reboot requested");
  EXPECT_EQ(read(root_ / "systemctl.log"), "restart a.service b.service\nreboot\n");
}

TEST_F(StepRunner, BadRequestsNameTheFix) {
  script("apply.sh", "exit 0\n");
  EXPECT_THROW(
      {
        try {
          run_step(req_);
        } catch (const core::InvalidInput& e) {
          EXPECT_NE(std::string(e.what()).find("apply-check.sh"), std::string::npos);
          throw;
        }
      },
      core::InvalidInput);
  req_.host_root = (base_ / "missing").string();
  EXPECT_THROW(run_step(req_), core::InvalidInput);
}

TEST(StepResultValue, StaysUnderTheTerminationMessageLimit) {
  StepRequest req;
  req.package = "p";
  req.version = "1.0.0";
  StepResult r;
  r.output = std::string(5000, 'x');
  r.check_output = std::string(5000, 'y');
  EXPECT_LE(core::to_json(result_to_value(req, r)).size(), 4096u);
}

// Verify mode (re-verification): only the listed stages' checks run, in order, each with its
// stage in GPUFLEET_STAGE; the stage scripts never run, the config the config stage left is
// not replaced, a passing key is never skipped, and the first failing check is reported with
// the last line it printed.
TEST_F(StepRunner, VerifyModeRunsOnlyTheChecksAndIsNeverSkipped) {
  script("apply.sh", "echo must-not-run > /etc/ran\n");
  script("apply-check.sh",
         "echo $GPUFLEET_STAGE >> /etc/checks\ntest \"$(cat /etc/value)\" = 1 || "
         "{ echo \"value is $(cat /etc/value), want 1\"; exit 3; }\n");
  script("config-check.sh",
         "echo $GPUFLEET_STAGE >> /etc/checks\n"
         "test \"$(cat $GPUFLEET_CONFIG_DIR/a.conf)\" = kept\n");
  write(root_ / "etc/value", "1");
  write(root_ / "var/lib/gpufleet/hostpkg/sysctl/1.0.0/config/a.conf", "kept");
  write(base_ / "config/a.conf", "new");
  req_.config_dir = (base_ / "config").string();
  req_.verify = {Stage::Apply, Stage::Config};
  req_.change = "r100";
  StepResult r = run_step(req_);
  EXPECT_EQ(r.status, StepStatus::Succeeded) << r.message << r.check_output;
  EXPECT_FALSE(fs::exists(root_ / "etc/ran")) << "a stage script ran";
  EXPECT_EQ(read(root_ / "etc/checks"), "apply\nconfig\n");
  EXPECT_EQ(read(root_ / "var/lib/gpufleet/hostpkg/sysctl/1.0.0/config/a.conf"), "kept");
  core::Value v = result();
  EXPECT_EQ(v.get_string({"stage"}), "verify");
  EXPECT_EQ(v.get_string({"key"}), "sysctl/verify/1.0.0/abc/r100");

  // The same key again runs again (a check proves the present, not the past), and drift shows.
  write(root_ / "etc/value", "0");
  r = run_step(req_);
  EXPECT_EQ(r.status, StepStatus::CheckFailed);
  EXPECT_NE(r.message.find("the apply check of sysctl 1.0.0 failed with exit code 3: value is 0, "
                           "want 1"),
            std::string::npos)
      << r.message;
  EXPECT_EQ(result().get_string({"status"}), "check-failed");

  req_.verify = {Stage::Uninstall};
  EXPECT_THROW(run_step(req_), core::InvalidInput) << "no uninstall-check.sh in the package";
}

}  // namespace
}  // namespace gpufleet::hostpkg
