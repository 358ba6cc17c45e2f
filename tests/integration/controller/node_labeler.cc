#include "node_labeler.h"
// --- example begin ---
#include "controller/manager.h"
#include "kube/api/objects.h"

using namespace gpufleet;

constexpr const char* kNotReady = "gpufleet.io/not-ready";

// Labels Nodes that are not Ready with gpufleet.io/not-ready=true; removes it on recovery.
class NodeLabeler : public controller::Reconciler {
 public:
  NodeLabeler(kube::Client& client, const controller::Cache& nodes)
      : client_(client), nodes_(nodes) {}

  controller::Result reconcile(const controller::Request& req, std::stop_token) override {
    kube::ObjectPtr node = nodes_.get(req.key());  // level-triggered: read the current state
    if (node == nullptr) return {};                // deleted: nothing to do
    bool ready = kube::node::ready(*node);
    bool labelled = !kube::label_of(*node, kNotReady).empty();
    if (labelled == !ready) return {};  // converged: write nothing
    core::Value patch;
    patch["metadata"]["labels"][kNotReady] = ready ? core::Value() : core::Value("true");
    client_.patch(kube::resources::nodes(), "", req.name, kube::PatchType::Merge, patch);
    return {};  // throwing instead retries this node with exponential backoff
  }

 private:
  kube::Client& client_;
  const controller::Cache& nodes_;
};

void add_node_labeler(controller::Manager& manager) {
  controller::SourceOptions nodes;
  nodes.cache.shape.prune = {"status.images"};  // a smaller cache
  // Kubelets rewrite Node status every few seconds; only readiness and our label matter.
  nodes.predicates.push_back([](const controller::WatchEvent& ev) {
    return ev.old_obj == nullptr || kube::node::ready(*ev.old_obj) != kube::node::ready(ev.obj) ||
           kube::label_of(*ev.old_obj, kNotReady) != kube::label_of(ev.obj, kNotReady);
  });
  auto& cache = manager.cache(kube::resources::nodes(), nodes.cache);
  manager.controller("node-labeler")
      .for_resource(kube::resources::nodes(), "Node", nodes)
      .complete(std::make_shared<NodeLabeler>(manager.client(), cache));
}
// --- example end ---
