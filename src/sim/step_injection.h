// Outcomes of hostpkg stage pods injected into a running simulator (`gpufleet sim inject`,
// event types hostStep and stagePod; docs/sim.md "Injected stage outcomes"), per node and
// package: a test makes a step fail, hang or run slow, or its pod stay Pending or crash, at the
// moment it wants, without restarting the simulator with another behaviour table. An
// injection is consulted when the kubelet takes a stage pod and wins over the behaviour table.
//
//   {node: gpu-001, type: hostStep, package: sysctl, stage: apply, outcome: fail, exitCode: 3}
//   {nodes: [gpu-002], type: hostStep, outcome: slow, duration: 30s, times: 1}
//   {pool: gpu, type: stagePod, package: "*", behaviour: pending}
//   {node: gpu-001, type: hostStep, outcome: clear}      # also clears stagePod injections
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/field_reader.h"
#include "sim/behaviour.h"
#include "sim/host_step.h"

namespace gpufleet::sim {

enum class StepOutcome {
  Fail,     // the step runs and fails: status, the script's exit code, message
  Hang,     // the step container runs until the pod is deleted; the step never finishes
  Slow,     // the step runs `duration`, then succeeds as the behaviour table says
  Pending,  // the pod's containers never start (image pull, admission stuck): Pending
  Crash,    // the step container exits with `exit_code` and no step result
  Clear,    // removes the node's injections matching package and stage
};

struct StepInjection {
  std::string package = "*";  // glob over the package label ("" on the interrupt pod)
  std::string stage;          // "" = every stage; else a stage name or "verify"
  StepOutcome outcome = StepOutcome::Fail;
  std::string status = "failed";     // Fail: failed | check-failed | timed-out
  int exit_code = 1;                 // Fail: the script's; Crash: the container's (137)
  std::optional<double> duration_s;  // Slow (required), Fail (optional): the step's run time
  int times = 0;                     // pods it decides before it expires; 0 = until cleared
  std::string message;               // Fail: the result's message
};

// Reads the fields of a hostStep (`pod` false) or stagePod (`pod` true) event from `r`.
// Throws core::InvalidInput naming the field, the value and the fix.
StepInjection parse_step_injection(core::FieldReader& r, bool pod);
core::Value step_injection_to_value(const StepInjection& i);
std::string describe_step_injection(const StepInjection& i);

// The injections of every node, newest first.
class StepInjections {
 public:
  void apply(const std::string& node, const StepInjection& i);  // adds, or clears for Clear
  // The newest injection matching this pod's node, package and stage, one use consumed.
  std::optional<StepInjection> take(const std::string& node, const std::string& package,
                                    const std::string& stage);
  void forget(const std::string& node) { by_node_.erase(node); }

 private:
  struct Entry {
    StepInjection injection;
    int used = 0;
  };
  std::map<std::string, std::vector<Entry>> by_node_;
};

// How an injection changes a stage pod's run: the plan's timing and exit, and whether the step
// runs at all (with `behaviour()` in place of the declared one).
struct InjectedStep {
  bool run_step = true;
  std::optional<HostStepBehaviour> replaced;
  [[nodiscard]] const HostStepBehaviour* behaviour(const HostStepBehaviour* declared) const {
    return replaced ? &*replaced : declared;
  }
};
InjectedStep plan_injected_step(const StepInjection& i, const std::string& stage,
                                const HostStepBehaviour* declared, PodPlan& plan);

}  // namespace gpufleet::sim
