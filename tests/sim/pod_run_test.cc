#include "sim/kubelet/pod_run.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"
#include "kube/client.h"
#include "pod_display.h"
#include "sim/kubelet/container_logs.h"
#include "sim/kubelet/fleet_kubelet.h"

namespace gpufleet::sim {
namespace {

using Clock = std::chrono::steady_clock;
using testing::kubectl_status;

// A pod on a fake clock: `at(s)` advances to simulated second s and returns the pod object
// (spec + the status the kubelet would have posted), so tests read it as a controller would.
class FakeKubelet {
 public:
  FakeKubelet(const std::string& pod_yaml, const std::string& behaviours = "[]",
              BackOff back_off = {})
      : pod_(core::parse_yaml(pod_yaml)) {
    BehaviourTable table = BehaviourTable::parse_list(core::parse_yaml(behaviours), "t", "b");
    run_ = make_pod_run(pod_, table.plan(pod_), back_off, "10.64.0.1", "10.128.0.7");
    env_.wall = [](double s) {
      return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    };
  }
  core::Value at(double s) {
    changed_ = advance_pod(run_, t0_ + env_.wall(s), rfc(s), env_);
    pod_["status"] = pod_status(run_, rfc(s), pod_.get({"status"}));
    return pod_;
  }
  core::Value reboot(double s) {
    kill_for_restart(run_, "node n rebooted", rfc(s));
    pod_["status"] = pod_status(run_, rfc(s), pod_.get({"status"}));
    return pod_;
  }
  core::Value stop(double s, int code) {
    stop_pod(run_, code, "", rfc(s));
    pod_["status"] = pod_status(run_, rfc(s), pod_.get({"status"}));
    return pod_;
  }
  static std::string rfc(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "2026-01-01T00:%02d:%02dZ", static_cast<int>(s) / 60,
                  static_cast<int>(s) % 60);
    return buf;
  }
  [[nodiscard]] bool changed() const { return changed_; }
  PodRun& run() { return run_; }

 private:
  core::Value pod_;
  PodRun run_;
  PodEnv env_;
  Clock::time_point t0_ = Clock::now();
  bool changed_ = false;
};

const core::Value& condition(const core::Value& pod, std::string_view type) {
  for (const auto& c : pod.get({"status", "conditions"})->as_list()) {
    if (c.get_string({"type"}) == type) return c;
  }
  static const core::Value kNone;
  return kNone;
}

const core::Value& init_status(const core::Value& pod, std::size_t i) {
  return pod.get({"status", "initContainerStatuses"})->as_list().at(i);
}

const core::Value& main_status(const core::Value& pod, std::size_t i) {
  return pod.get({"status", "containerStatuses"})->as_list().at(i);
}

TEST(PodRun, PendingRunningSucceededWithTheKubeletsShape) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: 1234-abcd}
spec:
  nodeName: h100-00-00
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.36
    volumeMounts: [{name: kube-api-access-x, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}]
)");
  core::Value pending = k.at(0);
  EXPECT_EQ(pending.get_string({"status", "phase"}), "Pending");
  EXPECT_EQ(pending.get({"status", "qosClass"}), nullptr);
  EXPECT_EQ(pending.get({"status", "podIP"}), nullptr);
  EXPECT_EQ(pending.get_string({"status", "startTime"}), "2026-01-01T00:00:00Z");
  EXPECT_EQ(condition(pending, "PodReadyToStartContainers").get_string({"status"}), "False");
  EXPECT_EQ(condition(pending, "Initialized").get_string({"status"}), "True");
  EXPECT_EQ(condition(pending, "Ready").get_string({"message"}),
            "containers with unready status: [main]");
  const core::Value& w = main_status(pending, 0);
  EXPECT_EQ(w.get_string({"state", "waiting", "reason"}), "ContainerCreating");
  EXPECT_EQ(w.get_string({"image"}), "busybox:1.36");  // never created: the spec's image
  EXPECT_EQ(w.get_string({"imageID"}), "");
  EXPECT_EQ(w.find("containerID"), nullptr);
  EXPECT_EQ(*w.find("started"), core::Value(false));
  EXPECT_EQ(w.find("volumeMounts")->as_list()[0].get_string({"recursiveReadOnly"}), "Disabled");

  core::Value running = k.at(1);
  EXPECT_EQ(running.get_string({"status", "phase"}), "Running");
  EXPECT_EQ(running.get_string({"status", "podIP"}), "10.128.0.7");
  EXPECT_EQ(running.get({"status", "podIPs"})->as_list()[0].get_string({"ip"}), "10.128.0.7");
  EXPECT_EQ(running.get({"status", "hostIPs"})->as_list()[0].get_string({"ip"}), "10.64.0.1");
  const core::Value& r = main_status(running, 0);
  EXPECT_EQ(r.get_string({"image"}), "docker.io/library/busybox:1.36");
  EXPECT_EQ(std::string(r.get_string({"imageID"})).size(), 33u + 64u);
  EXPECT_EQ(r.get_string({"imageID"}).substr(0, 33), "docker.io/library/busybox@sha256:");
  EXPECT_EQ(r.get_string({"containerID"}).substr(0, 13), "containerd://");
  EXPECT_EQ(r.get_string({"state", "running", "startedAt"}), "2026-01-01T00:00:01Z");
  EXPECT_EQ(*r.find("ready"), core::Value(true));
  EXPECT_EQ(*r.find("started"), core::Value(true));
  EXPECT_EQ(condition(running, "Ready").get_string({"status"}), "True");
  EXPECT_EQ(condition(running, "Ready").get_string({"lastTransitionTime"}), "2026-01-01T00:00:01Z");
  EXPECT_EQ(condition(running, "PodScheduled").get_string({"status"}), "True");

  core::Value done = k.at(4);  // the built-in batch behaviour: 3 s, exit 0
  EXPECT_EQ(done.get_string({"status", "phase"}), "Succeeded");
  const core::Value& t = *main_status(done, 0).get({"state", "terminated"});
  EXPECT_EQ(*t.find("exitCode"), core::Value(0));
  EXPECT_EQ(t.get_string({"reason"}), "Completed");
  EXPECT_EQ(t.get_string({"startedAt"}), "2026-01-01T00:00:01Z");
  EXPECT_EQ(t.get_string({"finishedAt"}), "2026-01-01T00:00:04Z");
  EXPECT_EQ(t.get_string({"containerID"}), r.get_string({"containerID"}));
  EXPECT_EQ(condition(done, "Ready").get_string({"reason"}), "PodCompleted");
  EXPECT_EQ(condition(done, "Initialized").get_string({"reason"}), "PodCompleted");
  EXPECT_EQ(condition(done, "PodReadyToStartContainers").get_string({"status"}), "False");
  EXPECT_EQ(kubectl_status(done), "Completed");
  EXPECT_EQ(done.get_string({"status", "podIP"}), "10.128.0.7");
}

TEST(PodRun, ConditionTransitionTimesMoveOnlyOnChange) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u1}
spec: {containers: [{name: c, image: nginx}]}
)");
  k.at(0);
  core::Value a = k.at(1);
  core::Value b = k.at(30);
  EXPECT_FALSE(k.changed());
  for (const char* type :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    EXPECT_EQ(condition(a, type).get_string({"lastTransitionTime"}),
              condition(b, type).get_string({"lastTransitionTime"}))
        << type;
  }
  EXPECT_EQ(condition(b, "Initialized").get_string({"lastTransitionTime"}), "2026-01-01T00:00:00Z");
}

TEST(PodRun, InitContainersRunInOrderThenTheContainers) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u2}
spec:
  restartPolicy: Never
  initContainers:
  - {name: fetch, image: example.com/fetch:1}
  - {name: unpack, image: example.com/unpack:1}
  containers: [{name: main, image: example.com/main:1}]
)");
  core::Value p = k.at(0);
  EXPECT_EQ(kubectl_status(p), "Init:0/2");
  EXPECT_EQ(init_status(p, 0).get_string({"state", "waiting", "reason"}), "PodInitializing");
  EXPECT_EQ(main_status(p, 0).get_string({"state", "waiting", "reason"}), "PodInitializing");
  EXPECT_EQ(condition(p, "Initialized").get_string({"message"}),
            "containers with incomplete status: [fetch unpack]");
  p = k.at(1);  // fetch runs (1 s start, 1 s run)
  EXPECT_EQ(init_status(p, 0).get_string({"state", "running", "startedAt"}),
            "2026-01-01T00:00:01Z");
  EXPECT_EQ(kubectl_status(p), "Init:0/2");
  EXPECT_EQ(p.get_string({"status", "phase"}), "Pending");
  p = k.at(2);  // fetch done, unpack created
  EXPECT_EQ(init_status(p, 0).get_string({"state", "terminated", "reason"}), "Completed");
  EXPECT_EQ(*init_status(p, 0).find("ready"), core::Value(true));
  EXPECT_EQ(*init_status(p, 0).find("started"), core::Value(false));
  EXPECT_EQ(kubectl_status(p), "Init:1/2");
  EXPECT_EQ(condition(p, "Initialized").get_string({"message"}),
            "containers with incomplete status: [unpack]");
  p = k.at(3);
  EXPECT_EQ(init_status(p, 1).get_string({"state", "running", "startedAt"}),
            "2026-01-01T00:00:03Z");
  p = k.at(4);
  EXPECT_EQ(condition(p, "Initialized").get_string({"status"}), "True");
  EXPECT_EQ(p.get_string({"status", "phase"}), "Pending");
  p = k.at(5);
  EXPECT_EQ(p.get_string({"status", "phase"}), "Running");
  p = k.at(8);
  EXPECT_EQ(p.get_string({"status", "phase"}), "Succeeded");
}

TEST(PodRun, AFailedInitContainerFailsANeverPod) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u3}
spec:
  restartPolicy: Never
  initContainers: [{name: check, image: x/check:1}]
  containers: [{name: main, image: x/main:1}]
)",
                R"([{name: bad-check, match: {initContainer: check}, duration: 1s, exitCode: 3,
                    terminationMessage: "preflight failed"}])");
  k.at(0);
  k.at(1);
  core::Value p = k.at(2);
  EXPECT_EQ(p.get_string({"status", "phase"}), "Failed");
  EXPECT_EQ(kubectl_status(p), "Init:Error");
  const core::Value& t = *init_status(p, 0).get({"state", "terminated"});
  EXPECT_EQ(*t.find("exitCode"), core::Value(3));
  EXPECT_EQ(t.get_string({"message"}), "preflight failed");
  EXPECT_EQ(main_status(p, 0).get_string({"state", "waiting", "reason"}), "PodInitializing");
  EXPECT_EQ(condition(p, "Initialized").get_string({"status"}), "False");
  EXPECT_EQ(condition(p, "Ready").get_string({"reason"}), "PodFailed");
}

TEST(PodRun, InitContainerCrashLoopsWithTheKubeletsBackOff) {
  // "init container *-apply of image *package* exits 1 twice, then 0".
  FakeKubelet k(R"(
metadata: {name: pkg, namespace: ns, uid: u4}
spec:
  restartPolicy: OnFailure
  initContainers: [{name: kernel-apply, image: example.com/host-package:2}]
  containers: [{name: main, image: x/main:1}]
)",
                R"([{name: flaky, match: {initContainer: "*-apply", image: "*package*"},
                    startDelay: 0s, duration: 2s, exitCodes: [1, 1, 0]}])");
  core::Value p = k.at(0);
  EXPECT_EQ(init_status(p, 0).get_string({"state", "running", "startedAt"}),
            "2026-01-01T00:00:00Z");
  p = k.at(2);  // first crash: the kubelet restarts at once
  const core::Value& first = init_status(p, 0);
  EXPECT_EQ(*first.find("restartCount"), core::Value(1));
  EXPECT_EQ(*first.get({"lastState", "terminated", "exitCode"}), core::Value(1));
  EXPECT_EQ(first.get_string({"lastState", "terminated", "reason"}), "Error");
  EXPECT_EQ(first.get_string({"state", "running", "startedAt"}), "2026-01-01T00:00:02Z");
  EXPECT_EQ(p.get_string({"status", "phase"}), "Pending");
  p = k.at(4);  // second crash: back-off 10 s
  EXPECT_EQ(kubectl_status(p), "Init:CrashLoopBackOff");
  const core::Value& looping = init_status(p, 0);
  EXPECT_EQ(*looping.find("restartCount"), core::Value(1));
  EXPECT_EQ(looping.get_string({"state", "waiting", "message"}),
            "back-off 10s restarting failed container=kernel-apply pod=pkg_ns(u4)");
  EXPECT_EQ(looping.get_string({"lastState", "terminated", "finishedAt"}), "2026-01-01T00:00:04Z");
  p = k.at(13);
  EXPECT_EQ(kubectl_status(p), "Init:CrashLoopBackOff");
  p = k.at(14);
  EXPECT_EQ(*init_status(p, 0).find("restartCount"), core::Value(2));
  EXPECT_EQ(kubectl_status(p), "Init:0/1");
  p = k.at(16);  // third run exits 0
  EXPECT_EQ(init_status(p, 0).get_string({"state", "terminated", "reason"}), "Completed");
  EXPECT_EQ(condition(p, "Initialized").get_string({"status"}), "True");
  p = k.at(17);
  EXPECT_EQ(p.get_string({"status", "phase"}), "Running");
}

TEST(PodRun, BackOffDoublesToItsCap) {
  BackOff b;
  EXPECT_EQ(b.delay(1), 0);
  EXPECT_EQ(b.delay(2), 10);
  EXPECT_EQ(b.delay(3), 20);
  EXPECT_EQ(b.delay(6), 160);
  EXPECT_EQ(b.delay(7), 300);
  EXPECT_EQ(b.delay(50), 300);
  BackOff fast{0.1, 0.4};
  EXPECT_DOUBLE_EQ(fast.delay(2), 0.1);
  EXPECT_DOUBLE_EQ(fast.delay(9), 0.4);
}

TEST(PodRun, SidecarsKeepRunningUntilTheContainersAreDone) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u5}
spec:
  restartPolicy: Never
  initContainers:
  - {name: proxy, image: envoy:1, restartPolicy: Always}
  - {name: setup, image: x/setup:1}
  containers: [{name: main, image: x/main:1}]
)");
  k.at(0);
  core::Value p = k.at(1);  // proxy started: initialization moves on
  EXPECT_EQ(*init_status(p, 0).find("started"), core::Value(true));
  EXPECT_EQ(*init_status(p, 0).find("ready"), core::Value(true));
  EXPECT_EQ(kubectl_status(p), "Init:1/2");
  p = k.at(2);
  p = k.at(3);
  p = k.at(4);  // setup done at 3, main started at 4
  EXPECT_EQ(p.get_string({"status", "phase"}), "Running");
  EXPECT_EQ(condition(p, "ContainersReady").get_string({"status"}), "True");
  EXPECT_TRUE(init_status(p, 0).get({"state", "running"}) != nullptr);
  p = k.at(7);  // main done: the kubelet stops the sidecar, the pod succeeds
  EXPECT_EQ(p.get_string({"status", "phase"}), "Succeeded");
  EXPECT_EQ(init_status(p, 0).get_string({"state", "terminated", "reason"}), "Completed");
}

TEST(PodRun, RestartPoliciesAreHonoured) {
  const char* spec = R"(
metadata: {name: p, namespace: ns, uid: u6}
spec:
  restartPolicy: %s
  containers: [{name: a, image: x/a:1}, {name: b, image: x/b:1}]
)";
  const char* table = R"([{name: a-fails, match: {container: a}, startDelay: 0s, duration: 1s,
                           exitCodes: [2, 0]},
                          {name: b-ok, match: {container: b}, startDelay: 0s, duration: 1s}])";
  auto pod = [&](const char* policy) {
    char buf[512];
    std::snprintf(buf, sizeof buf, spec, policy);
    return std::string(buf);
  };
  {
    FakeKubelet k(pod("Never"), table);
    k.at(0);
    core::Value p = k.at(1);
    EXPECT_EQ(p.get_string({"status", "phase"}), "Failed");
    EXPECT_EQ(*main_status(p, 0).get({"state", "terminated", "exitCode"}), core::Value(2));
    EXPECT_EQ(*main_status(p, 1).get({"state", "terminated", "exitCode"}), core::Value(0));
  }
  {
    FakeKubelet k(pod("OnFailure"), table);
    k.at(0);
    core::Value p = k.at(1);  // a restarts at once, b is done for good
    EXPECT_EQ(p.get_string({"status", "phase"}), "Running");
    EXPECT_EQ(*main_status(p, 0).find("restartCount"), core::Value(1));
    EXPECT_EQ(main_status(p, 1).get_string({"state", "terminated", "reason"}), "Completed");
    EXPECT_EQ(condition(p, "Ready").get_string({"message"}), "containers with unready status: [b]");
    p = k.at(2);
    EXPECT_EQ(p.get_string({"status", "phase"}), "Succeeded");
  }
  {
    FakeKubelet k(pod("Always"), table);
    k.at(0);
    k.at(1);
    core::Value p = k.at(2);
    EXPECT_EQ(p.get_string({"status", "phase"}), "Running");
    EXPECT_EQ(*main_status(p, 1).find("restartCount"), core::Value(1));
    EXPECT_EQ(main_status(p, 1).get_string({"state", "waiting", "reason"}), "CrashLoopBackOff");
    EXPECT_EQ(kubectl_status(p), "CrashLoopBackOff");
  }
}

TEST(PodRun, GracefulStopEndsThePodWithSigterm) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u7}
spec: {containers: [{name: c, image: nginx}]}
)");
  k.at(0);
  k.at(1);
  core::Value p = k.stop(5, 143);
  EXPECT_EQ(p.get_string({"status", "phase"}), "Failed");
  EXPECT_EQ(*main_status(p, 0).get({"state", "terminated", "exitCode"}), core::Value(143));
  EXPECT_EQ(main_status(p, 0).get_string({"state", "terminated", "reason"}), "Error");
  EXPECT_EQ(condition(p, "Ready").get_string({"reason"}), "PodFailed");
}

TEST(PodRun, ARebootStartsThePodOverWithInitContainers) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u9}
spec:
  initContainers: [{name: setup, image: x/setup:1}]
  containers: [{name: c, image: nginx}]
)");
  k.at(0);
  k.at(1);
  k.at(2);
  core::Value up = k.at(3);
  ASSERT_EQ(up.get_string({"status", "phase"}), "Running");
  std::string ready_since(condition(up, "Ready").get_string({"lastTransitionTime"}));
  core::Value down = k.reboot(10);
  // getPhase counts containers that ran before as stopped, not pending: an Always pod stays
  // Running while its init containers run again, as on a real node after a reboot.
  EXPECT_EQ(down.get_string({"status", "phase"}), "Running");
  EXPECT_EQ(kubectl_status(down), "Init:0/1");
  EXPECT_EQ(*main_status(down, 0).get({"lastState", "terminated", "exitCode"}), core::Value(137));
  EXPECT_EQ(main_status(down, 0).get_string({"lastState", "terminated", "message"}),
            "node n rebooted");
  EXPECT_EQ(condition(down, "Ready").get_string({"status"}), "False");
  EXPECT_EQ(condition(down, "PodReadyToStartContainers").get_string({"status"}), "False");
  k.at(20);
  k.at(21);
  k.at(22);
  core::Value again = k.at(23);
  EXPECT_EQ(again.get_string({"status", "phase"}), "Running");
  EXPECT_EQ(*main_status(again, 0).find("restartCount"), core::Value(1));
  EXPECT_EQ(*init_status(again, 0).find("restartCount"), core::Value(1));
  EXPECT_NE(condition(again, "Ready").get_string({"lastTransitionTime"}), ready_since);
}

TEST(PodRun, OthersConditionsAreKept) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u8}
spec: {containers: [{name: c, image: nginx}]}
status:
  qosClass: Guaranteed
  conditions:
  - {type: PodScheduled, status: "True", lastTransitionTime: "2025-12-31T23:59:59Z"}
  - {type: DisruptionTarget, status: "True", reason: EvictionByEvictionAPI}
)");
  core::Value p = k.at(0);
  EXPECT_EQ(condition(p, "PodScheduled").get_string({"lastTransitionTime"}),
            "2025-12-31T23:59:59Z");
  EXPECT_EQ(condition(p, "DisruptionTarget").get_string({"reason"}), "EvictionByEvictionAPI");
  core::Value sent = pod_status(k.run(), "2026-01-01T00:00:00Z", nullptr);
  EXPECT_EQ(sent.find("qosClass"), nullptr);
}

TEST(PodRun, ImagesAreNormalizedAsTheRuntimeReportsThem) {
  EXPECT_EQ(normalize_image("busybox"), "docker.io/library/busybox:latest");
  EXPECT_EQ(normalize_image("nginx:1.27"), "docker.io/library/nginx:1.27");
  EXPECT_EQ(normalize_image("bitnami/redis:7"), "docker.io/bitnami/redis:7");
  EXPECT_EQ(normalize_image("ghcr.io/x/y:2"), "ghcr.io/x/y:2");
  EXPECT_EQ(normalize_image("localhost:5000/y"), "localhost:5000/y:latest");
  EXPECT_EQ(normalize_image("nvcr.io/nvidia/pytorch@sha256:ab"),
            "nvcr.io/nvidia/pytorch@sha256:ab");
}

// The kubelet's /containerLogs answers, picked by the container's state and cut by the query.
TEST(ContainerLogs, ServeTheInstanceTheKubeletWouldWithItsQuery) {
  FakeKubelet k(R"(
metadata: {name: p, namespace: ns, uid: u9}
spec:
  restartPolicy: OnFailure
  containers: [{name: a, image: x/a:1}]
)",
                R"([{name: twice, match: {container: a}, startDelay: 1s, duration: 1s,
                     exitCodes: [1, 0], output: "line1\nline2\nline3\n"}])");
  const auto now = core::Timestamp::parse_rfc3339("2026-01-01T00:10:00Z");
  const auto get = [&](std::map<std::string, std::string, std::less<>> query,
                       std::string container = "a") {
    LogOptions o;
    if (auto error = parse_log_options(query, o)) return *error;
    return container_log(k.run(), container, o, now);
  };
  k.at(0);
  EXPECT_EQ(get({}).status, 400);
  EXPECT_EQ(get({}).body, R"(container "a" in pod "p" is waiting to start: ContainerCreating)");
  k.at(1);  // running, nothing written yet
  EXPECT_EQ(get({}).status, 200);
  EXPECT_EQ(get({}).body, "");
  EXPECT_EQ(get({{"previous", "true"}}).body,
            R"(previous terminated container "a" in pod "p" not found)");
  k.at(2);  // exit 1 at 2 s, restarted at once; exit 0 at 3 s
  EXPECT_EQ(get({}).body, "");
  EXPECT_EQ(get({{"previous", "true"}, {"timestamps", "true"}}).body,
            "2026-01-01T00:00:02Z line1\n2026-01-01T00:00:02Z line2\n"
            "2026-01-01T00:00:02Z line3\n");
  k.at(3);
  EXPECT_EQ(get({}).body, "line1\nline2\nline3\n");
  EXPECT_EQ(get({{"timestamps", "1"}, {"tailLines", "1"}}).body, "2026-01-01T00:00:03Z line3\n");
  EXPECT_EQ(get({{"tailLines", "2"}, {"limitBytes", "8"}}).body, "line2\nli");
  EXPECT_EQ(get({{"tail", "all"}}).body, "line1\nline2\nline3\n");
  EXPECT_EQ(get({{"sinceTime", "2026-01-01T00:00:04Z"}}).body, "");
  EXPECT_EQ(get({{"sinceTime", "2026-01-01T00:00:03Z"}}).body, "line1\nline2\nline3\n");
  EXPECT_EQ(get({{"sinceSeconds", "60"}}).body, "");  // written ten minutes before `now`
  EXPECT_EQ(get({{"previous", "true"}, {"tailLines", "0"}}).body, "");
  EXPECT_EQ(get({{"follow", "true"}, {"stream", "All"}}).body, "line1\nline2\nline3\n");

  EXPECT_EQ(get({}, "b").status, 404);
  EXPECT_EQ(get({}, "b").body, R"(container "b" not found in pod "p")");
  // What the kubelet refuses: undecodable (400) and invalid (422) options.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"tailLines", "x"}, {"follow", "yes"}, {"sinceTime", "yesterday"}}) {
    EXPECT_EQ(get({{key, value}}).status, 400) << key << "=" << value;
  }
  for (const auto& q : std::vector<std::map<std::string, std::string, std::less<>>>{
           {{"tailLines", "-1"}},
           {{"limitBytes", "0"}},
           {{"sinceSeconds", "0"}},
           {{"sinceSeconds", "5"}, {"sinceTime", "2026-01-01T00:00:00Z"}}}) {
    EXPECT_EQ(get(q).status, 422) << q.begin()->first;
  }
  EXPECT_EQ(get({{"stream", "Stdout"}}).status, 400);
  EXPECT_NE(get({{"stream", "Stdout"}}).body.find("PodLogsQuerySplitStreams"), std::string::npos);
}

TEST(ContainerLogs, PathsNeedEveryPart) {
  std::string ns, pod, container;
  LogAnswer error;
  EXPECT_TRUE(split_log_path("/containerLogs/ns/p/c", ns, pod, container, error));
  EXPECT_EQ(ns + "|" + pod + "|" + container, "ns|p|c");
  EXPECT_FALSE(split_log_path("/containerLogs/ns/p/", ns, pod, container, error));
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.body, R"({"message": "Missing container name."})");
  EXPECT_FALSE(split_log_path("/containerLogs/ns", ns, pod, container, error));
  EXPECT_EQ(error.body, R"({"message": "Missing podID."})");
}

// A kubelet endpoint the API server could not use is refused before anything starts.
TEST(ContainerLogs, AnEndpointWithoutCertificateOrOnEveryInterfaceIsRefused) {
  kube::ClientConfig config;
  config.server = "https://127.0.0.1:1";  // never reached: start() throws first
  kube::Client client(config);
  const auto fleet = parse_fleet(core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: logs}
spec: {pools: [{name: p, count: 1, gpu: {product: h100}}]}
)"),
                                 "fleet.yaml");
  const auto refused = [&](KubeletOptions o) -> std::string {
    FleetKubelet k(client, fleet, BehaviourTable{}, o);
    try {
      k.start();
    } catch (const core::InvalidInput& e) {
      return e.what();
    }
    return "started";
  };
  KubeletOptions no_cert;
  no_cert.kubelet_listen = "127.0.0.1:0";
  EXPECT_NE(refused(no_cert).find("needs a serving certificate and key"), std::string::npos)
      << refused(no_cert);
  KubeletOptions everywhere;
  everywhere.kubelet_listen = "0.0.0.0:0";
  everywhere.kubelet_cert_pem = everywhere.kubelet_key_pem = "x";
  EXPECT_NE(refused(everywhere).find("give the one IP the API server should dial"),
            std::string::npos)
      << refused(everywhere);
}

}  // namespace
}  // namespace gpufleet::sim
