// The simulator against the real kube-local control plane ($KUBECONFIG): registration and
// heartbeats past the node-monitor grace period, Jobs, evictions under a PDB, reboots, Xids on
// the kmsg stream, an NCCL pod group over a degraded node, and a 1,000-node fleet.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <thread>

#include "core/yaml.h"
#include "kube/client.h"
#include "kube/config.h"
#include "sim/atomic_file.h"
#include "sim/kubelet/fleet_kubelet.h"
#include "sim/scenario.h"

namespace gpufleet::sim {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kRun = std::to_string(::getpid());

bool eventually(const std::function<bool()>& check, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (check()) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(250ms);
  }
  return check();
}

FleetSpec fleet_of(const std::string& name, const std::string& pool, int count) {
  std::string yaml = "apiVersion: gpufleet.io/v1alpha1\nkind: Fleet\nmetadata: {name: " + name +
                     "}\nspec:\n  seed: 11\n  pools:\n  - name: " + pool +
                     "\n    count: " + std::to_string(count) +
                     "\n    namePattern: \"{pool}-{index:04}\"\n    gpu: {product: h100}\n";
  return parse_fleet(core::parse_yaml(yaml), "itest");
}

std::string ready_status(const core::Value& node) {
  const core::Value* conds = node.get({"status", "conditions"});
  if (conds == nullptr) return "";
  for (const auto& c : conds->as_list()) {
    if (c.get_string({"type"}) == "Ready") return std::string(c.get_string({"status"}));
  }
  return "";
}

kube::ListOptions selector(const std::string& labels) {
  kube::ListOptions o;
  o.label_selector = labels;
  return o;
}

SimEvent event(const std::string& yaml) {
  return parse_event(core::parse_yaml(yaml), "itest", "event", false);
}

class SimFleet : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    client_ = new kube::Client(kube::load_default_config());
    state_dir_ = (std::filesystem::temp_directory_path() / ("sim-it-" + kRun)).string();
    fleet_name_ = "it" + kRun;
    pool_ = "s" + kRun;
    KubeletOptions o;
    o.state_dir = state_dir_;
    o.lease_renew = 5s;
    o.status_report = 60s;
    o.tick = 200ms;
    sim_ = new FleetKubelet(*client_, fleet_of(fleet_name_, pool_, 100), BehaviourTable::defaults(),
                            o);
    sim_->start();
    ASSERT_TRUE(sim_->wait_registered(120s));
    registered_at_ = std::chrono::steady_clock::now();
    ns_ = "sim-it-" + kRun;
    core::Value ns;
    ns["apiVersion"] = "v1";
    ns["kind"] = "Namespace";
    ns["metadata"]["name"] = ns_;
    client_->create(kube::resources::namespaces(), ns);
  }
  static void TearDownTestSuite() {
    try {
      client_->remove(kube::resources::namespaces(), "", ns_);
    } catch (const std::exception&) {
    }
    sim_->stop(true);
    delete sim_;
    delete client_;
    std::filesystem::remove_all(state_dir_);
  }
  static std::string node(int i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s-%04d", pool_.c_str(), i);
    return buf;
  }
  static core::Value get_pod(const std::string& name) {
    return client_->get(kube::resources::pods(), ns_, name);
  }

  static kube::Client* client_;
  static FleetKubelet* sim_;
  static std::string state_dir_, fleet_name_, pool_, ns_;
  static std::chrono::steady_clock::time_point registered_at_;
};

kube::Client* SimFleet::client_ = nullptr;
FleetKubelet* SimFleet::sim_ = nullptr;
std::string SimFleet::state_dir_, SimFleet::fleet_name_, SimFleet::pool_, SimFleet::ns_;
std::chrono::steady_clock::time_point SimFleet::registered_at_;

TEST_F(SimFleet, JobPodsRunToCompletionWithTheScriptedMessage) {
  core::Value job = core::parse_yaml(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        sim.gpufleet.io/duration: 2s
        sim.gpufleet.io/termination-message: "trained 3 epochs, loss 0.41"
    spec:
      restartPolicy: Never
      containers:
      - {name: trainer, image: example.com/trainer:1}
)");
  job["metadata"]["namespace"] = ns_;
  job["spec"]["template"]["spec"]["nodeSelector"]["gpufleet.io/fleet"] = fleet_name_;
  client_->create(kube::resources::jobs(), job);
  ASSERT_TRUE(eventually(
      [&] {
        core::Value j = client_->get(kube::resources::jobs(), ns_, "train");
        const core::Value* s = j.get({"status", "succeeded"});
        return s != nullptr && s->as_int() == 1;
      },
      90s));
  auto pods = client_->list(kube::resources::pods(), ns_, selector("job-name=train"));
  ASSERT_EQ(pods.items.size(), 1u);
  const core::Value& p = pods.items[0];
  EXPECT_EQ(p.get_string({"status", "phase"}), "Succeeded");
  const core::Value& c = p.get({"status", "containerStatuses"})->as_list()[0];
  EXPECT_EQ(c.get_string({"state", "terminated", "message"}), "trained 3 epochs, loss 0.41");
  EXPECT_EQ(c.get_string({"state", "terminated", "reason"}), "Completed");
  EXPECT_THAT(std::string(p.get_string({"spec", "nodeName"})), HasSubstr(pool_));
  EXPECT_FALSE(p.get_string({"status", "podIP"}).empty());
}

TEST_F(SimFleet, EvictionIsRefusedOrAllowedAsThePdbDecides) {
  core::Value pod = core::parse_yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: guarded, labels: {app: guarded}}
spec:
  terminationGracePeriodSeconds: 5
  containers: [{name: server, image: example.com/server:1}]
)");
  pod["metadata"]["namespace"] = ns_;
  pod["spec"]["nodeName"] = node(10);
  client_->create(kube::resources::pods(), pod);
  ASSERT_TRUE(eventually(
      [&] {
        return get_pod("guarded").get_string({"status", "phase"}) == "Running";
      },
      30s));
  core::Value pdb = core::parse_yaml(R"(
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: guarded}}
)");
  pdb["metadata"]["namespace"] = ns_;
  client_->create(kube::resources::pod_disruption_budgets(), pdb);
  ASSERT_TRUE(eventually(
      [&] {
        core::Value p = client_->get(kube::resources::pod_disruption_budgets(), ns_, "guarded");
        const core::Value* healthy = p.get({"status", "currentHealthy"});
        return healthy != nullptr && healthy->as_int() == 1;
      },
      60s));
  try {
    client_->evict(ns_, "guarded");
    FAIL() << "the PDB should have refused the eviction";
  } catch (const kube::ApiError& e) {
    EXPECT_TRUE(e.is(kube::Reason::EvictionBlocked) || e.is(kube::Reason::TooManyRequests))
        << e.what();
  }
  // Allow one disruption: the eviction goes through and the kubelet finishes the deletion.
  core::Value patch;
  patch["spec"]["minAvailable"] = 0;
  client_->patch(kube::resources::pod_disruption_budgets(), ns_, "guarded", kube::PatchType::Merge,
                 patch);
  ASSERT_TRUE(eventually(
      [&] {
        core::Value p = client_->get(kube::resources::pod_disruption_budgets(), ns_, "guarded");
        const core::Value* allowed = p.get({"status", "disruptionsAllowed"});
        return allowed != nullptr && allowed->as_int() == 1;
      },
      60s));
  client_->evict(ns_, "guarded");
  EXPECT_TRUE(
      eventually([&] { return !client_->try_get(kube::resources::pods(), ns_, "guarded"); }, 30s));
}

TEST_F(SimFleet, RebootFlipsReadyAndTheBootId) {
  std::string name = node(20);
  core::Value before = client_->get(kube::resources::nodes(), "", name);
  std::string boot = std::string(before.get_string({"status", "nodeInfo", "bootID"}));
  ASSERT_EQ(boot, sim_->boot_id_of(name));
  sim_->inject(event("{node: " + name + ", type: reboot, down: 4s}"));
  ASSERT_TRUE(eventually(
      [&] { return ready_status(client_->get(kube::resources::nodes(), "", name)) == "False"; },
      15s));
  ASSERT_TRUE(eventually(
      [&] {
        core::Value n = client_->get(kube::resources::nodes(), "", name);
        return ready_status(n) == "True" && n.get_string({"status", "nodeInfo", "bootID"}) != boot;
      },
      30s));
  EXPECT_EQ(
      client_->get(kube::resources::nodes(), "", name).get_string({"status", "nodeInfo", "bootID"}),
      sim_->boot_id_of(name));
}

TEST_F(SimFleet, InjectedXidAppearsOnTheKmsgStream) {
  std::string name = node(30);
  sim_->inject(
      event("{node: " + name + ", type: xid, gpu: 3, code: 79, pid: 4242, process: python3}"));
  std::string path = state_dir_ + "/nodes/" + name + "/dev/kmsg";
  std::string text;
  ASSERT_TRUE(eventually(
      [&] {
        text = read_text_file(path);
        return text.find("Xid") != std::string::npos;
      },
      30s));
  EXPECT_THAT(text, HasSubstr(",-;NVRM: Xid (PCI:0000:5d:00): 79, pid=4242, name=python3, GPU has "
                              "fallen off the bus.\n"));
  EXPECT_THAT(text, HasSubstr("NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from "
                              "0x0 (None) to 0x2 (Node Reboot Required)"));
  // The GPU that fell off is no longer allocatable.
  EXPECT_TRUE(eventually(
      [&] {
        core::Value n = client_->get(kube::resources::nodes(), "", name);
        return n.get_string({"status", "allocatable", "nvidia.com/gpu"}) == "7" &&
               n.get_string({"status", "capacity", "nvidia.com/gpu"}) == "8";
      },
      15s));
}

double largest_busbw(const std::string& output) {
  std::istringstream in(output);
  std::string line;
  double bus = -1;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string size, count, type, op, root, time, algbw, busbw;
    if (f >> size >> count >> type >> op >> root >> time >> algbw >> busbw) bus = std::stod(busbw);
  }
  return bus;
}

TEST_F(SimFleet, NcclPodGroupReflectsADegradedNode) {
  auto run_group = [&](const std::string& tag, int first) {
    std::string hosts;
    for (int i = 0; i < 4; ++i) hosts += (i ? "," : "") + node(first + i);
    for (int i = 0; i < 4; ++i) {
      core::Value pod = core::parse_yaml(R"(
apiVersion: v1
kind: Pod
spec:
  restartPolicy: Never
  containers:
  - name: nccl
    image: ghcr.io/example/nccl-tests:2.17
    command: [all_reduce_perf, -b, "8", -e, 1G, -f, "2", -g, "1"]
)");
      pod["metadata"]["name"] = tag + "-" + std::to_string(i);
      pod["metadata"]["namespace"] = ns_;
      pod["metadata"]["annotations"]["sim.gpufleet.io/nccl-hosts"] = hosts;
      pod["spec"]["nodeName"] = node(first + i);
      client_->create(kube::resources::pods(), pod);
    }
    std::string message;
    EXPECT_TRUE(eventually(
        [&] {
          core::Value p = get_pod(tag + "-0");
          if (p.get_string({"status", "phase"}) != "Succeeded") return false;
          message = std::string(p.get({"status", "containerStatuses"})
                                    ->as_list()[0]
                                    .get_string({"state", "terminated", "message"}));
          return true;
        },
        60s));
    return message;
  };
  std::string healthy = run_group("healthy", 40);
  sim_->inject(event("{node: " + node(52) + ", type: networkDegraded, factor: 0.5}"));
  std::string degraded = run_group("degraded", 50);
  EXPECT_THAT(healthy, HasSubstr("# Collective test concluded: all_reduce_perf"));
  EXPECT_THAT(degraded, HasSubstr("# Collective test concluded: all_reduce_perf"));
  double good = largest_busbw(healthy);
  double bad = largest_busbw(degraded);
  EXPECT_GT(good, 200.0);
  EXPECT_NEAR(bad / good, 0.5, 0.08) << healthy << "\n---\n" << degraded;
}

// Last in the suite: by now the fleet has been up for longer than kube-local's
// node-monitor grace period (40 s), and every node must still be Ready.
TEST_F(SimFleet, HundredNodesStayReadyPastTheNodeMonitorGracePeriod) {
  auto since = std::chrono::steady_clock::now() - registered_at_;
  if (since < 50s) std::this_thread::sleep_for(50s - since);
  auto nodes =
      client_->list(kube::resources::nodes(), "", selector("gpufleet.io/fleet=" + fleet_name_));
  ASSERT_EQ(nodes.items.size(), 100u);
  for (const auto& n : nodes.items) {
    EXPECT_EQ(ready_status(n), "True") << kube::name_of(n);
    if (const core::Value* taints = n.get({"spec", "taints"})) {
      for (const auto& t : taints->as_list()) {
        EXPECT_NE(t.get_string({"key"}), "node.kubernetes.io/unreachable") << kube::name_of(n);
      }
    }
  }
  auto leases = client_->list(kube::resources::leases(), "kube-node-lease");
  int ours = 0;
  for (const auto& l : leases.items) ours += kube::name_of(l).rfind(pool_, 0) == 0 ? 1 : 0;
  EXPECT_EQ(ours, 100);
}

TEST(SimThousand, AThousandNodeFleetComesUpAndGoesAwayCleanly) {
  kube::ClientConfig config = kube::load_default_config();
  config.qps = 400;  // one client speaks for 1,000 kubelets (as gpufleet sim sizes it)
  config.burst = 400;
  kube::Client client(std::move(config));
  std::string fleet = "k" + kRun;
  KubeletOptions o;
  o.workers = 16;
  FleetKubelet sim(client, fleet_of(fleet, "t" + kRun, 1000), BehaviourTable::defaults(), o);
  sim.start();
  ASSERT_TRUE(sim.wait_registered(300s));
  std::string sel = "gpufleet.io/fleet=" + fleet;
  ASSERT_TRUE(eventually(
      [&] {
        auto nodes = client.list(kube::resources::nodes(), "", selector(sel));
        int ready = 0;
        for (const auto& n : nodes.items) ready += ready_status(n) == "True" ? 1 : 0;
        return ready == 1000;
      },
      120s));
  sim.stop(true);
  auto left = client.list(kube::resources::nodes(), "", selector(sel));
  EXPECT_EQ(left.items.size(), 0u);
  auto leases = client.list(kube::resources::leases(), "kube-node-lease");
  for (const auto& l : leases.items) EXPECT_NE(kube::name_of(l).rfind("t" + kRun, 0), 0u);
}

}  // namespace
}  // namespace gpufleet::sim
