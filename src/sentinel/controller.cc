#include "sentinel/controller.h"

#include <algorithm>

#include "controller/manager.h"
#include "core/json.h"
#include "kube/api/job_disruption.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "sentinel/node_reconciler.h"
#include "sentinel/policy.h"
#include "sentinel/policy_reconciler.h"
#include "sentinel/rules.h"

namespace gpufleet::sentinel {

namespace {

using namespace detail;
using controller::Request;

constexpr std::string_view kRequestAnnotation = "sentinel.gpufleet.io/remediation-request";

// ---- the annotation remediator ----

class AnnotationRemediator final : public Remediator {
 public:
  explicit AnnotationRemediator(kube::Client& client) : client_(client) {}
  void request(const RemediationRequest& r) override {
    core::Value req = core::Value::map();
    req["incident"] = r.incident;
    req["attempt"] = r.attempt;
    req["action"] = r.action;
    if (!r.gpus.empty()) {
      core::Value g = core::Value::list();
      for (const auto& u : r.gpus) g.push_back(u);
      req["gpus"] = std::move(g);
    }
    core::Value patch;
    patch["metadata"]["annotations"][kRequestAnnotation] = core::to_json(req);
    client_.patch(kube::resources::nodes(), "", r.node, kube::PatchType::Merge, patch);
  }

 private:
  kube::Client& client_;
};

std::vector<std::string> index_spec_node(const core::Value& obj) {
  std::string_view n = obj.get_string({"spec", "nodeName"});
  if (n.empty()) return {};
  return {std::string(n)};
}

controller::MapFunc to_node(std::initializer_list<std::string_view> path) {
  std::vector<std::string> p(path.begin(), path.end());
  return [p](const core::Value& obj) -> std::vector<Request> {
    const core::Value* v = &obj;
    for (const auto& k : p) {
      v = v->is_map() ? v->find(k) : nullptr;
      if (v == nullptr) return {};
    }
    if (!v->is_string() || v->as_string().empty()) return {};
    return {Request{"", v->as_string()}};
  };
}

// A pod is an event for its node, and for the nodes whose drain waits for its gang's
// checkpoint (the job's answer usually comes on a pod on another node).
controller::MapFunc pod_to_nodes(std::shared_ptr<State> state) {
  return [state, own = to_node({"spec", "nodeName"})](const core::Value& pod) {
    std::vector<Request> out = own(pod);
    if (auto gang = kube::gang_key_of(pod))
      for (auto& n : state->gang_waits.nodes(gang->index())) out.push_back(Request{"", n});
    return out;
  };
}

}  // namespace

std::unique_ptr<Remediator> make_annotation_remediator(kube::Client& client) {
  return std::make_unique<AnnotationRemediator>(client);
}

void setup_sentinel(controller::Manager& manager, SentinelOptions options) {
  // The admission webhook refuses a policy whose rules do not compile (or break a limit the
  // schema cannot express), with the parser and compiler the policy reconciler uses.
  std::vector<std::string> provider_names;
  for (const auto& [name, provider] : options.providers) provider_names.push_back(name);
  manager.admission().add(
      api::sentinel_policies().group, "SentinelPolicy",
      [provider_names](const controller::AdmissionRequest& r) {
        if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
          return controller::AdmissionResult::allow();
        const core::Value* spec = r.object.find("spec");
        const Policy p = Policy::from_spec(spec != nullptr ? *spec : core::Value());
        p.check_providers(provider_names);
        (void)RuleSet::compile(p.rules, p.cost_limit);  // InvalidInput: denied with its words
        return controller::AdmissionResult::allow();
      });
  auto state = std::make_shared<State>();
  state->provider_names = provider_names;
  state->follow.insert(options.policies.begin(), options.policies.end());
  // The registry hands out the same series to a second Metrics on it (a second Manager).
  state->metrics = std::make_shared<Metrics>(*manager.options().registry);
  Metrics* metrics = state->metrics.get();
  std::shared_ptr<Remediator> remediator =
      options.remediator
          ? std::shared_ptr<Remediator>(std::move(options.remediator))
          : std::shared_ptr<Remediator>(make_annotation_remediator(manager.client()));

  controller::SourceOptions nodes_src;
  nodes_src.cache.shape.prune = {"status.images"};
  // Kubelets rewrite status every few seconds: only what sentinel reads matters.
  nodes_src.predicates.push_back([](const controller::WatchEvent& ev) {
    if (ev.old_obj == nullptr) return true;
    const core::Value& a = *ev.old_obj;
    const core::Value& b = ev.obj;
    return kube::node::unschedulable(a) != kube::node::unschedulable(b) ||
           kube::node::ready(a) != kube::node::ready(b) ||
           a.get_string({"status", "nodeInfo", "bootID"}) !=
               b.get_string({"status", "nodeInfo", "bootID"}) ||
           !(a.get({"metadata", "annotations"}) == nullptr
                 ? b.get({"metadata", "annotations"}) == nullptr
                 : b.get({"metadata", "annotations"}) != nullptr &&
                       *a.get({"metadata", "annotations"}) ==
                           *b.get({"metadata", "annotations"})) ||
           !(a.get({"spec", "taints"}) == nullptr
                 ? b.get({"spec", "taints"}) == nullptr
                 : b.get({"spec", "taints"}) != nullptr &&
                       *a.get({"spec", "taints"}) == *b.get({"spec", "taints"}));
  });
  controller::Cache& nodes = manager.cache(kube::resources::nodes(), nodes_src.cache);
  controller::Cache& healths = manager.cache(api::node_healths());
  controller::Cache& policies = manager.cache(api::sentinel_policies());
  controller::Cache& rems = manager.cache(api::remediations());
  rems.add_index("node", index_spec_node);
  controller::SourceOptions pods_src;
  controller::Cache& pods = manager.cache(kube::resources::pods(), pods_src.cache);
  pods.add_index("node", index_spec_node);
  // A drain looks at the whole gang of each training job on its node (job-aware drain).
  pods.add_index(std::string(kGangIndex), kube::gang_index);
  controller::Cache& vreqs = manager.cache(api::validation_requests());

  auto node_rec =
      std::make_shared<NodeReconciler>(manager, state, *metrics, remediator, options.providers,
                                       NodeCaches{nodes, healths, rems, pods, vreqs, policies},
                                       static_cast<std::size_t>(std::max(1, options.workers)));
  controller::SourceOptions vr_src;
  controller::Controller& nodes_ctl =
      manager.controller("sentinel")
          .for_resource(kube::resources::nodes(), "Node", nodes_src)
          .watches(api::node_healths(), controller::mapping::to_self())
          .watches(api::remediations(), to_node({"spec", "nodeName"}))
          .watches(kube::resources::pods(), pod_to_nodes(state), pods_src)
          .watches(api::validation_requests(), to_node({"metadata", "labels", kNodeLabel}), vr_src)
          .max_concurrent_reconciles(options.workers)
          .complete(node_rec);
  state->nodes_controller = &nodes_ctl;

  // Spec edits and the reset annotation; status writes (its own and the breaker saves) are
  // not events for it. Counts and window expiry are refreshed every 5 s by requeue.
  controller::SourceOptions policy_src;
  policy_src.predicates.push_back(
      controller::predicates::any_of({controller::predicates::generation_changed(),
                                      controller::predicates::annotations_changed()}));
  manager.controller("sentinel-policy")
      .for_resource(api::sentinel_policies(), "SentinelPolicy", policy_src)
      .complete(make_policy_reconciler(manager, state, *metrics, policies, nodes, rems));
}

}  // namespace gpufleet::sentinel
