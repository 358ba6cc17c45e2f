// kill -9 the hostpkg controller (`gpufleet controller --controllers=hostpkg`, a child
// process) again and again at random points of a rollout with reboots, then check the
// invariants: the rollout completes, the budget was never exceeded (sampled from the Nodes all
// along), every node was rebooted exactly once for the change (one interrupt in its host
// history, boot ID changed), nothing is left cordoned. The CI case fits ~90 s under ASan; the
// 500-node / 20-kill / 2 API server restart case runs from scripts/fault-hostpkg.sh.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "core/json.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/reverify.h"
#include "hostpkg/stage_plan.h"
#include "hostpkg_env.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "process.h"
#include "sim/host_step.h"
#include "sim/node_object.h"

namespace gpufleet::hostpkg::testing {
namespace {

using namespace std::chrono_literals;
namespace ct = controller::testing;

struct FaultRun {
  int nodes;
  int budget;
  int kills;
  int api_restarts;  // kube-local stopped and started again while a controller runs
  std::chrono::milliseconds pause_min, pause_max;  // between a controller's start and its kill
  std::chrono::seconds deadline;
  std::chrono::milliseconds sample;  // budget sampling period (one LIST of every Node)
  // Spread the kills over the whole rollout: the k-th kill also waits (up to a minute) until
  // the set counts a random share of the nodes done, the shares drawn uniformly and sorted.
  // Without it, 20 kills 2-12 s apart all fell in the first third of a 500-node rollout.
  bool spread = false;
};

// Every stop and start of the control plane on $GPUFLEET_KUBE_LOCAL_DIR, as the sentinel fault
// script does: `kube-local down` / `up --detach` on the same data directory.
void restart_api_server() {
  const char* bin = std::getenv("KUBE_LOCAL_BIN");
  const char* dir = std::getenv("GPUFLEET_KUBE_LOCAL_DIR");
  ASSERT_TRUE(bin != nullptr && dir != nullptr)
      << "API server restarts need KUBE_LOCAL_BIN and GPUFLEET_KUBE_LOCAL_DIR";
  std::string b = std::string("'") + bin + "'", d = std::string("'") + dir + "'";
  ASSERT_EQ(std::system((b + " down --data-dir " + d + " >/dev/null").c_str()), 0);
  ASSERT_EQ(std::system(
                (b + " up --data-dir " + d + " --detach --ready-timeout 180s >/dev/null").c_str()),
            0);
}

// kill -9 the controller `run.kills` times at random points of a rollout of a reboot package
// (and restart the API server `run.api_restarts` times at random kills' places, a controller
// running), then check: the rollout completes, the budget was never exceeded (sampled), every
// node was interrupted exactly once (one interrupt in its host history, boot ID changed),
// nothing is left cordoned.
void rollout_under_faults(const FaultRun& run) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // kills and restarts show as they happen
  HostPkgEnv env(run.nodes, /*controller=*/false);
  std::vector<std::string> nodes;
  std::map<std::string, std::string> boot;
  for (int i = 0; i < run.nodes; ++i) {
    nodes.push_back(env.node(i));
    boot[env.node(i)] = env.sim().boot_id_of(env.node(i));
  }
  const std::string budget = std::to_string(run.budget);
  env.apply(
      "apiVersion: gpufleet.io/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: fault}\n"
      "spec:\n  default:\n    budget: {count: " +
      budget + "}\n    strategy: {fixed: {initialBatch: " + budget + "}}\n");
  env.apply(
      "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: fault}\n"
      "spec:\n  nodeSelector:\n    matchLabels: {" +
      std::string(sim::kPoolLabel) + ": " + env.pool() +
      "}\n  deploymentPolicy: fault\n  packages:\n"
      "    k:\n      version: 1.0.0\n      image: example.com/k\n"
      "      interrupt: {type: reboot}\n"
      "    s:\n      version: 1.0.0\n      image: example.com/s\n      dependsOn: [k]\n"
      "      interrupt: {type: restartServices, services: [x.service]}\n");

  // Sample the budget all along: nodes cordoned or holding an in-progress record. One LIST
  // per sample, so each sample is one moment of the cluster (a GET per node would mix
  // moments: node 0 read before its batch finished and node 3 after the next batch started
  // counts both batches at once).
  std::atomic<bool> stop{false};
  std::atomic<int> max_out{0}, samples{0};
  const std::set<std::string> ours(nodes.begin(), nodes.end());
  std::thread watch([&] {
    while (!stop) {
      int out = 0;
      try {
        for (const auto& node : env.client().list(kube::resources::nodes(), "").items) {
          if (!ours.contains(std::string(kube::name_of(node)))) continue;
          RecordRead rr = read_record(node, "fault");
          bool active = rr.record && rr.record->state == NodeState::InProgress;
          if (active || kube::node::unschedulable(node)) ++out;
        }
        ++samples;
      } catch (const std::exception&) {
      }
      max_out = std::max(max_out.load(), out);
      std::this_thread::sleep_for(run.sample);
    }
  });

  const char* kc = std::getenv("KUBECONFIG");
  unsigned seed = static_cast<unsigned>(::getpid());
  if (const char* s = std::getenv("FAULT_SEED")) seed = static_cast<unsigned>(std::atoi(s));
  std::printf("hostpkg fault run: %d nodes, budget %d, %d kills, %d API server restarts, seed %u\n",
              run.nodes, run.budget, run.kills, run.api_restarts, seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<long> pause_ms(run.pause_min.count(), run.pause_max.count());
  // Which kills restart the API server first (while that controller runs).
  std::set<int> restart_at;
  std::uniform_int_distribution<int> at(1, std::max(1, run.kills - 2));
  while (static_cast<int>(restart_at.size()) < std::min(run.api_restarts, run.kills - 2))
    restart_at.insert(at(rng));
  std::vector<std::int64_t> done_at;
  if (run.spread) {
    std::uniform_int_distribution<int> share(0, run.nodes * 9 / 10);
    for (int k = 0; k < run.kills; ++k) done_at.push_back(share(rng));
    std::sort(done_at.begin(), done_at.end());
  }
  int kills = 0, restarts = 0;
  auto done = [&]() -> std::int64_t {
    try {
      return status_int(env.get_set("fault"), "done");
    } catch (const std::exception&) {
      return -1;  // the API server is restarting
    }
  };
  auto complete = [&] {
    try {
      return env.get_set("fault").get_string({"status", "phase"}) == "Complete";
    } catch (const std::exception&) {
      return false;  // the API server is restarting
    }
  };
  const auto began = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  };
  auto deadline = began + run.deadline;
  while (!complete() && std::chrono::steady_clock::now() < deadline) {
    int port = ct::free_port();
    ct::Child c({ct::gpufleet_bin(), "controller", "--controllers=hostpkg", "--kubeconfig",
                 kc ? kc : "", "--metrics-addr", "127.0.0.1:" + std::to_string(port), "--set",
                 "hostpkg.namespace=" + env.stage_namespace(), "--set",
                 "hostpkg.runner-image=example.com/gpufleet:test", "--set", "hostpkg.poll=300ms"},
                "/tmp/hostpkg-fault-" + std::to_string(::getpid()) + ".log");
    if (kills < run.kills) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
      if (!done_at.empty())
        HostPkgEnv::eventually([&] { return done() >= done_at[kills] || complete(); }, 60s);
      if (complete()) break;  // nothing left to kill it during
      if (restart_at.contains(kills)) {
        std::printf("  %.0f s: API server restart %d\n", elapsed(), restarts + 1);
        restart_api_server();
        ++restarts;
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
      }
      c.signal(SIGKILL);
      c.wait(10s);
      ++kills;
      std::printf("  %.0f s: kill -9 %d (%lld nodes done)\n", elapsed(), kills,
                  static_cast<long long>(done()));
    } else {
      HostPkgEnv::eventually(complete, std::chrono::duration_cast<std::chrono::milliseconds>(
                                           deadline - std::chrono::steady_clock::now()));
      c.signal(SIGTERM);
      c.wait(10s);
    }
  }
  stop = true;
  watch.join();
  std::printf("  %.0f s: rollout %s; most nodes out at once %d (budget %d, %d samples)\n",
              elapsed(), complete() ? "complete" : "NOT complete", max_out.load(), run.budget,
              samples.load());
  ASSERT_TRUE(complete()) << core::to_json(*env.get_set("fault").get({"status"}));
  EXPECT_GE(kills, run.kills);
  EXPECT_EQ(restarts, run.api_restarts);
  EXPECT_LE(max_out.load(), run.budget) << "budget exceeded";
  int bad = 0;
  for (const auto& n : nodes) {
    SCOPED_TRACE(n);
    bool cordoned = kube::node::unschedulable(env.get_node(n));
    EXPECT_FALSE(cordoned) << "left cordoned";
    bool rebooted = env.sim().boot_id_of(n) != boot[n];
    EXPECT_TRUE(rebooted);
    std::string history = env.sim().host_read(n, sim::kHostStepHistory).value_or("");
    int interrupts = 0;
    for (auto p = history.find("/interrupt/"); p != std::string::npos;
         p = history.find("/interrupt/", p + 1))
      ++interrupts;
    EXPECT_EQ(interrupts, 1) << "interrupted more than once: " << history;
    if (cordoned || !rebooted || interrupts != 1) ++bad;
  }
  std::printf("  checked %zu nodes: %d left cordoned, not rebooted or not interrupted once\n",
              nodes.size(), bad);
}

// CI size: ~50 s under ASan.
TEST(HostPkgFault, KillNineDuringRolloutKeepsInvariants) {
  rollout_under_faults({.nodes = 9,
                        .budget = 3,
                        .kills = 8,
                        .api_restarts = 0,
                        .pause_min = 800ms,
                        .pause_max = 3500ms,
                        .deadline = 150s,
                        .sample = 30ms});
}

// Issue 17's fault proof: 500 nodes, 20 kills, 2 API server restarts. Too long for `make test`
// (minutes): scripts/fault-hostpkg.sh runs it on its own kube-local. FAULT_NODES, FAULT_KILLS,
// FAULT_API_RESTARTS, FAULT_BUDGET scale it.
TEST(HostPkgFault, DISABLED_FleetScaleKillsAndApiRestarts) {
  auto env_int = [](const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::atoi(v) : fallback;
  };
  rollout_under_faults({.nodes = env_int("FAULT_NODES", 500),
                        .budget = env_int("FAULT_BUDGET", 50),
                        .kills = env_int("FAULT_KILLS", 20),
                        .api_restarts = env_int("FAULT_API_RESTARTS", 2),
                        .pause_min = 2s,
                        .pause_max = 12s,
                        .deadline = 3600s,
                        .sample = 200ms,
                        .spread = true});
}

// kill -9 the controller again and again while it re-verifies finished nodes (a 1s interval
// through hostpkg.reverify-interval): no round's check ever runs twice on a node (each verify
// key at most once in the host history), rounds go on, no node is cordoned for a check, no
// drift is invented, and the verify pods left are only those of the nodes' current rounds.
TEST(HostPkgFault, KillNineDuringReverifyNeverRunsARoundTwice) {
  constexpr int kNodes = 4;
  HostPkgEnv env(kNodes, /*controller=*/false);
  std::string pool = env.node(0);
  const std::string name = "reverify-" + pool.substr(0, pool.size() - 4);
  env.apply("apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
            "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
            "operator: In, values: " +
            env.node_list(0, kNodes) +
            "}\n  reverify: {interval: 1h}\n  packages:\n"
            "    a:\n      version: 1.0.0\n      image: example.com/a\n"
            "    b:\n      version: 1.0.0\n      image: example.com/b\n      dependsOn: [a]\n");
  const char* kc = std::getenv("KUBECONFIG");
  auto controller = [&] {
    return std::make_unique<ct::Child>(
        std::vector<std::string>{ct::gpufleet_bin(), "controller", "--controllers=hostpkg",
                                 "--kubeconfig", kc ? kc : "", "--metrics-addr",
                                 "127.0.0.1:" + std::to_string(ct::free_port()), "--set",
                                 "hostpkg.namespace=" + env.stage_namespace(), "--set",
                                 "hostpkg.runner-image=example.com/gpufleet:test", "--set",
                                 "hostpkg.poll=300ms", "--set", "hostpkg.reverify-interval=1s"},
        "/tmp/hostpkg-fault-reverify-" + std::to_string(::getpid()) + ".log");
  };
  {
    auto c = controller();
    ASSERT_TRUE(HostPkgEnv::eventually(
        [&] {
          return env.get_set(name).get_string({"status", "phase"}) == "Complete";
        },
        60s));
    c->signal(SIGTERM);
    c->wait(10s);
  }

  std::atomic<bool> stop{false}, cordoned{false};
  std::thread watch([&] {
    while (!stop) {
      for (int i = 0; i < kNodes; ++i) {
        try {
          if (kube::node::unschedulable(env.get_node(env.node(i)))) cordoned = true;
        } catch (const std::exception&) {
        }
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> pause_ms(300, 1800);
  for (int kill = 0; kill < 10; ++kill) {
    auto c = controller();
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    c->signal(SIGKILL);
    c->wait(10s);
  }
  HostPackageSet set = parse_host_package_set(env.get_set(name));
  DesiredState d = digest(set);
  // Verify pods of rounds already recorded (left by a kill between the record and the clean-up)
  // are deleted by the next controller: eventually every verify pod is of a current round.
  auto stale_pods = [&] {
    std::vector<std::string> stale;
    auto pods = env.client().list(kube::resources::pods(), env.stage_namespace()).items;
    std::set<std::string> current;
    for (int i = 0; i < kNodes; ++i) {
      RecordRead rr = read_record(env.get_node(env.node(i)), name);
      if (!rr.record) continue;
      for (const Package& p : set.packages)
        current.insert(verify_pod_name(name, env.node(i), verify_key(p, d, rr.record->verified)));
    }
    for (const auto& pod : pods) {
      std::string pn(kube::name_of(pod));
      if (kube::label_of(pod, "hostpkg.gpufleet.io/stage") == "verify" && !current.contains(pn))
        stale.push_back(pn);
    }
    return stale;
  };
  // Verification keys run on node i so far (from the simulator's host history), and how often.
  auto verify_runs = [&](int i) {
    std::string history = env.sim().host_read(env.node(i), sim::kHostStepHistory).value_or("");
    std::map<std::string, int> runs;
    std::size_t pos = 0;
    while (pos < history.size()) {
      std::size_t nl = history.find('\n', pos);
      std::string line = history.substr(pos, nl == std::string::npos ? nl : nl - pos);
      pos = nl == std::string::npos ? history.size() : nl + 1;
      if (line.find("/verify/") != std::string::npos) ++runs[line.substr(0, line.find(' '))];
    }
    return runs;
  };
  {
    // A last one that cleans up, goes on until every node had 4 rounds (a condition, not a
    // time: rounds come slower on a loaded machine) and stops cleanly.
    auto c = controller();
    EXPECT_TRUE(HostPkgEnv::eventually([&] { return stale_pods().empty(); }, 15s))
        << "verify pods of recorded rounds left behind: " << stale_pods().size();
    EXPECT_TRUE(HostPkgEnv::eventually(
        [&] {
          for (int i = 0; i < kNodes; ++i)
            if (verify_runs(i).size() < 4) return false;
          return true;
        },
        120s))
        << "rounds did not go on after the kills";
    c->signal(SIGTERM);
    c->wait(10s);
  }
  stop = true;
  watch.join();
  EXPECT_FALSE(cordoned) << "a check cordoned a node";

  for (int i = 0; i < kNodes; ++i) {
    const std::string n = env.node(i);
    SCOPED_TRACE(n);
    RecordRead rr = read_record(env.get_node(n), name);
    ASSERT_TRUE(rr.record) << rr.error;
    EXPECT_EQ(rr.record->state, NodeState::Done);
    EXPECT_FALSE(rr.record->drift) << rr.record->drift->message;
    const std::map<std::string, int> runs = verify_runs(i);
    EXPECT_GE(runs.size(), 4u) << "too few verification rounds";
    for (const auto& [key, count] : runs)
      EXPECT_EQ(count, 1) << key << " ran " << count << " times";
  }
  env.remove_set(name);
}

// kill -9 the controller at random points of a node's rollout up to its validation, and once
// more while the node waits on its ValidationRequest: after each restart exactly one request
// exists for the node (the name is in the record before the create, so none is lost or made
// twice), the node stays cordoned until the test (playing certify) passes it, and the rollout
// then completes with the node rebooted once.
TEST(HostPkgFault, KillNineWhileValidatingKeepsOneRequest) {
  HostPkgEnv env(1, /*controller=*/false);
  env.pass_validations = false;
  const std::string node = env.node(0);
  const std::string boot = env.sim().boot_id_of(node);
  const std::string set = "validate-kill-" + env.pool();
  env.apply("apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + set +
            "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
            "operator: In, values: " +
            env.node_list(0, 1) +
            "}\n  packages:\n    k:\n      version: 1.0.0\n      image: example.com/k\n"
            "      interrupt: {type: reboot}\n");
  const char* kc = std::getenv("KUBECONFIG");
  auto controller = [&] {
    return std::make_unique<ct::Child>(
        std::vector<std::string>{
            ct::gpufleet_bin(), "controller", "--controllers=hostpkg", "--kubeconfig", kc ? kc : "",
            "--metrics-addr", "127.0.0.1:" + std::to_string(ct::free_port()), "--set",
            "hostpkg.namespace=" + env.stage_namespace(), "--set",
            "hostpkg.runner-image=example.com/gpufleet:test", "--set", "hostpkg.poll=300ms"},
        "/tmp/hostpkg-fault-validate-" + std::to_string(::getpid()) + ".log");
  };
  auto requests = [&] { return env.validation_requests(node); };
  auto recorded = [&]() -> std::string {
    RecordRead rr = read_record(env.get_node(node), set);
    return rr.record ? rr.record->validation : "";
  };
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> pause_ms(200, 1500);
  int kills = 0;
  // Killed at random points until the node waits on its request.
  while (kills < 12) {
    auto c = controller();
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    const bool waiting = !recorded().empty() && requests().size() == 1;
    c->signal(SIGKILL);
    c->wait(10s);
    ++kills;
    EXPECT_LE(requests().size(), 1U) << "after kill " << kills;
    if (waiting) break;
  }
  std::printf("  %d kill -9s up to the wait on certify\n", kills);
  // Once more while it waits, and a controller started again.
  {
    auto c = controller();
    ASSERT_TRUE(
        HostPkgEnv::eventually([&] { return !recorded().empty() && requests().size() == 1; }, 60s));
    std::this_thread::sleep_for(1s);
    c->signal(SIGKILL);
    c->wait(10s);
    ++kills;
  }
  auto c = controller();
  std::this_thread::sleep_for(3s);  // it has looked at the node again
  auto vrs = requests();
  ASSERT_EQ(vrs.size(), 1U);
  const std::string vr(kube::name_of(vrs.front()));
  EXPECT_EQ(recorded(), vr);
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(node))) << "uncordoned before certify";
  env.answer_validation(vr, node, "Passed");
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env.get_set(set).get_string({"status", "phase"}) == "Complete";
      },
      60s))
      << core::to_json(*env.get_set(set).get({"status"}));
  c->signal(SIGTERM);
  c->wait(10s);
  EXPECT_EQ(requests().size(), 1U);
  EXPECT_FALSE(kube::node::unschedulable(env.get_node(node)));
  EXPECT_NE(env.sim().boot_id_of(node), boot);
  std::string history = env.sim().host_read(node, sim::kHostStepHistory).value_or("");
  int interrupts = 0;
  for (auto p = history.find("/interrupt/"); p != std::string::npos;
       p = history.find("/interrupt/", p + 1))
    ++interrupts;
  EXPECT_EQ(interrupts, 1) << history;
  env.remove_set(set);
}

}  // namespace
}  // namespace gpufleet::hostpkg::testing
