#include "certify/controller.h"

#include <algorithm>
#include <set>

#include "certify/isolation_planner.h"
#include "certify/judge.h"
#include "certify/node_selection.h"
#include "certify/run_state.h"
#include "certify/state_codec.h"
#include "certify/verdict.h"
#include "certify/workload_job.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/json.h"
#include "core/log.h"
#include "core/text.h"
#include "core/time.h"
#include "kube/api/conditions.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/errors.h"

namespace gpufleet::certify {

namespace resources {
kube::ResourceId services() { return {"", "v1", "services", true}; }
}  // namespace resources

std::string state_config_map(std::string_view run, int category) {
  return std::string(run) + "-certify-" + std::to_string(category);
}
std::string targets_config_map(std::string_view run) {
  return std::string(run) + "-certify-targets";
}
std::string storage_name(bool workload_run, std::string_view name) {
  return workload_run ? "wlr-" + std::string(name) : std::string(name);
}

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kStatusListMax = 100;
// A finished Job whose pod shows no terminated container yet: the pod cache lags the Job's;
// wait this long before judging the group WorkloadFailed.
constexpr auto kPodGrace = 30s;
constexpr auto kPoll = 5s;

std::string now_rfc3339() { return kube::format_rfc3339(std::chrono::system_clock::now()); }

std::string cut(std::string s, std::size_t n) {
  if (s.size() > n) {
    s.resize(n - 3);
    s += "...";
  }
  return s;
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

// What an Event is about: cached objects may lack apiVersion/kind, the recorder needs them.
core::Value regarding(const core::Value& obj, const kube::ResourceId& r, std::string_view kind) {
  core::Value x = core::Value::map();
  x["apiVersion"] = r.api_version();
  x["kind"] = kind;
  x["metadata"]["name"] = kube::name_of(obj);
  if (!kube::namespace_of(obj).empty()) x["metadata"]["namespace"] = kube::namespace_of(obj);
  x["metadata"]["uid"] = kube::uid_of(obj);
  return x;
}

// ---- the frozen target set ----

core::Value nodes_to_value(const Selection& s) {
  core::Value v;
  core::Value nodes = core::Value::list();
  for (const auto& n : s.nodes) {
    core::Value x;
    x["name"] = n.name;
    if (!n.gpu_product.empty()) x["product"] = n.gpu_product;
    if (!n.gpu_family.empty()) x["family"] = n.gpu_family;
    if (!n.clique.empty()) x["clique"] = n.clique;
    x["gpus"] = n.gpu_count;
    x["allocatable"] = n.gpu_allocatable;
    nodes.push_back(std::move(x));
  }
  v["nodes"] = std::move(nodes);
  core::Value ex = core::Value::list();
  for (const auto& e : s.excluded) {
    core::Value x;
    x["node"] = e.node;
    x["reason"] = e.reason;
    x["message"] = e.message;
    ex.push_back(std::move(x));
  }
  v["excluded"] = std::move(ex);
  return v;
}

Selection nodes_from_value(const core::Value& v) {
  Selection s;
  if (const core::Value* nodes = v.find("nodes"); nodes != nullptr && nodes->is_list()) {
    for (const auto& x : nodes->as_list()) {
      NodeInfo n;
      n.name = std::string(x.get_string({"name"}));
      n.gpu_product = std::string(x.get_string({"product"}));
      n.gpu_family = std::string(x.get_string({"family"}));
      n.clique = std::string(x.get_string({"clique"}));
      if (const core::Value* g = x.find("gpus"); g && g->is_int()) n.gpu_count = int(g->as_int());
      if (const core::Value* a = x.find("allocatable"); a && a->is_int())
        n.gpu_allocatable = int(a->as_int());
      s.nodes.push_back(std::move(n));
    }
  }
  if (const core::Value* ex = v.find("excluded"); ex != nullptr && ex->is_list())
    for (const auto& x : ex->as_list())
      s.excluded.push_back({std::string(x.get_string({"node"})),
                            std::string(x.get_string({"reason"})),
                            std::string(x.get_string({"message"}))});
  return s;
}

// A node whose device plugin reports fewer GPUs than it has cannot run a full-node workload:
// judged HardwareFailure at once instead of leaving its pods Pending until the timeout.
std::optional<std::string> gpu_shortfall(const NodeInfo& n) {
  if (n.gpu_count <= 0 || n.gpu_allocatable < 0 || n.gpu_allocatable >= n.gpu_count)
    return std::nullopt;
  return "allocatable nvidia.com/gpu is " + std::to_string(n.gpu_allocatable) + " of " +
         std::to_string(n.gpu_count) + " GPUs (a GPU is unhealthy or gone)";
}

// ---- ConfigMaps holding state ----

struct StoredMap {
  core::Value data;  // parsed JSON of kStateKey; null when the map does not exist
  std::string resource_version;
};

StoredMap read_map(kube::Client& client, std::string_view ns, const std::string& name) {
  StoredMap m;
  auto cm = client.try_get(kube::resources::config_maps(), ns, name);
  if (!cm) return m;
  m.resource_version = std::string(kube::resource_version_of(*cm));
  auto text = decode_state(*cm, kStateKey);
  m.data = text ? core::parse_json(*text, name) : core::Value::map();
  return m;
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

// ---- groups ----

std::vector<std::vector<std::string>> chunk(const std::vector<std::string>& nodes, int size) {
  std::vector<std::vector<std::string>> out;
  if (size <= 0) size = static_cast<int>(std::max<std::size_t>(nodes.size(), 1));
  for (std::size_t i = 0; i < nodes.size(); i += static_cast<std::size_t>(size))
    out.emplace_back(nodes.begin() + static_cast<std::ptrdiff_t>(i),
                     nodes.begin() + static_cast<std::ptrdiff_t>(std::min(
                                         nodes.size(), i + static_cast<std::size_t>(size))));
  return out;
}

std::vector<std::vector<std::string>> domains(const std::vector<NodeInfo>& nodes) {
  std::map<std::string, std::vector<std::string>> by;
  std::vector<std::vector<std::string>> out;
  for (const auto& n : nodes) {
    if (n.clique.empty())
      out.push_back({n.name});
    else
      by[n.clique].push_back(n.name);
  }
  for (auto& [c, members] : by) out.push_back(std::move(members));
  std::sort(out.begin(), out.end());
  return out;
}

void add_planner_round(CategoryState& st, const IsolationPlanner& planner) {
  const Round* r = planner.pending();
  if (r == nullptr) return;
  std::set<std::uint32_t> known;
  for (const auto& g : st.groups) known.insert(g.id);
  for (const GroupTest& t : r->tests) {
    if (known.count(t.id) > 0) continue;
    GroupState g;
    g.id = t.id;
    g.round = r->number;
    g.purpose = std::string(purpose_name(t.purpose));
    g.nodes = t.nodes;
    st.groups.push_back(std::move(g));
  }
  st.rounds = r->number;
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

// ---- the run reconciler ----

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
};

RunReconciler::RunReconciler(kube::Client& client, RunKind kind, const controller::Cache& runs,
                             const controller::Cache& nodes, const controller::Cache& jobs,
                             const controller::Cache& pods, kube::EventRecorder& events,
                             const controller::Cache* mpijobs, Launcher launcher,
                             std::chrono::milliseconds overdue_grace)
    : client_(client),
      kind_(std::move(kind)),
      events_(events),
      runs_(runs),
      nodes_(nodes),
      jobs_(jobs),
      pods_(pods),
      mpijobs_(mpijobs),
      launcher_(mpijobs != nullptr ? launcher : Launcher::Job),
      overdue_grace_(overdue_grace),
      status_(client, kind_.resource, kind_.kind, kFieldManager) {}

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

controller::Result RunReconciler::reconcile(const controller::Request& request,
                                            std::stop_token stop) {
  kube::ObjectPtr obj = runs_.get(request.key());
  if (obj == nullptr) return {};  // deleted: the garbage collector takes Jobs and ConfigMaps
  std::string phase(obj->get_string({"status", "phase"}));
  if (phase == "Passed" || phase == "Failed") return {};  // a record: never re-run

  Run run;
  run.obj = obj;
  run.ns = request.namespace_;
  run.name = request.name;
  run.store = storage_name(kind_.workload_run, request.name);
  run.uid = std::string(kube::uid_of(*obj));
  const core::Value* spec = obj->find("spec");
  try {
    run.spec = kind_.workload_run
                   ? parse_workload_run_spec(spec ? *spec : core::Value())
                   : parse_certification_spec(spec ? *spec : core::Value(), Catalog::builtin());
  } catch (const SpecError& e) {
    // Admission checked the schema; what only certify can check (a CEL expression that does
    // not compile) is refused here, once, with the metric and the expression named.
    core::Value status = obj->find("status") ? *obj->find("status") : core::Value::map();
    core::Value conds = status.find("conditions") ? *status.find("conditions") : core::Value();
    std::int64_t gen = 0;
    if (const core::Value* g = obj->get({"metadata", "generation"}); g && g->is_int())
      gen = g->as_int();
    kube::set_condition(conds, {"Accepted", "False", e.reason(), cut(e.what(), 1024), gen, {}});
    kube::set_condition(conds,
                        {"Complete", "True", "NotAccepted", "the spec was not accepted", gen, {}});
    core::Value out;
    out["phase"] = "Failed";
    out["observedGeneration"] = gen;
    out["message"] = cut(e.what(), 1024);
    out["conditions"] = conds;
    status_.apply(run.ns, run.name, out);
    event(run, kube::EventType::Warning, "Rejected", "Accept", e.what());
    return {};
  }
  const core::Value* vr = obj->get({"metadata", "labels", "gpufleet.io/validation-request"});
  run.tolerate_unschedulable = vr != nullptr;

  // The target set is chosen once, when the run starts, and kept: nodes cordoned or added
  // later do not move a run that is under way.
  StoredMap targets = read_map(client_, run.ns, targets_config_map(run.store));
  if (targets.data.is_null()) {
    Targets t = run.spec.targets;
    if (run.tolerate_unschedulable) {
      // A ValidationRequest's nodes are usually held out by their requester: test them anyway.
      core::Value all;
      all["operator"] = "Exists";
      t.tolerations.push_back(all);
    }
    Selection sel = select_nodes(t, nodes_.list());
    if (run.tolerate_unschedulable) {
      std::vector<Exclusion> kept;
      for (auto& e : sel.excluded) {
        if (e.reason != "Cordoned") {
          kept.push_back(e);
          continue;
        }
        if (kube::ObjectPtr n = nodes_.get(e.node)) sel.nodes.push_back(node_info(*n));
      }
      sel.excluded = std::move(kept);
      std::sort(sel.nodes.begin(), sel.nodes.end(),
                [](const NodeInfo& a, const NodeInfo& b) { return a.name < b.name; });
    }
    if (sel.nodes.size() > 5000) sel.nodes.resize(5000);  // the documented bound
    write_map(client_, kind_, *obj, targets_config_map(run.store), nodes_to_value(sel), "");
    targets.data = nodes_to_value(sel);
    event(run, kube::EventType::Normal, "Accepted", "Accept",
          std::to_string(sel.nodes.size()) + " nodes selected, " +
              std::to_string(sel.excluded.size()) + " excluded; " +
              std::to_string(run.spec.categories.size()) + " categories");
  }
  run.targets = nodes_from_value(targets.data);
  for (const auto& n : run.targets.nodes) run.info[n.name] = &n;

  for (std::size_t i = 0; i < run.spec.categories.size(); ++i) {
    if (stop.stop_requested()) return {};
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
  write_status(run);
  if (run.phase != "Running" && phase != run.phase) {
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
  if (run.phase == "Running") return {.requeue_after = kPoll};
  return {};
}

void RunReconciler::step_category(Run& run, int index, std::stop_token stop) {
  const CategoryPlan& plan = run.spec.categories[static_cast<std::size_t>(index)];
  const std::string cm = state_config_map(run.store, index);
  bool fresh = static_cast<int>(run.states.size()) == index;
  if (fresh) {
    CategoryState st;
    st.name = plan.name;
    st.start_time = now_rfc3339();
    std::vector<std::string> runnable;
    std::vector<NodeInfo> runnable_info;
    for (const auto& n : run.targets.nodes) {
      if (auto why = gpu_shortfall(n)) {
        st.failed.push_back({n.name, "HardwareFailure", *why});
        continue;
      }
      runnable.push_back(n.name);
      runnable_info.push_back(n);
    }
    std::vector<std::vector<std::string>> groups;
    Scale scale = plan.scale;
    if (scale == Scale::Diagnose && runnable.size() < 2) scale = Scale::PerNode;
    if (scale == Scale::Diagnose) {
      std::vector<std::vector<std::string>> topo;
      for (auto& d : domains(runnable_info))
        if (d.size() > 1) topo.push_back(std::move(d));
      PlannerOptions o;
      o.min_group_size =
          std::max<std::size_t>(2, static_cast<std::size_t>(plan.workload.min_nodes));
      IsolationPlanner planner(runnable, topo, o);
      add_planner_round(st, planner);
      st.planner = planner.to_value();
    } else {
      if (scale == Scale::PerNode) groups = chunk(runnable, 1);
      if (scale == Scale::WholeSet) groups = chunk(runnable, plan.nodes_per_job);
      if (scale == Scale::NvlinkDomain)
        for (const auto& d : domains(runnable_info))
          for (auto& c : chunk(d, plan.nodes_per_job)) groups.push_back(std::move(c));
      std::uint32_t id = 1;
      for (auto& g : groups) {
        if (g.empty()) continue;
        GroupState gs;
        gs.id = id++;
        gs.purpose = std::string(spec_scale_name(scale));
        gs.nodes = std::move(g);
        st.groups.push_back(std::move(gs));
      }
    }
    write_map(client_, kind_, *run.obj, cm, st.to_value(), "");
    event(run, kube::EventType::Normal, "CategoryStarted", "Run",
          plan.name + ": " + std::to_string(runnable.size()) + " nodes, " +
              (scale == Scale::Diagnose ? "diagnose round 1, " : "") +
              std::to_string(st.groups.size()) + " group test(s)");
    run.states.push_back(std::move(st));
    run.versions.push_back("");  // re-read on the next reconcile before any update
    return;
  }
  CategoryState& st = run.states.back();
  const std::string version = run.versions.back();
  std::optional<IsolationPlanner> planner;
  if (!st.planner.is_null()) planner = IsolationPlanner::from_value(st.planner);

  // 1. Record the results of finished Jobs (the record is stored before a Job is deleted).
  bool changed = false;
  std::vector<std::string> to_delete;
  std::set<std::string> busy;
  int running = 0;
  std::vector<GroupState*> waiting;
  auto now = std::chrono::system_clock::now();
  std::vector<std::string> retried;  // event notes, sent once the state is stored
  for (auto& g : st.groups) {
    std::string jname = job_name(run.name, run.uid, index, g.id, g.attempt);
    if (g.attempt > 1) {
      // Killed between storing the new attempt and deleting the old Job: delete it now.
      std::string old = job_name(run.name, run.uid, index, g.id, g.attempt - 1);
      if (workload(run.ns, old) != nullptr) to_delete.push_back(old);
    }
    kube::ObjectPtr job = workload(run.ns, jname);
    if (g.result) {
      if (job != nullptr) to_delete.push_back(jname);
      continue;
    }
    if (job == nullptr) {
      waiting.push_back(&g);
      continue;
    }
    const WorkloadProgress progress = progress_of(*job);
    // Past its deadline + a grace and still not ended: the Job controller or the MPI operator
    // is not doing its part (an MPIJob nobody took up: no operator installed, or it is down).
    // Nothing trustworthy ran, which is the cluster's fault, not the nodes'. An MPIJob's
    // deadline runs from its launcher (started once the workers are Ready), so its launcher
    // pod's creation counts where there is one.
    const bool is_mpijob = job->get_string({"kind"}) == "MPIJob";
    std::optional<std::chrono::system_clock::time_point> launched;
    if (is_mpijob)
      for (const auto& p : pods_.by_index(kJobLabel, kube::object_key(run.ns, jname)))
        if (kube::label_of(*p, kMpiRoleLabel) == "launcher")
          launched = kube::parse_rfc3339(p->get_string({"metadata", "creationTimestamp"}));
    const bool overdue = !progress.finished && [&] {
      auto since = launched
                       ? launched
                       : kube::parse_rfc3339(job->get_string({"metadata", "creationTimestamp"}));
      return since && now - *since > plan.timeout + overdue_grace_;
    }();
    if (!progress.finished && !overdue) {
      ++running;
      busy.insert(g.nodes.begin(), g.nodes.end());
      continue;
    }
    ThresholdContext ctx;
    ctx.group_size = static_cast<std::int64_t>(g.nodes.size());
    if (auto it = run.info.find(g.nodes.front()); it != run.info.end())
      ctx.gpu_product = it->second->gpu_product;
    std::optional<Judgement> j;
    if (overdue) {
      Judgement t;
      t.reason = Reason::Infrastructure;
      const std::string within = " within " +
                                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                    plan.timeout + overdue_grace_)
                                                    .count()) +
                                 " s";
      t.message = std::string(job->get_string({"kind"})) + " " + jname;
      if (!progress.acknowledged)
        t.message += " got no condition from an MPI operator" + within +
                     ": is the mpi-operator running? (or set certify.launcher=job)";
      else if (is_mpijob && !launched)
        t.message += " started no launcher" + within +
                     ": its workers were never all Ready (GPUs in use, an image pull failing?)";
      else
        t.message += " did not end" + within + " (its controller stopped updating it?)";
      j = t;
    } else if (progress.failure_reason == "DeadlineExceeded") {
      std::string what =
          "the workload did not finish within " + std::to_string(plan.timeout.count()) + " s";
      if (plan.thresholds.empty()) {
        Judgement t;
        t.reason = Reason::WorkloadFailed;
        t.message = what;
        j = t;
      } else {
        j = judge_timeout(plan.thresholds, what);
      }
    } else {
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
        if (at && now - *at < kPodGrace) {
          ++running;  // the pod cache lags: judge on a later pass
          busy.insert(g.nodes.begin(), g.nodes.end());
          continue;
        }
        Judgement t;
        t.reason = Reason::WorkloadFailed;
        t.message = "the job ended without a terminated workload container (" +
                    progress.failure_reason +
                    (progress.failure_message.empty() ? "" : ": " + progress.failure_message) + ")";
        j = t;
      } else {
        const core::Value* term = done->get({"state", "terminated"});
        int exit_code = 0;
        if (const core::Value* e = term->find("exitCode"); e && e->is_int())
          exit_code = static_cast<int>(e->as_int());
        const std::string message(term->get_string({"message"}));
        JudgeOptions jo;
        jo.statistic = plan.workload.statistic;
        const auto judge = [&](std::string_view output) {
          return judge_output(plan.workload.output, output, exit_code, plan.thresholds, ctx, jo);
        };
        if (!message.empty()) j = judge(message);
        // The log holds the whole output where the termination message holds at most its
        // tail: 4 KiB written by the workload, or (FallbackToLogsOnError, a failed container)
        // the kubelet's last 2 KiB of the log, which cuts a DCGM report's JSON. So read it
        // when there is no message, and when a catalog workload's message did not read.
        const bool read_log =
            message.empty() || (plan.workload.output != OutputKind::Result && !j->passed &&
                                j->reason == Reason::WorkloadFailed);
        std::string log;
        if (read_log) {
          try {
            log = client_.get_raw("/api/v1/namespaces/" + run.ns + "/pods/" + pod_name +
                                  "/log?container=" + kContainerName + "&limitBytes=16777216");
          } catch (const std::exception&) {
          }
        }
        if (!log.empty() || !j) j = judge(log);
      }
    }
    GroupResult res = to_result(*j);
    to_delete.push_back(jname);
    changed = true;
    const int attempts = plan.workload.retries + 1;
    if (!res.passed && should_retry(res.reason, g.attempt, plan.workload.retries)) {
      // The next attempt is stored before its Job exists (step 4 runs on a later pass).
      g.earlier.push_back(cut(res.reason + ": " + res.message, 240));
      ++g.attempt;
      retried.push_back("group " + std::to_string(g.id) + " (" + cut(core::join(g.nodes), 200) +
                        "): " + g.earlier.back() + "; attempt " + std::to_string(g.attempt) +
                        " of " + std::to_string(attempts));
      continue;
    }
    res.attempts = g.attempt;
    if (g.attempt > 1)
      res.message =
          cut((res.message.empty() ? "" : res.message + "; ") + "attempt " +
                  std::to_string(g.attempt) + " of " + std::to_string(attempts) + " (attempt " +
                  std::to_string(g.attempt - 1) + ": " + g.earlier.back() + ")",
              480);
    g.result = std::move(res);
    if (planner) planner->record(g.id, g.result->passed);
  }
  const int rounds_before = st.rounds;
  if (planner && changed) {
    add_planner_round(st, *planner);
    st.planner = planner->to_value();
  }

  // 2. Ended? Per-node verdicts.
  bool all_done = std::all_of(st.groups.begin(), st.groups.end(),
                              [](const GroupState& g) { return g.result.has_value(); });
  if (planner) all_done = planner->done();
  if (all_done && !st.done()) {
    std::map<std::string, NodeFailure> failed;
    for (const auto& f : st.failed) failed[f.node] = f;
    auto first_failure = [&](const std::string& node) -> const GroupState* {
      for (const auto& g : st.groups)
        if (g.result && !g.result->passed &&
            std::find(g.nodes.begin(), g.nodes.end(), node) != g.nodes.end())
          return &g;
      return nullptr;
    };
    if (planner) {
      IsolationVerdict v = planner->verdict();
      for (const auto& o : v.nodes) {
        if (o.verdict == NodeVerdict::Healthy) continue;
        const GroupState* g = first_failure(o.node);
        std::string reason = g != nullptr ? g->result->reason : "WorkloadFailed";
        std::string msg = o.message;
        if (g != nullptr) msg += (msg.empty() ? "" : "; ") + g->result->message;
        failed[o.node] = {o.node, reason, cut(msg, 480)};
      }
      for (const auto& f : v.infrastructure) {
        st.infrastructure.push_back({f.nodes, f.message});
        for (const auto& n : f.nodes)
          if (failed.count(n) == 0) failed[n] = {n, "Infrastructure", cut(f.message, 480)};
      }
      st.message = std::to_string(v.rounds) + " rounds, " + std::to_string(v.tests) + " tests";
    } else {
      for (const auto& g : st.groups) {
        if (g.result->passed) continue;
        for (const auto& n : g.nodes) {
          std::string msg = g.nodes.size() > 1 ? "group of " + std::to_string(g.nodes.size()) +
                                                     " nodes failed (scale diagnose names the "
                                                     "node): " +
                                                     g.result->message
                                               : g.result->message;
          failed[n] = {n, g.result->reason, cut(msg, 480)};
        }
      }
    }
    st.failed.clear();
    for (auto& [n, f] : failed) st.failed.push_back(std::move(f));
    st.phase = st.failed.empty() ? "Passed" : "Failed";
    st.completion_time = now_rfc3339();
    changed = true;
  }
  if (changed) {
    write_map(client_, kind_, *run.obj, cm, st.to_value(), version);
    for (const auto& note : retried)
      event(run, kube::EventType::Warning, "GroupRetried", "Run", plan.name + ": " + note);
    if (planner && !planner->done() && st.rounds > rounds_before)
      event(run, kube::EventType::Normal, "DiagnoseRound", "Diagnose",
            plan.name + ": round " + std::to_string(st.rounds) + ", " +
                std::to_string(planner->pending()->tests.size()) + " group test(s)");
    if (st.done())
      event(run, st.phase == "Passed" ? kube::EventType::Normal : kube::EventType::Warning,
            "CategoryFinished", "Run",
            plan.name + " " + st.phase + ": " + std::to_string(st.failed.size()) +
                " node(s) failed" + (st.message.empty() ? "" : " (" + st.message + ")"));
  }
  // 3. Recorded: their Jobs (and Services) go.
  kube::DeleteOptions del;
  del.propagation_policy = "Background";
  std::vector<kube::ResourceId> kinds = {kube::resources::jobs(), resources::services()};
  if (mpijobs_ != nullptr) kinds.push_back(mpijobs());
  for (const auto& jname : to_delete) {
    for (const auto& r : kinds) {
      try {
        client_.remove(r, run.ns, jname, del);
      } catch (const kube::ApiError& e) {
        if (e.reason() != kube::Reason::NotFound) throw;
      }
    }
  }
  if (st.done() || stop.stop_requested()) return;

  // 4. Start waiting groups: at most maxConcurrentJobs, never two on one node at once (a
  // node's GPUs run one workload; two half-placed indexed Jobs would wait on each other).
  if (changed) return;  // re-planned: start from the stored state on the next pass
  int limit = std::max(1, plan.workload.max_concurrent_jobs);
  for (GroupState* g : waiting) {
    if (running >= limit) break;
    bool clash = std::any_of(g->nodes.begin(), g->nodes.end(),
                             [&](const std::string& n) { return busy.count(n) > 0; });
    if (clash) continue;
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
    ++running;
    busy.insert(g->nodes.begin(), g->nodes.end());
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
  s["startTime"] = start.empty() ? now_rfc3339() : start;
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
    c["phase"] = st.phase;
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
    s["completionTime"] = end.empty() ? now_rfc3339() : end;
  }
  kube::set_condition(conds, {"Accepted", "True", "Accepted", "spec accepted", gen, {}});
  kube::set_condition(conds, {"Complete",
                              final ? "True" : "False",
                              final ? "Finished" : "InProgress",
                              cut(msg, 1024),
                              gen,
                              {}});
  std::string passed_reason = run.phase == "Passed" ? "AllNodesPassed"
                              : run.phase == "Failed"
                                  ? (failed_nodes.empty() ? "NoNodes" : "NodesFailed")
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

// ---- results of a finished run ----

std::vector<NodeResult> read_node_results(kube::Client& client, std::string_view ns,
                                          std::string_view run, std::size_t categories) {
  std::vector<NodeResult> out;
  StoredMap t = read_map(client, ns, targets_config_map(run));
  if (t.data.is_null()) return out;
  Selection sel = nodes_from_value(t.data);
  std::map<std::string, NodeResult> by;
  for (const auto& n : sel.nodes) by[n.name] = {n.name, true, true, "", "", ""};
  for (std::size_t i = 0; i < categories; ++i) {
    StoredMap m = read_map(client, ns, state_config_map(run, static_cast<int>(i)));
    if (m.data.is_null()) break;
    CategoryState st = CategoryState::from_value(m.data);
    for (const auto& f : st.failed) {
      NodeResult& r = by[f.node];
      if (!r.passed) continue;  // the first failed category is the verdict
      r = {f.node, false, true, f.reason, st.name, f.message};
    }
  }
  for (auto& [n, r] : by) out.push_back(std::move(r));
  for (const auto& e : sel.excluded) out.push_back({e.node, false, false, e.reason, "", e.message});
  return out;
}

std::optional<Selection> read_targets(kube::Client& client, std::string_view ns,
                                      std::string_view run) {
  StoredMap t = read_map(client, ns, targets_config_map(run));
  if (t.data.is_null()) return std::nullopt;
  return nodes_from_value(t.data);
}

std::optional<CategoryState> read_category(kube::Client& client, std::string_view ns,
                                           std::string_view run, int category) {
  StoredMap m = read_map(client, ns, state_config_map(run, category));
  if (m.data.is_null()) return std::nullopt;
  return CategoryState::from_value(m.data);
}

// ---- ValidationRequests ----

ValidationReconciler::ValidationReconciler(kube::Client& client, const controller::Cache& requests,
                                           const controller::Cache& certifications, std::string ns,
                                           kube::EventRecorder& events)
    : client_(client),
      requests_(requests),
      certs_(certifications),
      ns_(std::move(ns)),
      events_(events),
      status_(client, resources::validation_requests(), "ValidationRequest", kFieldManager) {}

std::string ValidationReconciler::certification_name(std::string_view request) {
  std::string n = "vr-" + std::string(request);
  if (n.size() > 63)
    n = n.substr(0, 52) + "-" + std::to_string(std::hash<std::string>{}(n) % 1000000000);
  for (char& c : n)
    if (c == '.') c = '-';
  while (!n.empty() && n.back() == '-') n.pop_back();
  return n;
}

controller::Result ValidationReconciler::reconcile(const controller::Request& request,
                                                   std::stop_token) {
  kube::ObjectPtr vr = requests_.get(request.key());
  if (vr == nullptr) return {};
  std::string phase(vr->get_string({"status", "phase"}));
  if (phase == "Passed" || phase == "Failed" || phase == "Expired") return {};
  std::string cert_name = certification_name(request.name);
  std::vector<std::string> nodes;
  if (const core::Value* n = vr->get({"spec", "nodeNames"}); n && n->is_list())
    for (const auto& x : n->as_list()) nodes.push_back(x.as_string());
  std::int64_t gen = 0;
  if (const core::Value* g = vr->get({"metadata", "generation"}); g && g->is_int())
    gen = g->as_int();
  const core::Value* cur = vr->find("status");

  core::Value s;
  s["observedGeneration"] = gen;
  s["certification"] = ns_ + "/" + cert_name;
  s["nodeCount"] = static_cast<std::int64_t>(nodes.size());
  std::string start = cur ? std::string(cur->get_string({"startTime"})) : "";
  s["startTime"] = start.empty() ? now_rfc3339() : start;
  core::Value conds;
  if (cur != nullptr)
    if (const core::Value* c = cur->find("conditions")) conds = *c;

  kube::ObjectPtr cert = certs_.get(kube::object_key(ns_, cert_name));
  std::string cert_phase = cert ? std::string(cert->get_string({"status", "phase"})) : "";
  bool final = cert_phase == "Passed" || cert_phase == "Failed";
  auto deadline = kube::parse_rfc3339(vr->get_string({"spec", "deadline"}));
  if (!final && deadline && std::chrono::system_clock::now() > *deadline) {
    s["phase"] = "Expired";
    s["message"] =
        "no verdict by the deadline " + std::string(vr->get_string({"spec", "deadline"}));
    s["completionTime"] = now_rfc3339();
    kube::set_condition(conds, {"Answered", "False", "Expired", s["message"].as_string(), gen, {}});
    s["conditions"] = conds;
    status_.apply("", request.name, s);
    events_.record(regarding(*vr, resources::validation_requests(), "ValidationRequest"),
                   kube::EventType::Warning, "Expired", "Answer", s["message"].as_string());
    return {};
  }
  if (cert == nullptr) {
    core::Value c;
    c["apiVersion"] = resources::certifications().api_version();
    c["kind"] = "Certification";
    c["metadata"]["name"] = cert_name;
    c["metadata"]["namespace"] = ns_;
    c["metadata"]["labels"]["gpufleet.io/validation-request"] = request.name;
    core::Value ref;
    ref["apiVersion"] = resources::validation_requests().api_version();
    ref["kind"] = "ValidationRequest";
    ref["name"] = request.name;
    ref["uid"] = kube::uid_of(*vr);
    ref["controller"] = true;
    ref["blockOwnerDeletion"] = true;
    c["metadata"]["ownerReferences"].push_back(ref);
    for (const auto& n : nodes) c["spec"]["targets"]["nodeNames"].push_back(n);
    core::Value all;
    all["operator"] = "Exists";
    c["spec"]["targets"]["tolerations"].push_back(all);
    if (const core::Value* cats = vr->get({"spec", "categories"}); cats && cats->is_list())
      for (const auto& x : cats->as_list()) {
        core::Value e;
        e["name"] = x;
        c["spec"]["categories"].push_back(e);
      }
    bool created = false;
    try {
      client_.create(resources::certifications(), c, kFieldManager);
      created = true;
    } catch (const kube::ApiError& e) {
      if (e.reason() == kube::Reason::Invalid) {
        // A category the catalog does not have: the request cannot be answered.
        s["phase"] = "Failed";
        s["message"] = cut(std::string("cannot run the requested categories: ") + e.what(), 1024);
        s["failedCount"] = static_cast<std::int64_t>(nodes.size());
        s["completionTime"] = now_rfc3339();
        kube::set_condition(
            conds, {"Answered", "True", "InvalidCategories", s["message"].as_string(), gen, {}});
        s["conditions"] = conds;
        status_.apply("", request.name, s);
        events_.record(regarding(*vr, resources::validation_requests(), "ValidationRequest"),
                       kube::EventType::Warning, "Rejected", "Accept", s["message"].as_string());
        return {};
      }
      if (e.reason() != kube::Reason::AlreadyExists) throw;
    }
    if (created)
      events_.record(regarding(*vr, resources::validation_requests(), "ValidationRequest"),
                     kube::EventType::Normal, "Accepted", "Accept",
                     "certifying " + std::to_string(nodes.size()) +
                         " node(s) through Certification " + ns_ + "/" + cert_name);
  }
  if (!final) {
    s["phase"] = cert_phase.empty() ? "Pending" : "Running";
    s["message"] = "certifying through Certification " + ns_ + "/" + cert_name;
    kube::set_condition(conds,
                        {"Answered", "False", "InProgress", s["message"].as_string(), gen, {}});
    s["conditions"] = conds;
    if (cur == nullptr || !(*cur == s)) status_.apply("", request.name, s);
    return {.requeue_after = kPoll};
  }
  std::size_t ncat = 0;
  if (const core::Value* cats = cert->get({"spec", "categories"}); cats && cats->is_list())
    ncat = cats->size();
  auto results = read_node_results(client_, ns_, cert_name, ncat);
  std::map<std::string, NodeResult> by;
  for (auto& r : results) by[r.node] = r;
  core::Value list = core::Value::list();
  std::int64_t failed = 0;
  for (const auto& n : nodes) {
    core::Value x;
    x["node"] = n;
    auto it = by.find(n);
    bool ok = it != by.end() && it->second.passed && cert_phase == "Passed";
    if (it != by.end() && it->second.passed && cert_phase != "Passed") ok = true;
    x["verdict"] = ok ? "Passed" : "Failed";
    if (!ok) {
      ++failed;
      if (it == by.end()) {
        x["reason"] = "Infrastructure";
        x["message"] = "not tested";
      } else if (!it->second.tested) {
        x["reason"] = "Infrastructure";
        x["message"] = cut("not tested: " + it->second.reason + ": " + it->second.message, 512);
      } else {
        x["reason"] = it->second.reason;
        x["category"] = it->second.category;
        x["message"] = cut(it->second.message, 512);
      }
    }
    list.push_back(std::move(x));
  }
  s["results"] = std::move(list);
  s["failedCount"] = failed;
  s["phase"] = failed == 0 && cert_phase == "Passed" ? "Passed" : "Failed";
  s["message"] = failed == 0 ? "every node passed"
                             : std::to_string(failed) + " of " + std::to_string(nodes.size()) +
                                   " nodes failed";
  s["completionTime"] = now_rfc3339();
  kube::set_condition(
      conds, {"Answered", "True", s["phase"].as_string(), s["message"].as_string(), gen, {}});
  s["conditions"] = conds;
  status_.apply("", request.name, s);
  events_.record(regarding(*vr, resources::validation_requests(), "ValidationRequest"),
                 failed == 0 ? kube::EventType::Normal : kube::EventType::Warning,
                 s["phase"].as_string(), "Answer", s["message"].as_string());
  return {};
}

// ---- wiring ----

void setup_certify(controller::Manager& manager, const controller::Context& context) {
  std::string vr_ns = context.setting("certify.namespace", "");
  if (vr_ns.empty()) {
    const char* pod_ns = std::getenv("POD_NAMESPACE");
    vr_ns = pod_ns != nullptr && *pod_ns != '\0' ? pod_ns : "default";
  }
  const std::string grace_text = context.setting("certify.overdue-grace", "2m");
  std::chrono::milliseconds overdue_grace{};
  try {
    overdue_grace =
        std::chrono::duration_cast<std::chrono::milliseconds>(core::parse_duration(grace_text));
  } catch (const core::InvalidInput&) {
    overdue_grace = std::chrono::milliseconds(-1);
  }
  // Under a second, a Job failed at its deadline could be read as overdue before its
  // condition arrives.
  if (overdue_grace < std::chrono::seconds(1))
    throw core::InvalidInput("setting certify.overdue-grace: value \"" + grace_text +
                             "\" is not a duration of at least 1s (e.g. 2m, 90s)");
  controller::SourceOptions nodes;
  nodes.cache.shape.prune = {"status.images"};
  // Nodes are read when a run starts (not watched: their heartbeats need not wake a run).
  controller::Cache& node_cache = manager.cache(kube::resources::nodes(), nodes.cache);
  controller::SourceOptions jobs;
  jobs.cache.namespace_ = context.namespace_;
  jobs.cache.label_selector = kRunLabel;
  controller::Cache& job_cache = manager.cache(kube::resources::jobs(), jobs.cache);
  controller::SourceOptions pods;
  pods.cache.namespace_ = context.namespace_;
  pods.cache.label_selector = kRunLabel;
  controller::Cache& pod_cache = manager.cache(kube::resources::pods(), pods.cache);
  // MPIJobs are watched wherever the cluster serves them, whatever the setting: groups a
  // controller started as MPIJobs are followed to the end after a restart with another one.
  const LauncherChoice choice = parse_launcher_choice(context.setting("certify.launcher", "auto"));
  bool serves_mpijob = false;
  try {
    (void)manager.client().resource_for(mpijobs().api_version(), "MPIJob");
    serves_mpijob = true;
  } catch (const kube::ApiError& e) {
    if (e.reason() != kube::Reason::NotFound) throw;
  }
  if (choice == LauncherChoice::MpiJob && !serves_mpijob)
    throw core::InvalidInput(
        "setting certify.launcher=mpijob: the API server does not serve kubeflow.org/v2beta1 "
        "MPIJob (install the mpi-operator, or set certify.launcher=auto or job)");
  controller::Cache* mpijob_cache = nullptr;
  controller::SourceOptions mpi;
  mpi.cache.namespace_ = context.namespace_;
  mpi.cache.label_selector = kRunLabel;
  if (serves_mpijob) mpijob_cache = &manager.cache(mpijobs(), mpi.cache);
  const Launcher launcher =
      serves_mpijob && choice != LauncherChoice::Job ? Launcher::MpiJob : Launcher::Job;
  core::log::info("certify launcher", {{"setting", context.setting("certify.launcher", "auto")},
                                       {"multi_node_mpi_workloads",
                                        launcher == Launcher::MpiJob ? "MPIJob" : "indexed Job"}});
  pod_cache.add_index(kJobLabel, [](const core::Value& p) -> std::vector<std::string> {
    std::string_view j = kube::label_of(p, kJobLabel);
    if (j.empty()) return {};
    return {kube::object_key(kube::namespace_of(p), j)};
  });

  // The admission webhook refuses what the API server's schema cannot check (a threshold that
  // does not compile) with the same parser the reconciler uses; the reconciler's
  // Accepted=False stays for objects stored while no webhook was registered.
  for (bool wr : {false, true}) {
    manager.admission().add(
        std::string(resources::certifications().group), wr ? "WorkloadRun" : "Certification",
        [wr](const controller::AdmissionRequest& r) {
          if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
            return controller::AdmissionResult::allow();
          const core::Value* spec = r.object.find("spec");
          try {
            if (wr)
              (void)parse_workload_run_spec(spec ? *spec : core::Value());
            else
              (void)parse_certification_spec(spec ? *spec : core::Value(), Catalog::builtin());
          } catch (const SpecError& e) {
            return controller::AdmissionResult::deny(e.what());
          }
          return controller::AdmissionResult::allow();
        });
  }

  for (bool wr : {false, true}) {
    RunKind k{wr ? resources::workload_runs() : resources::certifications(),
              wr ? "WorkloadRun" : "Certification", wr};
    controller::SourceOptions primary;
    primary.cache.namespace_ = context.namespace_;
    controller::Cache& runs = manager.cache(k.resource, primary.cache);
    controller::ControllerBuilder b = manager.controller(wr ? "certify-workloadrun" : "certify");
    b.for_resource(k.resource, k.kind, primary).owns(kube::resources::jobs(), jobs);
    if (mpijob_cache != nullptr) b.owns(mpijobs(), mpi);
    b.max_concurrent_reconciles(4).complete(std::make_shared<RunReconciler>(
        manager.client(), k, runs, node_cache, job_cache, pod_cache,
        manager.event_recorder("certify"), mpijob_cache, launcher, overdue_grace));
  }
  controller::SourceOptions requests;
  controller::Cache& vr_cache = manager.cache(resources::validation_requests(), requests.cache);
  controller::SourceOptions certs;
  certs.cache.namespace_ = vr_ns;
  certs.cache.label_selector = "gpufleet.io/validation-request";
  controller::Cache& cert_cache = manager.cache(resources::certifications(), certs.cache);
  manager.controller("certify-validation")
      .for_resource(resources::validation_requests(), "ValidationRequest", requests)
      .watches(
          resources::certifications(),
          [](const core::Value& c) -> std::vector<controller::Request> {
            std::string_view vr = kube::label_of(c, "gpufleet.io/validation-request");
            if (vr.empty()) return {};
            return {controller::Request{"", std::string(vr)}};
          },
          certs)
      .max_concurrent_reconciles(2)
      .complete(std::make_shared<ValidationReconciler>(manager.client(), vr_cache, cert_cache,
                                                       vr_ns, manager.event_recorder("certify")));
}

}  // namespace gpufleet::certify
