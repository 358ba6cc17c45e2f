// The reconciler's caches and the writes every part of a pass shares (set_reconciler.h).
#include "hostpkg/controller/set_reconciler.h"

#include <thread>

#include "api/resources.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/controller/text_fields.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::hostpkg::detail {

namespace {

Metrics register_metrics(core::metrics::Registry& r) {
  Metrics m;
  m.nodes = &r.gauge("gpufleet_hostpkg_nodes",
                     "Nodes selected by a HostPackageSet, by rollout state.", {"set", "state"});
  m.stopped = &r.gauge("gpufleet_hostpkg_rollout_stopped",
                       "1 while a compartment of the set's rollout is stopped (reset resumes it).",
                       {"set"});
  m.steps = &r.counter("gpufleet_hostpkg_stage_results_total",
                       "Stage pods finished, by stage and result.", {"set", "stage", "result"});
  // 1 s to 2.3 h: a package check to a driver build.
  m.stage_duration = &r.histogram("gpufleet_hostpkg_stage_duration_seconds",
                                  "Stage pods from creation to their result, by stage",
                                  core::metrics::exponential_buckets(1, 2, 14), {"set", "stage"});
  m.interrupts = &r.counter("gpufleet_hostpkg_interrupts_total",
                            "Interrupts delivered (reboots verified by boot ID).", {"set", "kind"});
  m.writes = &r.counter("gpufleet_hostpkg_api_writes_total",
                        "Writes the hostpkg controller sent to the API server, by kind.", {"kind"});
  m.verifications =
      &r.counter("gpufleet_hostpkg_verifications_total",
                 "Node re-verifications finished (spec.reverify), by result.", {"set", "result"});
  m.drift = &r.counter("gpufleet_hostpkg_drift_detected_total",
                       "Failed re-verifications: a package's checks failed on a finished node.",
                       {"set", "package"});
  return m;
}

// Sets and policies are few and read whole: kept as Values.
controller::CacheOptions full_cache_options() {
  controller::CacheOptions o;
  o.compact = false;
  return o;
}

controller::CacheOptions stage_pod_cache_options(const ControllerSettings& s) {
  controller::CacheOptions o;
  o.namespace_ = s.namespace_;
  o.label_selector = std::string(kSetLabel);
  return o;
}

// resourceVersions are opaque, but etcd-backed ones are increasing integers: a cache entry at
// or past the version we wrote has seen our write.
bool seen(std::string_view cached, std::string_view written) {
  if (cached == written) return true;
  auto c = parse_int(cached), w = parse_int(written);
  return c && w && *c >= *w;
}

}  // namespace

HostPkgReconciler::HostPkgReconciler(controller::Manager& m, ControllerSettings settings)
    : client_(m.client()),
      clock_(m.clock()),
      settings_(std::move(settings)),
      sets_(m.cache(api::host_package_sets(), full_cache_options())),
      policies_(m.cache(api::deployment_policies(), full_cache_options())),
      nodes_(m.cache(kube::resources::nodes())),
      pods_(m.cache(kube::resources::pods(), pod_cache_options())),
      stage_pods_(m.cache(kube::resources::pods(), stage_pod_cache_options(settings_))),
      config_maps_(m.cache(kube::resources::config_maps(), stage_pod_cache_options(settings_))),
      pdbs_(m.cache(kube::resources::pod_disruption_budgets())),
      remediations_(m.cache(api::remediations())),
      validation_requests_(m.cache(api::validation_requests())),
      budget_(m.client()),
      claims_(m.client(), {.namespace_ = m.options().lease_namespace}),
      events_(m.event_recorder("hostpkg")),
      status_(m.client(), api::host_package_sets(), "HostPackageSet", std::string(kFieldManager)),
      metrics_(register_metrics(*m.options().registry)) {
  pods_.add_index("node", [](const core::Value& p) {
    std::string_view n = kube::pod::node_name(p);
    return n.empty() ? std::vector<std::string>{} : std::vector<std::string>{std::string(n)};
  });
}

controller::CacheOptions HostPkgReconciler::pod_cache_options() {
  controller::CacheOptions o;
  o.shape.prune = {"spec.containers",   "spec.initContainers",
                   "spec.volumes",      "spec.tolerations",
                   "spec.affinity",     "status.containerStatuses",
                   "status.conditions", "status.initContainerStatuses"};
  return o;
}

controller::Result HostPkgReconciler::reconcile(const controller::Request& req,
                                                std::stop_token stop) {
  written_.clear();
  created_pods_.clear();
  created_config_maps_.clear();
  // Only this pass's answers: kept across passes (cleared only by a re-plan) they piled up
  // for every node written until a batch ended within one pass (RSS rose ~1 MB / 2 min in
  // a 500-node batch at 5,000), and an older one could hide a later change (someone else's
  // cordon) from a re-plan.
  fresh_.clear();
  try {
    controller::Result r = reconcile_pass(req, stop);
    wait_for_cache();
    return r;
  } catch (...) {
    wait_for_cache();
    throw;
  }
}

core::Value HostPkgReconciler::patch_node(const std::string& name, const core::Value& patch,
                                          const char* kind) {
  metrics_.writes->with({kind}).inc();
  core::Value out = client_.patch(kube::resources::nodes(), "", name, kube::PatchType::Merge, patch,
                                  {}, kFieldManager);
  // As the cache holds it (no managedFields), compact: up to a batch of these live at once.
  if (core::Value* meta = out.find("metadata"); meta != nullptr && meta->is_map())
    meta->as_map().erase("managedFields");
  kube::CompactPtr compact = kube::CompactObject::encode(out);
  std::lock_guard lock(written_mu_);
  written_.emplace_back(name, std::string(kube::resource_version_of(out)));
  fresh_[name] = std::move(compact);
  return out;
}

// The next pass plans from the cache: it must have seen this pass's Node writes, or a node
// started here would look free there and a budget could be exceeded; and the stage pods and
// config maps it created, or it creates them again (AlreadyExists: a wasted write each, seen
// once nodes were driven at once and their creates all landed at the end of a pass). Watch
// latency is milliseconds; the wait is bounded. Real time, not clock_: it waits on the watch,
// and decides nothing (a FakeClock standing still would never end it).
void HostPkgReconciler::wait_for_cache() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto wait_until = [&](const auto& done) {
    while (std::chrono::steady_clock::now() < deadline && !done())
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  for (const auto& entry : written_) {
    // Named, not bound: C++20 clang does not let a lambda capture a structured binding.
    const auto& name = entry.first;
    const auto& rv = entry.second;
    wait_until([&] {
      kube::CompactPtr n = nodes_.get_compact(name);
      return n == nullptr || seen(n->resource_version(), rv);
    });
  }
  for (const auto& key : created_pods_)
    wait_until([&] { return stage_pods_.get_compact(key) != nullptr; });
  for (const auto& key : created_config_maps_)
    wait_until([&] { return config_maps_.get_compact(key) != nullptr; });
  written_.clear();
  created_pods_.clear();
  created_config_maps_.clear();
}

bool HostPkgReconciler::ensure_finalizer(const core::Value& set, bool present) {
  const core::Value* fins = set.get({"metadata", "finalizers"});
  core::Value list = core::Value::list();
  bool has = false;
  if (fins != nullptr && fins->is_list()) {
    for (const auto& f : fins->as_list()) {
      if (f.is_string() && f.as_string() == kFinalizer) {
        has = true;
        if (!present) continue;
      }
      list.push_back(f);
    }
  }
  if (has == present) return false;
  if (present) list.push_back(std::string(kFinalizer));
  core::Value patch;
  patch["metadata"]["finalizers"] = std::move(list);
  patch["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(set));
  metrics_.writes->with({"finalizer"}).inc();
  client_.patch(api::host_package_sets(), "", kube::name_of(set), kube::PatchType::Merge, patch, {},
                kFieldManager);
  return true;
}

}  // namespace gpufleet::hostpkg::detail
