// What the two sentinel reconcilers (controller.cc: nodes, policy_reconciler.cc: policies)
// share: the metrics, every followed policy's compiled form and circuit breaker, and the small
// helpers both use. Internal to the sentinel module.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/metrics.h"
#include "core/value.h"
#include "sentinel/breaker.h"
#include "sentinel/controller.h"
#include "sentinel/policy.h"
#include "sentinel/rules.h"

namespace gpufleet::controller {
class Controller;
}  // namespace gpufleet::controller

namespace gpufleet::sentinel::detail {

inline constexpr std::string_view kGpuLabel = "nvidia.com/gpu.present";
// The Pod cache's index by training job (kube::gang_index).
inline constexpr std::string_view kGangIndex = "gang";

std::int64_t now_ms();
std::string rfc3339(std::int64_t ms);
// Milliseconds since the epoch of an RFC 3339 field, or 0 when absent or unreadable.
std::int64_t ms_of(std::string_view text);
bool final_phase(std::string_view phase);
std::string phase_of(const core::Value& remediation);
// What an Event is about: list items carry no apiVersion/kind, the recorder needs them.
core::Value regarding(const core::Value& obj, std::string_view api_version, std::string_view kind);
core::Value node_ref(const core::Value& node);
bool is_gpu_node(const core::Value& node);

struct Metrics {
  explicit Metrics(core::metrics::Registry& r);
  core::metrics::Counter& quarantines;
  core::metrics::Counter& refused;  // by policy
  core::metrics::Counter& incidents_ended;
  core::metrics::Counter& pod_actions;
  core::metrics::Counter& remediation_requests;
  core::metrics::Counter& job_decisions;   // by action: RequestCheckpoint, DrainGang
  core::metrics::Counter& jobs_disrupted;  // by reason
  core::metrics::Counter& rule_problems;
  core::metrics::Gauge& breaker_tripped;    // by policy
  core::metrics::Gauge& breaker_nodes;      // by policy
  core::metrics::Gauge& breaker_threshold;  // by policy
  core::metrics::Gauge& policy_nodes;       // by policy: the GPU nodes it governs
  core::metrics::Gauge& incidents;
  core::metrics::Gauge& quarantined;
  core::metrics::Histogram& cordon_latency;
};

// One followed SentinelPolicy: its compiled form and its circuit breaker (guarded by
// State::mu). Held by shared_ptr so a worker saving its breaker keeps it alive while the policy
// is deleted.
struct PolicyState {
  std::string name;
  bool loaded = false;  // compiled and breaker restored; false: invalid (monitor-only)
  std::string uid;
  std::int64_t generation = -1;
  // The uid and generation the policy reconciler last looked at, valid or not: until every
  // followed policy in the cache has been looked at, which policy governs a node is not known.
  std::string seen_uid;
  std::int64_t seen_generation = -1;
  std::int64_t created_ms = 0;
  Policy policy;
  std::optional<RuleSet> rules;
  std::optional<CircuitBreaker> breaker;
  // Group commit of the breaker's durable form: admissions bump breaker_version and wait
  // until a write covering it is done; one write is in flight at a time and covers every
  // admission made before it started.
  std::uint64_t breaker_version = 0;
  std::uint64_t saved_version = 0;
  bool saving = false;
  std::vector<std::string> problems;
  std::map<std::string, std::int64_t> dry_run;
  bool was_tripped = false;
  // From the last count over the nodes (State::count_nodes).
  std::size_t gpu_nodes = 0;    // GPU nodes this policy governs: the breaker's denominator
  std::size_t overlapping = 0;  // GPU nodes it selects that a policy above it governs
  std::map<std::string, std::size_t> overlapped_by;  // those, by the governing policy
  std::int64_t open_incidents = 0;                   // on the nodes it governs
};
using PolicyPtr = std::shared_ptr<PolicyState>;

// The policy that governs a node among several: the loaded policies whose spec.nodeSelector
// selects it, the highest spec.priority first, then the name (deterministic and stable).
// Call with State::mu held. nullptr: no policy governs the node (sentinel leaves it alone).
PolicyPtr governing_policy(const std::map<std::string, PolicyPtr>& policies,
                           const core::Value& node);
// Whether `a` outranks `b` as the governing policy of a node both select.
bool outranks(const PolicyState& a, const PolicyState& b);

// The gangs whose checkpoint each node's drain waits for (GangKey::index()): an event of a pod of
// such a gang is an event for the node too, since the answer usually comes on a pod elsewhere.
// Each look at a node sets its gangs (none, outside a Draining incident's wait); a restart loses
// nothing, every node is looked at on start.
class GangWaits {
 public:
  void set(const std::string& node, std::set<std::string> gangs);
  [[nodiscard]] std::vector<std::string> nodes(const std::string& gang) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::set<std::string>> by_node_;
  std::map<std::string, std::set<std::string>> by_gang_;
};

struct State {
  GangWaits gang_waits;
  std::mutex mu;
  std::condition_variable saved_cv;  // a breaker save finished
  // Every followed policy that exists, by name (loaded or not).
  std::map<std::string, PolicyPtr> policies;
  std::set<std::string> follow;  // the names followed; empty: every SentinelPolicy
  std::int64_t counted_at_ms = 0;
  std::uint64_t policies_version = 0;  // bumped when a policy is loaded, changed or removed
  std::uint64_t counted_version = 0;
  controller::Controller* nodes_controller = nullptr;
  std::shared_ptr<Metrics> metrics;         // kept alive with the reconcilers that use it
  std::vector<std::string> provider_names;  // the replacement providers (fixed at setup)

  [[nodiscard]] bool follows(std::string_view policy) const {
    return follow.empty() || follow.contains(std::string(policy));
  }
};

}  // namespace gpufleet::sentinel::detail
