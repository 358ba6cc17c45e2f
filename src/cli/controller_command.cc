// `gpufleet controller --controllers=a,b`: runs any subset of the registered controllers in
// one process on one Manager (shared caches, one lease, one /metrics endpoint).
#include <signal.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "controller/budget.h"
#include "controller/echo.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/duration.h"
#include "core/errors.h"
#include "core/log.h"
#include "kube/config.h"

namespace gpufleet::cli {
namespace {

// The sample controller: keeps a copy of every ConfigMap labelled gpufleet.io/echo=source.
const controller::Registration kEcho({
    .name = "echo",
    .description = "sample: copies ConfigMaps labelled gpufleet.io/echo=source to <name>-echo",
    .settings = {{"echo.delay", "pause before each write (a duration; for crash tests)"}},
    .setup = controller::setup_echo,
});

// The DisruptionBudget's status writer: who holds which nodes out (hostpkg, sentinel, others).
const controller::Registration kBudget({
    .name = "budget",
    .description = "reports who holds which nodes out against the cluster's DisruptionBudget "
                   "`default` (status, conditions Exhausted and DomainsAtLimit)",
    .settings = {},
    .setup = controller::setup_budget,
});

struct ControllerFlags {
  std::string controllers;
  std::string kubeconfig;
  std::string context;
  std::string namespace_;
  std::vector<std::string> settings;
  bool leader_elect = false;
  std::string lease_namespace = "default";
  std::string lease_name = "gpufleet-controller";
  std::string identity;
  std::string lease_duration = "15s";
  std::string renew_deadline = "10s";
  std::string retry_period = "2s";
  std::string metrics_addr = "127.0.0.1:8080";
  std::string webhook_addr;
  std::string webhook_cert_dir;
  std::string shutdown_grace = "30s";
  double kube_qps = 50;
  int kube_burst = 100;
  bool list = false;
};

std::chrono::milliseconds millis(const std::string& flag, const std::string& text) {
  auto d = core::try_parse_duration(text);
  if (!d || d->count() < 0)
    throw core::InvalidInput(flag + " value \"" + text + "\" is not a duration (e.g. 10s, 500ms)");
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

std::map<std::string, std::string> parse_settings(const std::vector<std::string>& items) {
  std::map<std::string, std::string> out;
  for (const std::string& s : items) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw core::InvalidInput("--set " + s + ": expected KEY=VALUE (e.g. echo.delay=500ms)");
    out[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return out;
}

void list_controllers() {
  for (const auto* d : controller::Registry::global().all()) {
    std::cout << d->name << "\t" << d->description << "\n";
    for (const auto& [key, help] : d->settings)
      std::cout << "  --set " << key << "=...\t" << help << "\n";
  }
}

void run_controllers(const ControllerFlags& f) {
  if (f.list) return list_controllers();
  auto& registry = controller::Registry::global();
  auto selected = registry.select(f.controllers);
  controller::Context ctx;
  ctx.namespace_ = f.namespace_;
  ctx.settings = parse_settings(f.settings);
  controller::Registry::check_settings(selected, ctx.settings);

  controller::ManagerOptions mo;
  mo.name = f.lease_name;
  mo.leader_election = f.leader_elect;
  mo.lease_namespace = f.lease_namespace;
  mo.identity = f.identity;
  mo.lease_duration = millis("--lease-duration", f.lease_duration);
  mo.renew_deadline = millis("--renew-deadline", f.renew_deadline);
  mo.retry_period = millis("--retry-period", f.retry_period);
  mo.shutdown_grace = millis("--shutdown-grace", f.shutdown_grace);
  mo.metrics_address = f.metrics_addr;
  if (!f.webhook_addr.empty()) {
    if (f.webhook_cert_dir.empty())
      throw core::InvalidInput("--webhook-addr " + f.webhook_addr +
                               " needs --webhook-cert-dir DIR holding tls.crt and tls.key (the "
                               "API server calls webhooks over HTTPS only)");
    mo.webhook_address = f.webhook_addr;
    mo.webhook_cert_file = (std::filesystem::path(f.webhook_cert_dir) / "tls.crt").string();
    mo.webhook_key_file = (std::filesystem::path(f.webhook_cert_dir) / "tls.key").string();
  } else if (!f.webhook_cert_dir.empty()) {
    throw core::InvalidInput("--webhook-cert-dir " + f.webhook_cert_dir +
                             " without --webhook-addr: give the address to serve the webhook on "
                             "(e.g. :9443), or drop --webhook-cert-dir");
  }
  if (mo.leader_election &&
      !(mo.lease_duration > mo.renew_deadline && mo.renew_deadline > mo.retry_period)) {
    throw core::InvalidInput("--lease-duration " + f.lease_duration + " > --renew-deadline " +
                             f.renew_deadline + " > --retry-period " + f.retry_period +
                             " must hold");
  }

  // SIGINT/SIGTERM are taken by a thread (sigwait) that requests the stop: blocked here,
  // before any thread exists, so every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::stop_source stop;
  std::jthread signals([&](std::stop_token done) {
    timespec tick{0, 200 * 1000 * 1000};
    while (!done.stop_requested()) {
      int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig == SIGINT || sig == SIGTERM) {
        core::log::info("signal received; shutting down", {{"signal", sig}});
        stop.request_stop();
        return;
      }
    }
  });

  if (!(f.kube_qps > 0) || f.kube_burst < 1)
    throw core::InvalidInput("--kube-qps and --kube-burst must be positive (e.g. 50 and 100)");
  kube::ClientConfig cc = kube::load_default_config(f.kubeconfig, f.context);
  cc.qps = f.kube_qps;
  cc.burst = f.kube_burst;
  kube::Client client(cc);
  controller::Manager manager(client, mo);
  for (const auto* d : selected) d->setup(manager, ctx);
  core::log::info("controller manager starting", {{"controllers", f.controllers},
                                                  {"identity", manager.identity()},
                                                  {"leader_election", f.leader_elect}});
  auto exit = manager.run(stop.get_token());
  signals.request_stop();
  if (exit == controller::Manager::Exit::LostLeadership) {
    // As controller-runtime does: exit, and let the restart campaign again from scratch.
    std::cerr << "error: leadership lost; exiting so that a restart campaigns anew\n";
    set_exit_code(kExitError);
  }
}

void setup_controller(CLI::App& root) {
  auto flags = std::make_shared<ControllerFlags>();
  auto* cmd = root.add_subcommand(
      "controller",
      "Run gpufleet controllers (any subset, one process, shared caches, leader election)");
  cmd->add_option("--controllers", flags->controllers,
                  "comma-separated controllers to run (see --list)");
  cmd->add_flag("--list", flags->list, "list the registered controllers and their settings");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)");
  cmd->add_option("--context", flags->context, "kubeconfig context (default: current-context)");
  cmd->add_option("--namespace", flags->namespace_, "watch only this namespace (default: all)");
  cmd->add_option("--set", flags->settings, "controller setting KEY=VALUE (repeatable)");
  cmd->add_flag("--leader-elect", flags->leader_elect,
                "elect a leader on a Lease; only the leader reconciles");
  cmd->add_option("--lease-namespace", flags->lease_namespace, "namespace of the Lease")
      ->capture_default_str();
  cmd->add_option("--lease-name", flags->lease_name, "name of the Lease")->capture_default_str();
  cmd->add_option("--identity", flags->identity, "this replica's identity (default: hostname-pid)");
  cmd->add_option("--lease-duration", flags->lease_duration, "lease duration")
      ->capture_default_str();
  cmd->add_option("--renew-deadline", flags->renew_deadline, "renew deadline")
      ->capture_default_str();
  cmd->add_option("--retry-period", flags->retry_period, "retry period")->capture_default_str();
  cmd->add_option("--metrics-addr", flags->metrics_addr,
                  "host:port for /metrics, /healthz, /readyz (\"\" = off; :PORT = all interfaces)")
      ->capture_default_str();
  cmd->add_option("--webhook-addr", flags->webhook_addr,
                  "host:port of the validating admission webhook (HTTPS; \"\" = off)");
  cmd->add_option("--webhook-cert-dir", flags->webhook_cert_dir,
                  "folder with the webhook's tls.crt and tls.key (a mounted kubernetes.io/tls "
                  "Secret)");
  cmd->add_option("--shutdown-grace", flags->shutdown_grace,
                  "time queued reconciles get to finish on SIGTERM")
      ->capture_default_str();
  // sentinel quarantining hundreds of nodes a second needs more than client-go's defaults.
  cmd->add_option("--kube-qps", flags->kube_qps, "API requests per second (client-side limit)")
      ->capture_default_str();
  cmd->add_option("--kube-burst", flags->kube_burst, "API request burst (client-side limit)")
      ->capture_default_str();
  cmd->callback([flags] {
    if (!flags->list && flags->controllers.empty())
      throw core::InvalidInput("--controllers is required (see gpufleet controller --list)");
    run_controllers(*flags);
  });
}

const CommandRegistration kController(setup_controller);

}  // namespace
}  // namespace gpufleet::cli
