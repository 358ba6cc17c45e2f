#include "sim/kubelet/pod_run.h"

#include <gtest/gtest.h>

#include "core/yaml.h"

namespace gpufleet::sim {
namespace {

core::Value pod() {
  return core::parse_yaml(R"(
metadata: {name: p, namespace: ns, uid: 1234-abcd}
spec:
  nodeName: h100-00-00
  restartPolicy: Never
  containers:
  - {name: main, image: busybox:1.36}
  - {name: side, image: nginx:1.27}
)");
}

TEST(PodRun, PendingRunningAndTerminatedStatuses) {
  PodRun run =
      make_pod_run(pod(), BehaviourTable::defaults().plan(pod()), "10.64.0.1", "10.128.0.7");
  EXPECT_EQ(run.key(), "ns/p");
  EXPECT_EQ(run.restart_policy, "Never");
  ASSERT_EQ(run.containers.size(), 2u);
  run.start_time = "2026-01-01T00:00:00Z";
  core::Value pending = pod_status(run, "2026-01-01T00:00:00Z");
  EXPECT_EQ(pending.get_string({"phase"}), "Pending");
  EXPECT_EQ(pending.find("podIP"), nullptr);
  EXPECT_EQ(
      (pending.find("containerStatuses"))->as_list()[0].get_string({"state", "waiting", "reason"}),
      "ContainerCreating");

  run.stage = PodStage::Running;
  run.running_since = "2026-01-01T00:00:01Z";
  core::Value running = pod_status(run, "2026-01-01T00:00:01Z");
  EXPECT_EQ(running.get_string({"phase"}), "Running");
  EXPECT_EQ(running.get_string({"podIP"}), "10.128.0.7");
  EXPECT_EQ(running.get_string({"hostIP"}), "10.64.0.1");
  const core::Value& c0 = (running.find("containerStatuses"))->as_list()[0];
  EXPECT_EQ(c0.get_string({"state", "running", "startedAt"}), "2026-01-01T00:00:01Z");
  EXPECT_EQ(*c0.find("ready"), core::Value(true));
  EXPECT_EQ(c0.get_string({"containerID"}).substr(0, 13), "containerd://");
  const core::Value& ready = running.find("conditions")->as_list()[2];
  EXPECT_EQ(ready.get_string({"type"}), "Ready");
  EXPECT_EQ(ready.get_string({"status"}), "True");

  run.terminated = finish_container(run, 3, "boom", "2026-01-01T00:00:09Z");
  run.stage = PodStage::Failed;
  core::Value failed = pod_status(run, "2026-01-01T00:00:09Z");
  EXPECT_EQ(failed.get_string({"phase"}), "Failed");
  const core::Value& t =
      *(failed.find("containerStatuses"))->as_list()[0].get({"state", "terminated"});
  EXPECT_EQ(*t.find("exitCode"), core::Value(3));
  EXPECT_EQ(t.get_string({"reason"}), "Error");
  EXPECT_EQ(t.get_string({"message"}), "boom");
  EXPECT_EQ(t.get_string({"startedAt"}), "2026-01-01T00:00:01Z");
  EXPECT_EQ(t.get_string({"finishedAt"}), "2026-01-01T00:00:09Z");
  EXPECT_EQ(failed.find("conditions")->as_list()[2].get_string({"reason"}), "PodCompleted");
}

TEST(PodRun, RestartsCarryLastState) {
  PodRun run = make_pod_run(pod(), BehaviourTable::defaults().plan(pod()), "h", "p");
  run.stage = PodStage::Running;
  run.running_since = "2026-01-01T00:00:01Z";
  run.last_state = finish_container(run, 137, "node rebooted", "2026-01-01T00:00:05Z");
  std::string first_id = run.container_id(0);
  ++run.restart_count;
  EXPECT_NE(run.container_id(1), first_id);
  core::Value s = pod_status(run, "2026-01-01T00:00:20Z");
  const core::Value& c = (s.find("containerStatuses"))->as_list()[0];
  EXPECT_EQ(*c.find("restartCount"), core::Value(1));
  EXPECT_EQ(c.get_string({"lastState", "terminated", "message"}), "node rebooted");
  EXPECT_EQ(*c.get({"lastState", "terminated", "exitCode"}), core::Value(137));
}

}  // namespace
}  // namespace gpufleet::sim
