// `gpufleet sim`: run a simulated GPU fleet (logic in src/sim/kubelet/sim_run.cc), and its
// control commands `sim inject`, `sim status`, `sim validate`.
#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/duration.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"
#include "sim/atomic_file.h"
#include "sim/control_inbox.h"
#include "sim/kubelet/sim_run.h"
#include "sim/node_identity.h"
#include "sim/scenario.h"

namespace gpufleet::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

struct SimFlags {
  sim::SimRunOptions run;
  std::string duration;
  std::string lease_renew = "10s";
  std::string status_report = "5m";
  std::string event;
  std::string event_file;
  std::string state_dir;
  std::string fleet;
  std::string scenario;
};

std::chrono::milliseconds millis(const std::string& flag, const std::string& text) {
  try {
    return std::chrono::duration_cast<std::chrono::milliseconds>(core::parse_duration(text));
  } catch (const core::InvalidInput&) {
    throw core::InvalidInput(flag + " value \"" + text + "\" is not a duration (e.g. 10s, 5m)");
  }
}

void run_sim(SimFlags& f) {
  if (!f.duration.empty()) {
    f.run.duration_s = std::chrono::duration<double>(core::parse_duration(f.duration)).count();
  }
  f.run.kubelet.lease_renew = millis("--lease-renew", f.lease_renew);
  f.run.kubelet.status_report = millis("--status-report", f.status_report);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  set_exit_code(sim::run_simulation(f.run, g_stop));
}

void run_inject(const SimFlags& f) {
  if (f.event.empty() == f.event_file.empty()) {
    throw core::InvalidInput("give exactly one of --event '<yaml map>' or -f <file>");
  }
  core::Value doc = f.event.empty()
                        ? core::parse_yaml(sim::read_text_file(f.event_file), f.event_file)
                        : core::parse_yaml(f.event, "--event");
  sim::parse_event(doc, f.event.empty() ? f.event_file : "--event", "event",
                   false);  // validate now
  std::cout << sim::submit_control_event(f.state_dir, doc) << "\n";
}

void run_status(const SimFlags& f) {
  std::cout << sim::read_text_file(sim::status_file_path(f.state_dir));
}

void run_validate(const SimFlags& f) {
  if (f.fleet.empty() == f.scenario.empty()) {
    throw core::InvalidInput("give exactly one of --fleet or --scenario");
  }
  sim::Scenario sc;
  if (!f.scenario.empty()) {
    sc = sim::load_scenario_file(f.scenario);
  } else {
    sc.fleet = sim::load_fleet_file(f.fleet);
  }
  std::cout << "fleet " << sc.fleet.name << ": " << sc.fleet.node_count() << " nodes\n";
  for (std::size_t p = 0; p < sc.fleet.pools.size(); ++p) {
    const auto& pool = sc.fleet.pools[p];
    std::cout << "  pool " << pool.name << ": " << pool.count << " x " << pool.gpus_per_node << " "
              << pool.gpu->key << ", " << pool.nodes_per_rack << " nodes per rack";
    if (pool.count > 0) {
      std::cout << ", " << sim::make_node_identity(sc.fleet, p, 0).name << " .. "
                << sim::make_node_identity(sc.fleet, p, pool.count - 1).name;
    }
    std::cout << "\n";
  }
  if (!f.scenario.empty()) std::cout << "timeline: " << sc.timeline.size() << " events\n";
}

void setup_sim(CLI::App& root) {
  auto flags = std::make_shared<SimFlags>();
  auto* cmd =
      root.add_subcommand("sim", "Run a simulated GPU fleet against a Kubernetes API server");
  cmd->add_option("--fleet", flags->run.fleet_file, "fleet file (YAML, kind: Fleet)");
  cmd->add_option("--scenario", flags->run.scenario_file, "scenario file (fleet + timeline)");
  cmd->add_option("--behaviours", flags->run.behaviours_file, "pod behaviour table (YAML)");
  cmd->add_option("--kubeconfig", flags->run.kubeconfig,
                  "kubeconfig (default: $KUBECONFIG, ~/.kube/config)");
  cmd->add_option("--state-dir", flags->run.kubelet.state_dir,
                  "where node signal files, control inbox and status.json live");
  cmd->add_option("--time-scale", flags->run.kubelet.time_scale, "simulated seconds per second");
  cmd->add_option("--duration", flags->duration, "stop after this much simulated time (e.g. 10m)");
  cmd->add_option("--listen", flags->run.listen,
                  "serve /status, /healthz, /readyz, /metrics (e.g. 127.0.0.1:9470)");
  cmd->add_option("--workers", flags->run.kubelet.workers, "concurrent API requests");
  cmd->add_option("--lease-renew", flags->lease_renew, "node lease renewal interval");
  cmd->add_option("--status-report", flags->status_report, "node status report interval");
  cmd->add_flag("--keep-nodes", flags->run.keep_nodes, "leave the Nodes in the cluster on exit");

  auto* inject = cmd->add_subcommand(
      "inject", "Send an event (fault, reboot, scale, host change) to a running simulator");
  inject->add_option("--state-dir", flags->state_dir, "the running simulator's --state-dir")
      ->required();
  inject->add_option("--event", flags->event,
                     "the event as YAML, e.g. '{node: n1, type: xid, gpu: 3, code: 79}'");
  inject->add_option("-f,--file", flags->event_file, "a file holding the event");
  inject->callback([flags] { run_inject(*flags); });

  auto* status = cmd->add_subcommand("status", "Print a running simulator's status summary");
  status->add_option("--state-dir", flags->state_dir, "the running simulator's --state-dir")
      ->required();
  status->callback([flags] { run_status(*flags); });

  auto* validate =
      cmd->add_subcommand("validate", "Check a fleet or scenario file and summarise it");
  validate->add_option("--fleet", flags->fleet, "fleet file");
  validate->add_option("--scenario", flags->scenario, "scenario file");
  validate->callback([flags] { run_validate(*flags); });

  cmd->callback([flags, cmd] {
    if (!cmd->get_subcommands().empty()) return;  // a control subcommand ran
    run_sim(*flags);
  });
}

const CommandRegistration kSim(setup_sim);

}  // namespace
}  // namespace gpufleet::cli
