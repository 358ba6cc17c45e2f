// The step runner behind `gpufleet pkg-step`: runs one stage of one package on the node it
// is pinned to, inside the host (chroot into the host root, or nsenter into the namespaces
// of a host process), then the stage's check, under one timeout; writes a structured JSON
// result (the stage pod's termination message) and appends to a per-node history file.
//
// Package layout (the image's /pkg, passed as package_dir): <stage>.sh runs the stage and
// <stage>-check.sh verifies it (stage = apply | upgrade | uninstall | config |
// post-interrupt); config files are handed over in config_dir. Both are copied into the host
// under /var/lib/gpufleet/hostpkg/<package>/<version>/ so the scripts run with the host's
// own tools and libraries. The interrupt stage runs no package script: the runner restarts
// the named services (`systemctl restart ...`), all services, or reboots the host.
//
// Idempotence: every run is keyed package/stage/version/config-hash/change. A key whose last
// history entry is a success is skipped (status "skipped"), so re-running a stage pod after
// a crash never repeats finished work; a key with only a "started" entry (the runner died
// mid-step) runs again as the next attempt, which is why package steps must be re-runnable.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/value.h"
#include "hostpkg/spec.h"

namespace gpufleet::hostpkg {

struct StepRequest {
  std::string package;
  std::string version;
  std::string from_version;  // upgrade / downgrade
  Stage stage = Stage::Apply;
  std::string config_hash;
  std::string
      change;  // PlannedStep::change(): makes a later re-apply of the same content a new step
  std::vector<std::string> changed_keys;
  Interrupt interrupt;              // interrupt stage only
  std::string host_root = "/host";  // chroot target; ignored when host_pid > 0
  int host_pid = 0;                 // > 0: nsenter -t PID (mount, uts, ipc, net, pid)
  std::string package_dir = "/pkg";
  std::string config_dir;  // empty: no config files
  std::map<std::string, std::string> env;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // Non-empty: verify mode (re-verification, reverify.h): run only these stages' checks, in
  // order, stopping at the first failure; never skipped, nothing but the runner's own copy of
  // the package scripts is written to the host. Succeeded or check-failed (timed-out).
  std::vector<Stage> verify;
  std::string history_path;  // per-node history (JSON lines); empty: none
  std::string result_path;   // e.g. /dev/termination-log; empty: none
};

enum class StepStatus : unsigned char { Succeeded, Skipped, Failed, TimedOut, CheckFailed };
std::string_view step_status_name(StepStatus s) noexcept;

struct StepResult {
  StepStatus status = StepStatus::Failed;
  int exit_code = -1;
  int attempt = 1;
  std::string output;        // tail of the step's stdout+stderr
  std::string check_output;  // tail of the check's
  std::string message;       // one line for conditions and events
  double seconds = 0;
  [[nodiscard]] bool ok() const noexcept {
    return status == StepStatus::Succeeded || status == StepStatus::Skipped;
  }
};

// The idempotence key of a request.
std::string step_key(const StepRequest& req);

// Runs the request. Throws core::InvalidInput for a bad request (missing script, bad host
// root); everything that happens on the host is reported in the result instead.
StepResult run_step(const StepRequest& req);

// The result as written to the termination message: at most 4 KiB of JSON (Kubernetes'
// limit), output tails shortened first.
core::Value result_to_value(const StepRequest& req, const StepResult& r);

}  // namespace gpufleet::hostpkg
