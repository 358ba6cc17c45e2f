#include "certify/controller.h"

#include <algorithm>
#include <set>

#include "certify/controller_shared.h"
#include "certify/node_selection.h"
#include "certify/run_state.h"
#include "certify/state_codec.h"
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

namespace detail {

std::string now_rfc3339(const controller::Clock& clock) {
  return kube::format_rfc3339(clock.now());
}

std::string cut(std::string s, std::size_t n) {
  if (s.size() > n) {
    s.resize(n - 3);
    s += "...";
  }
  return s;
}

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

// ---- ConfigMaps holding state ----

StoredMap read_map(kube::Client& client, std::string_view ns, const std::string& name) {
  StoredMap m;
  auto cm = client.try_get(kube::resources::config_maps(), ns, name);
  if (!cm) return m;
  m.resource_version = std::string(kube::resource_version_of(*cm));
  auto text = decode_state(*cm, kStateKey);
  m.data = text ? core::parse_json(*text, name) : core::Value::map();
  return m;
}

}  // namespace detail

using detail::cut;
using detail::kPoll;
using detail::nodes_from_value;
using detail::now_rfc3339;
using detail::read_map;
using detail::regarding;
using detail::StoredMap;

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
    if (!st.done()) {
      // A category the run ended before it finished (its maxDuration): no node passed it.
      for (auto& [node, r] : by)
        if (r.passed)
          r = {node,         false,   false,
               "Incomplete", st.name, st.name + " did not finish before the run ended"};
      break;
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
                                           kube::EventRecorder& events,
                                           const controller::Clock& clock)
    : client_(client),
      requests_(requests),
      certs_(certifications),
      ns_(std::move(ns)),
      events_(events),
      clock_(clock),
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
  s["startTime"] = start.empty() ? now_rfc3339(clock_) : start;
  core::Value conds;
  if (cur != nullptr)
    if (const core::Value* c = cur->find("conditions")) conds = *c;

  kube::ObjectPtr cert = certs_.get(kube::object_key(ns_, cert_name));
  std::string cert_phase = cert ? std::string(cert->get_string({"status", "phase"})) : "";
  bool final = cert_phase == "Passed" || cert_phase == "Failed";
  auto deadline = kube::parse_rfc3339(vr->get_string({"spec", "deadline"}));
  if (!final && deadline && clock_.now() > *deadline) {
    s["phase"] = "Expired";
    s["message"] =
        "no verdict by the deadline " + std::string(vr->get_string({"spec", "deadline"}));
    s["completionTime"] = now_rfc3339(clock_);
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
        s["completionTime"] = now_rfc3339(clock_);
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
  s["completionTime"] = now_rfc3339(clock_);
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
  const RunLimits limits = parse_run_limits([&](std::string_view key, std::string_view fallback) {
    return context.setting(std::string(key), std::string(fallback));
  });
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
  auto by_run = [](const core::Value& w) -> std::vector<std::string> {
    std::string_view uid = kube::label_of(w, kRunLabel);
    if (uid.empty()) return {};
    return {std::string(uid)};
  };
  job_cache.add_index(kRunIndex, by_run);
  if (mpijob_cache != nullptr) mpijob_cache->add_index(kRunIndex, by_run);
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
        [wr, limits, &node_cache](const controller::AdmissionRequest& r) {
          if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
            return controller::AdmissionResult::allow();
          const core::Value* spec = r.object.find("spec");
          RunSpec rs;
          try {
            rs = wr ? parse_workload_run_spec(spec ? *spec : core::Value())
                    : parse_certification_spec(spec ? *spec : core::Value(), Catalog::builtin());
            (void)run_duration_bound(rs, limits);
          } catch (const SpecError& e) {
            return controller::AdmissionResult::deny(e.what());
          }
          // The footprint as the nodes stand now (the controller checks again when the run
          // starts); before the node cache has synced only the start-time check applies.
          if (r.operation == "CREATE" && node_cache.has_synced()) {
            Targets t = rs.targets;
            const bool validation =
                r.object.get({"metadata", "labels", "gpufleet.io/validation-request"}) != nullptr;
            if (auto refusal =
                    footprint_refusal(detail::select_run_nodes(t, validation, node_cache), limits))
              return controller::AdmissionResult::deny(*refusal);
          }
          return controller::AdmissionResult::allow();
        });
  }

  auto metrics = std::make_shared<CertifyMetrics>(*manager.options().registry);
  for (bool wr : {false, true}) {
    RunKind k{wr ? resources::workload_runs() : resources::certifications(),
              wr ? "WorkloadRun" : "Certification", wr};
    controller::SourceOptions primary;
    primary.cache.namespace_ = context.namespace_;
    controller::Cache& runs = manager.cache(k.resource, primary.cache);
    controller::ControllerBuilder b = manager.controller(wr ? "certify-workloadrun" : "certify");
    b.for_resource(k.resource, k.kind, primary).owns(kube::resources::jobs(), jobs);
    if (mpijob_cache != nullptr) b.owns(mpijobs(), mpi);
    b.max_concurrent_reconciles(4).complete(
        std::make_shared<RunReconciler>(manager.client(), k, runs, node_cache, job_cache, pod_cache,
                                        manager.event_recorder("certify"), manager.clock(),
                                        mpijob_cache, launcher, overdue_grace, limits, metrics));
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
                                                       vr_ns, manager.event_recorder("certify"),
                                                       manager.clock()));
}

}  // namespace gpufleet::certify
