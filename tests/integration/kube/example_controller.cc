// The example controller of docs/kube-client.md (kept identical by kube_test's DocsExample).
#include "example_controller.h"
// --- example begin ---
#include "kube/informer.h"
#include "kube/api/objects.h"
#include "kube/work_queue.h"

using namespace gpufleet;

// Labels Nodes that are not Ready with gpufleet.io/not-ready=true; removes it on recovery.
void run_node_labeler(kube::Client& client, std::stop_token stop) {
  kube::WorkQueue queue;  // declared first: it must outlive the informer feeding it
  kube::InformerOptions options;
  options.resource = kube::resources::nodes();
  options.shape.prune = {"status.images", "metadata.managedFields"};  // small cache
  kube::Informer nodes(client, options);
  auto enqueue = [&](const core::Value& node) { queue.add(kube::object_key(node)); };
  nodes.add_handlers({enqueue, [&](const core::Value&, const core::Value& n) { enqueue(n); }, {}});
  nodes.start();
  std::stop_callback shut_down(stop, [&] { queue.shut_down(); });
  while (auto key = queue.get()) {  // level-triggered: look at the cached state, act
    try {
      if (auto node = nodes.store().get(*key)) {
        bool ready = kube::node::ready(*node);
        if (kube::label_of(*node, "gpufleet.io/not-ready").empty() == !ready) {
          core::Value patch;
          patch["metadata"]["labels"]["gpufleet.io/not-ready"] =
              ready ? core::Value() : core::Value("true");  // null deletes the label
          client.patch(kube::resources::nodes(), "", *key, kube::PatchType::Merge, patch);
        }
      }
      queue.forget(*key);
    } catch (const std::exception&) {
      queue.add_rate_limited(*key);  // retried later with per-key backoff
    }
    queue.done(*key);
  }
}
// --- example end ---
