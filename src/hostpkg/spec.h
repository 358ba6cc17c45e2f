// The HostPackageSet and DeploymentPolicy specs, read strictly from a core::Value (a parsed
// YAML/JSON object). Every field is checked once here, so planners can trust their input:
// a bad object gets one error naming the field path, the value and the fix, and changes
// nothing.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/semver.h"
#include "core/value.h"
#include "hostpkg/pod_resources.h"
#include "hostpkg/selector.h"
#include "kube/api/disruption.h"

namespace gpufleet::hostpkg {

// The stages a package goes through on a node, in order.
enum class Stage : unsigned char { Apply, Upgrade, Uninstall, Config, Interrupt, PostInterrupt };
inline constexpr std::size_t kStageCount = 6;
// "apply", "upgrade", "uninstall", "config", "interrupt", "post-interrupt".
std::string_view stage_name(Stage s) noexcept;
// Inverse of stage_name; false when `name` is not a stage.
bool parse_stage(std::string_view name, Stage& out) noexcept;

// What a node needs after a change: nothing, some services restarted, all services
// restarted, or a reboot. Ordered by disruption, so coalescing takes the maximum.
enum class InterruptKind : unsigned char { None, RestartServices, RestartAllServices, Reboot };
std::string_view interrupt_name(InterruptKind k) noexcept;

struct Interrupt {
  InterruptKind kind = InterruptKind::None;
  std::vector<std::string> services;  // RestartServices only; sorted, unique
  friend bool operator==(const Interrupt&, const Interrupt&) = default;
};

// Reads {type: none|reboot|restartServices|restartAllServices, services: [..]}.
Interrupt parse_interrupt(const core::Value& v, const std::string& field);
core::Value interrupt_to_value(const Interrupt& i);

// Several interrupts on one node become one: a reboot subsumes everything, restarting all
// services subsumes named restarts, named restarts merge.
Interrupt coalesce(const Interrupt& a, const Interrupt& b);

// A configMap key pattern (fnmatch glob) and what a change of a matching key needs.
struct ConfigInterrupt {
  std::string key_glob;
  Interrupt interrupt;
};

// How a version decrease is carried out.
enum class DowngradeRule : unsigned char {
  UninstallFirst,  // run the installed version's uninstall, then apply the lower version
  InPlace,         // run the upgrade stage with the lower version (the package says it can)
  Refuse,          // never downgrade; the node is reported blocked
};
std::string_view downgrade_name(DowngradeRule r) noexcept;

struct Package {
  std::string name;
  core::SemVer version;
  std::string version_text;  // as written, for images and messages
  std::string image;         // full reference: repo:version or repo@sha256:...
  std::vector<std::string> depends_on;
  std::map<std::string, std::string> config_map;  // file name -> content
  std::vector<ConfigInterrupt> config_interrupts;
  Interrupt interrupt;                     // after apply / upgrade / uninstall
  std::map<std::string, std::string> env;  // handed to every step
  PodResources resources;                  // requests and limits of every stage pod
  std::array<std::chrono::seconds, kStageCount> timeouts{};
  bool uninstall_supported = false;
  DowngradeRule downgrade = DowngradeRule::Refuse;

  // The interrupt a change of configMap key `key` needs (coalesced over matching globs);
  // None when no glob matches.
  [[nodiscard]] Interrupt interrupt_for_key(const std::string& key) const;
  [[nodiscard]] std::chrono::seconds timeout(Stage s) const {
    return timeouts[static_cast<std::size_t>(s)];
  }
};

// Periodic re-verification of nodes that finished the set (docs/hostpkg.md "Drift"): every
// `interval` the checks of each package run again on the node, without cordon or drain. A
// failed check marks the node Drifted; with Reapply the package goes back through the rollout.
enum class DriftAction : unsigned char { Report, Reapply };
std::string_view drift_action_name(DriftAction a) noexcept;

struct Reverify {
  static constexpr std::chrono::seconds kMinInterval{60};
  static constexpr std::chrono::seconds kMaxInterval{30 * 24 * 3600};
  std::chrono::seconds interval{0};  // 0: off (the default)
  DriftAction on_drift = DriftAction::Report;
  [[nodiscard]] bool enabled() const noexcept { return interval.count() > 0; }
};

// Validation by certify before a node's uncordon (docs/hostpkg.md "Validation"): when the
// change delivered an interrupt (Interrupting, the default), on every change (Always), or
// never. The node waits on a ValidationRequest; a failed or expired one fails the node.
enum class ValidateWhen : unsigned char { Interrupting, Always, Never };
std::string_view validate_when_name(ValidateWhen w) noexcept;

struct Validation {
  static constexpr std::int64_t kMinDeadline = 60;     // seconds
  static constexpr std::int64_t kMaxDeadline = 86400;  // seconds
  static constexpr std::size_t kMaxCategories = 16;    // the ValidationRequest's limit
  ValidateWhen when = ValidateWhen::Interrupting;
  std::vector<std::string> categories{"diagnostics/dcgm-r1"};  // certify catalog ids, in order
  std::chrono::seconds deadline{1800};
  // Whether a node whose change did (`interrupted`) or did not deliver an interrupt is
  // validated before its uncordon.
  [[nodiscard]] bool required(bool interrupted) const noexcept {
    return when == ValidateWhen::Always || (when == ValidateWhen::Interrupting && interrupted);
  }
};
// Reads {when, categories, deadlineSeconds}.
Validation parse_validation(const core::Value& v, const std::string& field);

enum class Sequencing : unsigned char {
  Node,  // a node starts this set once lower-priority-number sets are complete on that node
  All,   // this set starts only when lower-priority-number sets are complete on all nodes
};

struct HostPackageSet {
  std::string name;
  LabelSelector node_selector;
  std::vector<Package> packages;  // ordered so that every package follows its dependsOn
  std::int64_t priority = 100;    // lower runs first
  Sequencing sequencing = Sequencing::Node;
  bool runtime_required = false;
  bool auto_taint_new_nodes = false;
  bool pause = false;             // no new nodes start; started nodes finish
  bool disable = false;           // nothing runs; the set is ignored
  std::string deployment_policy;  // empty: the built-in conservative policy
  LabelSelector protected_pods;   // pods that must not be interrupted
  bool has_protected_pods = false;
  std::chrono::seconds protected_pod_wait{3600};
  core::Value additional_tolerations = core::Value::list();
  Reverify reverify;
  Validation validation;

  [[nodiscard]] const Package* find(std::string_view package) const noexcept;
};

// Reads a whole object (apiVersion gpufleet.io/v1alpha1, kind HostPackageSet, metadata.name,
// spec). Throws core::InvalidInput; a dependsOn cycle is named package by package.
HostPackageSet parse_host_package_set(const core::Value& object);

// A batch size as a count or a percentage of a compartment's nodes.
struct Budget {
  bool percent = false;
  std::int64_t value = 1;
  // The node count for a compartment of `size` nodes: percentages round down but never
  // below 1, so a non-empty compartment can always make progress.
  [[nodiscard]] std::int64_t resolve(std::int64_t size) const noexcept;
};

enum class StrategyKind : unsigned char { Fixed, Linear, Exponential };
std::string_view strategy_name(StrategyKind k) noexcept;

struct Strategy {
  StrategyKind kind = StrategyKind::Fixed;
  std::int64_t initial_batch = 1;
  std::int64_t step = 1;               // linear: added per successful batch
  double growth_factor = 2.0;          // exponential: multiplied per successful batch
  double batch_threshold = 100;        // % of a batch that must succeed for it to pass
  std::int64_t failure_threshold = 3;  // consecutive failed batches that stop the rollout
  double safety_limit = 50;            // % of the compartment's nodes that may fail before it stops

  // Size of a batch after `streak` consecutive successful batches (a failed batch resets
  // the streak, so growth starts over from the initial batch).
  [[nodiscard]] std::int64_t batch_size(std::int64_t streak) const noexcept;
};

struct Compartment {
  std::string name;
  LabelSelector selector;
  Budget budget;  // most nodes of the compartment out at once
  Strategy strategy;
};

struct DeploymentPolicy {
  std::string name;
  // Nodes matching no compartment fall into `fallback` (name "default").
  Compartment fallback;
  std::vector<Compartment> compartments;
};

// Reads a whole DeploymentPolicy object. Throws core::InvalidInput.
DeploymentPolicy parse_deployment_policy(const core::Value& object);
// One node at a time, fixed batches of 1: used when a set names no policy.
DeploymentPolicy conservative_policy();

// The disruption budget all sets share, with sentinel's quarantines counted against it.
// The cluster-wide limits: from the DisruptionBudget object when there is one, else from the
// controller's --set hostpkg.* settings. A percent rounds up, as the object's does
// (kube/api/disruption.h).
struct ClusterBudget {
  std::string topology_key;         // e.g. nvidia.com/gpu.clique or topology.kubernetes.io/rack
  std::int64_t max_per_domain = 1;  // nodes out at once per topology domain
  kube::IntOrPercent max_total{true, 10};  // nodes out at once in the whole fleet
};
// Reads {topologyKey, maxUnavailablePerDomain, maxUnavailable: {count|percent}}.
ClusterBudget parse_cluster_budget(const core::Value& v, const std::string& field);
// The DisruptionBudget's limits in the planner's form.
ClusterBudget cluster_budget_from(const kube::DisruptionBudgetSpec& spec);

}  // namespace gpufleet::hostpkg
