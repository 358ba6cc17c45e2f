// One transition of a node in progress (the drive loop of node_drive.cc: observe -> decide ->
// act). The loop observes the Node, the pods on it, the node's plan (stage_plan.h) and the
// stage pod of the plan's next step into NodeStepFacts; decide_node_step says what happens
// next, in the rollout's order: cordon -> wait for protected pods -> drain -> the plan's next
// step (a stage pod; a reboot confirmed by the boot ID changing) -> validation by certify when
// spec.validation asks for it (a ValidationRequest, named in the record first) -> done. The loop
// acts (Node patches, evictions, pod creates) and observes again. Pure: the clock is an argument,
// so every branch is unit-tested without an API server (tests/hostpkg/node_step_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/stage_plan.h"

namespace gpufleet::hostpkg {

// How long past its stage's timeout a stage pod may run before the node fails: the runner
// enforces the timeout itself; this is for a pod that never started or lost its node.
inline constexpr std::chrono::minutes kStagePodGrace{3};

// The ValidationRequest a node's validation is asked with: from the set, the node and the
// record's generation when it was asked, so a restarted controller names the same one (and a
// later change, or a retry, a new one). A DNS subdomain of at most 253 characters.
std::string validation_request_name(const std::string& set, const std::string& node,
                                    std::int64_t generation);

// What a ValidationRequest says of one node: its phase ("" : no status yet) and, once Failed
// or Expired, why (the node's failed result: category, reason and message; else the
// request's message).
struct ValidationSeen {
  std::string phase;
  std::string why;
};
ValidationSeen validation_seen(const core::Value& request, const std::string& node);

// What one round of the drive loop saw of a node whose record is InProgress.
struct NodeStepFacts {
  // Before any step: the cordon, protected pods, the drain.
  bool cordoned = false;                       // spec.unschedulable (by anyone)
  std::vector<std::string> protected_running;  // protected pods not finished (namespace/name)
  std::int64_t started = 0;                    // the record's start (Unix seconds; 0: unknown)
  std::chrono::seconds protected_wait{0};      // spec.protectedPods.waitTimeout
  bool evictions_left = false;                 // pods the drain must still evict
  // The step: the node's plan from its record; the rest is about plan.steps[0].
  NodePlan plan;
  std::string recorded_boot;  // the record's boot ID (set before a reboot is asked for)
  std::string boot;           // the Node's status.nodeInfo.bootID
  bool ready = false;         // the Node's Ready condition
  std::string pod_name;       // the step's stage pod
  bool pod_exists = false;
  std::optional<StageOutcome> outcome;  // the stage pod's result, once it finished
  std::optional<std::chrono::system_clock::time_point> pod_created;
  std::chrono::system_clock::time_point now;
  // Validation, looked at once the plan is empty.
  ValidateWhen validate_when = ValidateWhen::Never;  // spec.validation.when
  bool interrupted = false;         // the record: this change delivered an interrupt
  std::string validation;           // the record's ValidationRequest ("" : not asked yet)
  std::string validation_name;      // the name to ask with (validation_request_name)
  bool validation_exists = false;   // the request is in the cache
  ValidationSeen validation_state;  // what it says of the node
};

struct NodeStep {
  enum class Kind {
    Cordon,            // cordon it (again, if a person uncordoned it between steps); next round
    WaitProtected,     // protected pods still run: wait (`report`: past the wait, say which)
    Drain,             // evict the pods left (PodDisruptionBudgets may refuse); next pass
    Fail,              // the node fails with `why` in its record (it stays cordoned)
    Finish,            // the plan is empty: record Done and release the cordon share
    RememberBoot,      // a reboot is next: record `boot_id` before asking for it; next round
    StepDone,          // plan.steps[0] finished: record it; then Done, or the next round
    CreatePod,         // create the step's stage pod; next pass
    Wait,              // the stage pod, the reboot, or certify's verdict is still under way
    AskValidation,     // record `validation` (the request's name) before creating it; next round
    CreateValidation,  // create the record's ValidationRequest (again, if deleted); next pass
  };
  Kind kind = Kind::Wait;
  std::string why;          // Fail: the failure; WaitProtected with `report`: "ProtectedPods: ..."
  bool report = false;      // WaitProtected: the pods ran past spec.protectedPods.waitTimeout
  std::string boot_id;      // RememberBoot: the boot to compare with ("unknown" when none shows)
  bool reboot = false;      // StepDone: the reboot was confirmed (the record's boot ID is cleared)
  std::string result;       // the stage result to count (StepDone, Fail); "" : none
  std::string interrupt;    // StepDone: the interrupt kind delivered; "" : none
  std::string validation;   // AskValidation: the ValidationRequest's name
  bool validating = false;  // Wait, CreateValidation: the node waits on certify's verdict
  // Fail of a reboot: the result is counted once the failure is written (elsewhere: when the
  // step's outcome is read, before the write).
  bool count_after_write = false;
};

NodeStep decide_node_step(const NodeStepFacts& facts);

}  // namespace gpufleet::hostpkg
