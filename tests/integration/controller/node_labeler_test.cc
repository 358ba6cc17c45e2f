// Runs the documentation's example reconciler against kube-local.
#include <gtest/gtest.h>

#include <thread>

#include "controller/manager.h"
#include "kube/api/objects.h"
#include "node_labeler.h"
#include "process.h"
#include "test_env.h"

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;
using testing::wait_until;

TEST(NodeLabeler, LabelsNodesThatAreNotReady) {
  kube::Client client(kube::testing::admin_config());
  std::string name = kube::testing::unique_name("example-node");
  core::Value n;
  n["apiVersion"] = "v1";
  n["kind"] = "Node";
  n["metadata"]["name"] = name;
  client.create(kube::resources::nodes(), n);
  core::metrics::Registry registry;
  ManagerOptions mo;
  mo.name = "node-labeler-test";
  mo.metrics_address = "";
  mo.registry = &registry;
  Manager manager(client, mo);
  add_node_labeler(manager);
  std::jthread run([&](std::stop_token stop) { manager.run(stop); });
  auto label = [&] {
    return std::string(
        kube::label_of(client.get(kube::resources::nodes(), "", name), "gpufleet.io/not-ready"));
  };
  EXPECT_TRUE(wait_until([&] { return label() == "true"; }, 30s));
  core::Value node = client.get(kube::resources::nodes(), "", name);
  core::Value ready;
  ready["type"] = "Ready";
  ready["status"] = "True";
  ready["reason"] = "KubeletReady";
  ready["lastHeartbeatTime"] = "2026-11-30T04:00:00Z";
  ready["lastTransitionTime"] = "2026-11-30T04:00:00Z";
  node["status"]["conditions"].push_back(ready);
  client.update_status(kube::resources::nodes(), node);
  EXPECT_TRUE(wait_until([&] { return label().empty(); }, 30s));
  run.request_stop();
  run.join();
  client.remove(kube::resources::nodes(), "", name);
}

}  // namespace
}  // namespace gpufleet::controller
