// Runs the documentation's example controller against kube-local.
#include <gtest/gtest.h>

#include <thread>

#include "example_controller.h"
#include "kube/api/objects.h"
#include "test_env.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;

bool wait_until(const std::function<bool()>& f, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

TEST(ExampleController, LabelsNodesThatAreNotReady) {
  Client client(testing::admin_config());
  std::string name = testing::unique_name("example-node");
  core::Value n;
  n["apiVersion"] = "v1";
  n["kind"] = "Node";
  n["metadata"]["name"] = name;
  client.create(resources::nodes(), n);
  std::jthread controller([&](std::stop_token stop) { run_node_labeler(client, stop); });
  EXPECT_TRUE(wait_until(
      [&] {
        return label_of(client.get(resources::nodes(), "", name), "gpufleet.io/not-ready") ==
               "true";
      },
      30s));
  core::Value node = client.get(resources::nodes(), "", name);
  core::Value ready;
  ready["type"] = "Ready";
  ready["status"] = "True";
  ready["reason"] = "KubeletReady";
  ready["lastHeartbeatTime"] = "2026-11-30T04:00:00Z";
  ready["lastTransitionTime"] = "2026-11-30T04:00:00Z";
  node["status"]["conditions"].push_back(ready);
  client.update_status(resources::nodes(), node);
  EXPECT_TRUE(wait_until(
      [&] {
        return label_of(client.get(resources::nodes(), "", name), "gpufleet.io/not-ready").empty();
      },
      30s));
  controller.request_stop();
  controller.join();
  client.remove(resources::nodes(), "", name);
}

}  // namespace
}  // namespace gpufleet::kube
