// What a pod "does" on a simulated node (see docs/sim.md "Behaviours"): a table of
// behaviours matched by image glob, annotations or restart policy, each with a start delay,
// a duration (or forever), an exit code, a termination message and output text; a
// behaviour with `nccl: true` runs all_reduce_perf against the bandwidth model instead.
// Pods can override any of it with sim.gpufleet.io/* annotations, so tests can script work.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
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
  std::string image;           // glob with '*' over any container's image
  core::Map annotations;       // each must be present with this value
  std::string restart_policy;  // Always, OnFailure, Never
  // Effect.
  double start_delay_s = 1.0;        // Pending -> Running (image pull, container start)
  std::optional<double> duration_s;  // Running -> terminated; nullopt: until deleted
  int exit_code = 0;
  std::string termination_message;
  std::string output;
  bool nccl = false;
};

struct PodPlan {
  std::string behaviour;  // the behaviour's name
  double start_delay_s = 1.0;
  std::optional<double> duration_s;
  int exit_code = 0;
  std::string termination_message;
  std::string output;
  bool nccl = false;
  NcclTestConfig nccl_config;
  std::vector<std::string> nccl_hosts;  // empty: the pod's own node
  std::string error;                    // a bad annotation: the pod fails with this message
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
  // The plan for a v1 Pod object.
  [[nodiscard]] PodPlan plan(const core::Value& pod) const;

 private:
  std::vector<Behaviour> items_;
};

// The last whole lines of `text` within Kubernetes' 4096-byte termination message limit.
std::string termination_tail(const std::string& text);

}  // namespace gpufleet::sim
