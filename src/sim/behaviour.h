// What a pod "does" on a simulated node (see docs/sim.md "Behaviours"): a table of
// behaviours matched by image glob, annotations or restart policy, each with a start delay,
// a duration (or forever), exit codes (one per run: "exits 1 twice, then 0"), a termination
// message and output text; a behaviour with `nccl: true` runs all_reduce_perf against the
// bandwidth model instead. A behaviour that names a container or init container (name glob)
// decides that one container only; the others decide whole pods. Pods can override any of
// it with sim.gpufleet.io/* annotations, so tests can script work. The table also carries the
// kubelet's crash-loop back-off, so tests can shrink it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "sim/host_step.h"
#include "sim/nccl_output.h"

namespace gpufleet::sim {

// Annotations a pod may carry.
inline constexpr std::string_view kBehaviourAnnotation = "sim.gpufleet.io/behaviour";
inline constexpr std::string_view kDurationAnnotation = "sim.gpufleet.io/duration";
inline constexpr std::string_view kExitCodeAnnotation = "sim.gpufleet.io/exit-code";
inline constexpr std::string_view kMessageAnnotation = "sim.gpufleet.io/termination-message";
inline constexpr std::string_view kOutputAnnotation = "sim.gpufleet.io/output";
inline constexpr std::string_view kNcclHostsAnnotation = "sim.gpufleet.io/nccl-hosts";

struct Behaviour {
  std::string name;
  // Match (all given parts must hold; none given matches every pod).
  std::string image;           // glob with '*' over any container's image (or the named one's)
  std::string container;       // name glob: this behaviour decides matching regular containers
  std::string init_container;  // name glob: ... matching init containers (sidecars included)
  core::Map annotations;       // each must be present with this value
  std::string restart_policy;  // Always, OnFailure, Never
  // Effect.
  double start_delay_s = 1.0;        // Pending -> Running (image pull, container start)
  std::optional<double> duration_s;  // Running -> terminated; nullopt: until deleted
  int exit_code = 0;
  std::vector<int> exit_codes;  // per run (restarts); the last one repeats; empty: exit_code
  std::string termination_message;
  std::string output;
  bool nccl = false;
  // hostpkg stage pods: the package's effect on the host model and its failure modes.
  std::optional<HostStepBehaviour> host_step;
  bool dcgm = false;      // dcgmi diag -r N -j from the node's fault model (dcgm_output.h)
  bool training = false;  // synthetic trainer lines from the group (training_output.h)

  [[nodiscard]] bool targets_container() const {
    return !container.empty() || !init_container.empty();
  }
};

// What one container does on each of its runs.
struct ContainerPlan {
  std::string behaviour;
  double start_delay_s = 1.0;
  std::optional<double> duration_s;  // nullopt: runs until stopped
  std::vector<int> exit_codes{0};    // run i exits with exit_codes[min(i, size - 1)]
  std::string termination_message;
  std::string output;
  bool nccl = false;

  [[nodiscard]] int exit_code(int run) const;
};

// The kubelet's crash-loop back-off: the first restart is immediate, then initial, doubling
// up to max (kubelet: 10 s and 5 min).
struct BackOff {
  double initial_s = 10;
  double max_s = 300;
  // Delay before restart number `restart` (1 = the first restart).
  [[nodiscard]] double delay(int restart) const;
};

struct PodPlan {
  std::string behaviour;  // the behaviour's name
  double start_delay_s = 1.0;
  std::optional<double> duration_s;
  int exit_code = 0;
  std::string termination_message;
  std::string output;
  bool nccl = false;                        // the output comes from a model: `generator` says which
  std::string generator = "nccl";           // nccl | dcgm | training
  std::vector<std::string> generator_args;  // dcgm, training: the container's command + args
  std::string generator_image;              // dcgm: the container's image (its tag: the layout)
  NcclTestConfig nccl_config;
  std::vector<std::string> nccl_hosts;  // empty: the pod's own node
  std::string error;                    // a bad annotation: the pod fails with this message
  // Per container, in spec order: init containers and regular containers.
  std::vector<ContainerPlan> init_containers;
  std::vector<ContainerPlan> containers;
};

class BehaviourTable {
 public:
  // nccl-tests images run the NCCL model; restartPolicy Always pods run until deleted;
  // everything else runs 3 s and exits 0.
  static BehaviourTable defaults();
  // A `kind: BehaviourTable` document, or just its `behaviours` list; the defaults follow
  // the given behaviours. Throws core::InvalidInput naming field, value and fix.
  static BehaviourTable parse(const core::Value& doc, std::string_view source);
  static BehaviourTable parse_list(const core::Value& list, std::string_view source,
                                   std::string_view path);
  static BehaviourTable load_file(const std::string& path);

  [[nodiscard]] const std::vector<Behaviour>& behaviours() const noexcept { return items_; }
  [[nodiscard]] const BackOff& back_off() const noexcept { return back_off_; }
  void set_back_off(BackOff b) { back_off_ = b; }
  // The plan for a v1 Pod object.
  [[nodiscard]] PodPlan plan(const core::Value& pod) const;
  // For a hostpkg stage pod: the first behaviour with a hostStep whose image glob matches one
  // of the pod's images, init containers included (the package image is an init container's),
  // or null.
  [[nodiscard]] const HostStepBehaviour* host_step(const core::Value& pod) const;

 private:
  // The per-container plans of `plan` (its pod-level fields already final).
  void add_container_plans(PodPlan& plan, const core::Value& pod,
                           const std::vector<const core::Value*>& containers,
                           const core::Value* matched_container,
                           const std::vector<int>& exit_codes) const;
  [[nodiscard]] const Behaviour* container_behaviour(const core::Value& pod, bool init,
                                                     const core::Value& container) const;
  std::vector<Behaviour> items_;
  BackOff back_off_;
};

// The last whole lines of `text` within Kubernetes' 4096-byte termination message limit.
std::string termination_tail(const std::string& text);

}  // namespace gpufleet::sim
