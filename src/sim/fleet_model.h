// Every simulated node's GPU/fabric/host model plus the event timeline, in simulated time.
// No Kubernetes here: the kubelet layer (sim/kubelet) mirrors what this decides into the
// API server. Not thread-safe; the owner serializes calls.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/value.h"
#include "sim/bandwidth_model.h"
#include "sim/fleet_spec.h"
#include "sim/node_model.h"
#include "sim/scenario.h"

namespace gpufleet::sim {

struct AppliedEvent {
  double at_s = 0;
  EventKind kind = EventKind::Fault;
  std::string node;  // empty for scale
  std::string what;  // "xid 79 gpu 3", "reboot, down 60s", "boot", "scale h100 8 -> 12"
  std::vector<std::string> added;    // scale: nodes created
  std::vector<std::string> removed;  // scale: nodes deleted
  std::string error;                 // the event could not apply (target gone, bad GPU)
};

class FleetModel {
 public:
  explicit FleetModel(FleetSpec spec, double now_s = 0);
  FleetModel(const FleetModel&) = delete;
  FleetModel& operator=(const FleetModel&) = delete;

  [[nodiscard]] const FleetSpec& spec() const noexcept { return spec_; }
  // Current nodes, pool by pool, in index order.
  [[nodiscard]] std::vector<std::string> node_names() const;
  [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
  NodeModel* find(std::string_view name);
  [[nodiscard]] const NodeModel* find(std::string_view name) const;
  // True while a reboot keeps the node down (NotReady, no pods).
  [[nodiscard]] bool is_down(std::string_view name) const;
  // Simulated time the node comes back from a reboot (or a negative value).
  [[nodiscard]] double down_until(std::string_view name) const;

  // Queues an event for its `at_s`.
  void schedule(SimEvent e);
  [[nodiscard]] std::size_t pending_events() const noexcept { return queue_.size(); }
  // Applies queued events due by `now_s`, IB flaps, and boots of rebooted nodes whose down
  // time is over. Events on vanished targets are reported with `error`, not thrown.
  std::vector<AppliedEvent> advance(double now_s);
  // Applies one event at once; throws core::InvalidInput on an unknown node/pool/GPU.
  std::vector<AppliedEvent> apply(const SimEvent& e, double now_s);

  // The injected outcome (hostStep / stagePod events) for a stage pod of `package` and
  // `stage` on `node`, one use consumed; nullopt when none matches.
  std::optional<StepInjection> take_step_injection(const std::string& node,
                                                   const std::string& package,
                                                   const std::string& stage) {
    return step_injections_.take(node, package, stage);
  }

  // The members of an NCCL group (throws core::InvalidInput naming an unknown host).
  [[nodiscard]] std::vector<GroupMember> group(const std::vector<std::string>& hosts) const;
  // Writes every node's signal files under `root` (only files that changed).
  std::size_t write_signals(const std::string& root) const;
  // Signal file writes of at most `max_nodes` changed nodes (round robin, so a big fleet's
  // first mirror spreads over several calls): render under the caller's lock, write outside.
  std::vector<std::pair<std::string, std::string>> take_signal_writes(const std::string& root,
                                                                      std::size_t max_nodes);
  // Degraded links between two nodes (linkDegraded faults), each pair once (a < b).
  [[nodiscard]] const std::map<std::pair<std::string, std::string>, double>& degraded_links()
      const noexcept {
    return links_;
  }
  // Counts for the status summary: nodes per pool, down, faulty, GPUs, ports.
  [[nodiscard]] core::Value summary(double now_s) const;

 private:
  std::vector<std::string> targets(const SimEvent& e);
  void add_node(std::size_t pool, int index, double now_s);
  std::vector<AppliedEvent> scale(const std::string& pool, int count, double now_s);
  void forget_links(const std::string& node);

  FleetSpec spec_;
  std::vector<std::string> order_;
  std::unordered_map<std::string, std::unique_ptr<NodeModel>> nodes_;
  std::unordered_map<std::string, double> down_until_;
  std::map<std::pair<std::string, std::string>, double> links_;  // (a, b), a < b -> factor
  std::vector<SimEvent> queue_;                                  // sorted by at_s, stable
  StepInjections step_injections_;
  std::uint64_t picks_ = 0;
  std::size_t signal_cursor_ = 0;
};

}  // namespace gpufleet::sim
