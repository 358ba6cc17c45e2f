// `gpufleet sim`: load a fleet or scenario, bring the fleet to life on an API server, play
// the timeline, serve /status, /healthz, /readyz and /metrics on loopback, write
// <state-dir>/status.json, take control events from <state-dir>/control/inbox, and on stop
// (signal or --duration) remove the fleet again unless asked to keep it.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "sim/kubelet/fleet_kubelet.h"

namespace gpufleet::sim {

struct SimRunOptions {
  std::string fleet_file;  // one of fleet_file / scenario_file
  std::string scenario_file;
  std::string behaviours_file;
  std::string kubeconfig;            // "" = $KUBECONFIG, ~/.kube/config, in-cluster
  std::string listen;                // "127.0.0.1:0" style; "" = no HTTP server
  std::optional<double> duration_s;  // simulated seconds, then stop
  bool keep_nodes = false;
  KubeletOptions kubelet;
};

// Runs until `stop` turns true or the duration ends; returns a process exit code.
// Throws core::InvalidInput for bad files or flags (before touching the cluster).
int run_simulation(const SimRunOptions& options, const std::atomic<bool>& stop);

}  // namespace gpufleet::sim
