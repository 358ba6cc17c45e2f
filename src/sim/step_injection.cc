#include "sim/step_injection.h"

#include <algorithm>

#include "core/text.h"

namespace gpufleet::sim {
namespace {

using core::FieldReader;

constexpr double kNeverS = 1e9;  // "never" for a container start: about 30 years

const char* outcome_name(StepOutcome o) {
  switch (o) {
    case StepOutcome::Fail: return "fail";
    case StepOutcome::Hang: return "hang";
    case StepOutcome::Slow: return "slow";
    case StepOutcome::Pending: return "pending";
    case StepOutcome::Crash: return "crash";
    case StepOutcome::Clear: return "clear";
  }
  return "?";
}

StepOutcome outcome_from(const std::string& s) {
  for (StepOutcome o : {StepOutcome::Fail, StepOutcome::Hang, StepOutcome::Slow,
                        StepOutcome::Pending, StepOutcome::Crash, StepOutcome::Clear}) {
    if (s == outcome_name(o)) return o;
  }
  return StepOutcome::Clear;
}

}  // namespace

StepInjection parse_step_injection(FieldReader& r, bool pod) {
  StepInjection i;
  i.package = r.string("package", "*");
  if (i.package.empty()) {
    r.fail("package", core::Value(i.package), "is empty",
           "name the package (a glob; \"*\" for every package and the interrupt)");
  }
  i.stage = r.one_of(
      "stage", "",
      {"", "apply", "upgrade", "uninstall", "config", "interrupt", "post-interrupt", "verify"});
  if (pod) {
    i.outcome = outcome_from(r.one_of("behaviour", std::nullopt, {"pending", "crash", "clear"}));
    i.exit_code = static_cast<int>(
        r.integer("exitCode", 137, 1, 255, "the step container's exit code, 1 to 255"));
  } else {
    i.outcome = outcome_from(r.one_of("outcome", "fail", {"fail", "hang", "slow", "clear"}));
    i.status = r.one_of("status", "failed", {"failed", "check-failed", "timed-out"});
    i.exit_code = static_cast<int>(
        r.integer("exitCode", 1, 1, 255, "the stage script's exit code, 1 to 255"));
    i.message = r.string("message", "");
    if (const core::Value* d = r.get("duration")) {
      i.duration_s = core::seconds_from(*d, r.source(), r.field("duration"));
    }
    if (i.outcome == StepOutcome::Slow && !i.duration_s) {
      core::fail_field(r.source(), r.field("duration"), "is required for outcome slow",
                       "say how long the step runs, e.g. duration: 30s");
    }
  }
  i.times = static_cast<int>(
      r.integer("times", 0, 0, 100000, "how many stage pods it decides (0: until cleared)"));
  return i;
}

core::Value step_injection_to_value(const StepInjection& i) {
  core::Value v = core::Value::map();
  const bool pod = i.outcome == StepOutcome::Pending || i.outcome == StepOutcome::Crash;
  v["type"] = pod ? "stagePod" : "hostStep";
  v[pod ? "behaviour" : "outcome"] = outcome_name(i.outcome);
  v["package"] = i.package;
  if (!i.stage.empty()) v["stage"] = i.stage;
  if (i.outcome == StepOutcome::Fail) v["status"] = i.status;
  if (i.outcome == StepOutcome::Fail || i.outcome == StepOutcome::Crash)
    v["exitCode"] = i.exit_code;
  if (i.duration_s) v["duration"] = *i.duration_s;
  if (i.times > 0) v["times"] = i.times;
  if (!i.message.empty()) v["message"] = i.message;
  return v;
}

std::string describe_step_injection(const StepInjection& i) {
  std::string s = std::string("stage pods of ") + i.package +
                  (i.stage.empty() ? "" : " stage " + i.stage) + ": " + outcome_name(i.outcome);
  if (i.outcome == StepOutcome::Fail)
    s += " (" + i.status + ", exit code " + std::to_string(i.exit_code) + ")";
  if (i.outcome == StepOutcome::Crash) s += " (exit code " + std::to_string(i.exit_code) + ")";
  if (i.times > 0) s += ", " + std::to_string(i.times) + " time(s)";
  return s;
}

void StepInjections::apply(const std::string& node, const StepInjection& i) {
  auto& list = by_node_[node];
  if (i.outcome == StepOutcome::Clear) {
    // Clear what this one would have matched: the same package glob (or all for "*") and
    // stage (or all stages when none is named).
    std::erase_if(list, [&](const Entry& e) {
      return (i.package == "*" || e.injection.package == i.package) &&
             (i.stage.empty() || e.injection.stage == i.stage);
    });
    return;
  }
  list.insert(list.begin(), Entry{i, 0});
}

std::optional<StepInjection> StepInjections::take(const std::string& node,
                                                  const std::string& package,
                                                  const std::string& stage) {
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return std::nullopt;
  auto& list = it->second;
  for (auto e = list.begin(); e != list.end(); ++e) {
    const StepInjection& i = e->injection;
    if (!i.stage.empty() && i.stage != stage) continue;
    if (!core::glob_match(i.package, package)) continue;
    StepInjection out = i;
    if (i.times > 0 && ++e->used >= i.times) list.erase(e);
    return out;
  }
  return std::nullopt;
}

InjectedStep plan_injected_step(const StepInjection& i, const std::string& stage,
                                const HostStepBehaviour* declared, PodPlan& plan) {
  InjectedStep out;
  auto each = [&plan](auto&& f) {
    for (auto& c : plan.containers) f(c);
  };
  switch (i.outcome) {
    case StepOutcome::Pending:
      // Nothing starts: the pod stays Pending (ContainerCreating) until deleted.
      out.run_step = false;
      plan.start_delay_s = kNeverS;
      for (auto& c : plan.init_containers) c.start_delay_s = kNeverS;
      each([](ContainerPlan& c) { c.start_delay_s = kNeverS; });
      break;
    case StepOutcome::Crash:
      // The runner dies before it writes a result: a non-zero exit, no termination message.
      out.run_step = false;
      each([&i](ContainerPlan& c) {
        c.exit_codes = {i.exit_code};
        c.termination_message.clear();
      });
      break;
    case StepOutcome::Hang:
      out.run_step = false;
      each([](ContainerPlan& c) { c.duration_s.reset(); });
      plan.duration_s.reset();
      break;
    case StepOutcome::Fail: {
      HostStepFailure f;
      f.stage = stage;
      f.status = i.status;
      f.exit_code = i.exit_code;
      f.message = i.message;
      out.replaced = declared != nullptr ? *declared : HostStepBehaviour{};
      out.replaced->failures.insert(out.replaced->failures.begin(), std::move(f));
      [[fallthrough]];
    }
    case StepOutcome::Slow:
      if (i.duration_s) {
        plan.duration_s = i.duration_s;
        each([&i](ContainerPlan& c) { c.duration_s = i.duration_s; });
      }
      break;
    case StepOutcome::Clear: break;
  }
  return out;
}

}  // namespace gpufleet::sim
