// The stage pods of a rollout: one Pod per node and planned step, pinned to the node
// (spec.nodeName, so no scheduler and no cordon stands in the way), running
// `gpufleet pkg-step` from the runner image with the package's /pkg copied in by an init
// container from the package image, the host's / mounted at /host, and the result written to
// the termination message (step_runner.h's contract). Pods are named from the step's
// idempotence key, so a controller that restarts finds the pod it created instead of
// starting the step again.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/value.h"
#include "hostpkg/spec.h"
#include "hostpkg/stage_plan.h"

namespace gpufleet::hostpkg {

// Labels and annotations every stage pod carries (the simulator's kubelet reads them too).
inline constexpr std::string_view kSetLabel = "hostpkg.gpufleet.io/set";
inline constexpr std::string_view kStageLabel = "hostpkg.gpufleet.io/stage";
inline constexpr std::string_view kPackageLabel = "hostpkg.gpufleet.io/package";
inline constexpr std::string_view kNodeAnnotation = "hostpkg.gpufleet.io/node";
// A ValidationRequest's node (with kSetLabel, the set): label_safe of the node's name.
inline constexpr std::string_view kValidationNodeLabel = "hostpkg.gpufleet.io/node";
// A name as a label value: itself when it fits (63 characters), else a prefix and a hash.
std::string label_safe(const std::string& name);
inline constexpr std::string_view kKeyAnnotation = "hostpkg.gpufleet.io/key";
inline constexpr std::string_view kVersionAnnotation = "hostpkg.gpufleet.io/version";
inline constexpr std::string_view kInterruptAnnotation = "hostpkg.gpufleet.io/interrupt";
inline constexpr std::string_view kChangedKeysAnnotation = "hostpkg.gpufleet.io/changed-keys";
inline constexpr std::string_view kStepContainer = "step";
// Verify pods (re-verification): stage label "verify", the checked stages in this annotation.
inline constexpr std::string_view kVerifyStage = "verify";
inline constexpr std::string_view kVerifyAnnotation = "hostpkg.gpufleet.io/verify";

struct StagePodOptions {
  std::string namespace_;
  std::string runner_image;  // the gpufleet image (pkg-step)
  std::string config_map;    // config stage: the ConfigMap holding the package's files
};

// "hp-<16 hex>": a hash of set, node and step key (stable across restarts, unique per step).
std::string stage_pod_name(std::string_view set, std::string_view node, const PlannedStep& step);

core::Value stage_pod(const HostPackageSet& set, const std::string& node, const PlannedStep& step,
                      const StagePodOptions& options);

// A verify pod: the package's checks only (`pkg-step --verify apply,...`, reverify.h), pinned
// to the node like a stage pod, for round `round` (the record's `verified` it started from).
// Named "hp-<16 hex>" from set, node and verify key, so a restarted controller finds it.
std::string verify_pod_name(std::string_view set, std::string_view node, std::string_view key);
core::Value verify_pod(const HostPackageSet& set, const DesiredState& desired,
                       const std::string& node, const Package& package, std::int64_t round,
                       const StagePodOptions& options);

// The ConfigMap holding one package's configMap files: named by set, package and content
// hash, so a change makes a new one and a running pod never sees its files change under it.
std::string config_map_name(std::string_view set, std::string_view package,
                            std::string_view config_hash);
core::Value config_map(const HostPackageSet& set, const Package& package,
                       const std::string& config_hash, const std::string& namespace_);

// The outcome of a finished stage pod, read from its termination message (the runner's JSON
// result). nullopt while the pod has not finished.
struct StageOutcome {
  bool ok = false;
  std::string status;   // succeeded, skipped, failed, timed-out, check-failed, or "pod-failed"
  std::string message;  // one line
};
std::optional<StageOutcome> stage_outcome(const core::Value& pod);

}  // namespace gpufleet::hostpkg
