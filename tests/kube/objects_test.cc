#include "kube/api/objects.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/json.h"
#include "kube/credentials.h"
#include "support/source_paths.h"

namespace gpufleet::kube {
namespace {

core::Value fixture_node() {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/node-gpu.json");
  std::ostringstream ss;
  ss << in.rdbuf();
  return core::parse_json(ss.str(), "node-gpu.json");
}

TEST(Objects, Node) {
  core::Value n = fixture_node();
  EXPECT_TRUE(node::ready(n));
  EXPECT_FALSE(node::unschedulable(n));
  EXPECT_EQ(node::allocatable(n, "nvidia.com/gpu"), "8");
  EXPECT_EQ(node::capacity(n, "memory"), "1176587816Ki");
  EXPECT_EQ(node::allocatable(n, "amd.com/gpu"), "");
  EXPECT_EQ(node::kubelet_version(n), "v1.32.4");
  EXPECT_EQ(node::internal_ip(n), "10.12.42.17");
  ASSERT_EQ(node::taints(n).size(), 1u);
  EXPECT_EQ(node::taints(n)[0], (Taint{"nvidia.com/gpu", "present", "NoSchedule"}));
  EXPECT_TRUE(node::has_taint(n, "nvidia.com/gpu"));
  EXPECT_FALSE(node::has_taint(n, "nvidia.com/gpu", "NoExecute"));
  EXPECT_EQ(label_of(n, "nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(annotation_of(n, "node.alpha.kubernetes.io/ttl"), "0");
  EXPECT_EQ(condition_is_true(n, "MemoryPressure"), false);
  EXPECT_EQ(condition_is_true(n, "NetworkUnavailable"), std::nullopt);
  n["spec"]["unschedulable"] = true;
  EXPECT_TRUE(node::unschedulable(n));
}

TEST(Objects, PodJobPdbLeaseEventConfigMap) {
  core::Value pod = core::parse_json(R"({"metadata":{"name":"p","ownerReferences":[
    {"apiVersion":"apps/v1","kind":"DaemonSet","name":"agent","uid":"u","controller":true}]},
    "spec":{"nodeName":"n1"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}})");
  EXPECT_EQ(pod::node_name(pod), "n1");
  EXPECT_TRUE(pod::ready(pod));
  EXPECT_FALSE(pod::terminal(pod));
  EXPECT_TRUE(pod::owned_by_daemon_set(pod));
  EXPECT_FALSE(pod::mirror(pod));

  core::Value j = core::parse_json(
      R"({"status":{"succeeded":3,"failed":1,"conditions":[{"type":"Complete","status":"True"}]}})");
  EXPECT_EQ(job::succeeded(j), 3);
  EXPECT_EQ(job::failed(j), 1);
  EXPECT_EQ(job::active(j), 0);
  EXPECT_TRUE(job::complete(j));
  EXPECT_FALSE(job::failed_permanently(j));

  core::Value b = core::parse_json(
      R"({"status":{"disruptionsAllowed":0,"currentHealthy":2,"desiredHealthy":2,"expectedPods":2}})");
  EXPECT_EQ(pdb::disruptions_allowed(b), 0);
  EXPECT_EQ(pdb::current_healthy(b), 2);
  EXPECT_EQ(pdb::expected_pods(b), 2);

  core::Value l = core::parse_json(R"({"spec":{"holderIdentity":"a","leaseDurationSeconds":15,
    "renewTime":"2026-11-30T04:00:00.500000Z","leaseTransitions":2}})");
  EXPECT_EQ(lease::holder_identity(l), "a");
  EXPECT_EQ(lease::duration_seconds(l), 15);
  EXPECT_EQ(lease::transitions(l), 2);
  ASSERT_TRUE(lease::renew_time(l));
  EXPECT_EQ(format_micro_time(*lease::renew_time(l)), "2026-11-30T04:00:00.500000Z");
  EXPECT_FALSE(lease::acquire_time(l));

  core::Value e = core::parse_json(R"({"reason":"Cordoned","note":"n","type":"Warning",
    "regarding":{"kind":"Node","name":"n1"},"series":{"count":4}})");
  EXPECT_EQ(event::reason(e), "Cordoned");
  EXPECT_EQ(event::regarding_kind(e), "Node");
  EXPECT_EQ(event::regarding_name(e), "n1");
  EXPECT_EQ(event::count(e), 4);
  EXPECT_EQ(event::count(core::Value::map()), 1);

  core::Value cm = core::parse_json(R"({"data":{"k":"v"}})");
  EXPECT_EQ(config_map::data(cm, "k"), "v");
  EXPECT_EQ(config_map::data(cm, "x"), std::nullopt);
}

}  // namespace
}  // namespace gpufleet::kube
