// certify against the real kube-apiserver, scheduler and Job controller of kube-local, with a
// simulated GPU fleet whose kubelets run the workload pods from the bandwidth and fault
// models: thresholds (range, compound, per group size), a missing measurement, admission
// (immutable spec, unknown category and metric) and the InvalidThreshold condition,
// cordoned/tainted nodes excluded and listed, categories in order with the first failure
// ending the run, diagnose finding exactly the degraded nodes (16 nodes; and 64 nodes with a
// degraded link between two healthy ones, reported as an Infrastructure finding), a
// ValidationRequest answered,
// WorkloadRuns, a controller killed with SIGKILL mid-run resuming without re-running a
// recorded group, bounded runs (maxDuration, the footprint caps, deletion mid-run with the
// controller up and killed), and multi-node groups run as MPIJobs where the cluster serves them
// (the test plays the mpi-operator).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "certify/controller.h"
#include "certify/mpijob.h"
#include "certify/workload_job.h"
#include "core/json.h"
#include "core/text.h"
#include "core/yaml.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "process.h"
#include "sim/fault.h"
#include "sim/kubelet/fleet_kubelet.h"
#include "sim/scenario.h"
#include "support/source_paths.h"
#include "test_env.h"

namespace gpufleet::certify {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kRun = std::to_string(::getpid());
// 0..31 for most cases (12..14: DCGM on 8 GPUs and pods/log), 32..95 for the 64-node
// diagnose, 96..97 retries, 98..103 bounded runs
constexpr int kNodes = 104;

// Test-only workloads: a WorkloadRun image that reports through the result contract, and one
// that never ends (the timeout path). Everything else is the simulator's defaults (nccl-tests,
// DCGM, NeMo).
constexpr const char* kBehaviours = R"Y(
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
behaviours:
- name: result-contract
  match: {image: "*certify-itest-result*"}
  startDelay: 0s
  duration: 1s
  terminationMessage: '{"metrics": {"avgTFLOPsPerGPU": 420.5, "avgStepTimeSec": 1.25}, "message": "burn-in ok"}'
- name: hangs
  match: {image: "*certify-itest-hang*"}
  startDelay: 0s
  duration: forever
- name: flaky-first-attempt
  match: {image: "*certify-itest-flaky*", annotations: {gpufleet.io/certify-attempt: "1"}}
  startDelay: 0s
  duration: 1s
  exitCode: 1
  terminationMessage: '{"status": "Failed", "message": "CUDA error: unspecified launch failure"}'
- name: flaky-later-attempts
  match: {image: "*certify-itest-flaky*"}
  startDelay: 0s
  duration: 1s
  terminationMessage: '{"metrics": {"avgTFLOPsPerGPU": 415.0}, "message": "ok on a retry"}'
- name: always-broken
  match: {image: "*certify-itest-broken*"}
  startDelay: 0s
  duration: 1s
  exitCode: 2
  terminationMessage: '{"status": "Failed", "message": "segmentation fault"}'
- name: slow-result
  match: {image: "*certify-itest-slow*"}
  startDelay: 0s
  duration: 40s
  terminationMessage: '{"metrics": {"avgTFLOPsPerGPU": 410}}'
)Y";

std::string kubectl() {
  std::string kl = kube::testing::env_or_empty("KUBE_LOCAL_BIN");
  return (kl.empty() ? std::string("kubectl") : "'" + kl + "' kubectl") + " --kubeconfig '" +
         kube::testing::env_or_empty("KUBECONFIG") + "'";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path << " is missing: kube-local older than its kubelet PKI?";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool eventually(const std::function<bool()>& f, std::chrono::seconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    try {
      if (f()) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(250ms);
  }
  return f();
}

class CertifyIT : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    client_ = new kube::Client(kube::testing::admin_config());
    for (const char* f : {"certification", "workloadrun", "validationrequest"}) {
      ASSERT_EQ(kube::testing::run_command(
                    kubectl() + " apply --server-side --force-conflicts -f " + GPUFLEET_SOURCE_DIR +
                    "/deploy/crds/" + f + ".yaml >/dev/null"),
                0);
    }
    ASSERT_EQ(kube::testing::run_command(
                  kubectl() + " wait --for=condition=Established --timeout=30s "
                              "crd/certifications.gpufleet.io crd/workloadruns.gpufleet.io "
                              "crd/validationrequests.gpufleet.io >/dev/null"),
              0);
    ns_ = new kube::testing::TestNamespace(*client_, "certify-it");
    fleet_ = "cfy" + kRun;
    std::string yaml = "apiVersion: gpufleet.io/v1alpha1\nkind: Fleet\nmetadata: {name: " + fleet_ +
                       "}\nspec:\n  seed: 11\n  pools:\n  - name: p" + kRun +
                       "\n    count: " + std::to_string(kNodes) + "\n    namePattern: \"c" + kRun +
                       "-{index:03}\"\n    gpu: {product: h100}\n" +
                       // Two A100 nodes of 2 GPUs: the catalog runs DCGM 3.x on Ampere, and a
                       // 2-GPU level-3 report fits the 4 KiB termination message.
                       "  - name: a" + kRun + "\n    count: 2\n    namePattern: \"a" + kRun +
                       "-{index:03}\"\n    gpu: {product: a100, count: 2}\n";
    sim::KubeletOptions o;
    o.time_scale = 40;  // a 20 s nccl-tests run takes half a second
    o.lease_renew = 5s;
    // The kubelet endpoint, so pods/log reaches the simulated kubelets through the API
    // server, which kube-local points at kubelet-serving's CA with its own client cert.
    const std::string pki = kube::testing::env_or_empty("GPUFLEET_KUBE_LOCAL_DIR") + "/pki/";
    o.kubelet_listen = "127.0.0.1:0";
    o.kubelet_cert_pem = read_file(pki + "kubelet-serving.crt");
    o.kubelet_key_pem = read_file(pki + "kubelet-serving.key");
    o.kubelet_client_ca_pem = read_file(pki + "ca.crt");
    sim_ = new sim::FleetKubelet(*client_, sim::parse_fleet(core::parse_yaml(yaml), "itest"),
                                 sim::BehaviourTable::parse(core::parse_yaml(kBehaviours), "itest"),
                                 o);
    sim_->start();
    ASSERT_TRUE(sim_->wait_registered(60s));
    // Registered is not schedulable: until the node lifecycle controller sees Ready and lifts
    // the not-ready taint, a run excludes the node as Tainted. Whichever test runs first (gtest
    // shards start with different ones) must find the whole fleet in place.
    ASSERT_TRUE(eventually([] { return fleet_schedulable(); }, 90s))
        << "the simulated fleet's nodes did not all become Ready without a not-ready taint";
    start_controller();
  }
  // Every node of this run's fleet is Ready and carries no not-ready / unreachable taint.
  static bool fleet_schedulable() {
    std::size_t ready = 0;
    for (const auto& n : client_->list(kube::resources::nodes(), "").items) {
      const std::string name(n.get_string({"metadata", "name"}));
      if (!name.starts_with("c" + kRun + "-") && !name.starts_with("a" + kRun + "-")) continue;
      bool is_ready = false;
      if (const core::Value* cs = n.get({"status", "conditions"}); cs != nullptr && cs->is_list())
        for (const auto& c : cs->as_list())
          if (c.get_string({"type"}) == "Ready") is_ready = c.get_string({"status"}) == "True";
      if (const core::Value* ts = n.get({"spec", "taints"}); ts != nullptr && ts->is_list())
        for (const auto& t : ts->as_list())
          if (t.get_string({"key"}).starts_with("node.kubernetes.io/")) is_ready = false;
      if (is_ready) ++ready;
    }
    return ready == static_cast<std::size_t>(kNodes) + 2;  // the H100 pool and two A100 nodes
  }
  static void TearDownTestSuite() {
    delete controller_;
    controller_ = nullptr;
    if (sim_ != nullptr) sim_->stop(true);
    delete sim_;
    delete ns_;
    delete client_;
  }
  // `settings`: more --set pairs.
  static void start_controller(const std::vector<std::string>& settings = {}) {
    port_ = controller::testing::free_port();
    std::vector<std::string> argv = {controller::testing::gpufleet_bin(),
                                     "controller",
                                     "--controllers=certify",
                                     "--namespace",
                                     ns_->name(),
                                     "--set",
                                     "certify.namespace=" + ns_->name(),
                                     "--metrics-addr",
                                     "127.0.0.1:" + std::to_string(port_),
                                     "--kubeconfig",
                                     kube::testing::env_or_empty("KUBECONFIG")};
    for (const auto& s : settings) argv.insert(argv.end(), {"--set", s});
    controller_ = new controller::testing::Child(argv, "certify-controller-" + kRun + ".log");
  }
  static std::string node(int i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%03d", i);
    return "c" + kRun + "-" + buf;
  }
  static const std::string& ns() { return ns_->name(); }

  core::Value certification(const std::string& name, const std::vector<int>& nodes,
                            const std::string& categories_yaml) {
    core::Value c;
    c["apiVersion"] = "gpufleet.io/v1alpha1";
    c["kind"] = "Certification";
    c["metadata"]["name"] = name;
    c["metadata"]["namespace"] = ns();
    for (int i : nodes) c["spec"]["targets"]["nodeNames"].push_back(node(i));
    c["spec"]["categories"] = core::parse_yaml(categories_yaml);
    return c;
  }
  core::Value create(const kube::ResourceId& r, const core::Value& obj) {
    return client_->create(r, obj);
  }
  // Waits for a final phase; returns the object.
  core::Value finished(const kube::ResourceId& r, const std::string& name,
                       std::chrono::seconds timeout = 60s) {
    core::Value obj;
    bool done = eventually(
        [&] {
          obj = client_->get(r, r.namespaced ? ns() : "", name);
          std::string_view p = obj.get_string({"status", "phase"});
          return p == "Passed" || p == "Failed" || p == "Expired";
        },
        timeout);
    EXPECT_TRUE(done) << name << " did not finish: " << core::to_json(obj);
    return obj;
  }
  // Reasons of the Events about object `name` in namespace `ns` (events.k8s.io/v1).
  static std::multiset<std::string> event_reasons(const std::string& ns, const std::string& name) {
    std::multiset<std::string> out;
    for (const auto& e : client_->list(kube::resources::events(), ns).items)
      if (e.get_string({"regarding", "name"}) == name)
        out.insert(std::string(e.get_string({"reason"})));
    return out;
  }
  static std::map<std::string, std::string> failed_reasons(const core::Value& obj) {
    std::map<std::string, std::string> out;
    if (const core::Value* f = obj.get({"status", "failedNodes"}); f && f->is_list())
      for (const auto& x : f->as_list())
        out[std::string(x.get_string({"node"}))] = std::string(x.get_string({"reason"}));
    return out;
  }

  static kube::Client* client_;
  static kube::testing::TestNamespace* ns_;
  static sim::FleetKubelet* sim_;
  static controller::testing::Child* controller_;
  static int port_;
  static std::string fleet_;
};

kube::Client* CertifyIT::client_ = nullptr;
kube::testing::TestNamespace* CertifyIT::ns_ = nullptr;
sim::FleetKubelet* CertifyIT::sim_ = nullptr;
controller::testing::Child* CertifyIT::controller_ = nullptr;
int CertifyIT::port_ = 0;
std::string CertifyIT::fleet_;

TEST_F(CertifyIT, ThresholdsPassAndFailIncludingRangeAndCompound) {
  // A single HGX H100 node reaches ~480 GB/s all-reduce bus bandwidth in the model.
  create(resources::certifications(),
         certification("th-pass", {0, 1}, R"Y([{name: communication/nccl-all-reduce, scale: perNode,
            thresholds: {busBandwidthGBps: "value >= 400.0 && value <= 600.0",
                         algBandwidthGBps: "gpuProduct.startsWith('NVIDIA-H100') ? value >= 200.0 : value >= 1000.0"}}])Y"));
  create(resources::certifications(),
         certification("th-range", {2}, R"Y([{name: communication/nccl-all-reduce, scale: perNode,
            thresholds: {busBandwidthGBps: "value >= 100.0 && value <= 200.0"}}])Y"));
  create(
      resources::certifications(),
      certification("th-group", {3, 4}, R"Y([{name: communication/nccl-all-reduce, scale: wholeSet,
            thresholds: {busBandwidthGBps: "value >= (groupSize > 1 ? 1000.0 : 1.0)"}}])Y"));
  core::Value pass = finished(resources::certifications(), "th-pass");
  EXPECT_EQ(pass.get_string({"status", "phase"}), "Passed") << core::to_json(pass);
  EXPECT_EQ(pass.get({"status", "passedCount"})->as_int(), 2);
  core::Value range = finished(resources::certifications(), "th-range");
  EXPECT_EQ(range.get_string({"status", "phase"}), "Failed");
  EXPECT_EQ(failed_reasons(range),
            (std::map<std::string, std::string>{{node(2), "ThresholdViolated"}}));
  core::Value group = finished(resources::certifications(), "th-group");
  EXPECT_EQ(failed_reasons(group),
            (std::map<std::string, std::string>{{node(3), "ThresholdViolated"},
                                                {node(4), "ThresholdViolated"}}));
  auto results = read_node_results(*client_, ns(), "th-group", 1);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_THAT(results[0].message, HasSubstr("busBandwidthGBps"));
}

TEST_F(CertifyIT, AdmissionRejectsChangesUnknownCategoriesAndMetrics) {
  create(resources::certifications(), certification("adm", {5}, "[{name: diagnostics/dcgm-r1}]"));
  // A merge patch (no resourceVersion): the controller writes the status meanwhile, and a
  // read-then-update would meet 409 Conflict instead of the admission error looked for.
  const core::Value change =
      core::parse_yaml("{spec: {categories: [{name: diagnostics/dcgm-r2}]}}");
  try {
    client_->patch(resources::certifications(), ns(), "adm", kube::PatchType::Merge, change);
    ADD_FAILURE() << "spec change accepted";
  } catch (const kube::ApiError& e) {
    EXPECT_THAT(e.what(), HasSubstr("spec is immutable"));
  }
  try {
    create(resources::certifications(),
           certification("adm-cat", {5}, "[{name: diagnostics/dcgm-r7}]"));
    ADD_FAILURE() << "unknown category accepted";
  } catch (const kube::ApiError& e) {
    EXPECT_THAT(e.what(), HasSubstr("diagnostics/dcgm-r7"));
  }
  try {
    create(
        resources::certifications(),
        certification("adm-metric", {5},
                      "[{name: diagnostics/dcgm-r1, thresholds: {gpuTemperature: 'value < 80'}}]"));
    ADD_FAILURE() << "unknown metric accepted";
  } catch (const kube::ApiError& e) {
    EXPECT_THAT(e.what(), HasSubstr("metric gpuTemperature is not a known metric"));
  }
  // Compiling CEL is certify's: refused with the Accepted condition, nothing run.
  create(
      resources::certifications(),
      certification("adm-expr", {5},
                    "[{name: diagnostics/dcgm-r1, thresholds: {dcgmWarnResults: 'value <= '}}]"));
  core::Value bad = finished(resources::certifications(), "adm-expr");
  auto cond = kube::get_condition(*bad.get({"status", "conditions"}), "Accepted");
  ASSERT_TRUE(cond.has_value());
  EXPECT_EQ(cond->status, "False");
  EXPECT_EQ(cond->reason, "InvalidThreshold");
  EXPECT_THAT(cond->message, HasSubstr("dcgmWarnResults"));
  EXPECT_THAT(cond->message, HasSubstr("value <= "));
  EXPECT_FALSE(
      client_->try_get(kube::resources::config_maps(), ns(), targets_config_map("adm-expr")));
  EXPECT_TRUE(
      eventually([&] { return event_reasons(ns(), "adm-expr").count("Rejected") == 1; }, 10s))
      << "no Rejected Event for adm-expr";
  finished(resources::certifications(), "adm");
}

TEST_F(CertifyIT, CordonedAndUntoleratedNodesExcludedAndListed) {
  core::Value cordon;
  cordon["spec"]["unschedulable"] = true;
  client_->patch(kube::resources::nodes(), "", node(6), kube::PatchType::Merge, cordon);
  core::Value taint;
  taint["spec"]["taints"] =
      core::parse_yaml("[{key: example.com/maintenance, value: 'yes', effect: NoSchedule}]");
  client_->patch(kube::resources::nodes(), "", node(7), kube::PatchType::Merge, taint);
  core::Value tainted2 = taint;
  tainted2["spec"]["taints"].as_list()[0]["key"] = "example.com/tolerated";
  client_->patch(kube::resources::nodes(), "", node(8), kube::PatchType::Merge, tainted2);

  core::Value c = certification("excl", {6, 7, 8, 9}, "[{name: diagnostics/dcgm-r1}]");
  c["spec"]["targets"]["tolerations"] =
      core::parse_yaml("[{key: example.com/tolerated, operator: Exists}]");
  create(resources::certifications(), c);
  core::Value done = finished(resources::certifications(), "excl");
  EXPECT_EQ(done.get_string({"status", "phase"}), "Passed") << core::to_json(done);
  EXPECT_EQ(done.get({"status", "nodeCount"})->as_int(), 2);  // 8 (tolerated) and 9
  EXPECT_EQ(done.get({"status", "excludedCount"})->as_int(), 2);
  std::map<std::string, std::string> excluded;
  for (const auto& e : done.get({"status", "excluded"})->as_list())
    excluded[std::string(e.get_string({"node"}))] = std::string(e.get_string({"reason"}));
  EXPECT_EQ(excluded,
            (std::map<std::string, std::string>{{node(6), "Cordoned"}, {node(7), "Tainted"}}));
  core::Value clear;
  clear["spec"]["unschedulable"] = nullptr;
  clear["spec"]["taints"] = nullptr;
  for (int i : {6, 7, 8})
    client_->patch(kube::resources::nodes(), "", node(i), kube::PatchType::Merge, clear);
}

TEST_F(CertifyIT, CategoriesRunInOrderAndTheFirstFailureEndsTheRunKeepingEarlierResults) {
  create(resources::certifications(), certification("order", {10, 11}, R"Y([
           {name: diagnostics/dcgm-r1},
           {name: communication/nccl-all-reduce, scale: perNode, thresholds: {busBandwidthGBps: "value >= 5000.0"}},
           {name: training/llm-8b}])Y"));
  core::Value done = finished(resources::certifications(), "order");
  EXPECT_EQ(done.get_string({"status", "phase"}), "Failed");
  const auto& cats = done.get({"status", "categories"})->as_list();
  ASSERT_EQ(cats.size(), 3u);
  EXPECT_EQ(cats[0].get_string({"phase"}), "Passed");
  EXPECT_EQ(cats[1].get_string({"phase"}), "Failed");
  EXPECT_EQ(cats[2].get_string({"phase"}), "Skipped");
  EXPECT_EQ(done.get_string({"status", "currentCategory"}), "communication/nccl-all-reduce");
  auto dcgm = read_category(*client_, ns(), "order", 0);
  ASSERT_TRUE(dcgm.has_value());
  EXPECT_EQ(dcgm->phase, "Passed");
  EXPECT_EQ(dcgm->groups.size(), 2u);
  EXPECT_FALSE(read_category(*client_, ns(), "order", 2).has_value());
  auto cond = kube::get_condition(*done.get({"status", "conditions"}), "Passed");
  ASSERT_TRUE(cond.has_value());
  EXPECT_EQ(cond->status, "False");
}

TEST_F(CertifyIT, WorkloadRunsJudgedByTheResultContractAndMissingMeasurementTimesOut) {
  auto run = [&](const std::string& name, const std::string& image, int node_index,
                 const std::string& thresholds, const std::string& timeout = "") {
    core::Value w;
    w["apiVersion"] = "gpufleet.io/v1alpha1";
    w["kind"] = "WorkloadRun";
    w["metadata"]["name"] = name;
    w["metadata"]["namespace"] = ns();
    w["spec"]["targets"]["nodeNames"].push_back(node(node_index));
    w["spec"]["image"] = image;
    w["spec"]["thresholds"] = core::parse_yaml(thresholds);
    if (!timeout.empty()) w["spec"]["timeout"] = timeout;
    create(resources::workload_runs(), w);
  };
  run("wl-ok", "example.com/certify-itest-result:1", 12, "{avgTFLOPsPerGPU: 'value >= 400.0'}");
  run("wl-missing", "example.com/certify-itest-result:1", 13,
      "{avgTFLOPsPerGPU: 'value >= 400.0', goodputRatio: 'value >= 0.9'}");
  run("wl-hang", "example.com/certify-itest-hang:1", 14, "{avgTFLOPsPerGPU: 'value >= 400.0'}",
      "3s");
  core::Value ok = finished(resources::workload_runs(), "wl-ok");
  EXPECT_EQ(ok.get_string({"status", "phase"}), "Passed") << core::to_json(ok);
  core::Value missing = finished(resources::workload_runs(), "wl-missing");
  EXPECT_EQ(failed_reasons(missing),
            (std::map<std::string, std::string>{{node(13), "MeasurementTimeout"}}));
  core::Value hang = finished(resources::workload_runs(), "wl-hang");
  EXPECT_EQ(failed_reasons(hang),
            (std::map<std::string, std::string>{{node(14), "MeasurementTimeout"}}))
      << core::to_json(hang);
  auto st = read_category(*client_, ns(), storage_name(true, "wl-ok"), 0);
  ASSERT_TRUE(st.has_value());
  ASSERT_EQ(st->groups.size(), 1u);
  ASSERT_TRUE(st->groups[0].result.has_value());
  EXPECT_DOUBLE_EQ(st->groups[0].result->metrics.at("avgTFLOPsPerGPU"), 420.5);
}

TEST_F(CertifyIT, RetriesRerunNoisyFailuresUpToTheBudgetAndEventsTellTheStory) {
  auto run = [&](const std::string& name, const std::string& image, int node_index, int retries) {
    core::Value w;
    w["apiVersion"] = "gpufleet.io/v1alpha1";
    w["kind"] = "WorkloadRun";
    w["metadata"]["name"] = name;
    w["metadata"]["namespace"] = ns();
    w["spec"]["targets"]["nodeNames"].push_back(node(node_index));
    w["spec"]["image"] = image;
    w["spec"]["retries"] = retries;
    w["spec"]["thresholds"] = core::parse_yaml("{avgTFLOPsPerGPU: 'value >= 400.0'}");
    create(resources::workload_runs(), w);
  };
  // The first attempt crashes (the simulator fails pods annotated attempt 1), the retry passes.
  run("wl-flaky", "example.com/certify-itest-flaky:1", 96, 1);
  // Crashes every time: three attempts with retries 2, then the verdict.
  run("wl-broken", "example.com/certify-itest-broken:1", 97, 2);
  core::Value flaky = finished(resources::workload_runs(), "wl-flaky", 90s);
  EXPECT_EQ(flaky.get_string({"status", "phase"}), "Passed") << core::to_json(flaky);
  auto st = read_category(*client_, ns(), storage_name(true, "wl-flaky"), 0);
  ASSERT_TRUE(st.has_value());
  ASSERT_EQ(st->groups.size(), 1u);
  ASSERT_TRUE(st->groups[0].result.has_value());
  EXPECT_EQ(st->groups[0].result->attempts, 2);
  EXPECT_EQ(st->groups[0].attempt, 2);
  ASSERT_EQ(st->groups[0].earlier.size(), 1u);
  EXPECT_THAT(st->groups[0].earlier[0], HasSubstr("WorkloadFailed"));
  EXPECT_THAT(st->groups[0].earlier[0], HasSubstr("unspecified launch failure"));
  EXPECT_DOUBLE_EQ(st->groups[0].result->metrics.at("avgTFLOPsPerGPU"), 415.0);

  core::Value broken = finished(resources::workload_runs(), "wl-broken", 90s);
  EXPECT_EQ(failed_reasons(broken),
            (std::map<std::string, std::string>{{node(97), "WorkloadFailed"}}))
      << core::to_json(broken);
  auto bst = read_category(*client_, ns(), storage_name(true, "wl-broken"), 0);
  ASSERT_TRUE(bst.has_value());
  ASSERT_TRUE(bst->groups[0].result.has_value());
  EXPECT_EQ(bst->groups[0].result->attempts, 3) << "retries 2: three attempts, no fourth";
  EXPECT_EQ(bst->groups[0].earlier.size(), 2u);
  EXPECT_THAT(bst->groups[0].result->message, HasSubstr("attempt 3 of 3"));
  // Every attempt had its own Job; once judged, none is left (no fourth was created).
  std::string base = job_name("wl-broken", std::string(kube::uid_of(broken)), 0, 1);
  EXPECT_TRUE(eventually(
      [&] {
        for (int a = 1; a <= 4; ++a)
          if (client_->try_get(kube::resources::jobs(), ns(),
                               job_name("wl-broken", std::string(kube::uid_of(broken)), 0, 1, a)))
            return false;
        return true;
      },
      20s))
      << base;

  // Events: accepted, category started, the retry, category finished, the verdict.
  std::multiset<std::string> want_flaky{"Accepted", "CategoryStarted", "GroupRetried",
                                        "CategoryFinished", "Passed"};
  std::multiset<std::string> got;
  EXPECT_TRUE(eventually(
      [&] {
        got = event_reasons(ns(), "wl-flaky");
        return got == want_flaky;
      },
      15s))
      << "events of wl-flaky: " << core::join(got);
  EXPECT_TRUE(eventually(
      [&] {
        got = event_reasons(ns(), "wl-broken");
        return got.count("GroupRetried") == 2 && got.count("Failed") == 1;
      },
      15s))
      << "events of wl-broken: " << core::join(got);
}

TEST_F(CertifyIT, DcgmLevel3OnAmpereReadsThe3xLayoutAndNamesTheGpu) {
  const std::string good = "a" + kRun + "-000", bad = "a" + kRun + "-001";
  sim_->inject(
      sim::parse_event(core::parse_yaml("{node: " + bad + ", type: ecc, gpu: 1, kind: doubleBit}"),
                       "itest", "event", false));
  core::Value c = certification("dcgm-r3", {}, "[{name: diagnostics/dcgm-r3}]");
  c["spec"]["targets"]["nodeNames"].push_back(good);
  c["spec"]["targets"]["nodeNames"].push_back(bad);
  create(resources::certifications(), c);
  core::Value done = finished(resources::certifications(), "dcgm-r3", 120s);
  EXPECT_EQ(failed_reasons(done), (std::map<std::string, std::string>{{bad, "HardwareFailure"}}))
      << core::to_json(done);
  auto st = read_category(*client_, ns(), "dcgm-r3", 0);
  ASSERT_TRUE(st.has_value());
  ASSERT_EQ(st->groups.size(), 2u);
  for (const auto& g : st->groups) {
    ASSERT_TRUE(g.result.has_value());
    if (g.nodes.front() == good) {
      EXPECT_TRUE(g.result->passed) << g.result->message;
      EXPECT_EQ(g.result->metrics.at("dcgmFailedResults"), 0.0);
    } else {
      EXPECT_FALSE(g.result->passed);
      EXPECT_THAT(g.result->message, HasSubstr("GPU 1"));
      EXPECT_THAT(g.result->message, HasSubstr("GPU Memory"));  // the 3.x test name
    }
  }
}

// An 8-GPU DCGM level-3 report (4.x layout) is one JSON line far over the 4 KiB termination
// message, so the simulator's message is empty and the verdict comes from pods/log: the API
// server fetches it from the simulated kubelet endpoint.
TEST_F(CertifyIT, DcgmLevel3OnEightGpuHopperIsJudgedFromTheLog) {
  const std::string good = node(12), bad = node(13);
  sim_->inject(
      sim::parse_event(core::parse_yaml("{node: " + bad + ", type: ecc, gpu: 5, kind: doubleBit}"),
                       "itest", "event", false));
  core::Value c = certification("dcgm-r3-h100", {12, 13}, "[{name: diagnostics/dcgm-r3}]");
  create(resources::certifications(), c);
  core::Value done = finished(resources::certifications(), "dcgm-r3-h100", 120s);
  EXPECT_EQ(failed_reasons(done), (std::map<std::string, std::string>{{bad, "HardwareFailure"}}))
      << core::to_json(done);
  auto st = read_category(*client_, ns(), "dcgm-r3-h100", 0);
  ASSERT_TRUE(st.has_value());
  ASSERT_EQ(st->groups.size(), 2u);
  for (const auto& g : st->groups) {
    ASSERT_TRUE(g.result.has_value());
    if (g.nodes.front() == good) {
      EXPECT_TRUE(g.result->passed) << g.result->message;
      EXPECT_EQ(g.result->metrics.at("dcgmFailedResults"), 0.0);
    } else {
      EXPECT_FALSE(g.result->passed);
      EXPECT_THAT(g.result->message, HasSubstr("GPU 5"));
    }
  }
  sim_->inject(sim::parse_event(core::parse_yaml("{node: " + bad + ", type: clear}"), "itest",
                                "event", false));
}

// `kubectl logs` and the pods/log API, answered by the simulated kubelet via the API server:
// the query reaches it (tailLines, limitBytes) and its errors come back with its words.
TEST_F(CertifyIT, PodLogsAreServedThroughTheApiServer) {
  core::Value pod = core::parse_yaml(R"Y(
apiVersion: v1
kind: Pod
metadata:
  name: logs
  annotations: {sim.gpufleet.io/output: "first line\nsecond line\nthird line\n",
                sim.gpufleet.io/duration: 1s}
spec:
  restartPolicy: Never
  containers: [{name: main, image: busybox:1.36}]
)Y");
  pod["metadata"]["namespace"] = ns();
  pod["spec"]["nodeName"] = node(14);
  create(kube::resources::pods(), pod);
  ASSERT_TRUE(eventually(
      [&] {
        return client_->get(kube::resources::pods(), ns(), "logs")
                   .get_string({"status", "phase"}) == "Succeeded";
      },
      60s));
  const std::string base = "/api/v1/namespaces/" + ns() + "/pods/logs/log";
  EXPECT_EQ(client_->get_raw(base), "first line\nsecond line\nthird line\n");
  EXPECT_EQ(client_->get_raw(base + "?container=main&tailLines=1"), "third line\n");
  EXPECT_EQ(client_->get_raw(base + "?limitBytes=5"), "first");
  const std::string stamped = client_->get_raw(base + "?timestamps=true&tailLines=1");
  EXPECT_THAT(stamped, ::testing::MatchesRegex("20[0-9-]+T[0-9:.]+Z third line\n")) << stamped;
  try {
    client_->get_raw(base + "?previous=true");
    ADD_FAILURE() << "a previous instance that never ran was served";
  } catch (const kube::ApiError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr(R"(previous terminated container "main" in pod "logs" not found)"))
        << e.what();
  }
  std::string out;
  FILE* p = ::popen((kubectl() + " logs -n " + ns() + " logs --tail=2").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_EQ(out, "second line\nthird line\n");
  client_->remove(kube::resources::pods(), ns(), "logs");
}

TEST_F(CertifyIT, ValidationRequestAnsweredInStatusOnly) {
  // sentinel cordons a node before asking: certify tests it anyway, and leaves the cordon.
  core::Value cordon;
  cordon["spec"]["unschedulable"] = true;
  client_->patch(kube::resources::nodes(), "", node(15), kube::PatchType::Merge, cordon);
  std::string name = "vr-" + kRun;
  core::Value vr;
  vr["apiVersion"] = "gpufleet.io/v1alpha1";
  vr["kind"] = "ValidationRequest";
  vr["metadata"]["name"] = name;
  for (int i : {15, 16}) vr["spec"]["nodeNames"].push_back(node(i));
  vr["spec"]["categories"].push_back("diagnostics/dcgm-r1");
  vr["spec"]["requester"] = "sentinel";
  core::Value created = create(resources::validation_requests(), vr);
  core::Value done = finished(resources::validation_requests(), name);
  EXPECT_EQ(done.get_string({"status", "phase"}), "Passed") << core::to_json(done);
  EXPECT_EQ(done.get({"status", "results"})->size(), 2u);
  EXPECT_EQ(done.get({"spec"}) != nullptr && *done.get({"spec"}) == *created.get({"spec"}), true);
  EXPECT_EQ(done.get({"metadata", "generation"})->as_int(), 1);
  core::Value n = client_->get(kube::resources::nodes(), "", node(15));
  EXPECT_TRUE(kube::node::unschedulable(n)) << "certify never uncordons";
  // Events about a cluster-scoped request live in "default".
  EXPECT_TRUE(eventually(
      [&] {
        auto r = event_reasons("default", name);
        return r.count("Accepted") == 1 && r.count("Passed") == 1;
      },
      10s))
      << "ValidationRequest events missing";
  core::Value clear;
  clear["spec"]["unschedulable"] = nullptr;
  client_->patch(kube::resources::nodes(), "", node(15), kube::PatchType::Merge, clear);
  client_->remove(resources::validation_requests(), "", name);
}

TEST_F(CertifyIT, DiagnoseFindsExactlyTheDegradedNodes) {
  // Nodes 16..31; two lose half their network bandwidth: any group holding one of them
  // misses the threshold; the planner names exactly those two.
  for (int i : {19, 28})
    sim_->inject(sim::parse_event(
        core::parse_yaml("{node: " + node(i) + ", type: networkDegraded, factor: 0.5}"), "itest",
        "event", false));
  std::vector<int> nodes;
  for (int i = 16; i < 32; ++i) nodes.push_back(i);
  create(resources::certifications(),
         certification("diag", nodes, R"Y([{name: communication/nccl-all-reduce, scale: diagnose,
            thresholds: {busBandwidthGBps: "value >= 300.0"}}])Y"));
  core::Value done = finished(resources::certifications(), "diag", 120s);
  EXPECT_EQ(failed_reasons(done),
            (std::map<std::string, std::string>{{node(19), "ThresholdViolated"},
                                                {node(28), "ThresholdViolated"}}))
      << core::to_json(done);
  auto st = read_category(*client_, ns(), "diag", 0);
  ASSERT_TRUE(st.has_value());
  EXPECT_GE(st->rounds, 2);
  std::cout << "diagnose of 16 nodes: " << st->message << "\n";
  // One DiagnoseRound Event per round after the first (the first is CategoryStarted's).
  std::multiset<std::string> got;
  EXPECT_TRUE(eventually(
      [&] {
        got = event_reasons(ns(), "diag");
        return got.count("DiagnoseRound") == static_cast<std::size_t>(st->rounds - 1) &&
               got.count("CategoryStarted") == 1 && got.count("CategoryFinished") == 1 &&
               got.count("Failed") == 1;
      },
      15s))
      << "events of diag: " << core::join(got) << " (" << st->rounds << " rounds)";
  for (int i : {19, 28})
    sim_->inject(sim::parse_event(core::parse_yaml("{node: " + node(i) + ", type: clear}"), "itest",
                                  "event", false));
}

TEST_F(CertifyIT, DiagnoseOf64NodesFindsTheTwoDegradedNodesAndTheDegradedLink) {
  // Nodes 32..95. Two lose half their network bandwidth (Faulty, ThresholdViolated); the link
  // between two healthy nodes, 52 and 59, runs at half speed: only a test holding both ends
  // misses the threshold, so each end passes elsewhere and the planner probes across the
  // failing group ("both halves pass") down to the pair. The screen puts 16 consecutive
  // nodes in a group, so 52 and 59 share one without a faulty node (a link whose every test
  // also holds a faulty node is explained by that node; docs/certify.md "Fault isolation").
  const std::vector<int> bad{37, 84};
  const int a = 52, b = 59;
  auto inject = [&](const std::string& yaml) {
    sim_->inject(sim::parse_event(core::parse_yaml(yaml), "itest", "event", false));
  };
  for (int i : bad) inject("{node: " + node(i) + ", type: networkDegraded, factor: 0.5}");
  inject("{node: " + node(a) + ", type: linkDegraded, peer: " + node(b) + ", factor: 0.5}");
  std::vector<int> nodes;
  for (int i = 32; i < 96; ++i) nodes.push_back(i);
  auto started = std::chrono::steady_clock::now();
  create(resources::certifications(),
         certification("diag64", nodes, R"Y([{name: communication/nccl-all-reduce, scale: diagnose,
            thresholds: {busBandwidthGBps: "value >= 300.0"}}])Y"));
  core::Value done = finished(resources::certifications(), "diag64", 360s);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(done.get_string({"status", "phase"}), "Failed");
  // The two degraded nodes fail on their own evidence; the link's ends are listed with the
  // reason Infrastructure (their link, not the node, is at fault); nobody else.
  EXPECT_EQ(failed_reasons(done),
            (std::map<std::string, std::string>{{node(bad[0]), "ThresholdViolated"},
                                                {node(bad[1]), "ThresholdViolated"},
                                                {node(a), "Infrastructure"},
                                                {node(b), "Infrastructure"}}))
      << core::to_json(done);
  auto count = [&](std::string_view key) {
    const core::Value* v = done.get({"status", key});
    return v != nullptr && v->if_int() != nullptr ? *v->if_int() : -1;
  };
  EXPECT_EQ(count("failedCount"), 4) << core::to_json(done);
  EXPECT_EQ(count("passedCount"), 60);
  // Exactly one Infrastructure finding, naming both ends of the link.
  const core::Value* infra = done.get({"status", "infrastructure"});
  ASSERT_TRUE(infra != nullptr && infra->is_list()) << core::to_json(done);
  ASSERT_EQ(infra->size(), 1u) << core::to_json(*infra);
  std::set<std::string> ends;
  for (const auto& n : infra->as_list().front().find("nodes")->as_list())
    ends.insert(std::string(n.as_string()));
  EXPECT_EQ(ends, (std::set<std::string>{node(a), node(b)}));
  EXPECT_THAT(std::string(infra->as_list().front().get_string({"message"})),
              ::testing::AllOf(HasSubstr(node(a)), HasSubstr(node(b))));
  EXPECT_EQ(infra->as_list().front().get_string({"category"}), "communication/nccl-all-reduce");
  // The category's state (what `gpufleet certify report` reads) holds the same finding.
  auto st = read_category(*client_, ns(), "diag64", 0);
  ASSERT_TRUE(st.has_value());
  ASSERT_EQ(st->infrastructure.size(), 1u);
  EXPECT_EQ(
      std::set<std::string>(st->infrastructure[0].nodes.begin(), st->infrastructure[0].nodes.end()),
      (std::set<std::string>{node(a), node(b)}));
  std::cout << "diagnose of 64 nodes, 2 degraded + 1 link: " << st->message << ", " << wall
            << " s wall\n";
  for (int i : bad) inject("{node: " + node(i) + ", type: clear}");
  inject("{node: " + node(a) + ", type: linkDegraded, peer: " + node(b) + ", factor: 1}");
}

// Issue 31: a node whose NCCL falls back to TCP sockets (no RDMA device in the pod) fails the
// group with a reason naming it, the transport and the bandwidth, read from the NCCL_DEBUG=INFO
// lines of the log (the termination message's tail has none); expectTransport: any accepts it.
// Two iterations: at socket speed the full run is minutes of simulated time.
TEST_F(CertifyIT, NcclOverSocketsFailsWithTheTransportReason) {
  const std::string sock = node(96);
  sim_->inject(sim::parse_event(core::parse_yaml("{node: " + sock + ", type: socketFallback}"),
                                "itest", "event", false));
  create(resources::certifications(),
         certification("sock", {14, 96, 97},
                       "[{name: communication/nccl-all-reduce, scale: wholeSet, iterations: 2}]"));
  create(resources::certifications(),
         certification("sock-any", {94, 95, 96},
                       "[{name: communication/nccl-all-reduce, scale: wholeSet, "
                       "iterations: 2, expectTransport: any}]"));
  core::Value done = finished(resources::certifications(), "sock");
  core::Value any = finished(resources::certifications(), "sock-any");
  sim_->inject(sim::parse_event(
      core::parse_yaml("{node: " + sock + ", type: socketFallback, active: false}"), "itest",
      "event", false));
  EXPECT_EQ(failed_reasons(done),
            (std::map<std::string, std::string>{{node(14), "ThresholdViolated"},
                                                {node(96), "ThresholdViolated"},
                                                {node(97), "ThresholdViolated"}}))
      << core::to_json(done);
  auto results = read_node_results(*client_, ns(), "sock", 1);
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    EXPECT_THAT(r.message, HasSubstr("wrong NCCL transport: host " + sock +
                                     " used Socket (TCP) between nodes where RDMA (IB, RoCE or "
                                     "EFA) is expected (expectTransport: rdma); bus bandwidth "))
        << r.node;
    EXPECT_THAT(r.message, HasSubstr("RDMA device plugin")) << r.node;
  }
  EXPECT_EQ(any.get_string({"status", "phase"}), "Passed") << core::to_json(any);
}

TEST_F(CertifyIT, KilledControllerResumesWithoutRerunningRecordedGroups) {
  // Every Job the controller creates, by name -> uids: a re-run group would show two.
  std::mutex mu;
  std::map<std::string, std::set<std::string>> jobs;
  kube::InformerOptions io;
  io.resource = kube::resources::jobs();
  io.namespace_ = ns();
  io.label_selector = kRunLabel;
  kube::Informer informer(*client_, io);
  kube::EventHandlers h;
  h.on_add = [&](const core::Value& o) {
    std::lock_guard l(mu);
    jobs[std::string(kube::name_of(o))].insert(std::string(kube::uid_of(o)));
  };
  informer.add_handlers(h);
  informer.start();
  // A diagnose run: killed once round 1's results are recorded, the restarted controller
  // must go on with round 2 and never start a round-1 group again.
  sim_->inject(sim::parse_event(
      core::parse_yaml("{node: " + node(3) + ", type: networkDegraded, factor: 0.5}"), "itest",
      "event", false));
  std::vector<int> nodes;
  for (int i = 0; i < 16; ++i) nodes.push_back(i);
  create(resources::certifications(),
         certification("resume", nodes, R"Y([{name: communication/nccl-all-reduce, scale: diagnose,
            thresholds: {busBandwidthGBps: "value >= 300.0"}}])Y"));
  ASSERT_TRUE(eventually(
      [&] {
        auto st = read_category(*client_, ns(), "resume", 0);
        return st && st->rounds >= 2;
      },
      60s));
  controller_->signal(SIGKILL);
  controller_->wait(10s);
  auto at_kill = read_category(*client_, ns(), "resume", 0);
  ASSERT_TRUE(at_kill.has_value());
  EXPECT_EQ(at_kill->phase, "Running") << "killed after the run ended: nothing was resumed";
  delete controller_;
  controller_ = nullptr;
  std::this_thread::sleep_for(1s);
  start_controller();
  core::Value done = finished(resources::certifications(), "resume", 90s);
  EXPECT_EQ(failed_reasons(done),
            (std::map<std::string, std::string>{{node(3), "ThresholdViolated"}}))
      << core::to_json(done);
  sim_->inject(sim::parse_event(core::parse_yaml("{node: " + node(3) + ", type: clear}"), "itest",
                                "event", false));
  auto st = read_category(*client_, ns(), "resume", 0);
  ASSERT_TRUE(st.has_value());
  informer.stop();
  std::lock_guard l(mu);
  EXPECT_EQ(jobs.size(), st->groups.size()) << "one Job per group test";
  for (const auto& [name, uids] : jobs) EXPECT_EQ(uids.size(), 1u) << name << " ran twice";
}

kube::ListOptions run_selector(const std::string& uid) {
  kube::ListOptions o;
  o.label_selector = kRunLabel + std::string("=") + uid;
  return o;
}

// The GPU pods of run `uid` that are not on their way out.
std::vector<std::string> live_pods(kube::Client& client, const std::string& ns,
                                   const std::string& uid) {
  std::vector<std::string> out;
  for (const auto& p : client.list(kube::resources::pods(), ns, run_selector(uid)).items)
    if (p.get({"metadata", "deletionTimestamp"}) == nullptr) out.emplace_back(kube::name_of(p));
  return out;
}

std::size_t jobs_of(kube::Client& client, const std::string& ns, const std::string& uid) {
  return client.list(kube::resources::jobs(), ns, run_selector(uid)).items.size();
}

core::Value hanging_run(const std::string& name, const std::string& node_name,
                        const std::string& ns, const std::string& max_duration = "") {
  core::Value w;
  w["apiVersion"] = "gpufleet.io/v1alpha1";
  w["kind"] = "WorkloadRun";
  w["metadata"]["name"] = name;
  w["metadata"]["namespace"] = ns;
  w["spec"]["targets"]["nodeNames"].push_back(node_name);
  w["spec"]["image"] = "example.com/certify-itest-hang:1";
  w["spec"]["timeout"] = "10m";
  if (!max_duration.empty()) w["spec"]["maxDuration"] = max_duration;
  return w;
}

// A run past its maxDuration is stopped: its workloads deleted, phase Failed with reason
// DeadlineExceeded, the category cut short shown Stopped; a ValidationRequest-style reading of
// its node results certifies no node.
TEST_F(CertifyIT, RunPastItsMaxDurationIsStoppedAndCertifiesNothing) {
  core::Value w = create(resources::workload_runs(), hanging_run("bounded", node(98), ns(), "8s"));
  const std::string uid(kube::uid_of(w));
  ASSERT_TRUE(eventually([&] { return live_pods(*client_, ns(), uid).size() == 1; }, 30s))
      << "the run's pod never started";
  core::Value done = finished(resources::workload_runs(), "bounded", 40s);
  EXPECT_EQ(done.get_string({"status", "phase"}), "Failed") << core::to_json(done);
  EXPECT_THAT(std::string(done.get_string({"status", "message"})),
              HasSubstr("stopped at its maxDuration 8s while workload ran"));
  std::string reason;
  if (const core::Value* cs = done.get({"status", "conditions"}); cs && cs->is_list())
    for (const auto& c : cs->as_list())
      if (c.get_string({"type"}) == "Passed") reason = c.get_string({"reason"});
  EXPECT_EQ(reason, "DeadlineExceeded");
  const core::Value* cats = done.get({"status", "categories"});
  ASSERT_TRUE(cats != nullptr && cats->size() == 1) << core::to_json(done);
  EXPECT_EQ((*cats)[0].get_string({"phase"}), "Stopped");
  EXPECT_TRUE(eventually(
      [&] { return live_pods(*client_, ns(), uid).empty() && jobs_of(*client_, ns(), uid) == 0; },
      15s))
      << "the stopped run left its Job or pods behind";
  auto results = read_node_results(*client_, ns(), storage_name(true, "bounded"), 1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].passed);
  EXPECT_EQ(results[0].reason, "Incomplete");
  // `gpufleet certify report` says the same (it once called every node without a failure
  // Passed, finished or not).
  std::string report;
  {
    const std::string cmd = "'" + controller::testing::gpufleet_bin() +
                            "' certify report bounded --kind workloadrun -o json -n " + ns() +
                            " --kubeconfig '" + kube::testing::env_or_empty("KUBECONFIG") + "'";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) report.append(buf, n);
    ::pclose(p);
  }
  core::Value j = core::parse_json(report);
  const core::Value* report_nodes = j.find("nodes");
  ASSERT_TRUE(report_nodes != nullptr && report_nodes->size() == 1) << report;
  EXPECT_EQ((*report_nodes)[0].get_string({"verdict"}), "Incomplete") << report;
  // The category's wall time: at least the 8 s the run was given.
  const core::Value* wall = j.get({"categories"});
  ASSERT_TRUE(wall != nullptr && wall->size() == 1) << report;
  ASSERT_TRUE((*wall)[0].find("wallSeconds") != nullptr) << report;
  EXPECT_GE((*wall)[0].find("wallSeconds")->as_double(), 7.0) << report;
}

// Deleting a run mid-flight stops its pods at once; with the controller killed, the garbage
// collector still takes them, and the restarted controller starts nothing for the run.
TEST_F(CertifyIT, DeletedRunStopsItsPodsAlsoWithTheControllerKilled) {
  core::Value w = create(resources::workload_runs(), hanging_run("deleted", node(99), ns()));
  std::string uid(kube::uid_of(w));
  ASSERT_TRUE(eventually([&] { return live_pods(*client_, ns(), uid).size() == 1; }, 30s));
  auto t0 = std::chrono::steady_clock::now();
  client_->remove(resources::workload_runs(), ns(), "deleted");
  ASSERT_TRUE(eventually([&] { return live_pods(*client_, ns(), uid).empty(); }, 10s))
      << "the deleted run's pod is still running";
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::printf("deleted run: its pod was stopped %lld ms after the delete\n",
              static_cast<long long>(ms.count()));
  EXPECT_TRUE(eventually([&] { return jobs_of(*client_, ns(), uid) == 0; }, 10s));

  core::Value k = create(resources::workload_runs(), hanging_run("orphaned", node(100), ns()));
  uid = std::string(kube::uid_of(k));
  ASSERT_TRUE(eventually([&] { return live_pods(*client_, ns(), uid).size() == 1; }, 30s));
  controller_->signal(SIGKILL);
  controller_->wait(10s);
  delete controller_;
  controller_ = nullptr;
  client_->remove(resources::workload_runs(), ns(), "orphaned");
  EXPECT_TRUE(eventually(
      [&] { return live_pods(*client_, ns(), uid).empty() && jobs_of(*client_, ns(), uid) == 0; },
      45s))
      << "the run deleted while its controller was down left its Job or pod behind";
  start_controller();
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(jobs_of(*client_, ns(), uid), 0u) << "the restarted controller ran a deleted run";
}

// The platform team's caps: a run selecting more nodes than certify.max-nodes, or asking for a
// maxDuration over certify.max-duration, is refused before anything runs.
TEST_F(CertifyIT, RunsOverTheFootprintOrDurationCapAreRefusedBeforeAnythingRuns) {
  controller_->signal(SIGTERM);
  controller_->wait(20s);
  delete controller_;
  controller_ = nullptr;
  start_controller({"certify.max-nodes=2", "certify.max-duration=1h"});
  struct Restore {
    ~Restore() {
      controller_->signal(SIGTERM);
      controller_->wait(20s);
      delete controller_;
      controller_ = nullptr;
      start_controller();
    }
  } restore;
  core::Value big =
      create(resources::certifications(),
             certification("too-big", {101, 102, 103}, "[{name: diagnostics/dcgm-r1}]"));
  core::Value long_run = certification("too-long", {101}, "[{name: diagnostics/dcgm-r1}]");
  long_run["spec"]["maxDuration"] = "2h";
  create(resources::certifications(), long_run);
  auto accepted = [](const core::Value& obj) {
    std::pair<std::string, std::string> out;
    if (const core::Value* cs = obj.get({"status", "conditions"}); cs && cs->is_list())
      for (const auto& c : cs->as_list())
        if (c.get_string({"type"}) == "Accepted")
          out = {std::string(c.get_string({"reason"})), std::string(c.get_string({"message"}))};
    return out;
  };
  core::Value b = finished(resources::certifications(), "too-big", 30s);
  EXPECT_EQ(b.get_string({"status", "phase"}), "Failed");
  EXPECT_EQ(accepted(b).first, "FootprintExceeded");
  EXPECT_THAT(accepted(b).second,
              HasSubstr("spec.targets selects 3 nodes, over certify.max-nodes 2"));
  core::Value l = finished(resources::certifications(), "too-long", 30s);
  EXPECT_EQ(accepted(l).first, "DurationExceedsPolicy");
  EXPECT_THAT(accepted(l).second,
              HasSubstr("spec.maxDuration: 2h is over this cluster's certify.max-duration 1h"));
  for (const char* name : {"too-big", "too-long"}) {
    EXPECT_FALSE(read_targets(*client_, ns(), name).has_value()) << name << " selected nodes";
  }
  EXPECT_EQ(jobs_of(*client_, ns(), std::string(kube::uid_of(big))), 0u);
}

// Plays the mpi-operator (kubeflow.org/v2beta1) for the MPIJobs of one namespace, as far as
// certify relies on it: worker pods "<name>-worker-<i>" from the Worker template and, once
// they are Ready (launcherCreationPolicy: WaitForWorkersReady), a launcher Job
// "<name>-launcher" from the Launcher template, all owned by the MPIJob (so deleting it
// collects them); conditions Created, then Running, then Succeeded or Failed (the launcher
// Job's reason and message) when the launcher Job ends, and the workers deleted then
// (cleanPodPolicy: Running).
class PlayedMpiOperator {
 public:
  PlayedMpiOperator(kube::Client& client, std::string ns) : client_(client), ns_(std::move(ns)) {
    thread_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        try {
          pass();
        } catch (const std::exception&) {  // a conflict or a race with a deletion: next pass
        }
        std::this_thread::sleep_for(200ms);
      }
    });
  }
  // Stops acting, as an operator that is not installed or is down.
  void pause() { paused_ = true; }
  // Takes MPIJobs up (condition Created) but never starts a launcher, as when the workers
  // never all become Ready.
  void hold_launchers() { hold_ = true; }
  // Every MPIJob object it has seen (by uid): a group's MPIJob created twice shows twice.
  [[nodiscard]] std::size_t objects_seen() {
    std::lock_guard l(mu_);
    return uids_.size();
  }
  [[nodiscard]] std::set<std::string> launched() {
    std::lock_guard l(mu_);
    return launched_;
  }

 private:
  void pass() {
    if (paused_) return;
    for (const auto& m : client_.list(mpijobs(), ns_).items) {
      const std::string name(kube::name_of(m));
      {
        std::lock_guard l(mu_);
        uids_.insert(std::string(kube::uid_of(m)));
      }
      if (!m.get_string({"metadata", "deletionTimestamp"}).empty()) continue;
      core::Value owner;
      owner["apiVersion"] = "kubeflow.org/v2beta1";
      owner["kind"] = "MPIJob";
      owner["name"] = name;
      owner["uid"] = std::string(kube::uid_of(m));
      owner["controller"] = true;
      auto meta_for = [&](const core::Value& tmpl, const std::string& obj, const char* role) {
        core::Value meta =
            tmpl.get({"metadata"}) != nullptr ? *tmpl.get({"metadata"}) : core::Value();
        meta["name"] = obj;
        meta["namespace"] = ns_;
        meta["labels"]["training.kubeflow.org/job-name"] = name;
        meta["labels"]["training.kubeflow.org/job-role"] = role;
        meta["ownerReferences"].push_back(owner);
        return meta;
      };
      const core::Value& specs = *m.get({"spec", "mpiReplicaSpecs"});
      std::optional<core::Value> launcher;
      try {
        launcher = client_.get(kube::resources::jobs(), ns_, name + "-launcher");
      } catch (const kube::ApiError& e) {
        if (e.reason() != kube::Reason::NotFound) throw;
      }
      if (!launcher) {
        const core::Value& w = *specs.get({"Worker"});
        std::int64_t ready = 0;
        for (std::int64_t i = 0; i < w.get({"replicas"})->as_int(); ++i) {
          core::Value pod;
          pod["apiVersion"] = "v1";
          pod["kind"] = "Pod";
          pod["metadata"] =
              meta_for(*w.get({"template"}), name + "-worker-" + std::to_string(i), "worker");
          pod["spec"] = *w.get({"template", "spec"});
          create_or_keep(kube::resources::pods(), pod);
          const core::Value now =
              client_.get(kube::resources::pods(), ns_, name + "-worker-" + std::to_string(i));
          const core::Value* r = kube::find_condition(now, "Ready");
          ready += r != nullptr && r->get_string({"status"}) == "True" ? 1 : 0;
        }
        if (hold_ || (m.get_string({"spec", "launcherCreationPolicy"}) == "WaitForWorkersReady" &&
                      ready < w.get({"replicas"})->as_int())) {
          if (m.get({"status", "conditions"}) == nullptr)
            set_conditions(name, {{"Created", "True", "", ""}});
          continue;
        }
        const core::Value& l = *specs.get({"Launcher"});
        core::Value job;
        job["apiVersion"] = "batch/v1";
        job["kind"] = "Job";
        job["metadata"] = meta_for(core::Value(), name + "-launcher", "launcher");
        job["spec"]["template"] = *l.get({"template"});
        job["spec"]["template"]["metadata"]["labels"]["training.kubeflow.org/job-role"] =
            "launcher";
        job["spec"]["backoffLimit"] = *m.get({"spec", "runPolicy", "backoffLimit"});
        job["spec"]["activeDeadlineSeconds"] =
            *m.get({"spec", "runPolicy", "activeDeadlineSeconds"});
        create_or_keep(kube::resources::jobs(), job);
        set_conditions(name, {{"Created", "True", "", ""}, {"Running", "True", "", ""}});
        std::lock_guard lock(mu_);
        launched_.insert(name);
        continue;
      }
      const bool complete = kube::job::complete(*launcher);
      const bool failed = kube::job::failed_permanently(*launcher);
      if (!complete && !failed) continue;
      if (progress_of(m).finished) continue;
      std::string reason;
      std::string message;
      if (const core::Value* c = kube::find_condition(*launcher, "Failed"); failed && c) {
        reason = std::string(c->get_string({"reason"}));
        message = std::string(c->get_string({"message"}));
      }
      set_conditions(name, {{"Created", "True", "", ""},
                            {"Running", "False", "", ""},
                            {complete ? "Succeeded" : "Failed", "True", reason, message}});
      kube::ListOptions workers;
      workers.label_selector =
          "training.kubeflow.org/job-name=" + name + ",training.kubeflow.org/job-role=worker";
      for (const auto& p : client_.list(kube::resources::pods(), ns_, workers).items) {
        try {
          client_.remove(kube::resources::pods(), ns_, std::string(kube::name_of(p)));
        } catch (const kube::ApiError&) {
        }
      }
    }
  }
  void create_or_keep(const kube::ResourceId& r, const core::Value& obj) {
    try {
      client_.create(r, obj);
    } catch (const kube::ApiError& e) {
      if (e.reason() != kube::Reason::AlreadyExists) throw;
    }
  }
  struct Condition {
    std::string type, status, reason, message;
  };
  void set_conditions(const std::string& name, const std::vector<Condition>& conditions) {
    core::Value m = client_.get(mpijobs(), ns_, name);
    core::Value list = core::Value::list();
    for (const auto& c : conditions) {
      core::Value v;
      v["type"] = c.type;
      v["status"] = c.status;
      if (!c.reason.empty()) v["reason"] = c.reason;
      if (!c.message.empty()) v["message"] = c.message;
      v["lastTransitionTime"] = kube::format_rfc3339(std::chrono::system_clock::now());
      list.push_back(std::move(v));
    }
    m["status"]["conditions"] = std::move(list);
    client_.update_status(mpijobs(), m);
  }

  kube::Client& client_;
  std::string ns_;
  std::mutex mu_;
  std::set<std::string> launched_;
  std::set<std::string> uids_;
  std::atomic<bool> paused_{false};
  std::atomic<bool> hold_{false};
  std::jthread thread_;  // last: stopped and joined before the members it uses go
};

// Where the cluster serves kubeflow.org/v2beta1 MPIJob (certify.launcher=auto), a multi-node
// group of an MPI-style catalog workload runs as an MPIJob and is judged from its launcher,
// and single-node tests stay Jobs: a diagnose run over both finds the degraded node, with the
// controller killed while MPIJobs run. The CRD
// goes and the controller restarts without it afterwards, for the tests that follow.
TEST_F(CertifyIT, MultiNodeGroupsRunAsMpiJobsWhereTheClusterServesThem) {
  const std::string crd =
      std::string(GPUFLEET_SOURCE_DIR) + "/tests/integration/certify/testdata/mpijob-crd.yaml";
  ASSERT_EQ(kube::testing::run_command(kubectl() + " apply -f " + crd + " >/dev/null"), 0);
  struct Restore {
    ~Restore() {
      kube::testing::run_command(kubectl() +
                                 " delete crd mpijobs.kubeflow.org --wait=true >/dev/null 2>&1");
      eventually(
          [] {
            client_->invalidate_discovery();
            for (const auto& gv : client_->server_group_versions())
              if (gv == "kubeflow.org/v2beta1") return false;
            return true;
          },
          30s);
      delete controller_;
      controller_ = nullptr;
      start_controller();
    }
  } restore;
  ASSERT_EQ(
      kube::testing::run_command(kubectl() + " wait --for=condition=Established --timeout=30s "
                                             "crd/mpijobs.kubeflow.org >/dev/null"),
      0);
  ASSERT_TRUE(eventually(
      [] {
        client_->invalidate_discovery();
        for (const auto& gv : client_->server_group_versions())
          if (gv == "kubeflow.org/v2beta1") return true;
        return false;
      },
      30s));
  delete controller_;  // the launcher is chosen at start-up, from discovery
  controller_ = nullptr;
  start_controller({"certify.overdue-grace=1s"});
  PlayedMpiOperator mpi_operator(*client_, ns());

  // Every Job in the namespace: certify's own must all be single-node (multi-node groups are
  // MPIJobs, whose launcher Jobs the played operator makes).
  std::mutex mu;
  std::map<std::string, std::int64_t> job_completions;
  kube::InformerOptions io;
  io.resource = kube::resources::jobs();
  io.namespace_ = ns();
  kube::Informer informer(*client_, io);
  kube::EventHandlers h;
  h.on_add = [&](const core::Value& o) {
    std::lock_guard l(mu);
    const core::Value* c = o.get({"spec", "completions"});
    job_completions[std::string(kube::name_of(o))] = c != nullptr && c->is_int() ? c->as_int() : 1;
  };
  informer.add_handlers(h);
  informer.start();

  sim_->inject(sim::parse_event(
      core::parse_yaml("{node: " + node(21) + ", type: networkDegraded, factor: 0.5}"), "itest",
      "event", false));
  std::vector<int> nodes;
  for (int i = 16; i < 24; ++i) nodes.push_back(i);
  create(resources::certifications(),
         certification("mpi", nodes, R"Y([{name: communication/nccl-all-reduce, scale: diagnose,
            thresholds: {busBandwidthGBps: "value >= 300.0"}}])Y"));
  // Killed while MPIJobs run: the restarted controller finds them in its MPIJob cache and
  // follows them, creating none again.
  ASSERT_TRUE(eventually([&] { return !mpi_operator.launched().empty(); }, 60s));
  controller_->signal(SIGKILL);
  controller_->wait(10s);
  delete controller_;
  controller_ = nullptr;
  start_controller({"certify.overdue-grace=1s"});
  core::Value done = finished(resources::certifications(), "mpi", 120s);
  sim_->inject(sim::parse_event(core::parse_yaml("{node: " + node(21) + ", type: clear}"), "itest",
                                "event", false));
  EXPECT_EQ(failed_reasons(done),
            (std::map<std::string, std::string>{{node(21), "ThresholdViolated"}}))
      << core::to_json(done);
  informer.stop();

  const std::set<std::string> launched = mpi_operator.launched();
  EXPECT_FALSE(launched.empty()) << "no group ran as an MPIJob";
  {
    std::lock_guard l(mu);
    for (const auto& [name, completions] : job_completions) {
      if (name.ends_with("-launcher")) {
        EXPECT_TRUE(launched.count(name.substr(0, name.size() - 9)) > 0) << name;
        continue;
      }
      EXPECT_EQ(completions, 1) << name << ": a multi-node group ran as an indexed Job";
    }
  }
  // Recorded groups' MPIJobs are deleted (and with them, by owner, the launcher and workers).
  EXPECT_TRUE(eventually([&] { return client_->list(mpijobs(), ns()).items.empty(); }, 30s));
  auto st = read_category(*client_, ns(), "mpi", 0);
  ASSERT_TRUE(st.has_value());
  std::size_t multi = 0;
  for (const auto& g : st->groups) multi += g.nodes.size() > 1 ? 1 : 0;
  EXPECT_EQ(launched.size(), multi) << "one MPIJob per multi-node group test";
  EXPECT_EQ(mpi_operator.objects_seen(), multi) << "a group's MPIJob was created again";

  // An MPIJob taken up whose launcher never starts (workers never all Ready): past its
  // deadline + the grace the group is Infrastructure, saying so.
  mpi_operator.hold_launchers();
  create(resources::certifications(),
         certification("mpi-held", {26, 27}, R"Y([{name: communication/nccl-all-reduce,
            scale: wholeSet, timeout: 2s}])Y"));
  core::Value held = finished(resources::certifications(), "mpi-held", 60s);
  EXPECT_EQ(failed_reasons(held), (std::map<std::string, std::string>{
                                      {node(26), "Infrastructure"}, {node(27), "Infrastructure"}}))
      << core::to_json(held);
  auto held_results = read_node_results(*client_, ns(), "mpi-held", 1);
  ASSERT_EQ(held_results.size(), 2u);
  EXPECT_THAT(held_results[0].message, HasSubstr("started no launcher"));

  // No operator acting (none installed, or down): an MPIJob never gets a condition. Past its
  // deadline + the grace (2 s + 1 s here) the group is Infrastructure, retried once (the
  // template's retries) and then reported with what to check.
  mpi_operator.pause();
  create(resources::certifications(),
         certification("mpi-nobody", {24, 25}, R"Y([{name: communication/nccl-all-reduce,
            scale: wholeSet, timeout: 2s}])Y"));
  core::Value nobody = finished(resources::certifications(), "mpi-nobody", 60s);
  EXPECT_EQ(failed_reasons(nobody),
            (std::map<std::string, std::string>{{node(24), "Infrastructure"},
                                                {node(25), "Infrastructure"}}))
      << core::to_json(nobody);
  auto results = read_node_results(*client_, ns(), "mpi-nobody", 1);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_THAT(results[0].message, HasSubstr("is the mpi-operator running?"));
  EXPECT_THAT(results[0].message, HasSubstr("attempt 2 of 2"));
  EXPECT_EQ(mpi_operator.launched().size(), launched.size()) << "the paused operator acted";
}

}  // namespace
}  // namespace gpufleet::certify
