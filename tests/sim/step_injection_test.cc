// Stage outcomes injected at run time (hostStep / stagePod events): parsing and its errors,
// which pods they decide (node, package, stage, times, newest first, clear), and what they do
// to a pod's plan and the step's result.
#include "sim/step_injection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"
#include "sim/host_step.h"
#include "sim/scenario.h"

namespace gpufleet::sim {
namespace {

using ::testing::HasSubstr;

SimEvent event(const std::string& yaml) {
  return parse_event(core::parse_yaml(yaml), "--event", "event", false);
}

std::string error_of(const std::string& yaml) {
  try {
    event(yaml);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(StepInjection, ParsesBothTypesAndNamesBadFields) {
  SimEvent f = event(
      "{nodes: [a, b], type: hostStep, package: sysctl, stage: apply, exitCode: 3, times: 2}");
  EXPECT_EQ(f.kind, EventKind::StepOutcome);
  EXPECT_EQ(f.step.outcome, StepOutcome::Fail);
  EXPECT_EQ(f.step.exit_code, 3);
  EXPECT_EQ(f.step.times, 2);
  EXPECT_EQ(event("{node: a, type: stagePod, behaviour: crash}").step.exit_code, 137);
  EXPECT_EQ(event("{node: a, type: hostStep, outcome: slow, duration: 30s}").step.duration_s, 30);
  core::Value back = event_to_value(event("{node: a, type: stagePod, behaviour: pending}"));
  EXPECT_EQ(back.get_string({"type"}), "stagePod");
  EXPECT_EQ(event(core::to_json(back)).step.outcome, StepOutcome::Pending) << "round trip";

  EXPECT_THAT(error_of("{node: a, type: hostStep, outcome: boom}"),
              HasSubstr("event.outcome: value \"boom\""));
  EXPECT_THAT(error_of("{node: a, type: hostStep, outcome: boom}"), HasSubstr("fail"));
  EXPECT_THAT(error_of("{node: a, type: hostStep, outcome: slow}"),
              HasSubstr("event.duration: is required for outcome slow"));
  EXPECT_THAT(error_of("{node: a, type: hostStep, stage: install}"), HasSubstr("event.stage"));
  EXPECT_THAT(error_of("{node: a, type: stagePod}"), HasSubstr("event.behaviour"));
  EXPECT_THAT(error_of("{node: a, type: stagePod, behaviour: crash, exitCode: 0}"),
              HasSubstr("event.exitCode"));
  EXPECT_THAT(error_of("{node: a, type: stagePod, behaviour: crash, outcome: fail}"),
              HasSubstr("outcome"));
  EXPECT_THAT(error_of("{type: hostStep}"), HasSubstr("event.node: is required"));
}

TEST(StepInjection, DecidesMatchingPodsNewestFirstForTimesUntilCleared) {
  StepInjections t;
  StepInjection fail;
  fail.package = "sys*";
  fail.stage = "apply";
  t.apply("n1", fail);
  EXPECT_FALSE(t.take("n2", "sysctl", "apply")) << "another node";
  EXPECT_FALSE(t.take("n1", "sysctl", "config")) << "another stage";
  EXPECT_FALSE(t.take("n1", "other", "apply")) << "another package";
  EXPECT_TRUE(t.take("n1", "sysctl", "apply"));
  EXPECT_TRUE(t.take("n1", "sysctl", "apply")) << "times 0: until cleared";
  StepInjection once;
  once.outcome = StepOutcome::Crash;
  once.times = 1;
  t.apply("n1", once);  // newer, every package and stage (the interrupt's "" too)
  EXPECT_EQ(t.take("n1", "sysctl", "apply")->outcome, StepOutcome::Crash);
  EXPECT_EQ(t.take("n1", "sysctl", "apply")->outcome, StepOutcome::Fail) << "crash expired";
  StepInjection clear;
  clear.outcome = StepOutcome::Clear;
  t.apply("n1", clear);
  EXPECT_FALSE(t.take("n1", "sysctl", "apply"));
}

TEST(StepInjection, ChangesThePlanAndTheResult) {
  auto plan = [] {
    PodPlan p;
    p.init_containers.resize(1);
    p.containers.resize(1);
    p.containers[0].duration_s = 0.2;
    return p;
  };
  StepInjection i;
  i.outcome = StepOutcome::Pending;
  PodPlan pending = plan();
  EXPECT_FALSE(plan_injected_step(i, "apply", nullptr, pending).run_step);
  EXPECT_GT(pending.init_containers[0].start_delay_s, 1e8);
  EXPECT_GT(pending.containers[0].start_delay_s, 1e8);

  i.outcome = StepOutcome::Crash;
  i.exit_code = 137;
  PodPlan crash = plan();
  EXPECT_FALSE(plan_injected_step(i, "apply", nullptr, crash).run_step);
  EXPECT_EQ(crash.containers[0].exit_codes, std::vector<int>{137});

  i.outcome = StepOutcome::Hang;
  PodPlan hang = plan();
  EXPECT_FALSE(plan_injected_step(i, "apply", nullptr, hang).run_step);
  EXPECT_FALSE(hang.containers[0].duration_s);

  i.outcome = StepOutcome::Slow;
  i.duration_s = 30;
  PodPlan slow = plan();
  InjectedStep s = plan_injected_step(i, "apply", nullptr, slow);
  EXPECT_TRUE(s.run_step);
  EXPECT_EQ(s.behaviour(nullptr), nullptr) << "the declared behaviour decides the outcome";
  EXPECT_EQ(slow.containers[0].duration_s, 30);

  // Fail: the step runs and reports the injected status, exit code and message, ahead of the
  // behaviour table's failures and effects.
  i.outcome = StepOutcome::Fail;
  i.exit_code = 3;
  i.duration_s.reset();
  i.message = "apply.sh exited 3";
  HostStepBehaviour declared;
  declared.effects["apply"].files["/etc/x"] = "1";
  PodPlan failing = plan();
  InjectedStep f = plan_injected_step(i, "apply", &declared, failing);
  ASSERT_TRUE(f.run_step);
  HostModel host;
  HostStepRequest req{"n1", "sysctl", "apply", "1.0.0", "sysctl/apply/1.0.0//g0", "", {}, {}};
  HostStepOutcome o = run_host_step(req, f.behaviour(&declared), host);
  EXPECT_EQ(o.exit_code, 1);
  core::Value r = core::parse_json(o.result_json);
  EXPECT_EQ(r.get_string({"status"}), "failed");
  EXPECT_EQ(r.get({"exitCode"})->as_int(), 3);
  EXPECT_EQ(r.get_string({"message"}), "apply.sh exited 3");
  EXPECT_FALSE(host.read("/etc/x")) << "a failed step has no effect";
  EXPECT_THAT(*host.read(kHostStepHistory), HasSubstr("sysctl/apply/1.0.0//g0 failed"));
}

// A driver package (the host image owns the driver): apply stages the version, it is in use
// only after the reboot, and the verify check reads the driver in use, so a verify before the
// reboot fails and one after passes.
TEST(HostStep, DriverIsStagedUntilTheRebootAndVerifiedInUse) {
  HostStepBehaviour b = parse_host_step(
      core::parse_yaml("effects: {apply: {driver: \"{version}\"}}\nrebootDown: 1s\n"), "fleet.yaml",
      "behaviours[0].hostStep");
  ASSERT_EQ(b.effects.at("apply").driver, "{version}");
  HostModel host("6.8.0-60-generic", "570.148.08", "");
  HostStepRequest apply{
      "n1", "nvidia-driver", "apply", "580.126.20", "nvidia-driver/apply/580.126.20//g1", "", {},
      {}};
  ASSERT_EQ(run_host_step(apply, &b, host).exit_code, 0);
  EXPECT_EQ(host.driver_version(), "570.148.08") << "staged, not in use before the boot";

  HostStepRequest verify{"n1", "nvidia-driver", "verify", "580.126.20", "", "", {}, {"apply"}};
  HostStepOutcome early = run_host_step(verify, &b, host);
  EXPECT_EQ(early.exit_code, 1);
  EXPECT_THAT(core::parse_json(early.result_json).get_string({"message"}),
              HasSubstr("the GPU driver in use is 570.148.08, want 580.126.20"));

  host.reboot();
  EXPECT_EQ(host.driver_version(), "580.126.20");
  EXPECT_EQ(run_host_step(verify, &b, host).exit_code, 0);

  // A driver that is not a string is named with its field.
  try {
    parse_host_step(core::parse_yaml("effects: {apply: {driver: [1]}}\n"), "fleet.yaml",
                    "behaviours[0].hostStep");
    FAIL() << "a list was taken as a driver version";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("effects.apply.driver"));
  }
}

}  // namespace
}  // namespace gpufleet::sim
