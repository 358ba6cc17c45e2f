// The node reconciler: one key is one Node. It opens an incident (a Remediation) when the
// governing policy's rules match a fault, behind the policy's circuit breaker, and drives the
// incident through its phases (docs/sentinel.md). node_reconciler.cc holds the look at a node
// and the quarantine; incident_phases.cc the phases after it. Internal to the sentinel module.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/budget.h"
#include "controller/disruption_reservation.h"
#include "controller/reconciler.h"
#include "controller/status.h"
#include "controller/work_pool.h"
#include "kube/api/disruption.h"
#include "kube/api/store.h"
#include "sentinel/controller_shared.h"
#include "sentinel/drain.h"
#include "sentinel/quarantine.h"
#include "sentinel/remediation_step.h"

namespace gpufleet::kube {
class Client;
class EventRecorder;
}  // namespace gpufleet::kube

namespace gpufleet::controller {
class Cache;
class Manager;
}  // namespace gpufleet::controller

namespace gpufleet::sentinel::detail {

struct NodeCaches {
  const controller::Cache& nodes;
  const controller::Cache& healths;
  const controller::Cache& remediations;
  const controller::Cache& pods;
  const controller::Cache& vreqs;
  const controller::Cache& policies;
};

class NodeReconciler final : public controller::Reconciler {
 public:
  NodeReconciler(controller::Manager& m, std::shared_ptr<State> state, Metrics& metrics,
                 std::shared_ptr<Remediator> remediator,
                 std::map<std::string, std::shared_ptr<ReplacementProvider>> providers,
                 const NodeCaches& caches, std::size_t follow_up_threads);

  controller::Result reconcile(const controller::Request& req, std::stop_token) override;

 private:
  // ---- the look at a node (node_reconciler.cc) ----

  // The Node is gone: its incident fails, unless a replacement is due to register.
  controller::Result node_gone(const Policy& policy, const core::Value& active);
  // A quarantine record without its Remediation (killed in between), a finished incident's
  // interrupted release, a Failed incident handed back. nullopt: go on to the rules
  // (`take_over`: a Failed incident holds the node; a new one takes the quarantine over).
  std::optional<controller::Result> resume_record(
      const PolicyPtr& ps, const Policy& policy, const core::Value& node,
      const QuarantineRecord& rec, const std::set<std::string>& faulty, const core::Value* health,
      const std::map<std::string, std::int64_t>& overridden, bool& take_over);
  // The rules matched: the breaker's admission and the cordon (the only write on the
  // fault -> cordon path), the rest on the follow-up pool.
  controller::Result quarantine(const controller::Request& req, const PolicyPtr& ps, Policy policy,
                                const core::Value& node, Decision decision,
                                std::set<std::string> entities, std::int64_t fault_since,
                                bool take_over);
  // What follows a quarantine's cordon, off the worker: the incident, its Events and status,
  // and the breaker's durable form.
  void after_cordon(const PolicyPtr& ps, std::uint64_t version, const Policy& policy,
                    const core::Value& node, const Decision& decision,
                    const std::set<std::string>& entities, const std::string& name,
                    const std::string& action, const std::optional<core::Value>& escalation,
                    std::int64_t cordoned, std::int64_t latency);
  void evaluate(PolicyState& ps, const core::Value& health, const core::Value& node,
                const std::set<std::string>& faulty,
                const std::map<std::string, std::int64_t>& overridden, Decision& decision,
                std::set<std::string>& entities, std::int64_t& fault_since);
  // The breaker's durable form into the policy's status (group commit).
  void save_breaker(const PolicyPtr& ps, std::uint64_t version);
  // Every followed SentinelPolicy in the cache has been looked at by the policy reconciler at
  // its current uid and generation, and no deleted one is still followed.
  bool policies_settled();
  // The policy a node is reconciled under (nullptr: monitor-only).
  PolicyPtr policy_for(const core::Value* node, const core::Value* incident);
  controller::Result gate_new_node(const std::string& policy_name, const Policy& policy,
                                   std::int64_t policy_created, const core::Value& node);

  // ---- writes ----

  // The Node as patched, or nullopt when there was nothing to change.
  std::optional<core::Value> patch_node(const core::Value& node, const NodeChange& change);
  // The Remediation as created, or nullopt when it existed already.
  std::optional<core::Value> create_incident(
      const core::Value& node, const std::string& policy_name, const std::string& name,
      const std::string& reason, const std::set<std::string>& entities,
      const std::vector<std::string>& rules, bool cordon, const std::vector<Taint>& taints,
      const std::string& action, const core::Value* escalation = nullptr);
  // The Remediation as written (its new resourceVersion, for a second write in one look).
  core::Value write_status(const core::Value& rem, core::Value status);
  void set_phase(const core::Value& rem, const std::string& phase, const std::string& message,
                 const std::function<void(core::Value&)>& extra = nullptr);
  // Ends the incident: sentinel's marks off the node first (when it is there and the phase
  // lets it back), then the final phase.
  void finish(const core::Value& rem, const std::string& phase, const std::string& message,
              const core::Value* node, bool validated = false,
              const std::function<void(core::Value&)>& extra = nullptr);

  // ---- the incident's phases (incident_phases.cc) ----

  // What every phase needs of one look.
  struct Look {
    const Policy& policy;
    const core::Value& node;
    const core::Value& rem;
    const QuarantineRecord& rec;
    const std::set<std::string>& faulty;
    const core::Value* health;
    std::string name{};       // the incident's
    std::string node_name{};  // the node's
    std::set<std::string> entities{};
    bool new_node = false;
    bool recovered = false;  // every entity healthy again (never for a new node)
    std::int64_t now = 0;
  };
  controller::Result drive(const Policy& policy, const core::Value& node, const core::Value& rem,
                           const QuarantineRecord& rec, const std::set<std::string>& faulty,
                           const core::Value* health);
  // Before the phase: a person's hand-back, recovered entities, the agent's log bundle.
  std::optional<controller::Result> drive_common(const Look& l, const std::string& phase);
  controller::Result drive_detected(const Look& l);
  controller::Result drive_quarantined(const Look& l);
  controller::Result drive_draining(const Look& l);
  // Draining, before the pods go: the training jobs with a pod on the node (kube::decide_jobs
  // over the node's pods and their gangs'), their new records persisted in status.jobs before
  // anything is done, then the checkpoint requests. `written`: the Remediation as written, when
  // it was.
  JobDrain drain_jobs(const Look& l, const std::vector<const core::Value*>& on_node,
                      std::vector<kube::ObjectPtr>& keep, std::optional<core::Value>& written);
  void record_job_decision(const Look& l, const kube::JobDecision& d,
                           const std::vector<kube::JobRecord>& records);
  controller::Result drive_remediating(const Look& l);
  controller::Result drive_validating(const Look& l);
  // Remediating: observe, then act on decide_remediation's step.
  RemediationFacts observe_remediation(const Look& l, const std::string& action,
                                       ReplacementProvider* provider) const;
  controller::Result act_remediation(const Look& l, const RemediationStep& step,
                                     const RemediationFacts& facts, ReplacementProvider* provider);
  // Records attempt `step.attempt` of `step.action` in the status, then asks for it.
  void request_action(const Look& l, const RemediationStep& step, ReplacementProvider* provider);
  void ask(const Look& l, const std::string& type, std::int64_t attempt, std::int64_t request_no,
           const std::vector<std::string>& gpus, const std::string& old_uid,
           ReplacementProvider* provider);
  // The phase after Quarantined: Draining, Remediating, or Validating.
  void after_quarantine(const Policy& policy, const core::Value& node, const core::Value& rem,
                        bool new_node, std::int64_t now,
                        const std::function<void(core::Value&)>& extra);
  void enter_validating(const Policy& policy, const core::Value& node, const core::Value& rem,
                        const std::string& message, const std::function<void(core::Value&)>& extra);
  void create_validation_request(const Policy& policy, const std::string& node_name,
                                 const std::string& name, std::int64_t now);
  std::vector<const core::Value*> pods_on(const std::string& node,
                                          std::vector<kube::ObjectPtr>& keep);

  // ---- the DisruptionBudget (node_reconciler.cc) ----

  // Why a disruptive action on `node` must wait for the DisruptionBudget; nullopt: go, with
  // the node claimed.
  std::optional<std::string> budget_wait(const core::Value& node, const core::Value& rem);
  struct OutScan {
    std::int64_t total = 0;
    std::vector<kube::NodeOutFacts> out;
  };
  template <typename IncidentOn>
  std::shared_ptr<const OutScan> out_scan(const std::string& key, IncidentOn&& incident_on);
  controller::Result hold_for_budget(const core::Value& rem, const std::string& why);

  kube::Client& client_;
  kube::EventRecorder& events_;
  std::shared_ptr<State> state_;
  Metrics& metrics_;
  std::shared_ptr<Remediator> remediator_;
  std::map<std::string, std::shared_ptr<ReplacementProvider>> providers_;
  const controller::Cache& nodes_;
  const controller::Cache& healths_;
  const controller::Cache& remediations_;
  const controller::Cache& pods_;
  const controller::Cache& vreqs_;
  const controller::Cache& policies_;
  controller::StatusWriter breaker_status_;
  controller::BudgetReader budget_;           // the DisruptionBudget (read, not watched)
  controller::DisruptionReservation claims_;  // the lock shared with hostpkg (and replicas)
  std::mutex scan_mu_;                        // guards the three below (out_scan)
  std::shared_ptr<const OutScan> scan_;
  std::string scan_key_;
  std::chrono::steady_clock::time_point scan_at_;
  // Fault -> cordon latency of incidents created by this process, until their status has it
  // (different node keys run in parallel).
  std::mutex latency_mu_;
  std::map<std::string, std::int64_t> cordon_latency_;
  // Incidents whose status this process wrote right after creating them, until the cache
  // shows it (guarded by latency_mu_).
  std::set<std::string> status_written_;
  // Last: its threads are joined before the members they use go.
  controller::WorkPool follow_ups_;
};

}  // namespace gpufleet::sentinel::detail
