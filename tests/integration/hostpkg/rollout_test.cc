// hostpkg rollouts end to end on kube-local + the simulator: batches within budget, a reboot
// delivered once and verified by boot ID, dependsOn order, config-only changes, someone
// else's cordon, PDB-blocked drains, protected pods, failure threshold and reset, pause,
// disable and set deletion.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "core/json.h"
#include "core/metrics.h"
#include "core/yaml.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg_env.h"
#include "kube/api/conditions.h"
#include "kube/api/cordon.h"
#include "kube/api/objects.h"
#include "sim/host_step.h"

namespace gpufleet::hostpkg::testing {
namespace {

using namespace std::chrono_literals;

std::string set_yaml(const std::string& name, const std::string& nodes, const std::string& extra,
                     const std::string& packages) {
  return "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
         "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
         "operator: In, values: " +
         nodes + "}\n" + extra + "  packages:\n" + packages;
}

std::string policy_yaml(const std::string& name, const std::string& budget,
                        const std::string& strategy) {
  return "apiVersion: gpufleet.io/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: " + name +
         "}\nspec:\n  default:\n    budget: " + budget + "\n    strategy: " + strategy + "\n";
}

bool phase_is(HostPkgEnv& env, const std::string& set, const std::string& phase) {
  return env.get_set(set).get_string({"status", "phase"}) == phase;
}

int count_lines(const std::optional<std::string>& text, const std::string& needle) {
  if (!text) return 0;
  int n = 0;
  for (std::size_t pos = text->find(needle); pos != std::string::npos;
       pos = text->find(needle, pos + 1))
    ++n;
  return n;
}

// Samples the fleet while a rollout runs: the most nodes cordoned at once.
class CordonWatch {
 public:
  CordonWatch(HostPkgEnv& env, std::vector<std::string> nodes)
      : env_(env), nodes_(std::move(nodes)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        int n = 0;
        for (const auto& name : nodes_) {
          try {
            if (kube::node::unschedulable(env_.get_node(name))) ++n;
          } catch (const std::exception&) {
          }
        }
        max_ = std::max(max_.load(), n);
        std::this_thread::sleep_for(50ms);
      }
    });
  }
  ~CordonWatch() { stop(); }
  int stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return max_;
  }

 private:
  HostPkgEnv& env_;
  std::vector<std::string> nodes_;
  std::atomic<bool> stop_{false};
  std::atomic<int> max_{0};
  std::thread thread_;
};

// Four nodes, budget 2, a package that needs a reboot and another that depends on it: every
// node is rebooted exactly once (boot ID changed, one interrupt in its history), the
// packages ran in dependsOn order, at most two nodes were ever cordoned, none is left
// cordoned, the status is a complete progress view.
TEST(HostPkgRollout, RebootOnceInBudgetInDependsOnOrder) {
  HostPkgEnv env(4);
  std::vector<std::string> nodes;
  std::map<std::string, std::string> boot;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(env.node(i));
    boot[env.node(i)] = env.sim().boot_id_of(env.node(i));
  }
  env.apply(policy_yaml("two-at-a-time", "{count: 2}", "{fixed: {initialBatch: 2}}"));
  CordonWatch watch(env, nodes);
  env.apply(set_yaml("kernel", env.node_list(0, 4), "  deploymentPolicy: two-at-a-time\n",
                     "    tuning:\n      version: 1.0.0\n      image: example.com/tuning\n"
                     "      dependsOn: [base]\n      interrupt: {type: reboot}\n"
                     "    base:\n      version: 2.1.0\n      image: example.com/base\n"
                     "      interrupt: {type: restartServices, services: [a.service]}\n"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "kernel", "Complete"); }, 120s))
      << core::to_json(env.get_set("kernel").get({"status"})
                           ? *env.get_set("kernel").get({"status"})
                           : core::Value());
  EXPECT_LE(watch.stop(), 2) << "more nodes out at once than the budget";
  core::Value set = env.get_set("kernel");
  EXPECT_EQ(set.get_string({"status", "progress"}), "4/4");
  EXPECT_EQ(condition(set, "Ready").status, "True");
  EXPECT_EQ(condition(set, "Progressing").status, "False");
  EXPECT_EQ(condition(set, "Stopped").status, "False");
  for (const auto& n : nodes) {
    SCOPED_TRACE(n);
    core::Value node = env.get_node(n);
    EXPECT_FALSE(kube::node::unschedulable(node)) << "left cordoned";
    EXPECT_NE(env.sim().boot_id_of(n), boot[n]) << "not rebooted";
    auto history = env.sim().host_read(n, sim::kHostStepHistory);
    ASSERT_TRUE(history);
    // One interrupt for the change (the reboot subsumes base's service restart).
    EXPECT_EQ(count_lines(history, "/interrupt/"), 1) << *history;
    EXPECT_EQ(count_lines(env.sim().host_read(n, sim::kHostStepRestarts), "restart"), 0);
    // dependsOn: base applied before tuning.
    EXPECT_LT(history->find("base/apply/"), history->find("tuning/apply/")) << *history;
    EXPECT_EQ(env.sim().host_read(n, "/proc/sys/vm/max_map_count").value_or(""), "1048576\n");
    RecordRead rr = read_record(node, "kernel");
    ASSERT_TRUE(rr.record) << rr.error;
    EXPECT_EQ(rr.record->state, NodeState::Done);
    EXPECT_EQ(rr.record->installed.at("tuning").version, "1.0.0");
  }

  env.remove_set("kernel");
}

// The controller's API writes for a four-stage package (apply, config, restartServices
// interrupt, post-interrupt), counted by gpufleet_hostpkg_api_writes_total (every create,
// patch, eviction and delete the controller sends is counted there, by kind, before it is
// sent; a refused one counts too). Per node: start (record + cordon), 4 stage pods, 3 step
// records, done (last step + record + uncordon), one collection delete of its stage pods — 10;
// the config map is created once per rollout and found in the cache afterwards. The set's
// own writes (finalizer, status) do not grow with the nodes and are left out of the figure.
std::map<std::string, double> hostpkg_writes() {
  std::string text = core::metrics::default_registry().render();
  std::map<std::string, double> out;
  const std::string name = "gpufleet_hostpkg_api_writes_total{kind=\"";
  for (std::size_t pos = text.find(name); pos != std::string::npos;
       pos = text.find(name, pos + 1)) {
    std::size_t k = pos + name.size();
    std::size_t sp = text.find(' ', text.find('}', pos));
    out[text.substr(k, text.find('"', k) - k)] =
        std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
  }
  return out;
}

TEST(HostPkgRollout, WritesPerNodeWithinBound) {
  HostPkgEnv env(4);
  env.apply(policy_yaml("writes-two", "{count: 2}", "{fixed: {initialBatch: 2}}"));
  auto before = hostpkg_writes();
  // The rollout's own writes: validation (on by default for this interrupting package) adds
  // two per node, the last step's record no longer carrying Done and the request's create
  // (12.25 per node measured with it).
  env.apply(set_yaml("writes", env.node_list(0, 4),
                     "  deploymentPolicy: writes-two\n  validation: {when: Never}\n",
                     "    tuning:\n      version: 1.0.0\n      image: example.com/tuning\n"
                     "      configMap: {a.conf: \"x = 1\\n\"}\n"
                     "      interrupt: {type: restartServices, services: [a.service]}\n"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "writes", "Complete"); }, 120s));
  double node_writes = 0;
  std::string by_kind;
  for (const auto& [kind, n] : hostpkg_writes()) {
    double d = n - before[kind];
    by_kind += " " + kind + "=" + std::to_string(static_cast<int>(d));
    if (kind != "status" && kind != "finalizer") node_writes += d;
  }
  for (int i = 0; i < 4; ++i) {
    auto history = env.sim().host_read(env.node(i), sim::kHostStepHistory);
    EXPECT_EQ(count_lines(history, "\n"), 4) << "four stages ran: " << history.value_or("");
  }
  const double per_node = node_writes / 4;
  std::printf("hostpkg node writes: %.0f for 4 nodes (%.2f per node);%s\n", node_writes, per_node,
              by_kind.c_str());
  EXPECT_LE(per_node, 11.0) << by_kind;
  // The stage pods went by collection: none is left.
  EXPECT_TRUE(HostPkgEnv::eventually(
      [&] {
        kube::ListOptions o;
        o.label_selector = "hostpkg.gpufleet.io/set=writes";
        return env.client().list(kube::resources::pods(), env.stage_namespace(), o).items.empty();
      },
      20s));
  env.remove_set("writes");
}

// The hostpkg controller's reconcile calls so far (every result).
double hostpkg_reconciles() {
  std::string text = core::metrics::default_registry().render();
  const std::string name = "gpufleet_controller_reconcile_total{controller=\"hostpkg\"";
  double sum = 0;
  for (std::size_t pos = text.find(name); pos != std::string::npos;
       pos = text.find(name, pos + 1)) {
    std::size_t sp = text.find(' ', text.find('}', pos));
    sum += std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
  }
  return sum;
}

// Node heartbeats and status reports (timestamps, capacity: what kubelets write all the time)
// make no pass — at 5,000 nodes each one was a pass over every node — while a change a pass
// reads (here a label) does.
TEST(HostPkgRollout, NodeHeartbeatsMakeNoPass) {
  HostPkgEnv env(2);
  env.apply(set_yaml("heartbeats", env.node_list(0, 2), "",
                     "    tuning:\n      version: 1.0.0\n      image: example.com/tuning\n"));
  ASSERT_TRUE(
      HostPkgEnv::eventually([&] { return phase_is(env, "heartbeats", "Complete"); }, 120s));
  // Quiet: no reconcile for 2 s (the last pass's own writes have come back).
  double quiet = -1;
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        double before = hostpkg_reconciles();
        std::this_thread::sleep_for(2s);
        quiet = hostpkg_reconciles();
        return quiet == before;
      },
      30s));
  for (int i = 0; i < 10; ++i) {
    std::string now = kube::format_rfc3339(std::chrono::system_clock::now());
    core::Value patch = core::parse_json(
        R"({"status":{"conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":")" + now +
        R"("}],"allocatable":{"ephemeral-storage":")" + std::to_string(1000 + i) + R"(Gi"}}})");
    env.client().patch(kube::resources::nodes(), "", env.node(i % 2),
                       kube::PatchType::StrategicMerge, patch, "status");
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(2s);  // the watch has delivered them
  EXPECT_EQ(hostpkg_reconciles(), quiet) << "a heartbeat made a pass";
  core::Value label = core::parse_json(R"({"metadata":{"labels":{"example.com/touched":"1"}}})");
  env.client().patch(kube::resources::nodes(), "", env.node(0), kube::PatchType::Merge, label);
  EXPECT_TRUE(HostPkgEnv::eventually([&] { return hostpkg_reconciles() > quiet; }, 10s))
      << "a label change made no pass";
  env.remove_set("heartbeats");
}

// A config-only change runs only the config stage and the changed key's interrupt: no
// package re-applied, no reboot, one service restart per node.
TEST(HostPkgRollout, ConfigOnlyChange) {
  HostPkgEnv env(2);
  std::vector<std::string> nodes = {env.node(0), env.node(1)};
  auto packages = [](const std::string& config) {
    return "    tuning:\n      version: 1.0.0\n      image: example.com/tuning\n"
           "      interrupt: {type: reboot}\n" +
           config;
  };
  env.apply(set_yaml("cfg", env.node_list(0, 2), "", packages("")));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "cfg", "Complete"); }, 40s));
  std::map<std::string, std::string> boot2;
  for (const auto& n : nodes) boot2[n] = env.sim().boot_id_of(n);
  env.apply(set_yaml("cfg", env.node_list(0, 2), "",
                     packages("      configMap: {a.conf: \"x = 1\\n\"}\n"
                              "      configInterrupts: {\"*.conf\": {type: restartServices, "
                              "services: [systemd-sysctl.service]}}\n")));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return phase_is(env, "cfg", "Complete") &&
               count_lines(env.sim().host_read(nodes[1], sim::kHostStepHistory), "/config/") > 0;
      },
      40s));
  for (const auto& n : nodes) {
    SCOPED_TRACE(n);
    EXPECT_EQ(env.sim().boot_id_of(n), boot2[n]) << "a config change must not reboot";
    auto restarts = env.sim().host_read(n, sim::kHostStepRestarts);
    EXPECT_EQ(count_lines(restarts, "restartServices systemd-sysctl.service"), 1)
        << restarts.value_or("");
    auto history = env.sim().host_read(n, sim::kHostStepHistory).value_or("");
    EXPECT_EQ(count_lines(history, "/apply/"), 1) << "no package re-applied: " << history;
    EXPECT_EQ(count_lines(history, "/interrupt/"), 2) << history;  // the reboot, the restart
    EXPECT_FALSE(kube::node::unschedulable(env.get_node(n)));
  }
  env.remove_set("cfg");
}

// A node a person cordoned is never taken nor uncordoned; a node sentinel holds counts
// against the budget as the person's does (budget 3, two held: the others go one by one).
TEST(HostPkgRollout, ForeignCordonKeptAndSentinelHoldCounts) {
  HostPkgEnv env(5);
  kube::Client& c = env.client();
  core::Value cordon;
  cordon["spec"]["unschedulable"] = true;
  c.patch(kube::resources::nodes(), "", env.node(0), kube::PatchType::Merge, cordon);
  cordon["metadata"]["annotations"][std::string(kube::kCordonOwnersAnnotation)] = "sentinel";
  c.patch(kube::resources::nodes(), "", env.node(4), kube::PatchType::Merge, cordon);
  std::vector<std::string> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(env.node(i));
  CordonWatch watch(env, nodes);
  env.apply(policy_yaml("three", "{count: 3}", "{fixed: {initialBatch: 3}}"));
  env.apply(set_yaml("foreign", env.node_list(0, 5), "  deploymentPolicy: three\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  // Everything but the held nodes finishes.
  ASSERT_TRUE(
      HostPkgEnv::eventually([&] { return status_int(env.get_set("foreign"), "done") == 3; }, 40s))
      << core::to_json(*env.get_set("foreign").get({"status"}));
  EXPECT_LE(watch.stop(), 3) << "the held nodes count against the budget";
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(env.node(4)))) << "sentinel's cordon";
  EXPECT_EQ(kube::annotation_of(env.get_node(env.node(4)), kube::kCordonOwnersAnnotation),
            "sentinel");
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(env.node(0)))) << "someone else's cordon";
  EXPECT_FALSE(read_record(env.get_node(env.node(0)), "foreign").record.has_value())
      << "a node someone else cordoned was started";
  EXPECT_EQ(kube::annotation_of(env.get_node(env.node(0)), kube::kCordonOwnersAnnotation), "");
  env.remove_set("foreign");
}

// A node with an open sentinel incident is out even while it is schedulable (an incident in
// Detected, before its cordon lands): budget 3 with one such node lets at most 2 of the other
// nodes out at once, and the node is taken only once the incident is closed.
TEST(HostPkgRollout, OpenIncidentCountsWhileUncordoned) {
  HostPkgEnv env(5);
  kube::Client& c = env.client();
  const kube::ResourceId remediations{"gpufleet.io", "v1alpha1", "remediations", false};
  const std::string incident = env.node(4) + "-incident";
  core::Value rem;
  rem["apiVersion"] = "gpufleet.io/v1alpha1";
  rem["kind"] = "Remediation";
  rem["metadata"]["name"] = incident;
  rem["metadata"]["labels"]["sentinel.gpufleet.io/node"] = env.node(4);
  rem["spec"]["nodeName"] = env.node(4);
  rem["spec"]["reason"] = "Fault";
  c.create(remediations, rem);
  std::vector<std::string> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(env.node(i));
  CordonWatch watch(env, nodes);
  env.apply(policy_yaml("three", "{count: 3}", "{fixed: {initialBatch: 3}}"));
  env.apply(set_yaml("incident", env.node_list(0, 5), "  deploymentPolicy: three\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(
      HostPkgEnv::eventually([&] { return status_int(env.get_set("incident"), "done") == 4; }, 40s))
      << core::to_json(*env.get_set("incident").get({"status"}));
  EXPECT_LE(watch.stop(), 2) << "the node with an open incident counts against the budget";
  EXPECT_FALSE(read_record(env.get_node(env.node(4)), "incident").record.has_value())
      << "a node with an open incident was started";
  // Released: the node is free and the rollout finishes.
  core::Value released;
  released["status"]["phase"] = "Released";
  c.patch(remediations, "", incident, kube::PatchType::Merge, released, "status");
  ASSERT_TRUE(
      HostPkgEnv::eventually([&] { return status_int(env.get_set("incident"), "done") == 5; }, 40s))
      << core::to_json(*env.get_set("incident").get({"status"}));
  c.remove(remediations, "", incident);
  env.remove_set("incident");
}

// An eviction a PodDisruptionBudget refuses: DrainBlocked names the PDB; once the budget
// allows it, the drain and the rollout finish.
TEST(HostPkgRollout, PdbBlocksThenAllowsDrain) {
  HostPkgEnv env(2);
  kube::Client& c = env.client();
  const std::string ns = env.stage_namespace();
  core::Value pod = core::parse_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer, labels: {app: trainer}}\nspec:\n"
      "  nodeName: " +
      env.node(0) + "\n  containers: [{name: c, image: busybox:1.36}]\n");
  pod["metadata"]["namespace"] = ns;
  c.create(kube::resources::pods(), pod);
  core::Value pdb = core::parse_yaml(
      "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: keep-trainer}\n"
      "spec: {minAvailable: 1, selector: {matchLabels: {app: trainer}}}\n");
  pdb["metadata"]["namespace"] = ns;
  c.create(kube::resources::pod_disruption_budgets(), pdb);
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return kube::pod::phase(c.get(kube::resources::pods(), ns, "trainer")) == "Running"; },
      20s));
  env.apply(set_yaml("drain", env.node_list(0, 1), "",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        Cond b = condition(env.get_set("drain"), "Blocked");
        return b.status == "True" && b.reason == "DrainBlocked" &&
               b.message.find("PodDisruptionBudget " + ns + "/keep-trainer") != std::string::npos;
      },
      30s))
      << condition(env.get_set("drain"), "Blocked").message;
  c.remove(kube::resources::pod_disruption_budgets(), ns, "keep-trainer");
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "drain", "Complete"); }, 40s));
  EXPECT_EQ(condition(env.get_set("drain"), "Blocked").status, "False");
  EXPECT_FALSE(c.try_get(kube::resources::pods(), ns, "trainer").has_value()) << "not evicted";
  env.remove_set("drain");
}

// A failing check stops the rollout (failureThreshold 1) with the node named, the node stays
// cordoned; raising the reset epoch resumes it and the retry succeeds.
TEST(HostPkgRollout, FailureThresholdStopsAndResetResumes) {
  HostPkgEnv env(3);
  env.apply(policy_yaml("strict", "{count: 1}",
                        "{fixed: {initialBatch: 1, failureThreshold: 1, safetyLimit: 0}}"));
  env.apply(set_yaml("flaky", env.node_list(0, 3), "  deploymentPolicy: strict\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/flaky\n"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "flaky", "Stopped"); }, 30s))
      << core::to_json(*env.get_set("flaky").get({"status"}));
  core::Value set = env.get_set("flaky");
  Cond stopped = condition(set, "Stopped");
  EXPECT_EQ(stopped.status, "True");
  EXPECT_NE(stopped.message.find(env.node(0)), std::string::npos) << stopped.message;
  EXPECT_EQ(status_int(set, "failed"), 1);
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(env.node(0))));
  RecordRead rr = read_record(env.get_node(env.node(0)), "flaky");
  ASSERT_TRUE(rr.record);
  EXPECT_NE(rr.record->failure.find("vm.max_map_count is 65530"), std::string::npos)
      << rr.record->failure;
  // Stopped means stopped: nothing else starts.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(status_int(env.get_set("flaky"), "done"), 0);
  EXPECT_FALSE(read_record(env.get_node(env.node(1)), "flaky").record.has_value());

  core::Value reset;
  reset["metadata"]["annotations"]["hostpkg.gpufleet.io/reset-epoch"] = "1";
  env.client().patch({"gpufleet.io", "v1alpha1", "hostpackagesets", false}, "", "flaky",
                     kube::PatchType::Merge, reset);
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "flaky", "Complete"); }, 40s));
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(kube::node::unschedulable(env.get_node(env.node(i)))) << env.node(i);
  env.remove_set("flaky");
}

}  // namespace
}  // namespace gpufleet::hostpkg::testing
