// Conformance of the simulated kubelet against the real controllers of kube-local
// ($KUBECONFIG): the API server's qosClass rule, the Job controller (Burstable and Guaranteed
// pods, init containers that succeed, crash-loop and fail, backoffLimit, podFailurePolicy,
// Indexed Jobs), a Deployment rollout, a DaemonSet on every node and a StatefulSet scaling,
// each judged by the controller's own status fields; and a pod status compared field by
// field with the shape kubelet v1.32 reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "../../sim/pod_display.h"
#include "core/yaml.h"
#include "kube/client.h"
#include "kube/config.h"
#include "sim/kubelet/fleet_kubelet.h"

namespace gpufleet::sim {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::kubectl_status;

const std::string kRun = std::to_string(::getpid());
constexpr int kNodes = 4;

const kube::ResourceId kDaemonSets{"apps", "v1", "daemonsets"};
const kube::ResourceId kStatefulSets{"apps", "v1", "statefulsets"};
const kube::ResourceId kServices{"", "v1", "services"};

// Fast behaviours so the controllers' loops, not the simulated work, set the pace.
constexpr const char* kBehaviours = R"(
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
crashLoopBackOff: {initial: 2s, max: 4s}
behaviours:
- name: flaky-apply
  match: {initContainer: "*-apply", image: "*package*"}
  startDelay: 0s
  duration: 1s
  exitCodes: [1, 1, 0]
- name: failing-preflight
  match: {initContainer: "preflight"}
  startDelay: 0s
  duration: 500ms
  exitCode: 3
  terminationMessage: "preflight failed: driver missing"
- name: quick-init
  match: {initContainer: "setup-*"}
  startDelay: 0s
  duration: 500ms
- name: quick-batch
  match: {restartPolicy: Never}
  startDelay: 200ms
  duration: 1s
- name: quick-onfailure
  match: {restartPolicy: OnFailure}
  startDelay: 200ms
  duration: 1s
- name: quick-service
  match: {restartPolicy: Always}
  startDelay: 200ms
  duration: forever
)";

bool eventually(const std::function<bool()>& check, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (check()) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(200ms);
  }
  return check();
}

FleetSpec fleet_of(const std::string& name, const std::string& pool, int count) {
  std::string yaml = "apiVersion: gpufleet.io/v1alpha1\nkind: Fleet\nmetadata: {name: " + name +
                     "}\nspec:\n  seed: 5\n  pools:\n  - name: " + pool +
                     "\n    count: " + std::to_string(count) +
                     "\n    namePattern: \"{pool}-{index:04}\"\n    gpu: {product: h100}\n";
  return parse_fleet(core::parse_yaml(yaml), "itest");
}

std::string condition_status(const core::Value& obj, std::string_view type,
                             std::string* reason = nullptr) {
  const core::Value* conds = obj.get({"status", "conditions"});
  if (conds == nullptr || !conds->is_list()) return "";
  for (const auto& c : conds->as_list()) {
    if (c.get_string({"type"}) == type) {
      if (reason != nullptr) *reason = std::string(c.get_string({"reason"}));
      return std::string(c.get_string({"status"}));
    }
  }
  return "";
}

std::int64_t int_at(const core::Value& obj, std::initializer_list<std::string_view> path) {
  const core::Value* v = obj.get(path);
  return v != nullptr && v->is_int() ? v->as_int() : 0;
}

// The STATUS column of the real `kubectl get pods` (kubectl from PATH, else kube-local's).
std::vector<std::string> kubectl_statuses(const std::string& ns, const std::string& labels) {
  const char* kc = std::getenv("KUBECONFIG");
  const char* kl = std::getenv("KUBE_LOCAL_BIN");
  std::string kubectl = std::system("kubectl version --client >/dev/null 2>&1") == 0 ? "kubectl"
                        : kl != nullptr ? std::string("'") + kl + "' kubectl"
                                        : "kubectl";
  std::string cmd = kubectl + " --kubeconfig '" + (kc ? kc : "") + "' -n " + ns +
                    " get pods --no-headers -l " + labels + " 2>&1";
  std::vector<std::string> out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char line[1024];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::istringstream in(line);
    std::string name, ready, status;
    in >> name >> ready >> status;
    out.push_back(status);
  }
  ::pclose(f);
  return out;
}

kube::ListOptions selector(const std::string& labels) {
  kube::ListOptions o;
  o.label_selector = labels;
  return o;
}

class SimPods : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    client_ = new kube::Client(kube::load_default_config());
    fleet_ = "pods" + kRun;
    pool_ = "q" + kRun;
    KubeletOptions o;
    o.lease_renew = 5s;
    o.status_report = 60s;
    o.tick = 200ms;
    sim_ = new FleetKubelet(*client_, fleet_of(fleet_, pool_, kNodes),
                            BehaviourTable::parse(core::parse_yaml(kBehaviours), "itest"), o);
    sim_->start();
    ASSERT_TRUE(sim_->wait_registered(60s));
    ns_ = "sim-pods-" + kRun;
    core::Value ns;
    ns["apiVersion"] = "v1";
    ns["kind"] = "Namespace";
    ns["metadata"]["name"] = ns_;
    client_->create(kube::resources::namespaces(), ns);
    // Pods in a new namespace need its default ServiceAccount (the admission plugin).
    ASSERT_TRUE(eventually(
        [] {
          return client_->try_get(kube::resources::service_accounts(), ns_, "default").has_value();
        },
        30s));
  }
  static void TearDownTestSuite() {
    try {
      client_->remove(kube::resources::namespaces(), "", ns_);
    } catch (const std::exception&) {
    }
    sim_->stop(true);
    delete sim_;
    delete client_;
  }

  // Namespaced, pinned to the simulated fleet through its label.
  static core::Value in_fleet(const std::string& yaml, bool template_spec) {
    core::Value obj = core::parse_yaml(yaml);
    obj["metadata"]["namespace"] = ns_;
    core::Value& spec = template_spec ? obj["spec"]["template"]["spec"] : obj["spec"];
    spec["nodeSelector"]["gpufleet.io/fleet"] = fleet_;
    return obj;
  }
  static core::Value job(const std::string& name) {
    return client_->get(kube::resources::jobs(), ns_, name);
  }
  static std::vector<core::Value> job_pods(const std::string& name) {
    return client_->list(kube::resources::pods(), ns_, selector("job-name=" + name)).items;
  }

  static kube::Client* client_;
  static FleetKubelet* sim_;
  static std::string fleet_, pool_, ns_;
};

kube::Client* SimPods::client_ = nullptr;
FleetKubelet* SimPods::sim_ = nullptr;
std::string SimPods::fleet_, SimPods::pool_, SimPods::ns_;

// The bug this suite started from: a status patch carrying qosClass BestEffort is refused
// for a pod with requests. The simulator never sends qosClass, so every class runs, keeps
// the class the API server computed, and finishes its graceful deletion.
TEST_F(SimPods, EveryQosClassRunsAndDeletesGracefully) {
  struct Case {
    std::string name, resources, qos;
  };
  std::vector<Case> cases = {
      {"guaranteed", "{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}",
       "Guaranteed"},
      {"burstable", "{requests: {cpu: 50m}}", "Burstable"},
      {"besteffort", "{}", "BestEffort"},
  };
  for (const auto& c : cases) {
    core::Value pod = in_fleet("apiVersion: v1\nkind: Pod\nmetadata: {name: " + c.name +
                                   "}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n"
                                   "  - {name: app, image: nginx:1.27, resources: " +
                                   c.resources + "}\n",
                               false);
    client_->create(kube::resources::pods(), pod);
  }
  // Reproduce the 422 first: the API server refuses a qosClass that differs from its own.
  ASSERT_TRUE(eventually(
      [&] {
        return !client_->get(kube::resources::pods(), ns_, "guaranteed")
                    .get_string({"status", "qosClass"})
                    .empty();
      },
      20s));
  core::Value bad;
  bad["status"]["qosClass"] = "BestEffort";
  try {
    client_->patch(kube::resources::pods(), ns_, "guaranteed", kube::PatchType::Merge, bad,
                   "status");
    FAIL() << "the API server accepted a qosClass change";
  } catch (const kube::ApiError& e) {
    EXPECT_EQ(e.code(), 422) << e.what();
    EXPECT_THAT(std::string(e.what()), HasSubstr("qosClass"));
  }
  for (const auto& c : cases) {
    ASSERT_TRUE(eventually(
        [&] {
          core::Value p = client_->get(kube::resources::pods(), ns_, c.name);
          return p.get_string({"status", "phase"}) == "Running" &&
                 condition_status(p, "Ready") == "True";
        },
        30s))
        << c.name;
    core::Value p = client_->get(kube::resources::pods(), ns_, c.name);
    EXPECT_EQ(p.get_string({"status", "qosClass"}), c.qos);
  }
  for (const auto& c : cases) {
    kube::DeleteOptions del;
    client_->remove(kube::resources::pods(), ns_, c.name, del);
  }
  for (const auto& c : cases) {
    EXPECT_TRUE(
        eventually([&] { return !client_->try_get(kube::resources::pods(), ns_, c.name); }, 30s))
        << c.name << " stayed Terminating";
  }
}

TEST_F(SimPods, JobsWithInitContainersCompleteForBurstableAndGuaranteedPods) {
  client_->create(kube::resources::jobs(), in_fleet(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: burstable-init}
spec:
  completions: 3
  parallelism: 3
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - {name: setup-a, image: busybox:1.36, resources: {requests: {cpu: 10m}}}
      - {name: setup-b, image: busybox:1.36, resources: {requests: {cpu: 10m}}}
      containers:
      - {name: work, image: busybox:1.36, resources: {requests: {cpu: 20m, memory: 16Mi}}}
)",
                                                    true));
  client_->create(kube::resources::jobs(), in_fleet(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: guaranteed-pkg}
spec:
  backoffLimit: 6  # OnFailure: the init container's restarts count against it
  template:
    spec:
      restartPolicy: OnFailure
      initContainers:
      - name: kernel-apply
        image: example.com/host-package:1
        resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {cpu: 10m, memory: 16Mi}}
      containers:
      - name: work
        image: busybox:1.36
        resources: {requests: {cpu: 20m, memory: 16Mi}, limits: {cpu: 20m, memory: 16Mi}}
)",
                                                    true));
  // The host-package init container crash-loops (exits 1 twice, then 0): Init:CrashLoopBackOff
  // is visible on the way.
  bool saw_crash_loop = false;
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& p : job_pods("guaranteed-pkg")) {
          saw_crash_loop = saw_crash_loop || kubectl_status(p) == "Init:CrashLoopBackOff";
        }
        return int_at(job("burstable-init"), {"status", "succeeded"}) == 3 &&
               int_at(job("guaranteed-pkg"), {"status", "succeeded"}) == 1;
      },
      90s))
      << core::to_json(job("guaranteed-pkg"));
  EXPECT_TRUE(saw_crash_loop);
  EXPECT_EQ(condition_status(job("burstable-init"), "Complete"), "True");
  EXPECT_EQ(condition_status(job("guaranteed-pkg"), "Complete"), "True");
  auto pods = job_pods("guaranteed-pkg");
  ASSERT_EQ(pods.size(), 1u);
  const core::Value& pod = pods[0];
  EXPECT_EQ(pod.get_string({"status", "qosClass"}), "Guaranteed");
  const core::Value& init = pod.get({"status", "initContainerStatuses"})->as_list()[0];
  EXPECT_EQ(int_at(init, {"restartCount"}), 2);
  EXPECT_EQ(int_at(init, {"lastState", "terminated", "exitCode"}), 1);
  EXPECT_EQ(init.get_string({"state", "terminated", "reason"}), "Completed");
  for (const auto& p : job_pods("burstable-init")) {
    EXPECT_EQ(p.get_string({"status", "qosClass"}), "Burstable");
    EXPECT_EQ(p.get({"status", "initContainerStatuses"})->size(), 2u);
    EXPECT_EQ(kubectl_status(p), "Completed");
  }
  EXPECT_EQ(kubectl_statuses(ns_, "job-name=burstable-init"),
            (std::vector<std::string>{"Completed", "Completed", "Completed"}));
}

TEST_F(SimPods, FailingInitContainersExhaustTheBackoffLimit) {
  client_->create(kube::resources::jobs(), in_fleet(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: preflight}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - {name: preflight, image: busybox:1.36, resources: {requests: {cpu: 10m}}}
      containers:
      - {name: work, image: busybox:1.36, resources: {requests: {cpu: 10m}}}
)",
                                                    true));
  std::string reason;
  ASSERT_TRUE(eventually(
      [&] { return condition_status(job("preflight"), "Failed", &reason) == "True"; }, 120s))
      << core::to_json(job("preflight"));
  EXPECT_EQ(reason, "BackoffLimitExceeded");
  EXPECT_EQ(int_at(job("preflight"), {"status", "failed"}), 2);
  for (const auto& p : job_pods("preflight")) {
    EXPECT_EQ(p.get_string({"status", "phase"}), "Failed");
    EXPECT_EQ(kubectl_status(p), "Init:Error");
    const core::Value& init = p.get({"status", "initContainerStatuses"})->as_list()[0];
    EXPECT_EQ(int_at(init, {"state", "terminated", "exitCode"}), 3);
    EXPECT_EQ(init.get_string({"state", "terminated", "message"}),
              "preflight failed: driver missing");
  }
  EXPECT_EQ(kubectl_statuses(ns_, "job-name=preflight"),
            (std::vector<std::string>{"Init:Error", "Init:Error"}));
}

TEST_F(SimPods, PodFailurePolicyActsOnTheContainersExitCode) {
  client_->create(kube::resources::jobs(), in_fleet(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: exit42}
spec:
  backoffLimit: 6
  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes: {containerName: main, operator: In, values: [42]}
  template:
    metadata:
      annotations: {sim.gpufleet.io/exit-code: "42"}
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox:1.36, resources: {requests: {cpu: 10m}}}
)",
                                                    true));
  std::string reason;
  ASSERT_TRUE(
      eventually([&] { return condition_status(job("exit42"), "Failed", &reason) == "True"; }, 60s))
      << core::to_json(job("exit42"));
  EXPECT_EQ(reason, "PodFailurePolicy");
  EXPECT_EQ(int_at(job("exit42"), {"status", "failed"}), 1);  // no retry: the policy failed it
}

TEST_F(SimPods, IndexedJobsCompleteEveryIndex) {
  client_->create(kube::resources::jobs(), in_fleet(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completionMode: Indexed
  completions: 4
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox:1.36, resources: {requests: {cpu: 10m}}}
)",
                                                    true));
  ASSERT_TRUE(
      eventually([&] { return condition_status(job("indexed"), "Complete") == "True"; }, 90s))
      << core::to_json(job("indexed"));
  EXPECT_EQ(job("indexed").get_string({"status", "completedIndexes"}), "0-3");
  EXPECT_EQ(int_at(job("indexed"), {"status", "succeeded"}), 4);
}

TEST_F(SimPods, ADeploymentRollsOut) {
  client_->create(kube::resources::deployments(), in_fleet(R"(
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxUnavailable: 1, maxSurge: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      initContainers:
      - {name: proxy, image: envoyproxy/envoy:v1.31, restartPolicy: Always}
      containers:
      - name: web
        image: nginx:1.27
        resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {cpu: 10m, memory: 16Mi}}
)",
                                                           true));
  auto rolled_out = [&](std::int64_t generation) {
    core::Value d = client_->get(kube::resources::deployments(), ns_, "web");
    std::string reason;
    return int_at(d, {"status", "observedGeneration"}) >= generation &&
           int_at(d, {"status", "updatedReplicas"}) == 3 &&
           int_at(d, {"status", "availableReplicas"}) == 3 &&
           int_at(d, {"status", "replicas"}) == 3 &&
           condition_status(d, "Progressing", &reason) == "True" &&
           reason == "NewReplicaSetAvailable";
  };
  ASSERT_TRUE(eventually([&] { return rolled_out(1); }, 60s))
      << core::to_json(client_->get(kube::resources::deployments(), ns_, "web"));
  // A new template: the old pods must finish their graceful deletion for the rollout to end.
  core::Value patch;
  patch["spec"]["template"]["metadata"]["annotations"]["rev"] = "2";
  client_->patch(kube::resources::deployments(), ns_, "web", kube::PatchType::Merge, patch);
  ASSERT_TRUE(eventually([&] { return rolled_out(2); }, 90s))
      << core::to_json(client_->get(kube::resources::deployments(), ns_, "web"));
  EXPECT_TRUE(eventually(
      [&] {
        return client_->list(kube::resources::pods(), ns_, selector("app=web")).items.size() == 3u;
      },
      30s));
}

TEST_F(SimPods, ADaemonSetBecomesReadyOnEveryNode) {
  client_->create(kDaemonSets, in_fleet(R"(
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      tolerations: [{operator: Exists}]
      containers:
      - {name: agent, image: example.com/agent:1, resources: {requests: {cpu: 10m}}}
)",
                                        true));
  ASSERT_TRUE(eventually(
      [&] {
        core::Value d = client_->get(kDaemonSets, ns_, "agent");
        return int_at(d, {"status", "desiredNumberScheduled"}) == kNodes &&
               int_at(d, {"status", "numberReady"}) == kNodes &&
               int_at(d, {"status", "numberAvailable"}) == kNodes &&
               int_at(d, {"status", "updatedNumberScheduled"}) == kNodes;
      },
      60s))
      << core::to_json(client_->get(kDaemonSets, ns_, "agent"));
}

TEST_F(SimPods, AStatefulSetScalesUpAndDown) {
  core::Value svc = core::parse_yaml(R"(
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {clusterIP: None, selector: {app: db}, ports: [{port: 5432}]}
)");
  svc["metadata"]["namespace"] = ns_;
  client_->create(kServices, svc);
  client_->create(kStatefulSets, in_fleet(R"(
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - {name: db, image: postgres:16, resources: {requests: {cpu: 10m, memory: 32Mi}}}
)",
                                          true));
  auto ready = [&](std::int64_t n) {
    core::Value s = client_->get(kStatefulSets, ns_, "db");
    return int_at(s, {"status", "readyReplicas"}) == n &&
           int_at(s, {"status", "availableReplicas"}) == n &&
           int_at(s, {"status", "replicas"}) == n &&
           int_at(s, {"status", "observedGeneration"}) == int_at(s, {"metadata", "generation"});
  };
  ASSERT_TRUE(eventually([&] { return ready(2); }, 60s))
      << core::to_json(client_->get(kStatefulSets, ns_, "db"));
  for (std::int64_t n : {4, 1}) {
    core::Value patch;
    patch["spec"]["replicas"] = n;
    client_->patch(kStatefulSets, ns_, "db", kube::PatchType::Merge, patch);
    ASSERT_TRUE(eventually([&] { return ready(n); }, 90s))
        << n << ": " << core::to_json(client_->get(kStatefulSets, ns_, "db"));
  }
}

// Field by field against the shape kubelet v1.32 reports (pkg/kubelet/kubelet_pods.go
// convertToAPIContainerStatuses, status/generate.go): which keys each object has, their
// types and their formats.
std::set<std::string> keys(const core::Value& v) {
  std::set<std::string> out;
  for (const auto& e : v.as_map()) out.insert(e.key);
  return out;
}

const std::regex kTime(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
const std::regex kContainerId(R"(containerd://[0-9a-f]{64})");
const std::regex kImageId(R"([a-z0-9.\-]+(/[a-z0-9._\-]+)+@sha256:[0-9a-f]{64})");
const std::regex kIp(R"(\d+\.\d+\.\d+\.\d+)");

void expect_terminated_shape(const core::Value& t, const std::string& where) {
  std::set<std::string> k = keys(t);
  k.erase("message");
  EXPECT_EQ(k,
            (std::set<std::string>{"containerID", "exitCode", "finishedAt", "reason", "startedAt"}))
      << where;
  EXPECT_TRUE(t.find("exitCode")->is_int()) << where;
  EXPECT_TRUE(std::regex_match(std::string(t.get_string({"startedAt"})), kTime)) << where;
  EXPECT_TRUE(std::regex_match(std::string(t.get_string({"finishedAt"})), kTime)) << where;
  EXPECT_TRUE(std::regex_match(std::string(t.get_string({"containerID"})), kContainerId)) << where;
  std::string reason(t.get_string({"reason"}));
  EXPECT_TRUE(reason == "Completed" || reason == "Error") << where << ": " << reason;
}

void expect_container_shape(const core::Value& c, const std::string& where) {
  std::set<std::string> k = keys(c);
  EXPECT_EQ(k, (std::set<std::string>{"containerID", "image", "imageID", "lastState", "name",
                                      "ready", "restartCount", "started", "state", "volumeMounts"}))
      << where;
  EXPECT_TRUE(std::regex_match(std::string(c.get_string({"containerID"})), kContainerId)) << where;
  EXPECT_TRUE(std::regex_match(std::string(c.get_string({"imageID"})), kImageId)) << where;
  EXPECT_TRUE(c.find("ready")->is_bool() && c.find("started")->is_bool()) << where;
  EXPECT_TRUE(c.find("restartCount")->is_int()) << where;
  const core::Value& state = *c.find("state");
  EXPECT_EQ(state.size(), 1u) << where;
  if (const core::Value* r = state.find("running")) {
    EXPECT_EQ(keys(*r), (std::set<std::string>{"startedAt"})) << where;
    EXPECT_TRUE(std::regex_match(std::string(r->get_string({"startedAt"})), kTime)) << where;
  } else {
    ASSERT_NE(state.find("terminated"), nullptr) << where;
    expect_terminated_shape(*state.find("terminated"), where + ".state.terminated");
  }
  const core::Value& last = *c.find("lastState");
  if (last.size() > 0) expect_terminated_shape(*last.find("terminated"), where + ".lastState");
  // The ServiceAccount admission plugin's token mount, as RecursiveReadOnlyMounts reports it.
  const core::Value& mount = c.find("volumeMounts")->as_list()[0];
  EXPECT_EQ(mount.get_string({"mountPath"}), "/var/run/secrets/kubernetes.io/serviceaccount");
  EXPECT_EQ(mount.get_string({"recursiveReadOnly"}), "Disabled");
  EXPECT_EQ(*mount.find("readOnly"), core::Value(true));
}

TEST_F(SimPods, PodStatusHasTheKubeletsShapeFieldByField) {
  client_->create(kube::resources::pods(), in_fleet(R"(
apiVersion: v1
kind: Pod
metadata: {name: shape}
spec:
  restartPolicy: Always
  initContainers:
  - {name: setup-x, image: busybox:1.36}
  - {name: proxy, image: envoyproxy/envoy:v1.31, restartPolicy: Always}
  containers:
  - {name: zeta, image: nginx:1.27, resources: {requests: {cpu: 10m}}}
  - {name: alpha, image: ghcr.io/example/app:2, resources: {requests: {cpu: 10m}}}
)",
                                                    false));
  core::Value pod;
  ASSERT_TRUE(eventually(
      [&] {
        pod = client_->get(kube::resources::pods(), ns_, "shape");
        return condition_status(pod, "Ready") == "True";
      },
      30s))
      << core::to_json(pod);
  const core::Value& s = *pod.find("status");
  EXPECT_EQ(keys(s), (std::set<std::string>{"conditions", "containerStatuses", "hostIP", "hostIPs",
                                            "initContainerStatuses", "phase", "podIP", "podIPs",
                                            "qosClass", "startTime"}));
  EXPECT_EQ(s.get_string({"phase"}), "Running");
  EXPECT_EQ(s.get_string({"qosClass"}), "Burstable");
  EXPECT_TRUE(std::regex_match(std::string(s.get_string({"hostIP"})), kIp));
  EXPECT_TRUE(std::regex_match(std::string(s.get_string({"podIP"})), kIp));
  EXPECT_EQ(s.find("podIPs")->as_list()[0].get_string({"ip"}), s.get_string({"podIP"}));
  EXPECT_EQ(s.find("hostIPs")->as_list()[0].get_string({"ip"}), s.get_string({"hostIP"}));
  EXPECT_TRUE(std::regex_match(std::string(s.get_string({"startTime"})), kTime));

  std::vector<std::string> types;
  for (const auto& c : s.find("conditions")->as_list()) {
    types.emplace_back(c.get_string({"type"}));
    std::set<std::string> k = keys(c);
    EXPECT_TRUE(k ==
                std::set<std::string>({"type", "status", "lastProbeTime", "lastTransitionTime"}))
        << core::to_json(c);
    EXPECT_TRUE(c.find("lastProbeTime")->is_null());
    EXPECT_EQ(c.get_string({"status"}), "True");
    EXPECT_TRUE(std::regex_match(std::string(c.get_string({"lastTransitionTime"})), kTime));
  }
  EXPECT_EQ(types, (std::vector<std::string>{"PodReadyToStartContainers", "Initialized", "Ready",
                                             "ContainersReady", "PodScheduled"}));

  const auto& inits = s.find("initContainerStatuses")->as_list();
  ASSERT_EQ(inits.size(), 2u);
  EXPECT_EQ(inits[0].get_string({"name"}), "setup-x");  // spec order
  EXPECT_EQ(inits[1].get_string({"name"}), "proxy");
  expect_container_shape(inits[0], "initContainerStatuses[0]");
  expect_container_shape(inits[1], "initContainerStatuses[1]");
  EXPECT_EQ(inits[0].get_string({"state", "terminated", "reason"}), "Completed");
  EXPECT_EQ(*inits[0].find("ready"), core::Value(true));
  EXPECT_EQ(*inits[0].find("started"), core::Value(false));
  EXPECT_EQ(*inits[1].find("ready"), core::Value(true));  // a running sidecar
  EXPECT_EQ(*inits[1].find("started"), core::Value(true));
  EXPECT_EQ(inits[1].get_string({"image"}), "docker.io/envoyproxy/envoy:v1.31");

  const auto& mains = s.find("containerStatuses")->as_list();
  ASSERT_EQ(mains.size(), 2u);
  EXPECT_EQ(mains[0].get_string({"name"}), "alpha");  // the kubelet sorts by name
  EXPECT_EQ(mains[1].get_string({"name"}), "zeta");
  for (std::size_t i = 0; i < mains.size(); ++i) {
    expect_container_shape(mains[i], "containerStatuses[" + std::to_string(i) + "]");
    EXPECT_EQ(*mains[i].find("ready"), core::Value(true));
    EXPECT_EQ(*mains[i].find("started"), core::Value(true));
    EXPECT_EQ(int_at(mains[i], {"restartCount"}), 0);
    EXPECT_EQ(mains[i].find("lastState")->size(), 0u);
  }
  EXPECT_EQ(mains[0].get_string({"image"}), "ghcr.io/example/app:2");
  EXPECT_EQ(mains[1].get_string({"image"}), "docker.io/library/nginx:1.27");
  EXPECT_THAT(std::string(mains[1].get_string({"imageID"})),
              ::testing::StartsWith("docker.io/library/nginx@sha256:"));

  // The pod ends: terminated state and terminal conditions, the same shape.
  kube::DeleteOptions del;
  client_->remove(kube::resources::pods(), ns_, "shape", del);
  EXPECT_TRUE(
      eventually([&] { return !client_->try_get(kube::resources::pods(), ns_, "shape"); }, 30s));
}

}  // namespace
}  // namespace gpufleet::sim
