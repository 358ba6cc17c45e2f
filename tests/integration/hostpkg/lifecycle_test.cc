// hostpkg set lifecycle on kube-local + the simulator: protected pods waited for (and named
// past the deadline), pause and disable, exponential batches, the runtime-required taint
// lifted when done, upgrade vs downgrade, and set deletion (uninstall what supports it, keep
// the records).
#include <gtest/gtest.h>

#include <thread>

#include "core/json.h"
#include "core/yaml.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg_env.h"
#include "kube/api/objects.h"
#include "kube/errors.h"
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

bool phase_is(HostPkgEnv& env, const std::string& set, const std::string& phase) {
  return env.get_set(set).get_string({"status", "phase"}) == phase;
}

std::string dump(HostPkgEnv& env, const std::string& set) {
  core::Value s = env.get_set(set);
  const core::Value* st = s.get({"status"});
  return st != nullptr ? core::to_json(*st) : "(no status)";
}

// A protected pod holds its node: the node waits (no eviction), past waitTimeout the set is
// Blocked naming the pod; once the pod is gone the node proceeds.
TEST(HostPkgLifecycle, ProtectedPodWaitedFor) {
  HostPkgEnv env(1);
  kube::Client& c = env.client();
  const std::string ns = env.stage_namespace();
  core::Value pod = core::parse_yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: training, labels: {app: training}}\nspec:\n"
      "  nodeName: " +
      env.node(0) + "\n  containers: [{name: c, image: busybox:1.36}]\n");
  pod["metadata"]["namespace"] = ns;
  c.create(kube::resources::pods(), pod);
  env.apply(
      set_yaml("protect", env.node_list(0, 1),
               "  protectedPods: {selector: {matchLabels: {app: training}}, waitTimeout: 1s}\n",
               "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        Cond b = condition(env.get_set("protect"), "Blocked");
        return b.reason == "ProtectedPods" && b.message.find(ns + "/training") != std::string::npos;
      },
      30s))
      << dump(env, "protect");
  EXPECT_TRUE(c.try_get(kube::resources::pods(), ns, "training").has_value())
      << "a protected pod was evicted";
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(env.node(0))));
  c.remove(kube::resources::pods(), ns, "training");
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "protect", "Complete"); }, 30s))
      << dump(env, "protect");
  env.remove_set("protect");
}

// pause: nothing starts (status Paused); unpaused it completes. disable: the set is ignored.
TEST(HostPkgLifecycle, PauseAndDisable) {
  HostPkgEnv env(2);
  env.apply(set_yaml("paused", env.node_list(0, 2), "  pause: true\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "paused", "Paused"); }, 20s))
      << dump(env, "paused");
  std::this_thread::sleep_for(1s);
  EXPECT_FALSE(read_record(env.get_node(env.node(0)), "paused").record.has_value());
  env.apply(set_yaml("paused", env.node_list(0, 2), "  disable: true\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "paused", "Disabled"); }, 20s));
  EXPECT_FALSE(read_record(env.get_node(env.node(1)), "paused").record.has_value());
  env.apply(set_yaml("paused", env.node_list(0, 2), "",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "paused", "Complete"); }, 40s))
      << dump(env, "paused");
  // Pausing a finished set shows at once: phase Paused and Paused=True.
  env.apply(set_yaml("paused", env.node_list(0, 2), "  pause: true\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        core::Value s = env.get_set("paused");
        return s.get_string({"status", "phase"}) == "Paused" &&
               condition(s, "Paused").status == "True";
      },
      10s))
      << dump(env, "paused");
  env.remove_set("paused");
}

// Exponential batches 1, 2, 4 over 7 nodes (budget 4): the records carry the batch each node
// was started in.
TEST(HostPkgLifecycle, ExponentialBatches) {
  HostPkgEnv env(7);
  env.apply(
      "apiVersion: gpufleet.io/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: expo}\nspec:\n"
      "  default:\n    budget: {count: 4}\n    strategy: {exponential: {initialBatch: 1, "
      "growthFactor: 2}}\n");
  env.apply(set_yaml("expo", env.node_list(0, 7), "  deploymentPolicy: expo\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "expo", "Complete"); }, 120s))
      << dump(env, "expo");
  std::map<std::int64_t, int> per_batch;
  for (int i = 0; i < 7; ++i) {
    RecordRead rr = read_record(env.get_node(env.node(i)), "expo");
    ASSERT_TRUE(rr.record) << rr.error;
    ++per_batch[rr.record->batch];
  }
  EXPECT_EQ(per_batch, (std::map<std::int64_t, int>{{0, 1}, {1, 2}, {2, 4}}));
  env.remove_set("expo");
}

// runtimeRequired: the gpufleet.io/runtime-required taint comes off a node once the set is
// done there (and stays on a node the set does not finish).
TEST(HostPkgLifecycle, RuntimeRequiredTaintRemovedWhenDone) {
  HostPkgEnv env(2);
  for (int i = 0; i < 2; ++i) {
    core::Value patch = core::parse_yaml(
        "spec: {taints: [{key: gpufleet.io/runtime-required, effect: NoSchedule}]}");
    env.client().patch(kube::resources::nodes(), "", env.node(i), kube::PatchType::Merge, patch);
  }
  env.apply(set_yaml("runtime", env.node_list(0, 1), "  runtimeRequired: true\n",
                     "    p:\n      version: 1.0.0\n      image: example.com/p\n"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return !kube::node::has_taint(env.get_node(env.node(0)), "gpufleet.io/runtime-required");
      },
      40s))
      << dump(env, "runtime");
  EXPECT_TRUE(kube::node::has_taint(env.get_node(env.node(1)), "gpufleet.io/runtime-required"));
  env.remove_set("runtime");
}

// Upgrade, then downgrade with uninstallFirst, then deletion: the finalizer uninstalls what
// supports it and the records stay on the Nodes.
TEST(HostPkgLifecycle, UpgradeDowngradeAndDeletion) {
  HostPkgEnv env(1);
  const std::string n = env.node(0);
  auto pkgs = [](const std::string& v) {
    return "    p:\n      version: " + v +
           "\n      image: example.com/p\n      uninstall: {supported: true}\n"
           "      downgrade: uninstallFirst\n"
           "    q:\n      version: 1.0.0\n      image: example.com/q\n";
  };
  auto version_on_host = [&] { return env.sim().host_read(n, "/etc/pkgtest/version"); };
  env.apply(set_yaml("life", env.node_list(0, 1), "", pkgs("1.0.0")));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "life", "Complete"); }, 30s));
  env.apply(set_yaml("life", env.node_list(0, 1), "", pkgs("1.2.0")));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return phase_is(env, "life", "Complete") && version_on_host() == "1.2.0"; }, 30s))
      << dump(env, "life");
  auto history = env.sim().host_read(n, sim::kHostStepHistory).value_or("");
  EXPECT_NE(history.find("p/upgrade/1.2.0"), std::string::npos) << history;
  env.apply(set_yaml("life", env.node_list(0, 1), "", pkgs("1.1.0")));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return phase_is(env, "life", "Complete") && version_on_host() == "1.1.0"; }, 30s))
      << dump(env, "life");
  history = env.sim().host_read(n, sim::kHostStepHistory).value_or("");
  auto un = history.find("p/uninstall/1.2.0");
  EXPECT_NE(un, std::string::npos) << history;
  EXPECT_LT(un, history.find("p/apply/1.1.0")) << "uninstall first: " << history;

  env.remove_set("life");
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        try {
          env.get_set("life");
          return false;
        } catch (const kube::ApiError& e) {
          return e.is(kube::Reason::NotFound);
        }
      },
      40s));
  EXPECT_FALSE(version_on_host().has_value()) << "p supports uninstall: removed";
  RecordRead rr = read_record(env.get_node(n), "life");
  ASSERT_TRUE(rr.record) << "the record outlives the set";
  EXPECT_FALSE(rr.record->installed.contains("p"));
  EXPECT_TRUE(rr.record->installed.contains("q")) << "q cannot uninstall: kept on record";
  EXPECT_FALSE(kube::node::unschedulable(env.get_node(n)));
}

// priority + sequencing node: a later set starts on a node only once the earlier set is done
// there, so the earlier set's package always runs first on every node.
TEST(HostPkgLifecycle, PriorityGatesLaterSetPerNode) {
  HostPkgEnv env(2);
  auto early = [&](const std::string& extra) {
    env.apply(set_yaml("early", env.node_list(0, 2), "  priority: 10\n" + extra,
                       "    a:\n      version: 1.0.0\n      image: example.com/a\n"
                       "      interrupt: {type: restartServices, services: [a.service]}\n"));
  };
  early("  pause: true\n");  // the earlier set exists but holds still
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_is(env, "early", "Paused"); }, 20s));
  env.apply(set_yaml("late", env.node_list(0, 2), "  priority: 20\n",
                     "    b:\n      version: 1.0.0\n      image: example.com/b\n"));
  std::this_thread::sleep_for(3s);
  for (int i = 0; i < 2; ++i)
    EXPECT_FALSE(read_record(env.get_node(env.node(i)), "late").record.has_value())
        << "the later set started before the earlier one was done on " << env.node(i);
  early("");
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return phase_is(env, "early", "Complete") && phase_is(env, "late", "Complete"); },
      120s))
      << dump(env, "early") << "\n"
      << dump(env, "late");
  for (int i = 0; i < 2; ++i) {
    std::string history = env.sim().host_read(env.node(i), sim::kHostStepHistory).value_or("");
    auto a = history.find("a/apply/"), b = history.find("b/apply/");
    ASSERT_NE(a, std::string::npos) << history;
    ASSERT_NE(b, std::string::npos) << history;
    EXPECT_LT(a, b) << "the later set ran first on " << env.node(i) << ": " << history;
  }
  env.remove_set("late");
  env.remove_set("early");
}

}  // namespace
}  // namespace gpufleet::hostpkg::testing
