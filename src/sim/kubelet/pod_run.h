// One pod's simulated life on a node, and the v1 PodStatus the simulated kubelet reports for
// it (phase, conditions, IPs, start time, container statuses with running/terminated states,
// exit codes, termination messages, restart counts).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "sim/behaviour.h"

namespace gpufleet::sim {

enum class PodStage {
  Pending,    // accepted, containers being created
  Running,    // containers running until the behaviour's duration ends
  Succeeded,  // terminal
  Failed,     // terminal
};

struct ContainerTermination {
  int exit_code = 0;
  std::string reason;   // Completed, Error, OOMKilled, ...
  std::string message;  // the termination message
  std::string started_at;
  std::string finished_at;
  std::string container_id;
};

struct PodRun {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
  std::string restart_policy = "Always";
  std::vector<std::pair<std::string, std::string>> containers;  // name, image
  PodPlan plan;

  PodStage stage = PodStage::Pending;
  std::string host_ip;
  std::string pod_ip;
  std::string start_time;  // pod status.startTime (first time the kubelet took it)
  std::string running_since;
  int restart_count = 0;
  std::optional<ContainerTermination> last_state;  // previous run (restarts)
  std::optional<ContainerTermination> terminated;  // current terminal state
  // Wall-clock times the kubelet acts next (steady clock).
  std::chrono::steady_clock::time_point due{};
  bool stopping = false;  // graceful deletion in progress
  std::chrono::steady_clock::time_point stop_due{};
  std::string ready_transition;

  [[nodiscard]] std::string key() const { return ns + "/" + name; }
  [[nodiscard]] std::string container_id(int run) const;
};

// Builds a PodRun from a v1 Pod (spec.nodeName set) and its plan.
PodRun make_pod_run(const core::Value& pod, PodPlan plan, std::string host_ip, std::string pod_ip);

// The status the kubelet posts (a complete `status`, sent as a merge patch of the status
// subresource). `now` is an RFC 3339 time for condition transitions.
core::Value pod_status(const PodRun& run, std::string_view now);

// Records the end of the current container run: exit code, reason, message.
ContainerTermination finish_container(const PodRun& run, int exit_code, std::string message,
                                      std::string_view now);

}  // namespace gpufleet::sim
