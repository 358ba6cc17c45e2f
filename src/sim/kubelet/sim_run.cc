#include "sim/kubelet/sim_run.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include "core/errors.h"
#include "core/http_server.h"
#include "core/json.h"
#include "core/log.h"
#include "core/process_metrics.h"
#include "kube/config.h"
#include "sim/scenario.h"

namespace gpufleet::sim {

namespace log = core::log;

int run_simulation(const SimRunOptions& options, const std::atomic<bool>& stop) {
  if (options.fleet_file.empty() == options.scenario_file.empty()) {
    throw core::InvalidInput("give exactly one of --fleet or --scenario");
  }
  Scenario sc;
  if (!options.scenario_file.empty()) {
    sc = load_scenario_file(options.scenario_file);
  } else {
    sc.fleet = load_fleet_file(options.fleet_file);
    sc.name = sc.fleet.name;
  }
  if (!options.behaviours_file.empty())
    sc.behaviours = BehaviourTable::load_file(options.behaviours_file);
  std::optional<double> duration = options.duration_s ? options.duration_s : sc.duration_s;

  // One client speaks for every simulated kubelet: its request budget must cover a lease
  // renewal per node per interval (plus status reports and pods), where each real kubelet
  // would have its own.
  kube::ClientConfig config = kube::load_default_config(options.kubeconfig);
  double renew_s = std::max(0.1, options.kubelet.lease_renew.count() / 1000.0);
  double needed = static_cast<double>(sc.fleet.node_count()) / renew_s * 1.5 + 50;
  config.qps = std::max(config.qps, needed);
  config.burst = std::max(config.burst, static_cast<int>(needed));
  kube::Client client(std::move(config));
  FleetKubelet fleet(client, sc.fleet, sc.behaviours, options.kubelet);
  for (auto& e : sc.timeline) fleet.schedule(e);

  std::unique_ptr<core::HttpServer> http;
  if (!options.listen.empty()) {
    core::BindAddress bind = core::parse_bind_address(options.listen);
    core::metrics::register_process_metrics(core::metrics::default_registry());
    core::HttpServerOptions ho;
    ho.address = bind.address;
    ho.port = bind.port;
    ho.readyz = [&fleet] {
      core::Value s = fleet.status();
      auto reg = s.find("registered");
      auto nodes = s.find("nodes");
      if (reg && nodes && reg->as_int() >= nodes->as_int()) return core::HealthStatus::healthy();
      return core::HealthStatus::unhealthy("nodes still registering");
    };
    ho.handlers["/status"] = [&fleet] {
      core::HttpResponse r;
      r.content_type = "application/json";
      r.body = core::to_json(fleet.status(), core::JsonStyle::Pretty) + "\n";
      return r;
    };
    http = std::make_unique<core::HttpServer>(std::move(ho));
    log::info("simulator status", {{"url", http->url() + "/status"}});
  }

  fleet.start();
  auto began = std::chrono::steady_clock::now();
  bool announced = false;
  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (!announced && fleet.wait_registered(std::chrono::milliseconds(0))) {
      announced = true;
      log::info("fleet registered", {{"nodes", fleet.status().get({"nodes"})->as_int()},
                                     {"took", std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::chrono::steady_clock::now() - began)}});
    }
    if (duration && fleet.sim_now() >= *duration) break;
  }
  log::info("simulator stopping", {{"removeNodes", !options.keep_nodes}});
  if (http) http->stop();
  fleet.stop(!options.keep_nodes);
  std::cout << core::to_json(fleet.status(), core::JsonStyle::Pretty) << "\n";
  return 0;
}

}  // namespace gpufleet::sim
