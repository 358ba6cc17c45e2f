// `gpufleet agent`: the node agent (docs/agent.md). One node (--node, in the DaemonSet) or
// every node of a simulator (--sim-state-dir), each with its own identity, journal and state,
// on a few shared threads.
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "agent/agent.h"
#include "agent/metrics.h"
#include "agent/nodehealth.h"
#include "agent/pod_tokens.h"
#include "agent/remediation.h"
#include "cli/command.h"
#include "core/duration.h"
#include "core/errors.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/process_metrics.h"
#include "core/text.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "sim/control_inbox.h"

namespace gpufleet::cli {
namespace {

std::atomic<bool> g_agent_stop{false};
extern "C" void on_agent_signal(int) { g_agent_stop.store(true); }

// Loopback: the agent's metrics are for a node-local scraper (or a port-forward), and in
// production the pod is on the host network namespace only if the chart says so.
constexpr const char* kDefaultAgentMetrics = "127.0.0.1:9464";

// /metrics (AgentMetrics, aggregated over nodes), /healthz, /readyz (at least one agent).
// The default address may be taken (two agents on one machine, tests): that is logged and
// the agent runs without metrics; an address given explicitly must bind.
std::unique_ptr<core::HttpServer> serve_metrics(const std::string& address,
                                                const agent::AgentPool& pool) {
  if (address.empty()) return nullptr;
  core::metrics::register_process_metrics(core::metrics::default_registry());
  core::BindAddress bind = core::parse_bind_address(address);
  core::HttpServerOptions so;
  so.address = bind.address;
  so.port = bind.port;
  so.readyz = [&pool] {
    return pool.size() > 0 ? core::HealthStatus::healthy()
                           : core::HealthStatus::unhealthy("no node agents yet");
  };
  try {
    auto server = std::make_unique<core::HttpServer>(std::move(so));
    core::log::info("agent: serving metrics and health", {{"url", server->url()}});
    return server;
  } catch (const std::exception& e) {
    if (address != kDefaultAgentMetrics) throw;
    core::log::error("agent: cannot serve metrics on the default address; running without",
                     {{"address", address}, {"error", e.what()}});
    return nullptr;
  }
}

// Remediation in simulation: the same parse, ledger and journal as on a real node, but the
// "host command" is the simulator's control inbox (as `gpufleet sim inject` would), so the
// simulated node really reboots (its boot id changes) or has its GPUs reset.
class SimExecutor final : public agent::Executor {
 public:
  SimExecutor(std::string state_dir, std::string down)
      : dir_(std::move(state_dir)), down_(std::move(down)) {}
  agent::ExecResult execute(const agent::NodeIdentity& node,
                            const agent::RemediationRequest& request) override {
    core::Value ev = core::Value::map();
    ev["node"] = node.node_name;
    std::vector<std::string> files;
    if (request.action == "reboot") {
      ev["type"] = "reboot";
      ev["down"] = down_;
      files.push_back(sim::submit_control_event(dir_, ev));
    } else {
      ev["type"] = "gpuReset";
      if (request.gpus.empty()) files.push_back(sim::submit_control_event(dir_, ev));
      for (const auto& uuid : request.gpus) {  // one reset per faulty GPU named
        ev["uuid"] = uuid;
        files.push_back(sim::submit_control_event(dir_, ev));
      }
    }
    std::string names;
    for (const auto& f : files)
      names += (names.empty() ? "" : ", ") + std::filesystem::path(f).filename().string();
    return {.ok = true,
            .message = "asked the simulator for " + std::string(ev.get_string({"type"})) +
                       (request.gpus.empty() ? "" : " of " + core::join(request.gpus, ", ")) +
                       " (" + names + ")"};
  }

 private:
  std::string dir_;
  std::string down_;
};

constexpr const char* kDefaultRebootCommand = "nsenter -t 1 -m -u -i -n -p -- systemctl reboot";
constexpr const char* kDefaultGpuResetCommand = "nsenter -t 1 -m -u -i -n -p -- nvidia-smi -r";
constexpr const char* kDefaultBundleGpuCommand = "nsenter -t 1 -m -u -i -n -p -- nvidia-smi -q";

struct AgentFlags {
  std::string node;
  std::string host_root = "/";
  std::string state_dir = "/var/lib/gpufleet/agent";
  std::string sim_state_dir;
  std::vector<std::string> monitors;
  std::size_t threads = 2;
  std::size_t delivery_threads = 0;  // 0: 1 for one node, 8 for a simulator's fleet
  std::uint64_t journal_max_bytes = 64 << 20;
  bool fsync = true;
  std::string run_for;
  std::string kubeconfig;
  std::string metrics_address = kDefaultAgentMetrics;
  bool list_plugins = false;
  std::string remediation = "on";
  std::string reboot_command = kDefaultRebootCommand;
  std::string gpu_reset_command = kDefaultGpuResetCommand;
  std::string remediation_timeout = "5m";
  std::string sim_reboot_down = "5s";
  std::string sim_agent_pods;
  std::string log_bundle = "on";
  std::string log_bundle_deadline = "30s";
  std::string log_bundle_gpu_command = kDefaultBundleGpuCommand;
};

// The log bundle's settings (agent/log_bundle.h); nullopt when off.
std::optional<agent::LogBundleOptions> bundle_options(const AgentFlags& f) {
  if (f.log_bundle == "off") return std::nullopt;
  if (f.log_bundle != "on")
    throw core::InvalidInput("--log-bundle=" + f.log_bundle +
                             ": use on (collect logs before an incident's first action) or off");
  auto d = core::try_parse_duration(f.log_bundle_deadline);
  if (!d || d->count() <= 0 || *d > std::chrono::minutes(10))
    throw core::InvalidInput("--log-bundle-deadline value \"" + f.log_bundle_deadline +
                             "\" is not a duration in (0, 10m] (e.g. 30s)");
  agent::LogBundleOptions o;
  o.deadline = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  // The simulator writes nvidia-smi's state as files; a real node runs it.
  if (f.sim_state_dir.empty() && !f.log_bundle_gpu_command.empty())
    o.gpu_state_command =
        agent::split_command(f.log_bundle_gpu_command, "--log-bundle-gpu-command");
  return o;
}

// The executor --remediation and friends ask for; nullptr when off.
std::unique_ptr<agent::Executor> make_executor(const AgentFlags& f) {
  if (f.remediation == "off") return nullptr;
  if (f.remediation != "on")
    throw core::InvalidInput("--remediation=" + f.remediation +
                             ": use on (carry out sentinel's remediation requests) or off");
  if (!f.sim_state_dir.empty()) {
    auto down = core::try_parse_duration(f.sim_reboot_down);
    if (!down || down->count() < 0)
      throw core::InvalidInput("--sim-reboot-down value \"" + f.sim_reboot_down +
                               "\" is not a duration (e.g. 5s)");
    return std::make_unique<SimExecutor>(f.sim_state_dir, f.sim_reboot_down);
  }
  agent::HostCommands c;
  c.reboot = agent::split_command(f.reboot_command, "--reboot-command");
  c.gpu_reset = agent::split_command(f.gpu_reset_command, "--gpu-reset-command");
  auto timeout = core::try_parse_duration(f.remediation_timeout);
  if (!timeout || timeout->count() <= 0)
    throw core::InvalidInput("--remediation-timeout value \"" + f.remediation_timeout +
                             "\" is not a positive duration (e.g. 5m)");
  c.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
  return std::make_unique<agent::HostCommandExecutor>(std::move(c));
}

agent::AgentOptions options_for(const AgentFlags& f, const std::string& node,
                                const std::filesystem::path& host_root,
                                const std::filesystem::path& state_dir,
                                agent::AgentMetrics& metrics) {
  agent::AgentOptions o;
  o.metrics = &metrics;
  o.node.identity.node_name = node;
  o.node.host_root = host_root;
  o.node.state_dir = state_dir;
  o.monitors = f.monitors;
  o.journal_max_bytes = f.journal_max_bytes;
  // Segments stay well below the bound so compaction drops small slices, not half the journal.
  o.journal_segment_bytes =
      std::max<std::uint64_t>(4096, std::min<std::uint64_t>(4 << 20, f.journal_max_bytes / 8));
  o.fsync = f.fsync;
  return o;
}

// Simulated nodes: every DIR/nodes/<node>/ the simulator wrote (a node appears there once
// the simulator created it; new ones are picked up on the next scan).
std::vector<std::string> sim_nodes(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir / "nodes", ec))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void print_summary(const agent::AgentPool& pool) {
  std::uint64_t emitted = 0, delivered = 0, pending = 0, failures = 0, compacted = 0;
  pool.for_each([&](const agent::Agent& a) {
    auto s = a.stats();
    emitted += s.emitted;
    delivered += s.delivered;
    failures += s.delivery_failures;
    compacted += s.journal.compacted;
    pending += s.journal.last_id - s.journal.acked_id;
  });
  core::log::info("agent: status", {{"nodes", pool.size()},
                                    {"emitted", emitted},
                                    {"delivered", delivered},
                                    {"pending", pending},
                                    {"delivery_failures", failures},
                                    {"compacted", compacted}});
}

void run_agent(const AgentFlags& f) {
  if (f.list_plugins) {
    std::cout << "monitors:";
    for (const auto& n : agent::monitor_names()) std::cout << " " << n;
    std::cout << "\nhost steps:";
    for (const auto& n : agent::host_step_names()) std::cout << " " << n;
    std::cout << "\n";
    return;
  }
  if (f.node.empty() == f.sim_state_dir.empty())
    throw core::InvalidInput(
        "give exactly one of --node NAME (this node's Kubernetes name) or --sim-state-dir DIR "
        "(every node of a simulator)");
  if (f.threads == 0 || f.threads > 64)
    throw core::InvalidInput("--threads " + std::to_string(f.threads) + " must be 1 to 64");
  if (f.delivery_threads > 64)
    throw core::InvalidInput("--delivery-threads " + std::to_string(f.delivery_threads) +
                             " must be 1 to 64 (0: 1 for --node, 8 for --sim-state-dir)");
  const std::size_t delivery_threads =
      f.delivery_threads > 0 ? f.delivery_threads : (f.sim_state_dir.empty() ? 1 : 8);
  std::optional<std::chrono::nanoseconds> run_for;
  if (!f.run_for.empty()) {
    run_for = core::try_parse_duration(f.run_for);
    if (!run_for || run_for->count() <= 0)
      throw core::InvalidInput("--run-for value \"" + f.run_for +
                               "\" is not a positive duration (e.g. 30s, 5m)");
  }
  std::unique_ptr<agent::Executor> executor = make_executor(f);
  const std::optional<agent::LogBundleOptions> bundles = bundle_options(f);
  kube::Client client(kube::load_default_config(f.kubeconfig));
  // --sim-agent-pods: each simulated node writes with its own agent pod's token, so the
  // identity admission policy judges it as it would a real node's agent.
  std::unique_ptr<agent::PodTokens> tokens;
  if (!f.sim_agent_pods.empty()) {
    if (f.sim_state_dir.empty())
      throw core::InvalidInput(
          "--sim-agent-pods needs --sim-state-dir: a real node's agent uses "
          "its own pod's projected token (the in-cluster config)");
    agent::PodTokenOptions o = agent::parse_pod_token_flag(f.sim_agent_pods);
    o.token_file = [dir = std::filesystem::path(f.sim_state_dir)](const std::string& node) {
      return dir / "nodes" / node / "var/lib/gpufleet/agent/serviceaccount/token";
    };
    tokens = std::make_unique<agent::PodTokens>(client, std::move(o));
  }
  std::unique_ptr<agent::NodeHealthSink> sink =
      tokens ? std::make_unique<agent::NodeHealthSink>(
                   [&tokens](const agent::NodeIdentity& n) -> kube::Client& {
                     return tokens->client_for(n);
                   })
             : std::make_unique<agent::NodeHealthSink>(client);
  agent::AgentMetrics metrics;
  agent::AgentPool pool(f.threads, delivery_threads);
  // Remediation: one decision object per node, one thread for all of them, one Node watch.
  std::vector<std::unique_ptr<agent::NodeRemediation>> remediations;
  agent::RemediationService remediation(
      [&metrics](agent::Outcome o) { metrics.remediation(agent::outcome_name(o)); });
  std::set<std::string> running;
  auto add_agent = [&](const std::string& node, const std::filesystem::path& host,
                       const std::filesystem::path& state) {
    agent::Agent& a =
        pool.add(std::make_unique<agent::Agent>(options_for(f, node, host, state, metrics), *sink));
    remediations.push_back(std::make_unique<agent::NodeRemediation>(
        a.identity(), state, executor.get(),
        [&a](std::string_view kind, const core::Value& payload) { a.record(kind, payload); }));
    if (bundles) {
      agent::LogBundleSource src;
      src.host_root = host;
      src.node_health = [&client, &tokens, &a, node] {
        kube::Client& c = tokens ? tokens->client_for(a.identity()) : client;
        return c.get(agent::kNodeHealthResource, "", node);
      };
      remediations.back()->set_log_bundle(std::move(src), *bundles);
    }
    remediation.add_node(node, remediations.back().get());
  };
  // With --sim-agent-pods: tokens for new nodes before their agents start delivering, then every
  // few seconds while a node has none, else every minute. The API server may be away; the
  // deliveries wait in the journals meanwhile.
  auto refresh_tokens = [&] {
    if (!tokens) return;
    try {
      const std::size_t written = tokens->refresh(running);
      if (written > 0)
        core::log::info("agent: agent pod tokens written",
                        {{"tokens", written},
                         {"nodes", running.size()},
                         {"with_identity", tokens->with_identity()}});
    } catch (const std::exception& e) {
      core::log::warn("agent: cannot list the agent pods", {{"error", e.what()}});
    }
  };
  auto add_sim_nodes = [&] {
    const std::filesystem::path dir = f.sim_state_dir;
    std::vector<std::string> fresh;
    for (const auto& node : sim_nodes(dir))
      if (running.insert(node).second) fresh.push_back(node);
    if (!fresh.empty()) refresh_tokens();
    for (const auto& node : fresh) {
      const auto host = dir / "nodes" / node;
      add_agent(node, host, host / "var/lib/gpufleet/agent");
    }
  };
  if (f.sim_state_dir.empty()) {
    add_agent(f.node, f.host_root, f.state_dir);
  } else {
    if (!std::filesystem::is_directory(std::filesystem::path(f.sim_state_dir) / "nodes"))
      throw core::InvalidInput("--sim-state-dir " + f.sim_state_dir +
                               " has no nodes/ directory; start `gpufleet sim --state-dir " +
                               f.sim_state_dir + "` first");
    add_sim_nodes();
  }
  // One watch: this node's Node (field selector on its name) or, in simulation, every Node.
  // (In simulation the watch runs as the process's own identity, not a node's.)
  std::unique_ptr<kube::Informer> requests =
      agent::watch_node_requests(client, f.sim_state_dir.empty() ? f.node : "", remediation);
  metrics.observe(pool);
  auto server = serve_metrics(f.metrics_address, pool);
  core::log::info("agent: started", {{"nodes", pool.size()},
                                     {"threads", f.threads},
                                     {"delivery_threads", delivery_threads},
                                     {"remediation", executor ? "on" : "off"}});
  std::signal(SIGINT, on_agent_signal);
  std::signal(SIGTERM, on_agent_signal);
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  auto last_observe = start;
  auto last_tokens = start;
  while (!g_agent_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto now = std::chrono::steady_clock::now();
    if (now - last_observe >= std::chrono::seconds(2)) {
      metrics.observe(pool);
      last_observe = now;
    }
    if (run_for && now - start >= *run_for) break;
    if (tokens && now - last_tokens >= (tokens->with_identity() < running.size()
                                            ? std::chrono::seconds(3)
                                            : std::chrono::seconds(60))) {
      refresh_tokens();
      last_tokens = now;
    }
    if (now - last_report >= std::chrono::seconds(30)) {
      if (!f.sim_state_dir.empty()) add_sim_nodes();
      print_summary(pool);
      last_report = now;
    }
  }
  if (server) server->stop();
  requests->stop();
  remediation.stop();  // waits for an action in progress (its own timeout bounds it)
  pool.stop();
  print_summary(pool);
}

void setup_agent(CLI::App& root) {
  auto flags = std::make_shared<AgentFlags>();
  auto* cmd =
      root.add_subcommand("agent", "Run the node agent (one node, or every simulated node)");
  cmd->add_option("--node", flags->node, "this node's Kubernetes name (DaemonSet: spec.nodeName)");
  cmd->add_option("--host-root", flags->host_root, "where host paths are read")
      ->capture_default_str();
  cmd->add_option("--state-dir", flags->state_dir, "journal and plug-in state")
      ->capture_default_str();
  cmd->add_option("--sim-state-dir", flags->sim_state_dir,
                  "run one agent per DIR/nodes/<node>/ of a `gpufleet sim --state-dir DIR`");
  cmd->add_option("--monitors", flags->monitors, "monitors to run (default: every registered one)")
      ->delimiter(',');
  cmd->add_option("--threads", flags->threads, "threads polling the monitors, shared by all agents")
      ->capture_default_str();
  cmd->add_option("--delivery-threads", flags->delivery_threads,
                  "threads delivering the journals to the API server, apart from the polls "
                  "(0: 1 for --node, 8 for --sim-state-dir)")
      ->capture_default_str();
  cmd->add_option("--journal-max-bytes", flags->journal_max_bytes, "journal bound per node")
      ->capture_default_str();
  cmd->add_option("--fsync", flags->fsync,
                  "fsync journal writes (false only for simulation at scale)")
      ->capture_default_str();
  cmd->add_option("--run-for", flags->run_for,
                  "stop after this long (e.g. 30s); default: until SIGTERM");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)");
  // --metrics-addr is the one spelling every command uses; --metrics-address stays accepted
  // (the chart and older scripts pass it).
  cmd->add_option("--metrics-addr,--metrics-address", flags->metrics_address,
                  "host:port for /metrics, /healthz, /readyz (loopback; \"\" = none); "
                  "--metrics-address is a deprecated alias")
      ->capture_default_str();
  cmd->add_option("--remediation", flags->remediation,
                  "carry out sentinel's remediation requests (Node annotation "
                  "sentinel.gpufleet.io/remediation-request): on or off")
      ->capture_default_str();
  cmd->add_option("--reboot-command", flags->reboot_command,
                  "host command for a reboot (split into words, no shell)")
      ->capture_default_str();
  cmd->add_option("--gpu-reset-command", flags->gpu_reset_command,
                  "host command for a GPU reset, run with -i <uuid> per faulty GPU named "
                  "(without: every GPU of the node; no shell)")
      ->capture_default_str();
  cmd->add_option("--log-bundle", flags->log_bundle,
                  "collect a bounded log bundle before an incident's first remediation action "
                  "(kernel GPU/NIC lines, nvidia-smi state, IB counters, NodeHealth): on or off")
      ->capture_default_str();
  cmd->add_option("--log-bundle-deadline", flags->log_bundle_deadline,
                  "the action goes ahead after this long even if the bundle is not complete")
      ->capture_default_str();
  cmd->add_option("--log-bundle-gpu-command", flags->log_bundle_gpu_command,
                  "host command whose output is the bundle's GPU state (\"\" = none; not in "
                  "simulation, whose state files are read)")
      ->capture_default_str();
  cmd->add_option("--remediation-timeout", flags->remediation_timeout,
                  "a remediation command running longer is killed and reported failed")
      ->capture_default_str();
  cmd->add_option("--sim-reboot-down", flags->sim_reboot_down,
                  "with --sim-state-dir: how long a requested reboot keeps the node down")
      ->capture_default_str();
  cmd->add_option("--sim-agent-pods", flags->sim_agent_pods,
                  "with --sim-state-dir: NAMESPACE/SELECTOR of the agent pods; each simulated "
                  "node then writes with a token bound to its own agent pod (as the kubelet "
                  "would project it), so the identity admission policy applies");
  cmd->add_flag("--list-plugins", flags->list_plugins,
                "print the registered monitors and host steps");
  cmd->callback([flags] { run_agent(*flags); });
}

const CommandRegistration kAgent(setup_agent);

}  // namespace
}  // namespace gpufleet::cli
