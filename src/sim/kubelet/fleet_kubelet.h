// The simulated kubelets of a whole fleet against a real API server: registers the Nodes,
// keeps them Ready with coordination.k8s.io Leases in kube-node-lease and status updates,
// runs the pods bound to them (init containers, sidecars, containers; see pod_run.h) and
// reports their status as a real kubelet shapes it via the status subresource, as the
// behaviour table says, honours graceful deletion (and so evictions),
// reboots nodes (NotReady, pods killed, new boot ID), scales pools, and mirrors every node's
// GPU/fabric/host signals into <state-dir>/nodes/<node>/. It only ever patches Node status
// and its own labels, so cordons and taints set by others are never touched.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "controller/manager.h"
#include "core/value.h"
#include "kube/client.h"
#include "sim/behaviour.h"
#include "sim/fleet_model.h"
#include "sim/kubelet/pod_run.h"
#include "sim/node_object.h"

namespace gpufleet::core {
class HttpServer;
struct HttpRequest;
struct HttpResponse;
}  // namespace gpufleet::core

namespace gpufleet::sim {

struct KubeletOptions {
  std::string state_dir;    // "" = no signal files, no control inbox, no status file
  double time_scale = 1.0;  // simulated seconds per wall second (timeline, pod durations)
  int lease_duration_seconds = 40;
  std::chrono::milliseconds lease_renew{10000};     // kubelet default: a quarter of 40 s
  std::chrono::milliseconds status_report{300000};  // kubelet nodeStatusReportFrequency
  std::chrono::milliseconds tick{500};
  int workers = 8;  // concurrent reconciles of each controller (nodes, pods)
  std::string field_manager = "gpufleet-sim";
  // The kubelet endpoint (container logs, see container_logs.h): one HTTPS server for the
  // whole fleet at this "ip:port" (port 0: a free one), which every Node advertises. ""
  // serves none. It needs a serving certificate the API server trusts
  // (--kubelet-certificate-authority); with a client CA it answers only clients that CA signed
  // (the API server's --kubelet-client-certificate).
  std::string kubelet_listen;
  std::string kubelet_cert_pem;
  std::string kubelet_key_pem;
  std::string kubelet_client_ca_pem;
};

class FleetKubelet {
 public:
  FleetKubelet(kube::Client& client, FleetSpec fleet, BehaviourTable behaviours,
               KubeletOptions options);
  ~FleetKubelet();
  FleetKubelet(const FleetKubelet&) = delete;
  FleetKubelet& operator=(const FleetKubelet&) = delete;

  // Registers every node and starts the loops; returns at once.
  void start();
  // True once every current node has been registered (created or adopted).
  bool wait_registered(std::chrono::milliseconds timeout);
  // Stops heartbeats and pods; with `remove_nodes`, deletes every Node and Lease it owns.
  void stop(bool remove_nodes);

  // Timeline events (at simulated time e.at_s).
  void schedule(SimEvent e);
  // Applies an event now; throws core::InvalidInput on an unknown node, pool or GPU.
  std::vector<AppliedEvent> inject(const SimEvent& e);

  [[nodiscard]] double sim_now() const;
  // Summary: the model's counts plus registration, pods and API statistics.
  [[nodiscard]] core::Value status() const;
  // A copy of one node's kernel log (tests), or "" when unknown.
  [[nodiscard]] std::string kmsg_of(const std::string& node) const;
  [[nodiscard]] std::string boot_id_of(const std::string& node) const;
  // A file of one node's host model (hostpkg tests: sysctls, history, restarts), if present.
  [[nodiscard]] std::optional<std::string> host_read(const std::string& node,
                                                     const std::string& path) const;
  // The kubelet endpoint's URL ("https://127.0.0.1:41234"), "" when none is served.
  [[nodiscard]] std::string kubelet_url() const;

 private:
  class NodeSync;
  class PodSync;
  using Clock = std::chrono::steady_clock;

  struct NodeState {
    std::string uid;
    bool registered = false;
    bool seen = false;  // the Node cache has held it since it was (re)registered
    bool ready = true;
    std::string ready_transition;
    std::string reported_labels;     // JSON of the labels last patched
    bool lease_exists = false;       // known to exist: renew by patch, else create first
    bool status_dirty = false;       // the model changed what its status says: report at once
    Clock::time_point status_due{};  // the next periodic status report
    Clock::time_point lease_due{};   // the next lease renewal
  };

  void tick_loop();
  void signal_loop();  // mirrors changed nodes' signal files under <state-dir>/nodes
  // The "sim-nodes" reconcile: whatever of register / status report / lease renewal / delete
  // (a node scaled away) is due for `name`, then requeue_after the next due time.
  controller::Result sync_node(const std::string& name);
  bool register_node(const std::string& name);
  bool report_node_status(const std::string& name);
  bool renew_lease(const std::string& name);
  void mark_node_locked(const std::string& name);  // something to report: queue the node
  // Pods: sync_pod reads the pod and sends what decide_pod_locked decided (the status,
  // then the grace-0 delete); the deciding is split by situation.
  struct PodAction {
    core::Value status;  // null: nothing to report
    bool final_delete = false;
    std::optional<std::chrono::steady_clock::time_point> requeue;
  };
  controller::Result sync_pod(const std::string& key);
  PodAction decide_pod_locked(const std::string& key, const core::Value& pod);
  PodAction admit_pod_locked(const std::string& key, const core::Value& pod, bool down);
  PodAction delete_pod_locked(PodRun& run, const core::Value& pod, bool down);
  PodAction node_down_locked(PodRun& run, const core::Value& pod);
  PodEnv pod_env_locked();
  void count_transition(PodStage before, const PodRun& run);
  bool process_delete(const std::string& name);
  void handle_events(const std::vector<AppliedEvent>& events);  // mu_ held
  void drain_inbox();                                           // mu_ held
  NodeRuntime runtime_locked(const std::string& name) const;
  std::string next_pod_ip();
  std::chrono::steady_clock::duration wall(double sim_seconds) const;
  void write_pod_log(const PodRun& run, const ContainerRun& container,
                     const std::string& output) const;

  // GET /containerLogs/{ns}/{pod}/{container}: thread-safe (takes mu_).
  core::HttpResponse serve_container_log(const core::HttpRequest& request) const;

  kube::Client& client_;
  BehaviourTable table_;
  KubeletOptions options_;
  std::chrono::steady_clock::time_point started_;

  mutable std::mutex mu_;  // guards model_, nodes_, runs_, pod_ips_
  FleetModel model_;
  std::unordered_map<std::string, NodeState> nodes_;
  std::unordered_map<std::string, PodRun> runs_;
  std::uint64_t pod_ips_ = 0;

  // The runtime: set up in start(), run on manager_thread_ until stop().
  std::unique_ptr<controller::Manager> manager_;
  controller::Cache* node_cache_ = nullptr;
  controller::Cache* pod_cache_ = nullptr;
  controller::Controller* node_sync_ = nullptr;
  controller::Controller* pod_sync_ = nullptr;
  std::stop_source manager_stop_;
  std::thread manager_thread_;
  std::thread ticker_;
  std::thread signals_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<core::HttpServer> kubelet_server_;  // started before the Nodes register
  std::string kubelet_address_;
  int kubelet_port_ = 10250;

  std::atomic<std::uint64_t> api_errors_{0};
  std::atomic<std::uint64_t> lease_renewals_{0};
  std::atomic<std::uint64_t> status_updates_{0};
  std::atomic<std::uint64_t> pods_started_{0};
  std::atomic<std::uint64_t> pods_finished_{0};
  std::atomic<std::uint64_t> registered_{0};
};

}  // namespace gpufleet::sim
