// The controller's settings (--set hostpkg.*), the Node event filter, and its registration:
// the admission webhooks, the caches, the reconciler and its watches.
#include <fstream>
#include <memory>

#include "api/resources.h"
#include "controller/predicates.h"
#include "core/errors.h"
#include "core/time.h"
#include "hostpkg/controller/policy_admission.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/set_reconciler.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/controller/text_fields.h"
#include "kube/api/cordon.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/api/selector.h"

namespace gpufleet::hostpkg {

using controller::Request;
using detail::parse_int;

ControllerSettings settings_from(const controller::Context& context) {
  ControllerSettings s;
  // In a pod, the stage pods go to the controller's own namespace.
  if (std::ifstream f("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); f) {
    std::string ns;
    std::getline(f, ns);
    if (!ns.empty()) s.namespace_ = ns;
  }
  s.namespace_ = context.setting("hostpkg.namespace", s.namespace_);
  s.runner_image = context.setting("hostpkg.runner-image", s.runner_image);
  std::string poll = context.setting("hostpkg.poll", "2s");
  auto d = core::try_parse_duration(poll);
  if (!d || d->count() <= 0)
    throw core::InvalidInput("--set hostpkg.poll=" + poll +
                             " is not a positive duration (e.g. 2s, 500ms)");
  s.poll = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  std::string rv = context.setting("hostpkg.reverify-interval", "");
  if (!rv.empty()) {
    auto r = core::try_parse_duration(rv);
    if (!r || r->count() <= 0)
      throw core::InvalidInput("--set hostpkg.reverify-interval=" + rv +
                               " is not a positive duration (e.g. 5s; for tests and demos only)");
    s.reverify_interval = std::chrono::duration_cast<std::chrono::milliseconds>(*r);
  }
  std::string inflight = context.setting("hostpkg.reverify-max-in-flight", "");
  if (!inflight.empty()) {
    auto n = parse_int(inflight);
    if (!n || *n < 1)
      throw core::InvalidInput("--set hostpkg.reverify-max-in-flight=" + inflight +
                               " is not a positive whole number of verify pods");
    s.reverify_max_in_flight = *n;
  }
  std::string max = context.setting("hostpkg.max-unavailable", "");
  std::string topo = context.setting("hostpkg.topology-key", "");
  std::string per = context.setting("hostpkg.max-unavailable-per-domain", "");
  if (!max.empty() || !topo.empty() || !per.empty()) {
    core::Value v = core::Value::map();
    if (!topo.empty()) v["topologyKey"] = topo;
    if (!per.empty()) {
      auto n = parse_int(per);
      if (!n)
        throw core::InvalidInput("--set hostpkg.max-unavailable-per-domain=" + per +
                                 " is not a whole number of nodes");
      v["maxUnavailablePerDomain"] = *n;
    }
    if (!max.empty()) {
      bool pct = max.ends_with('%');
      auto n = parse_int(pct ? max.substr(0, max.size() - 1) : max);
      if (!n)
        throw core::InvalidInput("--set hostpkg.max-unavailable=" + max +
                                 " is neither a node count (5) nor a percentage (10%)");
      v["maxUnavailable"][pct ? "percent" : "count"] = *n;
    }
    s.cluster = parse_cluster_budget(v, "--set hostpkg.*");
    s.has_cluster_budget = true;
  }
  return s;
}

controller::Predicate node_event_filter() {
  namespace pr = controller::predicates;
  return pr::any_of({
      pr::fields_changed({{"metadata", "labels"},
                          {"metadata", "deletionTimestamp"},
                          {"spec", "unschedulable"},
                          {"spec", "taints"},
                          {"status", "nodeInfo", "bootID"}}),
      pr::annotations_changed_with_prefix(
          {std::string(kRecordPrefix), std::string(kube::kCordonOwnersAnnotation)}),
      pr::condition_changed("Ready", {"status"}),
      pr::condition_changed(std::string(kDriftCondition), {"status", "reason", "message"}),
  });
}

void setup_hostpkg(controller::Manager& manager, const controller::Context& context) {
  setup_hostpkg(manager, settings_from(context));
}

void setup_hostpkg(controller::Manager& manager, const ControllerSettings& settings) {
  // The admission webhook refuses what the CRD schema cannot check (a dependsOn cycle, a
  // version that is not semver, ...) with the parsers the reconciler uses.
  const std::string group = api::host_package_sets().group;
  manager.admission().add(group, "HostPackageSet", [](const controller::AdmissionRequest& r) {
    if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
      return controller::AdmissionResult::allow();
    (void)parse_host_package_set(r.object);  // InvalidInput: denied with its words
    return controller::AdmissionResult::allow();
  });
  kube::Client& client = manager.client();
  auto policy_admission = [&client](const controller::AdmissionRequest& r) {
    // Deleting a policy a set still names would leave that set Blocked mid-rollout.
    if (r.operation == "DELETE") return policy_delete_admission(client, r.name);
    if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
      return controller::AdmissionResult::allow();
    (void)parse_deployment_policy(r.object);
    return controller::AdmissionResult::allow();
  };
  manager.admission().add(group, "DeploymentPolicy", policy_admission);
  auto rec = std::make_shared<detail::HostPkgReconciler>(manager, settings);
  controller::Cache& sets = rec->sets();
  // A Node event concerns every set selecting the node, and every set whose record is on it
  // (a node that left a set's selector mid-change still needs finishing).
  controller::MapFunc node_to_sets = [&sets](const core::Value& node) {
    std::vector<Request> out;
    const core::Value* labels = node.get({"metadata", "labels"});
    static const core::Value kNone = core::Value::map();
    const core::Value* ann = node.get({"metadata", "annotations"});
    for (const auto& s : sets.list()) {
      std::string name(kube::name_of(*s));
      const core::Value* sel = s->get({"spec", "nodeSelector"});
      bool match = sel == nullptr || kube::selector_matches(*sel, labels ? *labels : kNone);
      if (!match && ann != nullptr && ann->is_map())
        match = ann->find(record_annotation(name)) != nullptr;
      if (match) out.push_back(Request{"", name});
    }
    return out;
  };
  controller::MapFunc policy_to_sets = [&sets](const core::Value& policy) {
    std::vector<Request> out;
    for (const auto& s : sets.list()) {
      if (s->get_string({"spec", "deploymentPolicy"}) == kube::name_of(policy))
        out.push_back(Request{"", std::string(kube::name_of(*s))});
    }
    return out;
  };
  controller::MapFunc stage_pod_to_set = [](const core::Value& pod) {
    std::string_view set = kube::label_of(pod, kSetLabel);
    return set.empty() ? std::vector<Request>{}
                       : std::vector<Request>{Request{"", std::string(set)}};
  };
  // A pod leaving a node being drained: the sets with a change in progress there.
  controller::Cache& nodes = rec->nodes();
  controller::MapFunc pod_to_sets = [&nodes](const core::Value& pod) {
    std::vector<Request> out;
    std::string_view node = kube::pod::node_name(pod);
    if (node.empty()) return out;
    kube::CompactPtr n = nodes.get_compact(std::string(node));
    if (n == nullptr) return out;
    if (auto ann = n->root().get({"metadata", "annotations"}); ann && ann->is_map()) {
      ann->for_each_entry([&](std::string_view k, kube::CompactView v) {
        auto s = v.string();
        if (k.starts_with(kRecordPrefix) && s && detail::text_in_state(*s, "InProgress"))
          out.push_back(Request{"", std::string(k.substr(kRecordPrefix.size()))});
      });
    }
    return out;
  };
  // An incident opening or closing changes what is out for every set (sets are few).
  controller::MapFunc incident_to_sets = [&sets](const core::Value&) {
    std::vector<Request> out;
    for (const auto& s : sets.list()) out.push_back(Request{"", std::string(kube::name_of(*s))});
    return out;
  };
  // certify's verdict on a node validating: the set that owns the request.
  controller::MapFunc validation_to_set = [](const core::Value& vr) {
    std::vector<Request> out;
    if (const core::Value* owners = vr.get({"metadata", "ownerReferences"});
        owners && owners->is_list()) {
      for (const auto& o : owners->as_list()) {
        if (o.get_string({"kind"}) == "HostPackageSet")
          out.push_back(Request{"", std::string(o.get_string({"name"}))});
      }
    }
    return out;
  };
  controller::SourceOptions set_source;
  set_source.cache.compact = false;
  controller::SourceOptions node_source;
  node_source.predicates.push_back(node_event_filter());
  controller::SourceOptions stage_source;
  stage_source.cache.namespace_ = settings.namespace_;
  stage_source.cache.label_selector = std::string(kSetLabel);
  controller::SourceOptions pod_source;
  pod_source.cache = detail::HostPkgReconciler::pod_cache_options();
  manager.controller("hostpkg")
      .for_resource(api::host_package_sets(), "HostPackageSet", set_source)
      .watches(kube::resources::nodes(), node_to_sets, node_source)
      .watches(api::deployment_policies(), policy_to_sets, set_source)
      .watches(kube::resources::pods(), stage_pod_to_set, stage_source)
      .watches(kube::resources::pods(), pod_to_sets, pod_source)
      .watches(api::remediations(), incident_to_sets)
      .watches(api::validation_requests(), validation_to_set)
      // One worker: sets share the cluster budget, so their passes must not interleave.
      .max_concurrent_reconciles(1)
      .complete(rec);
}

}  // namespace gpufleet::hostpkg
