// What a hostpkg stage pod does on a simulated node (docs/sim.md "Host package steps"). A
// stage pod is any pod labelled hostpkg.gpufleet.io/stage; the simulated kubelet runs it
// against the node's HostModel instead of a real host and writes the same JSON result to the
// termination message that `gpufleet pkg-step` writes on a real one (step_runner.h), so the
// controller cannot tell the difference.
//
// A test package declares its effect and failure modes in the behaviour that matches its pods
// (by image glob, as any behaviour), under `hostStep`:
//
//   - name: sysctl-package
//     match: {image: "*/sysctl*"}
//     startDelay: 0s
//     duration: 500ms
//     hostStep:
//       effects:                          # per stage; {version} is replaced
//         apply:  {sysctls: {vm.max_map_count: "1048576"}, files: {/etc/pkg/version: "{version}"},
//                  kernelArgs: {add: [iommu=pt]}, package: {name: pkg, reboot: true},
//                  driver: "{version}"}       # the GPU driver, current from the next boot
//         uninstall: {files: {/etc/pkg/version: null}}
//       failures:                         # first match wins
//         - {stage: apply, nodes: "gpu-000[12]", status: check-failed, times: 1, message: "..."}
//         - {stage: config, exitCode: 3}   # the script's exit code in the result (default 1)
//       rebootDown: 2s                    # how long a reboot keeps the node NotReady
//
// The interrupt stage needs no declaration: reboot reboots the node at the end of the pod's
// duration (the pod dies with it; the boot ID changes), restartServices / restartAllServices
// append to /var/lib/gpufleet/hostpkg/restarts on the host model, one line per interrupt.
// Every step appends "<key> <status>" to /var/lib/gpufleet/hostpkg/history; a key that
// succeeded before is "skipped" without effect (the runner's idempotence). Verify pods (stage
// label "verify", stages in the hostpkg.gpufleet.io/verify annotation) change nothing: their
// checks compare the declared effects with the host model, and they are never skipped.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"
#include "sim/host_model.h"

namespace gpufleet::sim {

inline constexpr const char* kHostStepHistory = "/var/lib/gpufleet/hostpkg/history";
inline constexpr const char* kHostStepRestarts = "/var/lib/gpufleet/hostpkg/restarts";

struct HostEffect {
  std::map<std::string, std::string> sysctls;
  std::map<std::string, std::optional<std::string>> files;  // nullopt: remove
  std::vector<std::string> kernel_args_add, kernel_args_remove;
  std::string package;  // installs package=version when set
  bool package_reboot = false;
  std::string driver;  // the GPU driver version, taking effect at the next boot; "" = unchanged
};

struct HostStepFailure {
  std::string stage;              // "" = any stage
  std::string nodes;              // glob over node names; "" = every node
  std::string status = "failed";  // failed | check-failed | timed-out
  int times = 0;                  // failing attempts before success; 0 = always
  std::string message;
  int exit_code = 1;  // the stage script's exit code in the result (pkg-step itself exits 1)
};

struct HostStepBehaviour {
  std::map<std::string, HostEffect> effects;  // by stage name
  std::vector<HostStepFailure> failures;
  double reboot_down_s = 5;
};

// Reads a behaviour's `hostStep`; throws core::InvalidInput naming field, value and fix.
HostStepBehaviour parse_host_step(const core::Value& v, const std::string& source,
                                  const std::string& path);

// One step as the stage pod asks for it (labels and annotations the controller sets).
struct HostStepRequest {
  std::string node;
  std::string package;
  std::string stage;
  std::string version;
  std::string key;
  std::string interrupt;  // interrupt stage: none | reboot | restartServices | restartAllServices
  std::vector<std::string> services;
  // Verify pods (stage "verify", re-verification): the stages whose checks run. The simulated
  // check of a stage compares the stage's declared effects (sysctls, files, the running
  // driver) with the host
  // model, so a test drifts a node by changing its host (a `host` event); a failure declared
  // with `stage: verify` fails the check outright.
  std::vector<std::string> verify;
};
// nullopt for a pod that is not a stage pod.
std::optional<HostStepRequest> host_step_request(const core::Value& pod);

struct HostStepOutcome {
  int exit_code = 0;
  std::string result_json;  // the termination message
  bool reboot = false;      // the node reboots at the end of the pod's run
};

// Runs the step on `host` (effects, history, restarts) and returns what the pod reports.
HostStepOutcome run_host_step(const HostStepRequest& req, const HostStepBehaviour* behaviour,
                              HostModel& host);

}  // namespace gpufleet::sim
