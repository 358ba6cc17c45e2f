// The hostpkg reconciler: one key is one HostPackageSet (reconciler.h says what a pass does).
// Each part of a pass has its file:
//   set_reconciler.cc  the caches, the writes every part shares (Node patches, the finalizer,
//                      the wait for the cache to see this pass's writes), the metrics;
//   rollout_pass.cc    one pass: observe the set, its policy and the Nodes; plan_rollout
//                      decides; drive the nodes in progress, start the planned ones, write the
//                      status (set_status.h decides phase, status and requeue);
//   node_drive.cc      one node in progress, one transition at a time (node_step.h decides);
//   node_start.cc      a planned start: the cluster budget's claims, the record and cordon;
//   reverify_pass.cc   re-verification of finished nodes (verify_round.h decides);
//   node_marks.cc      the runtime-required taint (runtime_taint.h decides) and the
//                      HostPackageDrifted node condition (node_condition.h);
//   setup.cc           settings, watches and the admission webhooks.
// Internal to the hostpkg controller.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "controller/budget.h"
#include "controller/disruption_reservation.h"
#include "controller/manager.h"
#include "controller/reconciler.h"
#include "controller/status.h"
#include "core/metrics.h"
#include "hostpkg/controller/node_scan.h"
#include "hostpkg/controller/node_step.h"
#include "hostpkg/controller/reconciler.h"
#include "hostpkg/controller/verify_round.h"
#include "hostpkg/rollout.h"
#include "hostpkg/spec.h"
#include "hostpkg/stage_plan.h"
#include "kube/events.h"

namespace gpufleet::hostpkg::detail {

struct Metrics {
  core::metrics::Gauge* nodes = nullptr;
  core::metrics::Gauge* stopped = nullptr;
  core::metrics::Counter* steps = nullptr;
  core::metrics::Histogram* stage_duration = nullptr;
  core::metrics::Counter* interrupts = nullptr;
  core::metrics::Counter* writes = nullptr;
  core::metrics::Counter* verifications = nullptr;
  core::metrics::Counter* drift = nullptr;
};

class HostPkgReconciler : public controller::Reconciler {
 public:
  HostPkgReconciler(controller::Manager& m, ControllerSettings settings);

  // Drains and protected-pod waits read only who runs where, labels and owners.
  static controller::CacheOptions pod_cache_options();

  controller::Cache& sets() { return sets_; }
  controller::Cache& nodes() { return nodes_; }
  controller::Cache& validation_requests() { return validation_requests_; }

  controller::Result reconcile(const controller::Request& req, std::stop_token stop) override;

 private:
  // A pass's node scan handed to its re-plan, brought up to date with the pass's own writes.
  struct Rescan {
    LabelKeys keys;
    std::vector<NodeScan> nodes;
  };
  struct Pass;
  enum class Drive { Waiting, Done, Failed };

  // ---- one pass (rollout_pass.cc) ----

  // `replan`: when the last nodes in progress finished in this pass, plan again at once (once),
  // from `reuse` when given instead of a new scan of the cache.
  controller::Result reconcile_pass(const controller::Request& req, std::stop_token stop,
                                    bool replan = true, Rescan* reuse = nullptr);
  // The set, its finalizer and its policy; a result when the pass ends here (the set is gone,
  // invalid, disabled, its policy missing or invalid, or the finalizer was just added).
  std::optional<controller::Result> observe_set(Pass& p, const controller::Request& req);
  // The Nodes (after the open incidents and the earlier sets): p.nodes, p.inputs and what
  // holds or gates each node.
  void observe_nodes(Pass& p, Rescan* reuse);
  // Drives every node in progress (kDriveWorkers at once); how many finished.
  std::size_t drive_in_progress(Pass& p, std::stop_token stop, bool& waiting);
  // Every node in progress finished and the plan started nobody: plan the next batch now,
  // from this pass's scan brought up to date with its writes.
  controller::Result replan_after_batch(Pass& p, const controller::Request& req,
                                        std::stop_token stop);
  // Claims and sends the plan's starts; false when the pass was stopped.
  bool start_planned(Pass& p, RolloutPlan& plan, std::stop_token stop, bool& waiting);
  // The phase, the deletion's end or the status, and when to look again.
  controller::Result conclude(Pass& p, RolloutPlan& plan, bool waiting, std::int64_t next_verify);
  void write_status(Pass& p, const RolloutPlan* plan, const std::string& phase,
                    const std::string& message);

  // ---- one node in progress (node_drive.cc) ----

  Drive drive_node(Pass& p, const std::string& node_name, std::stop_token stop);
  // The pass's scan shows the node waiting on its running stage pod (the common case), which
  // it tells without rebuilding the Node or the pod as Values.
  bool waits_on_stage_pod(Pass& p, const std::string& node_name);
  // One round's facts for decide_node_step; `to_evict`: the pods a drain would evict.
  NodeStepFacts observe_step(Pass& p, const core::Value& node, const NodeRecord& rec,
                             std::vector<kube::ObjectPtr>& to_evict);
  // A pod the drain must evict: not finished, not a DaemonSet's or mirror pod, not ours.
  bool evictable(const core::Value& pod) const;
  // Evicts the pods; a refusal by a PodDisruptionBudget is reported (DrainBlocked).
  void evict(Pass& p, const std::string& node_name, const std::vector<kube::ObjectPtr>& pods);
  void create_stage_pod(Pass& p, const std::string& node_name, const PlannedStep& step,
                        const std::string& pod_name);
  void note_validating(Pass& p, const std::string& node_name, const std::string& request);
  void create_validation_request(Pass& p, const std::string& node_name, const std::string& name);
  void finish_node(Pass& p, const core::Value& node, NodeRecord rec);
  void fail_node(Pass& p, const core::Value& node, NodeRecord rec, const std::string& why);

  // ---- a planned start (node_start.cc) ----

  void start_node(Pass& p, const NodeStart& s, std::string_view claimed_rv);
  // Claims the plan's starts on the cluster budget (one write); returns the node -> Node
  // resourceVersion claimed for those granted.
  std::unordered_map<std::string, std::string> claim_starts(Pass& p, const RolloutPlan& plan);
  // The DisruptionBudget object wins over the --set hostpkg.* settings; those stay the
  // default where there is no object (or it cannot be read).
  const ClusterBudget* cluster_budget(ClusterBudget& storage);

  // ---- re-verification (reverify_pass.cc) ----

  // Re-verification of finished nodes; returns when the next node is due (0: none).
  std::int64_t reverify(Pass& p);
  std::chrono::seconds reverify_interval(const HostPackageSet& set) const;
  struct Verifying;  // what a reverify pass keeps across the set's nodes
  // A due node's round: create its next verify pod, wait for it, or record the outcome.
  void verify_node(Pass& p, Verifying& v, const std::string& node_name);
  // The round's outcome into the record (drift counted, Events), its pods removed.
  void record_round(Pass& p, Verifying& v, const core::Value& node, NodeRecord rec,
                    const VerifyOutcome& outcome, const std::vector<VerifyPodFacts>& round);
  void remove_verify_pod(const std::string& name);

  // ---- node marks (node_marks.cc) ----

  void taints(Pass& p);
  // Brings every node's HostPackageDrifted condition in line with the records on it (one
  // nodes/status patch per node whose condition changes; none otherwise).
  void sync_drift_conditions(const std::vector<NodeScan>& nodes);

  // ---- writes every part shares (set_reconciler.cc) ----

  core::Value patch_node(const std::string& name, const core::Value& patch, const char* kind);
  void wait_for_cache();
  bool ensure_finalizer(const core::Value& set, bool present);
  void record_event(const core::Value& set, kube::EventType type, std::string_view reason,
                    std::string_view note) {
    events_.record(set, type, reason, "Rollout", note);
  }

  kube::Client& client_;
  const controller::Clock& clock_;  // the Manager's: never the wall clock directly
  ControllerSettings settings_;
  controller::Cache& sets_;
  controller::Cache& policies_;
  controller::Cache& nodes_;
  controller::Cache& pods_;
  controller::Cache& stage_pods_;
  controller::Cache& config_maps_;  // ours (set label, our namespace): create only when absent
  controller::Cache& pdbs_;
  controller::Cache& remediations_;           // sentinel's open incidents count as out
  controller::Cache& validation_requests_;    // certify's verdicts on nodes validating
  controller::BudgetReader budget_;           // the DisruptionBudget object, when there is one
  controller::DisruptionReservation claims_;  // the lock shared with sentinel and other replicas
  bool warned_both_ = false;                  // one worker: no lock needed
  std::string warned_invalid_;
  kube::EventRecorder& events_;
  controller::StatusWriter status_;
  Metrics metrics_;
  // written_, fresh_, created_*: the drive workers write at once. Also held across a config
  // map's look-up and create, so two nodes reaching the config stage together create it once.
  std::mutex written_mu_;
  std::vector<std::pair<std::string, std::string>> written_;     // this pass's Node writes
  std::vector<std::string> created_pods_, created_config_maps_;  // this pass's creates (keys)
  // The Nodes as this pass's writes left them (the API's answers), newest per node: the
  // re-plan after a batch plans from these instead of waiting for the watch to bring them.
  std::unordered_map<std::string, kube::CompactPtr> fresh_;
};

// Everything one reconcile of one set works from.
struct HostPkgReconciler::Pass {
  kube::ObjectPtr object;
  HostPackageSet set;
  DesiredState desired;
  bool deleting = false;
  DeploymentPolicy policy_storage;
  const DeploymentPolicy* policy = nullptr;  // null: the set names none
  ClusterBudget cluster_storage;
  const ClusterBudget* cluster = nullptr;  // the budget in force; null: none
  LabelKeys keys;                          // the label keys scanned (node_scan.h)
  std::vector<NodeScan> nodes;
  std::deque<NodeRecord> records;  // stable addresses for NodeInput::record
  std::vector<NodeInput> inputs;
  std::unordered_map<std::string, std::size_t> index;  // node -> inputs/nodes position
  std::unordered_set<std::string> incidents;           // nodes with an open sentinel incident
  std::unordered_set<std::string> outside;             // held by another set or component
  std::unordered_set<std::string> gated;               // an earlier set is not done there
  bool gated_all = false;                              // ... and it gates every node
  std::vector<std::string> in_progress;                // this set's nodes in progress
  // Written by the drive workers (see kDriveWorkers), so under `mu`.
  std::mutex mu;
  std::vector<std::string> node_messages;  // "node: why" for blocked / failed nodes
  std::int64_t drain_blocked = 0, protected_wait = 0;
  std::int64_t validating = 0;  // nodes waiting on certify's verdict (spec.validation)
  // Re-verification: drifted nodes ("node: package: message"), verify pods running.
  std::int64_t drifted = 0;
  std::vector<std::string> drift_messages;
  bool verifying = false;
};

}  // namespace gpufleet::hostpkg::detail
