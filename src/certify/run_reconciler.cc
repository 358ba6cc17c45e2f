// The run reconciler (controller.h): a Certification's or WorkloadRun's target set frozen
// when it starts, its categories stepped in order (step_category: observe -> decide in
// category_step.h -> act), and its status.
#include <algorithm>
#include <set>

#include "certify/category_step.h"
#include "certify/controller.h"
#include "certify/controller_shared.h"
#include "certify/isolation_planner.h"
#include "certify/judge.h"
#include "certify/node_selection.h"
#include "certify/run_state.h"
#include "certify/state_codec.h"
#include "certify/verdict.h"
#include "certify/workload_job.h"
#include "core/json.h"
#include "kube/api/conditions.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/errors.h"

namespace gpufleet::certify {

using detail::cut;
using detail::kPoll;
using detail::nodes_from_value;
using detail::nodes_to_value;
using detail::now_rfc3339;
using detail::read_map;
using detail::regarding;
using detail::select_run_nodes;
using detail::StoredMap;

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kStatusListMax = 100;
// A finished Job whose pod shows no terminated container yet: the pod cache lags the Job's;
// wait this long before judging the group WorkloadFailed.
constexpr auto kPodGrace = 30s;

// From the object's creation to `now`; -1 when its creationTimestamp cannot be read.
double seconds_since_creation(const core::Value& obj, std::chrono::system_clock::time_point now) {
  const auto created = kube::parse_rfc3339(obj.get_string({"metadata", "creationTimestamp"}));
  if (!created) return -1;
  return std::chrono::duration<double>(now - *created).count();
}

core::Value owner_ref(const RunKind& k, const core::Value& obj) {
  core::Value r;
  r["apiVersion"] = k.resource.api_version();
  r["kind"] = k.kind;
  r["name"] = kube::name_of(obj);
  r["uid"] = kube::uid_of(obj);
  r["controller"] = true;
  r["blockOwnerDeletion"] = true;
  return r;
}

// Creates or updates (optimistically) the state map; a conflict throws and the reconcile
// is retried from what the API holds.
void write_map(kube::Client& client, const RunKind& kind, const core::Value& owner,
               const std::string& name, const core::Value& data,
               const std::string& resource_version) {
  core::Value cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = name;
  cm["metadata"]["namespace"] = kube::namespace_of(owner);
  cm["metadata"]["labels"][kRunLabel] = kube::uid_of(owner);
  cm["metadata"]["labels"]["app.kubernetes.io/part-of"] = "gpufleet";
  cm["metadata"]["ownerReferences"].push_back(owner_ref(kind, owner));
  EncodedState e = encode_state(kStateKey, core::to_json(data));
  cm["data"] = std::move(e.data);
  cm["binaryData"] = std::move(e.binary_data);
  if (resource_version.empty()) {
    client.create(kube::resources::config_maps(), cm, kFieldManager);
  } else {
    cm["metadata"]["resourceVersion"] = resource_version;
    client.update(kube::resources::config_maps(), cm, kFieldManager);
  }
}

// ---- judging a finished Job ----

const core::Value* workload_status(const core::Value& pod) {
  const core::Value* cs = pod.get({"status", "containerStatuses"});
  if (cs == nullptr || !cs->is_list()) return nullptr;
  for (const auto& c : cs->as_list())
    if (c.get_string({"name"}) == kContainerName) return &c;
  return nullptr;
}

GroupResult to_result(const Judgement& j) {
  GroupResult r;
  r.passed = j.passed;
  if (j.reason) r.reason = std::string(reason_name(*j.reason));
  r.message = cut(j.message, 480);
  r.metrics = j.metrics;
  return r;
}

}  // namespace

Selection detail::select_run_nodes(Targets t, bool validation, const controller::Cache& nodes) {
  if (validation) {
    // A ValidationRequest's nodes are usually held out by their requester: test them anyway.
    core::Value all;
    all["operator"] = "Exists";
    t.tolerations.push_back(all);
  }
  Selection sel = select_nodes(t, nodes.list());
  if (validation) {
    std::vector<Exclusion> kept;
    for (auto& e : sel.excluded) {
      if (e.reason != "Cordoned") {
        kept.push_back(e);
        continue;
      }
      if (kube::ObjectPtr n = nodes.get(e.node)) sel.nodes.push_back(node_info(*n));
    }
    sel.excluded = std::move(kept);
    std::sort(sel.nodes.begin(), sel.nodes.end(),
              [](const NodeInfo& a, const NodeInfo& b) { return a.name < b.name; });
  }
  return sel;
}

struct RunReconciler::Run {
  kube::ObjectPtr obj;
  std::string ns, name, uid;
  std::string store;  // names its ConfigMaps (storage_name)
  RunSpec spec;
  Selection targets;
  std::map<std::string, const NodeInfo*> info;
  std::vector<CategoryState> states;  // categories started so far, in order
  std::vector<std::string> versions;  // their ConfigMaps' resourceVersions
  bool tolerate_unschedulable = false;
  std::string phase = "Running";
  std::string message;
  std::string reason;  // the Passed condition's reason when it is not the usual one
};

RunReconciler::RunReconciler(kube::Client& client, RunKind kind, const controller::Cache& runs,
                             const controller::Cache& nodes, const controller::Cache& jobs,
                             const controller::Cache& pods, kube::EventRecorder& events,
                             const controller::Clock& clock, const controller::Cache* mpijobs,
                             Launcher launcher, std::chrono::milliseconds overdue_grace,
                             RunLimits limits, std::shared_ptr<CertifyMetrics> metrics)
    : client_(client),
      kind_(std::move(kind)),
      events_(events),
      clock_(clock),
      runs_(runs),
      nodes_(nodes),
      jobs_(jobs),
      pods_(pods),
      mpijobs_(mpijobs),
      launcher_(mpijobs != nullptr ? launcher : Launcher::Job),
      overdue_grace_(overdue_grace),
      limits_(limits),
      status_(client, kind_.resource, kind_.kind, kFieldManager),
      metrics_(std::move(metrics)) {}

kube::ObjectPtr RunReconciler::workload(const std::string& ns, const std::string& name) const {
  const std::string key = kube::object_key(ns, name);
  if (kube::ObjectPtr job = jobs_.get(key)) return job;
  return mpijobs_ != nullptr ? mpijobs_->get(key) : nullptr;
}

void RunReconciler::event(const Run& run, kube::EventType type, std::string_view reason,
                          std::string_view action, std::string_view note) {
  events_.record(regarding(*run.obj, kind_.resource, kind_.kind), type, reason, action,
                 cut(std::string(note), 1024));
}

void RunReconciler::reject(Run& run, std::string_view reason, const std::string& message) {
  core::Value status = run.obj->find("status") ? *run.obj->find("status") : core::Value::map();
  core::Value conds = status.find("conditions") ? *status.find("conditions") : core::Value();
  std::int64_t gen = 0;
  if (const core::Value* g = run.obj->get({"metadata", "generation"}); g && g->is_int())
    gen = g->as_int();
  kube::set_condition(conds,
                      {"Accepted", "False", std::string(reason), cut(message, 1024), gen, {}});
  kube::set_condition(conds,
                      {"Complete", "True", "NotAccepted", "the spec was not accepted", gen, {}});
  core::Value out;
  out["phase"] = "Failed";
  out["observedGeneration"] = gen;
  out["message"] = cut(message, 1024);
  out["conditions"] = conds;
  status_.apply(run.ns, run.name, out);
  if (metrics_)
    metrics_->run_ended(kind_.kind, "Failed", seconds_since_creation(*run.obj, clock_.now()));
  event(run, kube::EventType::Warning, "Rejected", "Accept", message);
}

std::vector<std::string> RunReconciler::workloads_of(std::string_view uid, std::string_view ns,
                                                     std::string_view owner) const {
  std::set<std::string> names;
  auto collect = [&](const controller::Cache& cache) {
    if (!uid.empty()) {
      for (const auto& w : cache.by_index(kRunIndex, std::string(uid)))
        names.insert(std::string(kube::name_of(*w)));
      return;
    }
    for (const auto& w : cache.list()) {
      if (kube::namespace_of(*w) != ns) continue;
      const core::Value* refs = w->get({"metadata", "ownerReferences"});
      if (refs == nullptr || !refs->is_list()) continue;
      for (const auto& r : refs->as_list())
        if (r.get_string({"kind"}) == kind_.kind && r.get_string({"name"}) == owner)
          names.insert(std::string(kube::name_of(*w)));
    }
  };
  collect(jobs_);
  if (mpijobs_ != nullptr) collect(*mpijobs_);
  return {names.begin(), names.end()};
}

controller::Result RunReconciler::reconcile(const controller::Request& request,
                                            std::stop_token stop) {
  kube::ObjectPtr obj = runs_.get(request.key());
  if (obj == nullptr) {
    // Deleted: its workloads stop now rather than when the garbage collector reaches them
    // (which it still does, should this controller be down).
    delete_workloads(request.namespace_, workloads_of("", request.namespace_, request.name));
    return {};
  }
  std::string phase(obj->get_string({"status", "phase"}));
  if (phase == "Passed" || phase == "Failed") {
    // A record: never re-run. A workload still there (left by a controller killed between
    // ending the run and deleting it) is stopped.
    delete_workloads(request.namespace_, workloads_of(kube::uid_of(*obj), "", ""));
    return {};
  }

  Run run;
  run.obj = obj;
  run.ns = request.namespace_;
  run.name = request.name;
  run.store = storage_name(kind_.workload_run, request.name);
  run.uid = std::string(kube::uid_of(*obj));
  const core::Value* spec = obj->find("spec");
  std::chrono::seconds bound{};
  try {
    run.spec = kind_.workload_run
                   ? parse_workload_run_spec(spec ? *spec : core::Value())
                   : parse_certification_spec(spec ? *spec : core::Value(), Catalog::builtin());
    bound = run_duration_bound(run.spec, limits_);
  } catch (const SpecError& e) {
    // Admission checked the schema; what only certify can check (a CEL expression that does
    // not compile, a maxDuration over the policy) is refused here, once, naming the field.
    reject(run, e.reason(), e.what());
    return {};
  }
  const core::Value* vr = obj->get({"metadata", "labels", "gpufleet.io/validation-request"});
  run.tolerate_unschedulable = vr != nullptr;

  // The target set is chosen once, when the run starts, and kept: nodes cordoned or added
  // later do not move a run that is under way.
  StoredMap targets = read_map(client_, run.ns, targets_config_map(run.store));
  if (targets.data.is_null()) {
    Selection sel = select_run_nodes(run.spec.targets, run.tolerate_unschedulable, nodes_);
    if (auto refusal = footprint_refusal(sel, limits_)) {
      reject(run, "FootprintExceeded", *refusal);
      return {};
    }
    write_map(client_, kind_, *obj, targets_config_map(run.store), nodes_to_value(sel), "");
    if (metrics_) metrics_->run_started(kind_.kind);
    targets.data = nodes_to_value(sel);
    event(run, kube::EventType::Normal, "Accepted", "Accept",
          std::to_string(sel.nodes.size()) + " nodes selected, " +
              std::to_string(sel.excluded.size()) + " excluded; " +
              std::to_string(run.spec.categories.size()) + " categories");
  }
  run.targets = nodes_from_value(targets.data);
  for (const auto& n : run.targets.nodes) run.info[n.name] = &n;

  // The run's wall-time bound, from its creation (so a restart does not extend it).
  const auto created = kube::parse_rfc3339(obj->get_string({"metadata", "creationTimestamp"}));
  const auto now = clock_.now();
  const auto deadline = created ? *created + bound : now + bound;
  const bool overdue = now >= deadline;
  for (std::size_t i = 0; i < run.spec.categories.size(); ++i) {
    if (stop.stop_requested()) return {};
    if (overdue) {
      // Past the bound: read what was recorded, start nothing more.
      StoredMap m = read_map(client_, run.ns, state_config_map(run.store, static_cast<int>(i)));
      if (m.data.is_null()) break;
      run.states.push_back(CategoryState::from_value(m.data));
      run.versions.push_back(m.resource_version);
      continue;
    }
    StoredMap m = read_map(client_, run.ns, state_config_map(run.store, static_cast<int>(i)));
    if (m.data.is_null()) {
      step_category(run, static_cast<int>(i), stop);
      break;
    }
    run.states.push_back(CategoryState::from_value(m.data));
    run.versions.push_back(m.resource_version);
    if (run.states.back().phase == "Passed") continue;
    if (run.states.back().phase == "Failed") break;
    step_category(run, static_cast<int>(i), stop);
    break;
  }
  bool all = run.states.size() == run.spec.categories.size() &&
             std::all_of(run.states.begin(), run.states.end(),
                         [](const CategoryState& s) { return s.done(); });
  bool failed = std::any_of(run.states.begin(), run.states.end(),
                            [](const CategoryState& s) { return s.phase == "Failed"; });
  run.phase = failed ? "Failed" : all ? "Passed" : "Running";
  if (run.targets.nodes.empty() && !failed) {
    run.phase = "Failed";
    run.message = "no node to test: every targeted node is excluded (see status.excluded)";
  }
  if (run.phase == "Running" && overdue) {
    // Its workloads are deleted before the phase is written: killed in between, the next
    // pass finds the run still overdue and deletes what is left.
    delete_workloads(run.ns, workloads_of(run.uid, "", ""));
    std::string current;
    for (const auto& st : run.states)
      if (!st.done()) current = st.name;
    run.phase = "Failed";
    run.reason = "DeadlineExceeded";
    run.message = "stopped at its maxDuration " + duration_text(bound) +
                  (current.empty() ? std::string() : " while " + current + " ran") +
                  ": its workloads were deleted and the nodes it had not finished are not "
                  "certified; give spec.maxDuration more time (up to certify.max-duration) or "
                  "fewer categories";
  }
  write_status(run);
  if (run.phase != "Running" && phase != run.phase) {
    if (metrics_)
      metrics_->run_ended(kind_.kind, run.phase, seconds_since_creation(*obj, clock_.now()));
    std::size_t bad = 0;
    for (const auto& st : run.states) bad += st.failed.size();
    event(run, run.phase == "Passed" ? kube::EventType::Normal : kube::EventType::Warning,
          run.phase, "Certify",
          run.phase == "Passed"
              ? "all " + std::to_string(run.targets.nodes.size()) + " nodes passed every category"
          : run.message.empty() ? std::to_string(bad) + " node verdict(s) failed of " +
                                      std::to_string(run.targets.nodes.size()) + " nodes"
                                : run.message);
  }
  if (run.phase == "Running")
    return {.requeue_after = std::min<std::chrono::milliseconds>(
                kPoll, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                           std::chrono::milliseconds(50))};
  return {};
}

// What observe_groups saw of a category's groups, for the steps after it.
struct RunReconciler::Observed {
  bool changed = false;                // a result or a next attempt to store
  std::vector<std::string> to_delete;  // workloads whose result is recorded (or superseded)
  std::set<std::string> busy;          // the nodes of running workloads
  int running = 0;
  std::vector<const GroupState*> waiting;  // groups whose workload does not exist yet
  std::vector<std::string> retried;        // event notes, sent once the state is stored
};

void RunReconciler::step_category(Run& run, int index, std::stop_token stop) {
  if (static_cast<int>(run.states.size()) == index) {
    start_category(run, index);
    return;
  }
  CategoryState& st = run.states.back();
  std::optional<IsolationPlanner> planner;
  if (!st.planner.is_null()) planner = IsolationPlanner::from_value(st.planner);

  // 1. Record the results of finished Jobs (the record is stored before a Job is deleted).
  Observed seen = observe_groups(run, index, planner ? &*planner : nullptr);
  const int rounds_before = st.rounds;
  if (planner && seen.changed) {
    add_planner_round(st, *planner);
    st.planner = planner->to_value();
  }

  // 2. Ended? Per-node verdicts.
  bool all_done = std::all_of(st.groups.begin(), st.groups.end(),
                              [](const GroupState& g) { return g.result.has_value(); });
  if (planner) all_done = planner->done();
  if (all_done && !st.done()) {
    std::optional<IsolationVerdict> verdict;
    if (planner) verdict = planner->verdict();
    CategoryOutcome outcome = decide_outcome(st, verdict ? &*verdict : nullptr);
    for (auto& f : outcome.infrastructure) st.infrastructure.push_back(std::move(f));
    if (outcome.message) st.message = std::move(*outcome.message);
    st.failed = std::move(outcome.failed);
    st.phase = std::move(outcome.phase);
    st.completion_time = now_rfc3339(clock_);
    seen.changed = true;
  }
  if (seen.changed)
    store_category(run, index, seen.retried, planner ? &*planner : nullptr, rounds_before);
  // 3. Recorded: their Jobs (and Services) go.
  delete_workloads(run.ns, seen.to_delete);
  if (st.done() || stop.stop_requested()) return;

  // 4. Start waiting groups: at most maxConcurrentJobs, never two on one node at once (a
  // node's GPUs run one workload; two half-placed indexed Jobs would wait on each other).
  if (seen.changed) return;  // re-planned: start from the stored state on the next pass
  start_groups(run, index, seen);
}

// A category's first pass: its groups laid out (start_category_state) and stored.
void RunReconciler::start_category(Run& run, int index) {
  const CategoryPlan& plan = run.spec.categories[static_cast<std::size_t>(index)];
  CategoryStart start = start_category_state(plan, run.targets.nodes);
  CategoryState& st = start.state;
  st.start_time = now_rfc3339(clock_);
  write_map(client_, kind_, *run.obj, state_config_map(run.store, index), st.to_value(), "");
  if (metrics_) metrics_->isolation_rounds(plan.name, st.rounds);
  event(run, kube::EventType::Normal, "CategoryStarted", "Run",
        plan.name + ": " + std::to_string(start.runnable) + " nodes, " +
            (start.scale == Scale::Diagnose ? "diagnose round 1, " : "") +
            std::to_string(st.groups.size()) + " group test(s)");
  run.states.push_back(std::move(st));
  run.versions.push_back("");  // re-read on the next reconcile before any update
}

// Each group's workload: recorded groups' leftovers to delete, groups without one waiting,
// running ones busy, ended ones judged and either retried (decide_attempt) or recorded (and
// given to the planner).
RunReconciler::Observed RunReconciler::observe_groups(Run& run, int index,
                                                      IsolationPlanner* planner) {
  const CategoryPlan& plan = run.spec.categories[static_cast<std::size_t>(index)];
  CategoryState& st = run.states.back();
  Observed seen;
  auto now = clock_.now();
  for (auto& g : st.groups) {
    std::string jname = job_name(run.name, run.uid, index, g.id, g.attempt);
    if (g.attempt > 1) {
      // Killed between storing the new attempt and deleting the old Job: delete it now.
      std::string old = job_name(run.name, run.uid, index, g.id, g.attempt - 1);
      if (workload(run.ns, old) != nullptr) seen.to_delete.push_back(old);
    }
    kube::ObjectPtr job = workload(run.ns, jname);
    if (g.result) {
      if (job != nullptr) seen.to_delete.push_back(jname);
      continue;
    }
    if (job == nullptr) {
      seen.waiting.push_back(&g);
      continue;
    }
    std::optional<Judgement> j = judge_group(run, plan, g, jname, *job, now);
    if (!j) {
      ++seen.running;
      seen.busy.insert(g.nodes.begin(), g.nodes.end());
      continue;
    }
    seen.to_delete.push_back(jname);
    seen.changed = true;
    AttemptStep step = decide_attempt(g, to_result(*j), plan.workload.retries);
    if (step.retry) {
      // The next attempt is stored before its Job exists (step 4 runs on a later pass).
      g.earlier.push_back(std::move(step.earlier));
      ++g.attempt;
      seen.retried.push_back(std::move(step.note));
      continue;
    }
    g.result = std::move(step.result);
    if (planner) planner->record(g.id, g.result->passed);
  }
  return seen;
}

// A group's workload judged: nullopt while it runs (or while the pod cache lags a finished
// Job), else overdue (Infrastructure), past its deadline, or its output.
std::optional<Judgement> RunReconciler::judge_group(
    const Run& run, const CategoryPlan& plan, const GroupState& g, const std::string& jname,
    const core::Value& job, std::chrono::system_clock::time_point now) const {
  const WorkloadProgress progress = progress_of(job);
  // Past its deadline + a grace and still not ended: the Job controller or the MPI operator
  // is not doing its part (an MPIJob nobody took up: no operator installed, or it is down).
  // Nothing trustworthy ran, which is the cluster's fault, not the nodes'. An MPIJob's
  // deadline runs from its launcher (started once the workers are Ready), so its launcher
  // pod's creation counts where there is one.
  const bool is_mpijob = job.get_string({"kind"}) == "MPIJob";
  std::optional<std::chrono::system_clock::time_point> launched;
  if (is_mpijob)
    for (const auto& p : pods_.by_index(kJobLabel, kube::object_key(run.ns, jname)))
      if (kube::label_of(*p, kMpiRoleLabel) == "launcher")
        launched = kube::parse_rfc3339(p->get_string({"metadata", "creationTimestamp"}));
  const std::chrono::milliseconds limit = plan.timeout + overdue_grace_;
  const bool late = overdue(
      progress.finished,
      launched ? launched : kube::parse_rfc3339(job.get_string({"metadata", "creationTimestamp"})),
      now, limit);
  if (!progress.finished && !late) return std::nullopt;
  if (late) {
    Judgement t;
    t.reason = Reason::Infrastructure;
    t.message = overdue_message(job.get_string({"kind"}), jname, limit, progress.acknowledged,
                                is_mpijob && !launched);
    return t;
  }
  if (progress.failure_reason == "DeadlineExceeded") {
    std::string what =
        "the workload did not finish within " + std::to_string(plan.timeout.count()) + " s";
    if (plan.thresholds.empty()) {
      Judgement t;
      t.reason = Reason::WorkloadFailed;
      t.message = what;
      return t;
    }
    return judge_timeout(plan.thresholds, what);
  }
  return judge_pod_output(run, plan, g, jname, progress, now);
}

// A finished workload's output, from the terminated workload container of its first pod:
// nullopt while the pod cache lags the Job's (kPodGrace), WorkloadFailed without one.
std::optional<Judgement> RunReconciler::judge_pod_output(
    const Run& run, const CategoryPlan& plan, const GroupState& g, const std::string& jname,
    const WorkloadProgress& progress, std::chrono::system_clock::time_point now) const {
  const core::Value* done = nullptr;
  std::string pod_name;
  // Owned here: the compact cache builds each object per call.
  const std::vector<kube::ObjectPtr> job_pods =
      pods_.by_index(kJobLabel, kube::object_key(run.ns, jname));
  for (const auto& p : job_pods) {
    std::string_view idx = kube::annotation_of(*p, "batch.kubernetes.io/job-completion-index");
    const core::Value* cs = workload_status(*p);
    if ((idx.empty() || idx == "0") && cs != nullptr &&
        cs->get({"state", "terminated"}) != nullptr) {
      done = cs;
      pod_name = std::string(kube::name_of(*p));
      if (cs->get({"state", "terminated", "exitCode"}) != nullptr) break;
    }
  }
  if (done == nullptr) {
    auto at = progress.finished_at;
    if (at && now - *at < kPodGrace) return std::nullopt;  // the pod cache lags: judge later
    Judgement t;
    t.reason = Reason::WorkloadFailed;
    t.message = "the job ended without a terminated workload container (" +
                progress.failure_reason +
                (progress.failure_message.empty() ? "" : ": " + progress.failure_message) + ")";
    return t;
  }
  ThresholdContext ctx;
  ctx.group_size = static_cast<std::int64_t>(g.nodes.size());
  if (auto it = run.info.find(g.nodes.front()); it != run.info.end())
    ctx.gpu_product = it->second->gpu_product;
  const core::Value* term = done->get({"state", "terminated"});
  int exit_code = 0;
  if (const core::Value* e = term->find("exitCode"); e && e->is_int())
    exit_code = static_cast<int>(e->as_int());
  const std::string message(term->get_string({"message"}));
  JudgeOptions jo;
  jo.statistic = plan.workload.statistic;
  jo.transport = plan.workload.transport;
  // NCCL names hosts by the pod's hostname (the Job's <job>-<index>): the message names the
  // node beside it.
  for (const auto& p : job_pods) {
    std::string_view host = p->get_string({"spec", "hostname"});
    if (host.empty()) host = kube::name_of(*p);
    std::string_view node = p->get_string({"spec", "nodeName"});
    if (!node.empty()) jo.host_nodes[std::string(host)] = std::string(node);
  }
  const auto judge = [&](std::string_view output) {
    return judge_output(plan.workload.output, output, exit_code, plan.thresholds, ctx, jo);
  };
  std::optional<Judgement> j;
  if (!message.empty()) j = judge(message);
  // The log holds the whole output where the termination message holds at most its
  // tail: 4 KiB written by the workload, or (FallbackToLogsOnError, a failed container)
  // the kubelet's last 2 KiB of the log, which cuts a DCGM report's JSON. So read it
  // when there is no message, and when a catalog workload's message did not read.
  // And when a multi-node NCCL run's message carries no transport lines: NCCL prints them
  // at init, before the table, so a tail has none (the check would be skipped).
  const bool read_log =
      message.empty() ||
      (plan.workload.output != OutputKind::Result && !j->passed &&
       j->reason == Reason::WorkloadFailed) ||
      (plan.workload.output == OutputKind::Nccl && j->transports.empty() &&
       plan.workload.transport != TransportExpectation::Any && g.nodes.size() > 1);
  std::string log;
  if (read_log) {
    try {
      log = client_.get_raw("/api/v1/namespaces/" + run.ns + "/pods/" + pod_name +
                            "/log?container=" + kContainerName + "&limitBytes=16777216");
    } catch (const std::exception&) {
    }
  }
  if (!log.empty() || !j) j = judge(log);
  return j;
}

// The category's state stored, then its Events: retried groups, a new diagnose round, the end.
void RunReconciler::store_category(Run& run, int index, const std::vector<std::string>& retried,
                                   const IsolationPlanner* planner, int rounds_before) {
  const CategoryPlan& plan = run.spec.categories[static_cast<std::size_t>(index)];
  const CategoryState& st = run.states.back();
  write_map(client_, kind_, *run.obj, state_config_map(run.store, index), st.to_value(),
            run.versions.back());
  // Stored: what this pass changed is counted once (a failed write throws before this).
  if (metrics_) {
    metrics_->isolation_rounds(plan.name, st.rounds - rounds_before);
    if (st.done()) metrics_->category_ended(st);
  }
  for (const auto& note : retried)
    event(run, kube::EventType::Warning, "GroupRetried", "Run", plan.name + ": " + note);
  if (planner && !planner->done() && st.rounds > rounds_before)
    event(run, kube::EventType::Normal, "DiagnoseRound", "Diagnose",
          plan.name + ": round " + std::to_string(st.rounds) + ", " +
              std::to_string(planner->pending()->tests.size()) + " group test(s)");
  if (st.done())
    event(run, st.phase == "Passed" ? kube::EventType::Normal : kube::EventType::Warning,
          "CategoryFinished", "Run",
          plan.name + " " + st.phase + ": " + std::to_string(st.failed.size()) + " node(s) failed" +
              (st.message.empty() ? "" : " (" + st.message + ")"));
}

// Each named workload's Job, Service and MPIJob, whichever exist.
void RunReconciler::delete_workloads(const std::string& ns, const std::vector<std::string>& names) {
  kube::DeleteOptions del;
  del.propagation_policy = "Background";
  std::vector<kube::ResourceId> kinds = {kube::resources::jobs(), resources::services()};
  if (mpijobs_ != nullptr) kinds.push_back(mpijobs());
  for (const auto& jname : names) {
    for (const auto& r : kinds) {
      try {
        client_.remove(r, ns, jname, del);
      } catch (const kube::ApiError& e) {
        if (e.reason() != kube::Reason::NotFound) throw;
      }
    }
  }
}

// The waiting groups groups_to_start picks, each as a Job (with a Service for several nodes)
// or an MPIJob.
void RunReconciler::start_groups(Run& run, int index, const Observed& seen) {
  const CategoryPlan& plan = run.spec.categories[static_cast<std::size_t>(index)];
  for (std::size_t i :
       groups_to_start(seen.waiting, seen.busy, seen.running, plan.workload.max_concurrent_jobs)) {
    const GroupState* g = seen.waiting[i];
    JobRequest r;
    r.ns = run.ns;
    r.name = job_name(run.name, run.uid, index, g->id, g->attempt);
    r.attempt = g->attempt;
    r.owner_ref = owner_ref(kind_, *run.obj);
    r.run_uid = run.uid;
    r.category = index;
    r.nodes = g->nodes;
    r.plan = &plan;
    r.tolerations = run.spec.targets.tolerations;
    r.tolerate_unschedulable = run.tolerate_unschedulable;
    if (run.tolerate_unschedulable) {
      core::Value all;
      all["operator"] = "Exists";
      r.tolerations.push_back(all);
    }
    int gpus = 0;
    if (auto it = run.info.find(g->nodes.front()); it != run.info.end()) {
      r.gpu_family = it->second->gpu_family;
      gpus = it->second->gpu_count;
    }
    r.gpus_per_node = plan.gpus_per_node >= 0 ? plan.gpus_per_node : gpus;
    // Catalog templates say they are MPI programs (launcher: mpi); a WorkloadRun's container
    // keeps the indexed Job's rendezvous contract it was written for.
    const bool as_mpijob = launcher_ == Launcher::MpiJob && !kind_.workload_run &&
                           plan.workload.mpi && g->nodes.size() > 1;
    try {
      if (as_mpijob)
        client_.create(mpijobs(), build_mpijob(r), kFieldManager);
      else if (g->nodes.size() > 1)
        client_.create(resources::services(), build_service(r), kFieldManager);
    } catch (const kube::ApiError& e) {
      if (e.reason() != kube::Reason::AlreadyExists) throw;
    }
    try {
      if (!as_mpijob) client_.create(kube::resources::jobs(), build_job(r), kFieldManager);
    } catch (const kube::ApiError& e) {
      if (e.reason() != kube::Reason::AlreadyExists) throw;
    }
  }
}

void RunReconciler::write_status(Run& run) {
  const core::Value& obj = *run.obj;
  std::int64_t gen = 0;
  if (const core::Value* g = obj.get({"metadata", "generation"}); g && g->is_int())
    gen = g->as_int();
  const core::Value* cur = obj.find("status");
  core::Value conds;
  if (cur != nullptr)
    if (const core::Value* c = cur->find("conditions")) conds = *c;

  core::Value s;
  s["phase"] = run.phase;
  s["observedGeneration"] = gen;
  std::string start = cur ? std::string(cur->get_string({"startTime"})) : "";
  s["startTime"] = start.empty() ? now_rfc3339(clock_) : start;
  std::set<std::string> failed_nodes;
  core::Value failed_list = core::Value::list();
  core::Value cats = core::Value::list();
  core::Value infra = core::Value::list();
  std::string current;
  for (std::size_t i = 0; i < run.spec.categories.size(); ++i) {
    core::Value c;
    c["name"] = run.spec.categories[i].name;
    if (i >= run.states.size()) {
      c["phase"] = run.phase == "Running" ? "Pending" : "Skipped";
      cats.push_back(std::move(c));
      continue;
    }
    const CategoryState& st = run.states[i];
    // A category the run's end cut short (its maxDuration) shows Stopped, not Running.
    c["phase"] = run.phase != "Running" && !st.done() ? std::string("Stopped") : st.phase;
    if (st.phase == "Running" || st.phase == "Failed") current = st.name;
    int done = 0, bad = 0;
    for (const auto& g : st.groups) {
      if (g.result) ++done;
      if (g.result && !g.result->passed) ++bad;
    }
    c["groups"] = static_cast<std::int64_t>(st.groups.size());
    c["groupsDone"] = done;
    c["groupsFailed"] = bad;
    if (st.rounds > 0) c["rounds"] = st.rounds;
    c["results"] = state_config_map(run.store, static_cast<int>(i));
    if (!st.start_time.empty()) c["startTime"] = st.start_time;
    if (!st.completion_time.empty()) c["completionTime"] = st.completion_time;
    if (!st.message.empty()) c["message"] = cut(st.message, 1024);
    if (st.done()) {
      c["failedCount"] = static_cast<std::int64_t>(st.failed.size());
      c["passedCount"] = static_cast<std::int64_t>(
          run.targets.nodes.size() - std::min(run.targets.nodes.size(), st.failed.size()));
    }
    for (const auto& f : st.failed) {
      if (!failed_nodes.insert(f.node).second) continue;
      if (failed_list.size() >= kStatusListMax) continue;
      core::Value x;
      x["node"] = f.node;
      x["category"] = st.name;
      x["reason"] = f.reason;
      x["message"] = cut(f.message, 512);
      failed_list.push_back(std::move(x));
    }
    for (const auto& f : st.infrastructure) {
      if (infra.size() >= 32) break;
      core::Value x;
      x["category"] = st.name;
      for (std::size_t k = 0; k < f.nodes.size() && k < 64; ++k) x["nodes"].push_back(f.nodes[k]);
      x["message"] = cut(f.message, 512);
      infra.push_back(std::move(x));
    }
    cats.push_back(std::move(c));
  }
  if (!current.empty()) s["currentCategory"] = current;
  s["nodeCount"] = static_cast<std::int64_t>(run.targets.nodes.size());
  s["failedCount"] = static_cast<std::int64_t>(failed_nodes.size());
  s["passedCount"] =
      run.phase == "Running"
          ? std::int64_t{0}
          : static_cast<std::int64_t>(run.targets.nodes.size() - failed_nodes.size());
  s["excludedCount"] = static_cast<std::int64_t>(run.targets.excluded.size());
  core::Value ex = core::Value::list();
  for (const auto& e : run.targets.excluded) {
    if (ex.size() >= kStatusListMax) break;
    core::Value x;
    x["node"] = e.node;
    x["reason"] = e.reason;
    x["message"] = cut(e.message, 512);
    ex.push_back(std::move(x));
  }
  s["excluded"] = std::move(ex);
  s["failedNodes"] = std::move(failed_list);
  s["categories"] = std::move(cats);
  if (!infra.as_list().empty()) s["infrastructure"] = std::move(infra);

  std::string msg = run.message;
  if (msg.empty() && run.phase == "Failed")
    msg = std::to_string(failed_nodes.size()) + " of " + std::to_string(run.targets.nodes.size()) +
          " nodes failed " + current;
  if (msg.empty() && run.phase == "Passed")
    msg = "all " + std::to_string(run.targets.nodes.size()) + " nodes passed every category";
  if (msg.empty()) msg = "running " + current;
  s["message"] = cut(msg, 1024);
  bool final = run.phase != "Running";
  if (final) {
    std::string end = cur ? std::string(cur->get_string({"completionTime"})) : "";
    s["completionTime"] = end.empty() ? now_rfc3339(clock_) : end;
  }
  kube::set_condition(conds, {"Accepted", "True", "Accepted", "spec accepted", gen, {}});
  kube::set_condition(conds, {"Complete",
                              final ? "True" : "False",
                              final ? "Finished" : "InProgress",
                              cut(msg, 1024),
                              gen,
                              {}});
  std::string passed_reason = run.phase == "Passed"   ? "AllNodesPassed"
                              : run.phase == "Failed" ? (!run.reason.empty()    ? run.reason
                                                         : failed_nodes.empty() ? "NoNodes"
                                                                                : "NodesFailed")
                                                      : "InProgress";
  kube::set_condition(conds, {"Passed",
                              run.phase == "Passed"   ? "True"
                              : run.phase == "Failed" ? "False"
                                                      : "Unknown",
                              passed_reason,
                              cut(msg, 1024),
                              gen,
                              {}});
  s["conditions"] = std::move(conds);

  // Skip the write when nothing would change (the start time is the stored one).
  if (cur != nullptr) {
    core::Value a = *cur;
    if (a == s) return;
  }
  status_.apply(run.ns, run.name, s);
}

}  // namespace gpufleet::certify
