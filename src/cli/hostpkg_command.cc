// `gpufleet pkg-step`: the host package step runner, run as the command of a hostpkg stage
// pod pinned to its node (see docs/hostpkg.md). It is a top-level command of its own so the
// agent's command file stays the agent engineer's; `gpufleet agent pkg-step` can forward here.
// Exit 0 when the step succeeded or was already done, 1 when it failed, timed out or its check
// failed, 2 for a bad request; the JSON result goes to --result and to stdout.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/duration.h"
#include "core/errors.h"
#include "core/json.h"
#include "hostpkg/step_runner.h"

namespace gpufleet::cli {
namespace {

struct PkgStepFlags {
  hostpkg::StepRequest req;
  std::string stage;
  std::string timeout = "10m";
  std::string interrupt = "none";
  std::vector<std::string> services;
  std::vector<std::string> env;
  std::vector<std::string> verify;
};

void run_pkg_step(PkgStepFlags& f) {
  for (const std::string& v : f.verify) {
    hostpkg::Stage st{};
    if (!hostpkg::parse_stage(v, st) || st == hostpkg::Stage::Interrupt) {
      throw core::InvalidInput("--verify '" + v +
                               "': list the stages whose checks to run, of apply, upgrade, "
                               "uninstall, config and post-interrupt (e.g. apply,post-interrupt)");
    }
    f.req.verify.push_back(st);
  }
  if (f.stage.empty() && !f.req.verify.empty()) f.stage = f.verify.front();
  if (!hostpkg::parse_stage(f.stage, f.req.stage)) {
    throw core::InvalidInput(
        "--stage '" + f.stage +
        "': use apply, upgrade, uninstall, config, interrupt or post-interrupt");
  }
  auto d = core::try_parse_duration(f.timeout);
  if (!d || d->count() <= 0)
    throw core::InvalidInput("--timeout '" + f.timeout + "': write a duration such as 90s or 10m");
  f.req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  core::Value iv = core::Value::map();
  iv["type"] = f.interrupt;
  if (!f.services.empty()) {
    core::Value l = core::Value::list();
    for (const std::string& s : f.services) l.push_back(s);
    iv["services"] = std::move(l);
  }
  f.req.interrupt = hostpkg::parse_interrupt(iv, "--interrupt");
  for (const std::string& kv : f.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw core::InvalidInput("--env '" + kv + "': write NAME=VALUE");
    f.req.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (f.req.history_path.empty()) {
    f.req.history_path = (f.req.host_pid > 0 ? "/proc/" + std::to_string(f.req.host_pid) + "/root"
                                             : f.req.host_root) +
                         "/var/lib/gpufleet/hostpkg/history.jsonl";
  }
  hostpkg::StepResult r = hostpkg::run_step(f.req);
  std::cout << core::to_json(hostpkg::result_to_value(f.req, r)) << "\n";
  if (!r.ok()) set_exit_code(kExitError);
}

void setup_pkg_step(CLI::App& root) {
  auto flags = std::make_shared<PkgStepFlags>();
  auto* cmd = root.add_subcommand(
      "pkg-step", "Run one hostpkg stage of a package inside the host (stage pods run this)");
  cmd->add_option("--package", flags->req.package, "package name")->required();
  cmd->add_option("--version", flags->req.version,
                  "package version being installed (uninstall: removed)")
      ->required();
  cmd->add_option("--from-version", flags->req.from_version,
                  "installed version (upgrade, downgrade)");
  cmd->add_option("--stage", flags->stage,
                  "apply | upgrade | uninstall | config | interrupt | post-interrupt (required "
                  "unless --verify is given)");
  cmd->add_option("--verify", flags->verify,
                  "verify mode (re-verification): run only these stages' checks, in order, "
                  "e.g. apply,config,post-interrupt; never skipped, changes nothing on the host")
      ->delimiter(',');
  cmd->add_option("--config-hash", flags->req.config_hash,
                  "hash of the package's configMap (idempotence key)");
  cmd->add_option("--change", flags->req.change,
                  "change id of the step (the planner's g<generation>)");
  cmd->add_option("--changed-keys", flags->req.changed_keys,
                  "configMap keys that changed (config stage)")
      ->delimiter(',');
  cmd->add_option("--interrupt", flags->interrupt,
                  "interrupt stage: none | reboot | restartServices | restartAllServices");
  cmd->add_option("--services", flags->services, "services for restartServices")->delimiter(',');
  cmd->add_option("--host-root", flags->req.host_root,
                  "the host's / mounted in the pod (chroot target)");
  cmd->add_option(
      "--host-pid", flags->req.host_pid,
      "enter the namespaces of this host process with nsenter instead (e.g. 1 with hostPID)");
  cmd->add_option("--package-dir", flags->req.package_dir,
                  "directory holding <stage>.sh and <stage>-check.sh");
  cmd->add_option("--config-dir", flags->req.config_dir,
                  "directory of configMap files handed to the steps");
  cmd->add_option("--env", flags->env, "NAME=VALUE for the steps (repeatable)");
  cmd->add_option("--timeout", flags->timeout, "time for the step and its check together");
  cmd->add_option("--history", flags->req.history_path,
                  "per-node history file (default: <host>/var/lib/gpufleet/hostpkg/history.jsonl)");
  cmd->add_option("--result", flags->req.result_path,
                  "write the JSON result here (e.g. /dev/termination-log)");
  cmd->callback([flags] { run_pkg_step(*flags); });
}

const CommandRegistration kPkgStep(setup_pkg_step);

}  // namespace
}  // namespace gpufleet::cli
