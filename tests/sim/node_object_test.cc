#include "sim/node_object.h"

#include <gtest/gtest.h>

#include "core/json.h"
#include "sim/node_identity.h"
#include "support/source_paths.h"

namespace gpufleet::sim {
namespace {

TEST(NodeObject, CarriesGfdNfdLabelsCapacityAndNodeInfo) {
  FleetSpec f = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  NodeIdentity id = make_node_identity(f, 0, 5);
  NodeRuntime rt = initial_runtime(f, id, boot_id_for(id, 0), "2026-01-01T00:00:00Z");
  core::Value n = node_object(f, id, rt, "2026-01-01T00:00:10Z");
  EXPECT_EQ(n.get_string({"metadata", "name"}), "h100-01-01");
  const core::Value& l = *n.get({"metadata", "labels"});
  EXPECT_EQ(l.get_string({"nvidia.com/gpu.product"}), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(l.get_string({"nvidia.com/gpu.count"}), "8");
  EXPECT_EQ(l.get_string({"nvidia.com/gpu.memory"}), "81559");
  EXPECT_EQ(l.get_string({"nvidia.com/gpu.family"}), "hopper");
  EXPECT_EQ(l.get_string({"nvidia.com/cuda.driver.major"}), "570");
  EXPECT_EQ(l.get_string({"nvidia.com/cuda.driver.minor"}), "148");
  EXPECT_EQ(l.get_string({"nvidia.com/cuda.driver.rev"}), "08");
  EXPECT_EQ(l.get_string({"nvidia.com/cuda.runtime.major"}), "12");
  EXPECT_EQ(l.get_string({"nvidia.com/cuda.runtime.minor"}), "8");
  EXPECT_EQ(l.get_string({"nvidia.com/mig.capable"}), "true");
  EXPECT_EQ(l.find("nvidia.com/gpu.clique"), nullptr);  // HGX: no multi-node domain
  EXPECT_EQ(l.get_string({"feature.node.kubernetes.io/kernel-version.full"}), "5.15.0-1063-nvidia");
  EXPECT_EQ(l.get_string({"feature.node.kubernetes.io/system-os_release.ID"}), "ubuntu");
  EXPECT_EQ(l.get_string({"feature.node.kubernetes.io/system-os_release.VERSION_ID"}), "22.04");
  EXPECT_EQ(l.get_string({"topology.kubernetes.io/zone"}), "zone-b");  // rack 1 -> second zone
  EXPECT_EQ(l.get_string({"gpufleet.io/rack"}), "h100-rack-001");
  EXPECT_EQ(l.get_string({"node.kubernetes.io/instance-type"}), "hgx-h100-8");

  const core::Value& s = *n.get({"status"});
  EXPECT_EQ(s.get_string({"capacity", "nvidia.com/gpu"}), "8");
  EXPECT_EQ(s.get_string({"capacity", "rdma/ib"}), "8");
  EXPECT_EQ(s.get_string({"capacity", "memory"}), "2147483648Ki");
  EXPECT_EQ(s.get_string({"allocatable", "cpu"}), "222000m");
  EXPECT_EQ(s.get_string({"nodeInfo", "kernelVersion"}), "5.15.0-1063-nvidia");
  EXPECT_EQ(s.get_string({"nodeInfo", "osImage"}), "Ubuntu 22.04.5 LTS");
  EXPECT_EQ(s.get_string({"nodeInfo", "containerRuntimeVersion"}), "containerd://1.7.27");
  EXPECT_EQ(s.get_string({"nodeInfo", "kubeletVersion"}), "v1.32.4");
  EXPECT_EQ(s.get_string({"nodeInfo", "bootID"}), rt.boot_id);
  const core::Value& conds = *s.find("conditions");
  ASSERT_EQ(conds.size(), 4u);
  EXPECT_EQ(conds[3].get_string({"type"}), "Ready");
  EXPECT_EQ(conds[3].get_string({"status"}), "True");
  EXPECT_EQ(conds[3].get_string({"lastHeartbeatTime"}), "2026-01-01T00:00:10Z");
  EXPECT_EQ(n.get({"spec", "taints"})->size(), 1u);

  // Same inputs, byte-identical object.
  EXPECT_EQ(core::to_json(n), core::to_json(node_object(f, id, rt, "2026-01-01T00:00:10Z")));
}

TEST(NodeObject, LostGpusAndNotReadyShowInStatus) {
  FleetSpec f = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-gb200.yaml");
  NodeIdentity id = make_node_identity(f, 0, 3);
  NodeRuntime rt = initial_runtime(f, id, boot_id_for(id, 0), "2026-01-01T00:00:00Z");
  rt.gpus_present = 3;
  rt.gpus_healthy = 2;
  rt.ready = false;
  rt.ready_reason = "KubeletNotReady";
  core::Value n = node_object(f, id, rt, "2026-01-01T00:00:10Z");
  EXPECT_EQ(n.get_string({"status", "capacity", "nvidia.com/gpu"}), "3");
  EXPECT_EQ(n.get_string({"status", "allocatable", "nvidia.com/gpu"}), "2");
  EXPECT_EQ(n.get_string({"metadata", "labels", "kubernetes.io/arch"}), "arm64");
  EXPECT_EQ(n.get_string({"metadata", "labels", "nvidia.com/gpu.clique"}), id.clique);
  EXPECT_EQ((*n.get({"status", "conditions"}))[3].get_string({"status"}), "False");
  EXPECT_NE(boot_id_for(id, 0), boot_id_for(id, 1));
}

// Where the API server finds the kubelet (pods/log): by default the kubelet's port and no
// address beyond InternalIP and Hostname; with the simulator's endpoint, an ExternalIP and
// its port, the InternalIP kept.
TEST(NodeObject, AdvertisesTheKubeletEndpoint) {
  FleetSpec f = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  NodeIdentity id = make_node_identity(f, 0, 5);
  NodeRuntime rt = initial_runtime(f, id, boot_id_for(id, 0), "2026-01-01T00:00:00Z");
  const auto types = [](const core::Value& n) {
    std::string out;
    for (const auto& a : n.get({"status", "addresses"})->as_list())
      out +=
          std::string(a.get_string({"type"})) + "=" + std::string(a.get_string({"address"})) + " ";
    return out;
  };
  core::Value plain = node_status(f, id, rt, "2026-01-01T00:00:10Z");
  core::Value wrapped;
  wrapped["status"] = plain;
  EXPECT_EQ(types(wrapped), "InternalIP=" + id.internal_ip + " Hostname=" + id.name + " ");
  EXPECT_EQ(*plain.get({"daemonEndpoints", "kubeletEndpoint", "Port"}), core::Value(10250));
  rt.kubelet_address = "127.0.0.1";
  rt.kubelet_port = 41234;
  core::Value n = node_object(f, id, rt, "2026-01-01T00:00:10Z");
  EXPECT_EQ(types(n),
            "InternalIP=" + id.internal_ip + " ExternalIP=127.0.0.1 Hostname=" + id.name + " ");
  EXPECT_EQ(*n.get({"status", "daemonEndpoints", "kubeletEndpoint", "Port"}), core::Value(41234));
}

}  // namespace
}  // namespace gpufleet::sim
