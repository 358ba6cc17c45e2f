// The Kubernetes-shaped parts of the hostpkg controller that need no cluster: the per-node
// record annotation, the HostPackageDrifted node condition, stage pod manifests and outcomes, the
// status view, and the simulator's host-step model that stands in for a real host in the
// integration tests.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"
#include "hostpkg/controller/node_condition.h"
#include "hostpkg/controller/reconciler.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/controller/status_view.h"
#include "hostpkg/reverify.h"
#include "hostpkg/stage_plan.h"
#include "sim/host_step.h"

namespace gpufleet::hostpkg {
namespace {

core::Value node_with(const std::string& annotation_value) {
  core::Value n;
  n["metadata"]["name"] = "n1";
  n["metadata"]["resourceVersion"] = "42";
  if (!annotation_value.empty())
    n["metadata"]["annotations"]["hostpkg.gpufleet.io/record.s1"] = annotation_value;
  return n;
}

TEST(RecordStore, RoundTripsWithPreconditionAndBumpsGeneration) {
  NodeRecord r;
  r.set = "s1";
  r.generation = 4;
  r.state = NodeState::InProgress;
  r.started = 1700000000;
  core::Value patch = record_patch(node_with(""), "s1", r);
  EXPECT_EQ(patch.get_string({"metadata", "resourceVersion"}), "42");
  std::string text(patch.get_string({"metadata", "annotations", "hostpkg.gpufleet.io/record.s1"}));
  RecordRead back = read_record(node_with(text), "s1");
  ASSERT_TRUE(back.record) << back.error;
  EXPECT_EQ(back.record->generation, 5);
  EXPECT_EQ(back.record->started, 1700000000);
  EXPECT_EQ(back.record->state, NodeState::InProgress);
  EXPECT_FALSE(read_record(node_with(""), "s1").record.has_value());
  EXPECT_TRUE(read_record(node_with(""), "s1").error.empty());
}

TEST(RecordStore, MalformedRecordIsReportedNamingTheAnnotation) {
  RecordRead r = read_record(node_with("{not json"), "s1");
  EXPECT_FALSE(r.record);
  EXPECT_NE(r.error.find("hostpkg.gpufleet.io/record.s1"), std::string::npos) << r.error;
  RecordRead w = read_record(node_with(R"({"format":1,"set":"other"})"), "s1");
  EXPECT_FALSE(w.record);
  EXPECT_NE(w.error.find("record.set is \"other\""), std::string::npos) << w.error;
}

std::string record_text(const std::string& set, std::optional<Drift> drift) {
  NodeRecord r;
  r.set = set;
  r.state = NodeState::Done;
  r.verified = 1000;
  r.drift = std::move(drift);
  return core::to_json(record_to_value(r));
}

const core::Value& only_condition(const core::Value& patch) {
  const core::Value* list = patch.get({"status", "conditions"});
  EXPECT_TRUE(list != nullptr && list->is_list() && list->as_list().size() == 1);
  return list->as_list().front();
}

TEST(NodeDriftCondition, TrueNamesSetPackageAndCheckThenFalseKeepsNothingElse) {
  using namespace std::chrono_literals;
  const auto t0 = std::chrono::system_clock::time_point(1'700'000'000s);
  std::map<std::string, std::string, std::less<>> records{
      {"s1", record_text("s1", Drift{"sysctl", "check-failed: vm.max_map_count is 65530", 900})},
      {"s2", record_text("s2", std::nullopt)}};
  std::unordered_set<std::string> reporting{"s1", "s2"};

  // A node that never drifted gets no condition at all.
  std::map<std::string, std::string, std::less<>> clean{{"s2", records["s2"]}};
  EXPECT_FALSE(drift_condition_patch(clean, reporting, {}, t0));

  auto up = drift_condition_patch(records, reporting, {}, t0);
  ASSERT_TRUE(up);
  const core::Value& c = only_condition(*up);
  EXPECT_EQ(c.get_string({"type"}), "HostPackageDrifted");
  EXPECT_EQ(c.get_string({"status"}), "True");
  EXPECT_EQ(c.get_string({"reason"}), "ChecksFailed");
  EXPECT_EQ(c.get_string({"message"}),
            "re-verification failed: s1/sysctl: check-failed: vm.max_map_count is 65530");
  EXPECT_EQ(c.get_string({"lastTransitionTime"}), "2023-11-14T22:13:20Z");
  EXPECT_EQ(c.find("observedGeneration"), nullptr) << "NodeCondition has no such field";

  // Shown as wanted: no write. The same status with a new message: written, transition kept.
  NodeDriftCondition shown{true, "True", "ChecksFailed", std::string(c.get_string({"message"})),
                           "2023-11-14T22:13:20Z"};
  EXPECT_FALSE(drift_condition_patch(records, reporting, shown, t0 + 60s));
  records["s1"] = record_text("s1", Drift{"sysctl", "check-failed: now 1", 900});
  auto reworded = drift_condition_patch(records, reporting, shown, t0 + 60s);
  ASSERT_TRUE(reworded);
  EXPECT_EQ(only_condition(*reworded).get_string({"lastTransitionTime"}), "2023-11-14T22:13:20Z");
  shown.message = std::string(only_condition(*reworded).get_string({"message"}));

  // The set stops counting (deleted, reverify off): False, and the transition moves.
  auto cleared = drift_condition_patch(records, {"s2"}, shown, t0 + 120s);
  ASSERT_TRUE(cleared);
  EXPECT_EQ(only_condition(*cleared).get_string({"status"}), "False");
  EXPECT_EQ(only_condition(*cleared).get_string({"reason"}), "NoDrift");
  EXPECT_EQ(only_condition(*cleared).get_string({"lastTransitionTime"}), "2023-11-14T22:15:20Z");
  // The drift cleared in the record (a passing check, a finished re-apply): False as well.
  records["s1"] = record_text("s1", std::nullopt);
  EXPECT_TRUE(drift_condition_patch(records, reporting, shown, t0 + 120s));
  NodeDriftCondition off{true, "False", "NoDrift", "no HostPackageSet reports drift on this node",
                         "2023-11-14T22:15:20Z"};
  EXPECT_FALSE(drift_condition_patch(records, reporting, off, t0 + 180s));

  // Many drifted sets: at most five named, the message bounded.
  std::map<std::string, std::string, std::less<>> many;
  std::unordered_set<std::string> all;
  for (int i = 0; i < 8; ++i) {
    std::string set = "set" + std::to_string(i);
    many[set] = record_text(set, Drift{"pkg", std::string(400, 'x'), 1});
    all.insert(set);
  }
  auto bounded = drift_condition_patch(many, all, {}, t0);
  ASSERT_TRUE(bounded);
  EXPECT_LE(only_condition(*bounded).get_string({"message"}).size(), 1000u);
  EXPECT_NE(only_condition(*bounded).get_string({"message"}).find("set1/pkg: "), std::string::npos);
}

TEST(StagePod, PinnedToleratesEverythingAndNamedByStepKey) {
  HostPackageSet set = parse_host_package_set(core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: HostPackageSet
metadata: {name: s1}
spec:
  packages:
    p: {version: 1.0.0, image: r.example/p, env: {A: "1"}, interrupt: {type: reboot}}
)"));
  DesiredState d = digest(set);
  NodePlan plan = plan_node(d, NodeRecord{});
  ASSERT_GE(plan.steps.size(), 2u);
  StagePodOptions o{"ns1", "runner:1", ""};
  core::Value pod = stage_pod(set, "n1", plan.steps[0], o);
  EXPECT_EQ(pod.get_string({"spec", "nodeName"}), "n1");
  EXPECT_EQ(pod.get_string({"metadata", "name"}), stage_pod_name("s1", "n1", plan.steps[0]));
  EXPECT_EQ(pod.get_string({"spec", "restartPolicy"}), "Never");
  EXPECT_EQ((*pod.get({"spec", "tolerations"}))[0].get_string({"operator"}), "Exists");
  EXPECT_EQ((*pod.get({"spec", "initContainers"}))[0].get_string({"image"}), "r.example/p:1.0.0");
  std::string args = core::to_json(*pod.get({"spec", "containers"}));
  EXPECT_NE(args.find("\"--env\",\"A=1\""), std::string::npos) << args;
  EXPECT_NE(stage_pod_name("s1", "n1", plan.steps[0]), stage_pod_name("s1", "n2", plan.steps[0]));
  // The interrupt pod enters the host's namespaces and carries the interrupt.
  core::Value ip = stage_pod(set, "n1", plan.steps[1], o);
  EXPECT_EQ(ip.get_string({"metadata", "labels", "hostpkg.gpufleet.io/stage"}), "interrupt");
  EXPECT_TRUE(ip.get({"spec", "hostPID"})->as_bool());
}

TEST(StagePod, OutcomeFromTerminationMessage) {
  auto pod = [](const std::string& phase, const std::string& message) {
    core::Value p;
    p["metadata"]["name"] = "hp-1";
    p["status"]["phase"] = phase;
    core::Value c;
    c["name"] = "step";
    c["state"]["terminated"]["exitCode"] = 1;
    c["state"]["terminated"]["message"] = message;
    p["status"]["containerStatuses"].push_back(c);
    return p;
  };
  EXPECT_FALSE(stage_outcome(pod("Running", "")).has_value());
  auto ok = stage_outcome(pod("Succeeded", R"({"status":"skipped","message":"done"})"));
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->ok);
  auto bad = stage_outcome(pod("Failed", R"({"status":"check-failed","message":"value 1"})"));
  EXPECT_FALSE(bad->ok);
  EXPECT_EQ(bad->status, "check-failed");
  auto raw = stage_outcome(pod("Failed", "exec format error"));
  EXPECT_EQ(raw->status, "pod-failed");
  EXPECT_NE(raw->message.find("exec format error"), std::string::npos);
}

TEST(StatusView, TableAndBarsPerCompartment) {
  EXPECT_EQ(progress_bar(5, 10, 10), "[#####-----]");
  EXPECT_EQ(progress_bar(0, 0, 4), "[----]");
  core::Value s = core::parse_yaml(R"(
metadata: {name: gpu-sysctl}
status:
  phase: Stopped
  progress: 3/8
  inProgress: 1
  failed: 1
  drifted: 2
  validating: 1
  target: abc
  compartments:
  - {name: canary, nodes: 2, done: 2, budget: 1, batch: 2, batchSize: 1}
  - {name: default, nodes: 6, done: 1, inProgress: 1, failed: 1, budget: 2, batch: 1, batchSize: 2, stopped: true, stopReason: "1 consecutive failed batches"}
  - {name: racks-b, nodes: 0, done: 0, budget: 1, batch: 0, batchSize: 1}
  conditions:
  - {type: Stopped, status: "True", reason: FailureThreshold, message: "failing nodes: n3"}
  - {type: Drifted, status: "True", reason: ChecksFailed, message: "n5: p: value is 0"}
)");
  std::string out = render_status({s});
  EXPECT_NE(out.find("gpu-sysctl  Stopped  3/8"), std::string::npos) << out;
  EXPECT_NE(out.find("canary   [####################] 2/2"), std::string::npos) << out;
  EXPECT_NE(out.find("STOPPED: 1 consecutive failed batches"), std::string::npos) << out;
  // A compartment that selects no node says so, not a 0/0 bar with a batch size.
  EXPECT_NE(out.find("  racks-b  no nodes selected\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("0/0"), std::string::npos) << out;
  EXPECT_NE(out.find("Stopped: FailureThreshold: failing nodes: n3"), std::string::npos) << out;
  EXPECT_NE(out.find("DRIFTED  VALIDATING  TARGET"), std::string::npos) << out;
  EXPECT_NE(out.find("  2        1           abc"), std::string::npos) << out;
  EXPECT_NE(out.find("Drifted: ChecksFailed: n5: p: value is 0"), std::string::npos) << out;
  core::Value doc = status_document({s});
  EXPECT_EQ((*doc.get({"hostPackageSets"}))[0].get_string({"status", "progress"}), "3/8");
}

TEST(SimHostStep, EffectsFailuresIdempotenceAndInterrupts) {
  sim::HostStepBehaviour b = sim::parse_host_step(core::parse_yaml(R"(
effects:
  apply: {sysctls: {vm.max_map_count: "1048576"}, files: {/etc/v: "{version}"}}
failures:
  - {stage: config, nodes: "n2", status: check-failed, times: 1}
)"),
                                                  "test", "hostStep");
  sim::HostModel host;
  sim::HostStepRequest req{"n1", "p", "apply", "1.0.0", "p/apply/1.0.0//g0", "", {}, {}};
  auto first = sim::run_host_step(req, &b, host);
  EXPECT_EQ(first.exit_code, 0);
  EXPECT_EQ(core::parse_json(first.result_json).get_string({"status"}), "succeeded");
  EXPECT_EQ(host.read("/etc/v").value_or(""), "1.0.0");
  EXPECT_EQ(host.read("/proc/sys/vm/max_map_count").value_or(""), "1048576\n");
  auto again = sim::run_host_step(req, &b, host);
  EXPECT_EQ(core::parse_json(again.result_json).get_string({"status"}), "skipped");
  sim::HostStepRequest cfg{"n2", "p", "config", "1.0.0", "p/config/1.0.0/h/g1", "", {}, {}};
  EXPECT_EQ(sim::run_host_step(cfg, &b, host).exit_code, 1);
  EXPECT_EQ(sim::run_host_step(cfg, &b, host).exit_code, 0) << "times: 1 fails only once";
  sim::HostStepRequest reboot{"n1", "s", "interrupt", "t", "*/interrupt/t//g2", "reboot", {}, {}};
  EXPECT_TRUE(sim::run_host_step(reboot, &b, host).reboot);
  sim::HostStepRequest restart{
      "n1", "s", "interrupt", "t", "*/interrupt/t//g3", "restartServices", {"a.service"}, {}};
  EXPECT_FALSE(sim::run_host_step(restart, &b, host).reboot);
  EXPECT_EQ(host.read(sim::kHostStepRestarts).value_or(""), "restartServices a.service\n");
  core::Value bad = core::parse_yaml("{effects: {reboot: {}}}");
  EXPECT_THROW(sim::parse_host_step(bad, "t", "hostStep"), core::InvalidInput);
}

// Re-verification's verify pod: the apply pod of the package (pinned, package image handed
// over) with the runner in verify mode, named per node and round; the simulator reads it as
// a check-only step that compares the declared effects with the host model.
TEST(StagePod, VerifyPodChecksOnlyAndTheSimComparesTheHost) {
  HostPackageSet set = parse_host_package_set(core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: HostPackageSet
metadata: {name: s1}
spec:
  reverify: {interval: 1h}
  packages:
    p: {version: 1.0.0, image: r.example/p, interrupt: {type: restartServices, services: [a]}}
)"));
  DesiredState d = digest(set);
  StagePodOptions o{"ns1", "runner:1", ""};
  core::Value pod = verify_pod(set, d, "n1", set.packages[0], 1700, o);
  EXPECT_EQ(pod.get_string({"spec", "nodeName"}), "n1");
  EXPECT_EQ(pod.get_string({"metadata", "labels", "hostpkg.gpufleet.io/stage"}), "verify");
  EXPECT_EQ(pod.get_string({"metadata", "annotations", "hostpkg.gpufleet.io/verify"}),
            "apply,post-interrupt");
  std::string key(pod.get_string({"metadata", "annotations", "hostpkg.gpufleet.io/key"}));
  EXPECT_TRUE(key.starts_with("p/verify/1.0.0/") && key.ends_with("/r1700")) << key;
  EXPECT_EQ(pod.get_string({"metadata", "name"}), verify_pod_name("s1", "n1", key));
  EXPECT_NE(verify_pod(set, d, "n1", set.packages[0], 1800, o).get_string({"metadata", "name"}),
            pod.get_string({"metadata", "name"}))
      << "each round its own pod";
  EXPECT_FALSE(pod.get({"spec", "hostPID"})->as_bool());
  std::string args = core::to_json(*pod.get({"spec", "containers"}));
  EXPECT_NE(args.find("\"--verify\",\"apply,post-interrupt\""), std::string::npos) << args;
  EXPECT_EQ(args.find("\"--stage\""), std::string::npos) << args;
  EXPECT_NE(args.find("\"--change\",\"r1700\""), std::string::npos) << args;
  EXPECT_EQ((*pod.get({"spec", "initContainers"}))[0].get_string({"image"}), "r.example/p:1.0.0");

  sim::HostStepBehaviour b = sim::parse_host_step(core::parse_yaml(R"(
effects:
  apply: {sysctls: {vm.max_map_count: "1048576"}, files: {/etc/v: "{version}"}}
)"),
                                                  "test", "hostStep");
  sim::HostModel host;
  sim::HostStepRequest apply{"n1", "p", "apply", "1.0.0", "p/apply/1.0.0//g0", "", {}, {}};
  sim::run_host_step(apply, &b, host);
  auto req = sim::host_step_request(pod);
  ASSERT_TRUE(req);
  EXPECT_EQ(req->stage, "verify");
  EXPECT_EQ(req->verify, (std::vector<std::string>{"apply", "post-interrupt"}));
  auto ok = sim::run_host_step(*req, &b, host);
  EXPECT_EQ(ok.exit_code, 0) << ok.result_json;
  EXPECT_EQ(sim::run_host_step(*req, &b, host).exit_code, 0) << "never skipped, still passes";
  host.set_sysctl("vm.max_map_count", "65530", false);  // someone edited the host
  auto drifted = sim::run_host_step(*req, &b, host);
  EXPECT_EQ(drifted.exit_code, 1);
  core::Value r = core::parse_json(drifted.result_json);
  EXPECT_EQ(r.get_string({"status"}), "check-failed");
  EXPECT_NE(r.get_string({"message"}).find("vm.max_map_count is 65530, want 1048576"),
            std::string::npos)
      << drifted.result_json;
  EXPECT_EQ(host.sysctls().at("vm.max_map_count"), "65530") << "a check changes nothing";
}

// What the simulator's kubelet and the node lifecycle controller write all the time (lease-like
// status reports, heartbeats, capacity) must not make a pass over every node; what a pass reads
// must.
TEST(NodeEventFilter, HeartbeatsDroppedWhatAPassReadsPasses) {
  controller::Predicate p = node_event_filter();
  core::Value base = core::parse_yaml(R"({
    metadata: {name: n1, resourceVersion: '1', labels: {pool: a},
               annotations: {other.example/x: '1'}},
    spec: {},
    status: {nodeInfo: {bootID: b1}, allocatable: {cpu: '8'},
             conditions: [{type: Ready, status: 'True', lastHeartbeatTime: '2026-01-01T00:00:00Z',
                           lastTransitionTime: '2026-01-01T00:00:00Z'},
                          {type: MemoryPressure, status: 'False',
                           lastHeartbeatTime: '2026-01-01T00:00:00Z'}]}})",
                                      "test");
  auto passes = [&](const core::Value& after) {
    return p({controller::WatchEvent::Type::Update, &base, after});
  };
  auto with = [&](auto edit) {
    core::Value v = base;
    edit(v);
    v["metadata"]["resourceVersion"] = "2";
    return v;
  };
  auto heartbeat = with([](core::Value& v) {
    for (auto& c : v["status"]["conditions"].as_list())
      c["lastHeartbeatTime"] = "2026-01-01T00:00:10Z";
    v["status"]["allocatable"]["cpu"] = "7";
    v["metadata"]["annotations"]["other.example/x"] = "2";
  });
  EXPECT_FALSE(passes(heartbeat));
  EXPECT_FALSE(passes(base));  // a resync
  EXPECT_TRUE(passes(with([](core::Value& v) { v["metadata"]["labels"]["pool"] = "b"; })));
  EXPECT_TRUE(passes(with([](core::Value& v) { v["spec"]["unschedulable"] = true; })));
  EXPECT_TRUE(passes(with([](core::Value& v) {
    v["spec"]["taints"] = core::parse_yaml("[{key: k, effect: NoSchedule}]", "t");
  })));
  EXPECT_TRUE(passes(with([](core::Value& v) { v["status"]["nodeInfo"]["bootID"] = "b2"; })));
  EXPECT_TRUE(passes(
      with([](core::Value& v) { v["status"]["conditions"].as_list()[0]["status"] = "False"; })));
  EXPECT_TRUE(passes(
      with([](core::Value& v) { v["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:20Z"; })));
  EXPECT_TRUE(passes(with([](core::Value& v) {
    v["metadata"]["annotations"]["hostpkg.gpufleet.io/record.s1"] = "{}";
  })));
  EXPECT_TRUE(passes(with([](core::Value& v) {
    v["metadata"]["annotations"]["gpufleet.io/cordon-owners"] = "sentinel";
  })));
  EXPECT_TRUE(passes(with([](core::Value& v) {
    v["status"]["conditions"].push_back(
        core::parse_yaml("{type: HostPackageDrifted, status: 'True', reason: ChecksFailed}", "t"));
  })));
  EXPECT_TRUE(p({controller::WatchEvent::Type::Add, nullptr, base}));
  EXPECT_TRUE(p({controller::WatchEvent::Type::Delete, nullptr, base}));
}

}  // namespace
}  // namespace gpufleet::hostpkg
