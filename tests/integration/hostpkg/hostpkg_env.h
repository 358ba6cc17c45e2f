// The hostpkg controller against kube-local ($KUBECONFIG) and a simulated fleet: the CRDs are
// applied, a FleetKubelet runs the nodes (stage pods act on its host model, see
// src/sim/host_step.h), and the controller runs in-process on a Manager. Each test takes its
// own nodes by name, so tests never see each other's sets.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/manager.h"
#include "core/value.h"
#include "kube/client.h"
#include "sim/kubelet/fleet_kubelet.h"

namespace gpufleet::hostpkg::testing {

class HostPkgEnv {
 public:
  // Starts the fleet (`nodes` nodes) and, unless `controller` is false, the controller. With a
  // `state_dir` the simulator mirrors its nodes' files there and reads its control inbox
  // (`gpufleet sim inject --state-dir`), as `gpufleet sim --state-dir` does.
  explicit HostPkgEnv(int nodes, bool controller = true, std::string state_dir = "");
  ~HostPkgEnv();

  kube::Client& client() { return *client_; }
  sim::FleetKubelet& sim() { return *sim_; }
  const std::string& stage_namespace() const { return ns_; }
  std::string node(int i) const;  // the i-th node's name
  // The fleet's pool: every node of this env carries it as sim::kPoolLabel (a selector for
  // fleets too large for a hostname list, which the CRD caps at 64 values).
  const std::string& pool() const { return pool_; }
  // Node names i..j-1 as a YAML flow list.
  std::string node_list(int from, int to) const;

  // > 0: the controller's hostpkg.reverify-interval (replaces every set's reverify interval,
  // which the schema keeps at 1m or more), set before start_controller().
  std::chrono::milliseconds reverify_interval{0};
  // The controller's clock (ManagerOptions::clock; null: the system clock), set before
  // start_controller(): tests move a FakeClock instead of waiting.
  controller::Clock* clock = nullptr;
  void start_controller();
  void stop_controller();

  void apply(const std::string& yaml);  // create or update (by server-side apply)
  core::Value get_set(const std::string& name);
  core::Value get_node(const std::string& name);
  void remove_set(const std::string& name);

  // Certify's part: sets validate interrupting changes by default (spec.validation), and no
  // certify runs here, so the env passes every ValidationRequest of its own nodes as soon as
  // it shows (a stand-in that plays certify, as sentinel_env.sh's pass_validation does).
  // Tests of the validation itself turn it off and answer by hand.
  std::atomic<bool> pass_validations{true};
  // This env's node `node`'s ValidationRequests (hostpkg's, by its node label).
  std::vector<core::Value> validation_requests(const std::string& node);
  // Writes certify's verdict on a request for one node: phase Passed, Failed or Expired; a
  // Failed one carries the node's failed result (category, reason, message).
  void answer_validation(const std::string& request, const std::string& node,
                         const std::string& phase, const std::string& category = "",
                         const std::string& reason = "", const std::string& message = "");

  static bool eventually(const std::function<bool()>& check, std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<sim::FleetKubelet> sim_;
  std::unique_ptr<controller::Manager> manager_;
  std::stop_source stop_;
  std::thread thread_;
  std::jthread certify_;  // the stand-in (pass_validations)
  std::string pool_;
  std::string ns_;
};

// The condition `type` of an object's status: status, reason and message ("" when absent).
struct Cond {
  std::string status, reason, message;
};
Cond condition(const core::Value& obj, const std::string& type);
std::int64_t status_int(const core::Value& set, const std::string& field);

}  // namespace gpufleet::hostpkg::testing
