// One pod's simulated life on a node, and the v1 PodStatus the simulated kubelet reports for
// it, shaped as kubelet v1.32 shapes it: init containers run one after another (sidecars,
// restartPolicy Always, start and keep running), then the regular containers; each container
// has its own plan, state, lastState, restart count, exit codes and termination messages;
// crashed containers restart after the kubelet's back-off as the restart policy says; the
// phase follows the kubelet's getPhase rules and the conditions its generators, with
// transition times that move only when a condition's status changes. qosClass is never
// reported: the API server computed it at creation and rejects any change.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/time.h"
#include "core/value.h"
#include "sim/behaviour.h"

namespace gpufleet::sim {

enum class PodStage {
  Pending,    // sandbox or init containers not done, or a container not yet started
  Running,    // initialized, containers started (some may be restarting)
  Succeeded,  // terminal
  Failed,     // terminal
};

struct ContainerTermination {
  int exit_code = 0;
  std::string reason;   // Completed, Error, ...
  std::string message;  // the termination message
  std::string started_at;
  std::string finished_at;
  std::string container_id;
};

enum class ContainerState { Waiting, Running, Terminated };

// One container instance's output, as the runtime's log file holds it (container_logs.h).
struct ContainerLog {
  std::string container_id;  // the instance it belongs to
  std::string text;
  core::Timestamp written;  // every line's time: a simulated process writes all at exit
};

struct ContainerRun {
  std::string name;
  std::string image;
  bool init = false;
  bool sidecar = false;  // an init container with restartPolicy Always
  ContainerPlan plan;
  core::Value volume_mounts;  // the spec's, reported back in the status

  ContainerState state = ContainerState::Waiting;
  std::string waiting_reason;  // "" = the default (ContainerCreating / PodInitializing)
  std::string waiting_message;
  std::string running_since;
  int instances = 0;      // container instances created so far (restartCount = instances - 1)
  bool finished = false;  // terminated for good (restart policy or pod end)
  std::optional<ContainerTermination> last_state;
  std::optional<ContainerTermination> terminated;  // the current state when Terminated
  std::vector<ContainerLog> logs;  // the newest two instances' output (current and previous)
  // The next action (start, restart or exit) is due at `due` when `has_due`.
  bool has_due = false;
  std::chrono::steady_clock::time_point due{};

  [[nodiscard]] int restart_count() const { return instances > 0 ? instances - 1 : 0; }
  [[nodiscard]] bool running() const { return state == ContainerState::Running; }
};

struct ConditionState {
  std::string type;
  std::string status;  // True / False
  std::string reason;
  std::string message;
  std::string since;  // lastTransitionTime: moves only when status changes
};

struct PodRun {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
  std::string restart_policy = "Always";
  PodPlan plan;
  BackOff back_off;
  std::vector<ContainerRun> init;  // spec order
  std::vector<ContainerRun> main;  // spec order

  PodStage stage = PodStage::Pending;
  std::string host_ip;
  std::string pod_ip;
  std::string start_time;       // status.startTime (the first time the kubelet took the pod)
  bool sandbox = false;         // pod sandbox up: podIP set, PodReadyToStartContainers True
  std::string scheduled_since;  // PodScheduled's time (the scheduler's, when it set one)
  std::vector<ConditionState> conditions;
  bool status_unsent = false;  // a status change the API server has not accepted yet
  bool stopping = false;       // graceful deletion in progress
  std::chrono::steady_clock::time_point stop_due{};

  [[nodiscard]] std::string key() const { return ns + "/" + name; }
  [[nodiscard]] bool terminal() const {
    return stage == PodStage::Succeeded || stage == PodStage::Failed;
  }
  // "containerd://<64 hex>", unique per pod, container and instance.
  [[nodiscard]] std::string container_id(const ContainerRun& c, int instance) const;
};

// Builds a PodRun from a v1 Pod (spec.nodeName set) and its plan.
PodRun make_pod_run(const core::Value& pod, PodPlan plan, BackOff back_off, std::string host_ip,
                    std::string pod_ip);

// What advancing a pod needs from the node: wall time for simulated seconds, and the NCCL
// model for containers whose plan runs all_reduce_perf.
struct PodEnv {
  std::function<std::chrono::steady_clock::duration(double sim_seconds)> wall;
  // Simulated seconds the NCCL run takes; throws core::InvalidInput for a bad group.
  std::function<double(const PodRun&, const ContainerRun&)> nccl_duration;
  // Exit code and output of the NCCL run at its end.
  std::function<std::pair<int, std::string>(const PodRun&, const ContainerRun&)> nccl_result;
  // Called with each finished run's output (the container log).
  std::function<void(const PodRun&, const ContainerRun&, const std::string&)> log;
};

// Advances every container whose action is due at `now` (`now_rfc` for the status times),
// then recomputes phase and conditions. Returns true when the reported status changed.
bool advance_pod(PodRun& run, std::chrono::steady_clock::time_point now, std::string_view now_rfc,
                 const PodEnv& env);
// The earliest pending action, if any.
std::optional<std::chrono::steady_clock::time_point> next_due(const PodRun& run);

// Stops every running container with `exit_code` and `message` (SIGTERM, a node reboot) and
// ends the pod (graceful deletion, Never pods on a reboot): phase by the kubelet's rules.
void stop_pod(PodRun& run, int exit_code, const std::string& message, std::string_view now_rfc);
// A node reboot under a pod that restarts: running containers are killed, the sandbox is
// gone, and the pod starts over (init containers again) once the node is back.
void kill_for_restart(PodRun& run, const std::string& message, std::string_view now_rfc);

// The status the kubelet posts (sent as a merge patch of the status subresource: every list
// whole). `current` is the pod's current status: conditions owned by others (PodScheduled from
// the scheduler, DisruptionTarget, readiness gates) are kept as they are.
core::Value pod_status(const PodRun& run, std::string_view now_rfc,
                       const core::Value* current = nullptr);

// The image as the container runtime reports it: docker.io/library/busybox:1.36.
std::string normalize_image(std::string_view image);

}  // namespace gpufleet::sim
