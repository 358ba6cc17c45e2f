// `gpufleet sim`: run a simulated GPU fleet (logic in src/sim/kubelet/sim_run.cc), and its
// control commands `sim inject`, `sim status`, `sim validate`.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/time.h"
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
  bool detach = false;
  std::string kubelet_cert;
  std::string kubelet_key;
  std::string kubelet_client_ca;
};

std::string pid_file(const std::string& state_dir) { return state_dir + "/sim.pid"; }

// Parent side of --detach: wait until the child has registered its fleet (status.json says
// so), or died, or two minutes passed.
int wait_for_child(pid_t child, const std::string& state_dir) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      std::cerr << "error: the simulator exited early; see " << state_dir << "/sim.log\n";
      return kExitError;
    }
    try {
      core::Value s =
          core::parse_json(sim::read_text_file(sim::status_file_path(state_dir)), "status");
      const core::Value* reg = s.find("registered");
      const core::Value* nodes = s.find("nodes");
      if (reg && nodes && nodes->as_int() > 0 && reg->as_int() >= nodes->as_int()) {
        std::cout << "simulator running (pid " << child << ", " << nodes->as_int()
                  << " nodes); status: gpufleet sim status --state-dir " << state_dir
                  << "; stop: gpufleet sim stop --state-dir " << state_dir << "\n";
        return kExitOk;
      }
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::cerr << "error: the simulator did not register its fleet within 2 minutes; see " << state_dir
            << "/sim.log\n";
  return kExitError;
}

// CLI11 checks duration flags before any command runs (exit 2 with the flag named).
const CLI::Validator kDuration(
    [](std::string& text) -> std::string {
      return core::try_parse_duration(text) ? ""
                                            : "\"" + text + "\" is not a duration (e.g. 10s, 5m)";
    },
    "DURATION");

std::chrono::milliseconds millis(const std::string& text) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(core::parse_duration(text));
}

void run_sim(SimFlags& f) {
  if (!f.duration.empty()) {
    f.run.duration_s = std::chrono::duration<double>(core::parse_duration(f.duration)).count();
  }
  f.run.kubelet.lease_renew = millis(f.lease_renew);
  f.run.kubelet.status_report = millis(f.status_report);
  if (!f.kubelet_cert.empty()) f.run.kubelet.kubelet_cert_pem = sim::read_text_file(f.kubelet_cert);
  if (!f.kubelet_key.empty()) f.run.kubelet.kubelet_key_pem = sim::read_text_file(f.kubelet_key);
  if (!f.kubelet_client_ca.empty())
    f.run.kubelet.kubelet_client_ca_pem = sim::read_text_file(f.kubelet_client_ca);
  if (f.detach) {
    std::filesystem::create_directories(f.run.kubelet.state_dir);
    std::filesystem::remove(sim::status_file_path(f.run.kubelet.state_dir));
    // Fork before any thread exists; the child runs the simulator in its own session.
    pid_t child = ::fork();
    if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (child > 0) {
      set_exit_code(wait_for_child(child, f.run.kubelet.state_dir));
      return;
    }
    ::setsid();
    std::string log = f.run.kubelet.state_dir + "/sim.log";
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (null >= 0) ::dup2(null, 0);
    sim::write_file_atomic(pid_file(f.run.kubelet.state_dir), std::to_string(::getpid()) + "\n");
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  set_exit_code(sim::run_simulation(f.run, g_stop));
}

void run_inject(const SimFlags& f) {
  core::Value doc = f.event.empty()
                        ? core::parse_yaml(sim::read_text_file(f.event_file), f.event_file)
                        : core::parse_yaml(f.event, "--event");
  sim::parse_event(doc, f.event.empty() ? f.event_file : "--event", "event",
                   false);  // validate now
  std::cout << sim::submit_control_event(f.state_dir, doc) << "\n";
}

void run_stop(const SimFlags& f) {
  std::string text = sim::read_text_file(pid_file(f.state_dir));
  pid_t pid = static_cast<pid_t>(std::stol(text));
  if (pid <= 1 || ::kill(pid, SIGTERM) != 0) {
    throw core::InvalidInput("no running simulator with pid " + std::to_string(pid) + " (from " +
                             pid_file(f.state_dir) + ")");
  }
  // The simulator removes its Nodes before it exits (unless --keep-nodes).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::filesystem::remove(pid_file(f.state_dir));
  std::cout << "simulator " << pid << " stopped\n";
}

void run_status(const SimFlags& f) {
  std::cout << sim::read_text_file(sim::status_file_path(f.state_dir));
}

void run_validate(const SimFlags& f) {
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
  auto* state_dir = cmd->add_option("--state-dir", flags->run.kubelet.state_dir,
                                    "where node signal files, control inbox and status.json live");
  cmd->add_option("--time-scale", flags->run.kubelet.time_scale, "simulated seconds per second");
  cmd->add_option("--duration", flags->duration, "stop after this much simulated time (e.g. 10m)")
      ->check(kDuration);
  cmd->add_option("--listen", flags->run.listen,
                  "serve /status, /healthz, /readyz, /metrics (e.g. 127.0.0.1:9470)");
  auto* kubelet_listen = cmd->add_option(
      "--kubelet-listen", flags->run.kubelet.kubelet_listen,
      "serve the kubelet endpoint (pods/log) for every node at this IP:port over HTTPS "
      "(e.g. 127.0.0.1:0); the Nodes advertise it as their ExternalIP and kubelet port");
  auto* kubelet_cert =
      cmd->add_option(
             "--kubelet-cert", flags->kubelet_cert,
             "PEM serving certificate of the kubelet endpoint, signed by the API "
             "server's --kubelet-certificate-authority (kube-local: pki/kubelet-serving.crt)")
          ->check(CLI::ExistingFile);
  auto* kubelet_key = cmd->add_option("--kubelet-key", flags->kubelet_key, "its PEM private key")
                          ->check(CLI::ExistingFile);
  cmd->add_option("--kubelet-client-ca", flags->kubelet_client_ca,
                  "PEM CA that signed the API server's kubelet client certificate: other "
                  "clients get 401 (kube-local: pki/ca.crt)")
      ->check(CLI::ExistingFile)
      ->needs(kubelet_listen);
  kubelet_listen->needs(kubelet_cert)->needs(kubelet_key);
  kubelet_cert->needs(kubelet_listen);
  kubelet_key->needs(kubelet_listen);
  cmd->add_option("--workers", flags->run.kubelet.workers, "concurrent API requests");
  cmd->add_option("--lease-renew", flags->lease_renew, "node lease renewal interval")
      ->check(kDuration);
  cmd->add_option("--status-report", flags->status_report, "node status report interval")
      ->check(kDuration);
  cmd->add_flag("--keep-nodes", flags->run.keep_nodes, "leave the Nodes in the cluster on exit");
  cmd->add_flag(
         "--detach", flags->detach,
         "run in the background (log, pid in --state-dir); returns once the fleet is registered")
      ->needs(state_dir);

  auto* inject = cmd->add_subcommand(
      "inject", "Send an event (fault, reboot, scale, host change) to a running simulator");
  inject->add_option("--state-dir", flags->state_dir, "the running simulator's --state-dir")
      ->required();
  auto* event = inject->add_option_group("event", "give exactly one of --event or -f");
  event->add_option("--event", flags->event,
                    "the event as YAML, e.g. '{node: n1, type: xid, gpu: 3, code: 79}'");
  event->add_option("-f,--file", flags->event_file, "a file holding the event")
      ->check(CLI::ExistingFile);
  event->require_option(1);
  inject->callback([flags] { run_inject(*flags); });

  auto* status = cmd->add_subcommand("status", "Print a running simulator's status summary");
  status->add_option("--state-dir", flags->state_dir, "the running simulator's --state-dir")
      ->required();
  status->callback([flags] { run_status(*flags); });

  auto* stop =
      cmd->add_subcommand("stop", "Stop a simulator started with --detach (it removes its Nodes)");
  stop->add_option("--state-dir", flags->state_dir, "the running simulator's --state-dir")
      ->required();
  stop->callback([flags] { run_stop(*flags); });

  auto* validate =
      cmd->add_subcommand("validate", "Check a fleet or scenario file and summarise it");
  auto* input = validate->add_option_group("input", "give exactly one of --fleet or --scenario");
  input->add_option("--fleet", flags->fleet, "fleet file")->check(CLI::ExistingFile);
  input->add_option("--scenario", flags->scenario, "scenario file")->check(CLI::ExistingFile);
  input->require_option(1);
  validate->callback([flags] { run_validate(*flags); });

  cmd->callback([flags, cmd] {
    if (!cmd->get_subcommands().empty()) return;  // a control subcommand ran
    run_sim(*flags);
  });
}

const CommandRegistration kSim(setup_sim);

}  // namespace
}  // namespace gpufleet::cli
