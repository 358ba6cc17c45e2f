// The certify controller (`gpufleet controller --controllers=certify`, docs/certify.md):
//   Certification      selects the nodes (frozen in a ConfigMap it owns when the run starts),
//                      runs its categories in order as Jobs, judges every group's result with
//                      the parsers and thresholds, drives the isolation planner for scale
//                      diagnose, records every group result and node verdict in per-category
//                      ConfigMaps it owns, and keeps a bounded summary in status.
//   WorkloadRun        the same for the user's container (one category, result contract).
//   ValidationRequest  answered through a Certification it owns; only status is written.
// It never changes a Node (its RBAC cannot). Level-triggered: every decision is recomputed
// from the API (the run's ConfigMaps, Jobs, Pods), so kill -9 at any point resumes without
// re-running a group whose result is recorded.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "api/resources.h"
#include "certify/metrics.h"
#include "certify/mpijob.h"
#include "certify/node_selection.h"
#include "certify/run_limits.h"
#include "certify/run_spec.h"
#include "certify/run_state.h"
#include "controller/cache.h"
#include "controller/clock.h"
#include "controller/reconciler.h"
#include "controller/status.h"
#include "kube/client.h"
#include "kube/events.h"

namespace gpufleet::controller {
class Manager;
struct Context;
}  // namespace gpufleet::controller

namespace gpufleet::certify {

class IsolationPlanner;
struct Judgement;

namespace resources {
using api::certifications;       // api/resources.h
using api::validation_requests;  // api/resources.h
using api::workload_runs;        // api/resources.h
kube::ResourceId services();
}  // namespace resources

inline constexpr const char* kFieldManager = "gpufleet-certify";
// ConfigMap data key of a category's state (run_state.h).
inline constexpr const char* kStateKey = "state.json";
// "<run>-certify-<i>": category i's state and results; "<run>-certify-targets": the nodes.
std::string state_config_map(std::string_view run, int category);
std::string targets_config_map(std::string_view run);
// What `run` is in those names: a Certification's name; "wlr-<name>" for a WorkloadRun (so
// the two kinds never share ConfigMaps).
std::string storage_name(bool workload_run, std::string_view name);

struct RunKind {
  kube::ResourceId resource;
  std::string kind;  // Certification, WorkloadRun
  bool workload_run = false;
};

class RunReconciler : public controller::Reconciler {
 public:
  // `mpijobs`: the MPIJob cache when the cluster serves MPIJob (null otherwise); `launcher`:
  // what multi-node MPI-style groups run as (MpiJob needs `mpijobs`); `overdue_grace`: how
  // long past its deadline a group's Job or MPIJob may go without ending before certify stops
  // waiting for the controller that should end it (judged Infrastructure).
  RunReconciler(kube::Client& client, RunKind kind, const controller::Cache& runs,
                const controller::Cache& nodes, const controller::Cache& jobs,
                const controller::Cache& pods, kube::EventRecorder& events,
                const controller::Clock& clock, const controller::Cache* mpijobs = nullptr,
                Launcher launcher = Launcher::Job,
                std::chrono::milliseconds overdue_grace = std::chrono::minutes(2),
                RunLimits limits = {}, std::shared_ptr<CertifyMetrics> metrics = nullptr);
  controller::Result reconcile(const controller::Request& request, std::stop_token stop) override;

 private:
  struct Run;
  // One category's step (run_reconciler.cc): observe its groups' workloads, recording what
  // they judged; conclude it once every group ended; store it; then act: delete recorded
  // workloads, start waiting groups. The decisions are category_step.h's.
  struct Observed;
  void step_category(Run& run, int index, std::stop_token stop);
  void start_category(Run& run, int index);
  Observed observe_groups(Run& run, int index, IsolationPlanner* planner);
  std::optional<Judgement> judge_group(const Run& run, const CategoryPlan& plan,
                                       const GroupState& g, const std::string& jname,
                                       const core::Value& job,
                                       std::chrono::system_clock::time_point now) const;
  std::optional<Judgement> judge_pod_output(const Run& run, const CategoryPlan& plan,
                                            const GroupState& g, const std::string& jname,
                                            const WorkloadProgress& progress,
                                            std::chrono::system_clock::time_point now) const;
  void store_category(Run& run, int index, const std::vector<std::string>& retried,
                      const IsolationPlanner* planner, int rounds_before);
  void delete_workloads(const std::string& ns, const std::vector<std::string>& names);
  // Every workload (Job, MPIJob) labelled with run `uid`, or, for a run already deleted,
  // controlled by an object of this kind named `owner`: stopped at once.
  std::vector<std::string> workloads_of(std::string_view uid, std::string_view ns,
                                        std::string_view owner) const;
  // Refused before anything runs: Accepted=False with `reason`, phase Failed.
  void reject(Run& run, std::string_view reason, const std::string& message);
  void start_groups(Run& run, int index, const Observed& seen);
  void write_status(Run& run);
  // A group's workload object, whichever launcher ran it (a Job, else an MPIJob).
  kube::ObjectPtr workload(const std::string& ns, const std::string& name) const;
  void event(const Run& run, kube::EventType type, std::string_view reason, std::string_view action,
             std::string_view note);

  kube::Client& client_;
  RunKind kind_;
  kube::EventRecorder& events_;
  const controller::Clock& clock_;  // the Manager's: never the wall clock directly
  const controller::Cache& runs_;
  const controller::Cache& nodes_;
  const controller::Cache& jobs_;
  const controller::Cache& pods_;
  const controller::Cache* mpijobs_;
  Launcher launcher_;
  std::chrono::milliseconds overdue_grace_;
  RunLimits limits_;
  controller::StatusWriter status_;
  std::shared_ptr<CertifyMetrics> metrics_;  // null: not counted
};

// Index of the certify job cache by the run's uid (label gpufleet.io/certify-run).
inline constexpr const char* kRunIndex = "certify-run";

class ValidationReconciler : public controller::Reconciler {
 public:
  ValidationReconciler(kube::Client& client, const controller::Cache& requests,
                       const controller::Cache& certifications, std::string ns,
                       kube::EventRecorder& events, const controller::Clock& clock);
  controller::Result reconcile(const controller::Request& request, std::stop_token stop) override;
  // The Certification answering request `name` (in the controller's namespace).
  static std::string certification_name(std::string_view request);

 private:
  kube::Client& client_;
  const controller::Cache& requests_;
  const controller::Cache& certs_;
  std::string ns_;
  kube::EventRecorder& events_;
  const controller::Clock& clock_;
  controller::StatusWriter status_;
};

// Every node verdict of a finished run, read from its ConfigMaps: node -> {passed, reason,
// category, message}; nodes the run excluded are listed with reason "" and the exclusion.
struct NodeResult {
  std::string node;
  bool passed = true;
  bool tested = true;
  std::string reason;
  std::string category;
  std::string message;
};
std::vector<NodeResult> read_node_results(kube::Client& client, std::string_view ns,
                                          std::string_view run, std::size_t categories);

// The stored target set and category states of a run (nullopt when not written yet).
std::optional<Selection> read_targets(kube::Client& client, std::string_view ns,
                                      std::string_view run);
std::optional<CategoryState> read_category(kube::Client& client, std::string_view ns,
                                           std::string_view run, int category);

void setup_certify(controller::Manager& manager, const controller::Context& context);

}  // namespace gpufleet::certify
