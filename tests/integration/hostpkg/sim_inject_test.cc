// Failures injected into a running simulator (`gpufleet sim inject`, the CLI, into the state dir
// the simulator reads) drive the rollout planner's stop rules end to end; the simulator's host
// history files appear under each node's state dir.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg_env.h"

namespace gpufleet::hostpkg::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string temp_state_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `gpufleet sim inject` and waits until the simulator applied the event.
void inject(const std::string& state_dir, const std::string& event) {
  const char* bin = std::getenv("GPUFLEET_BIN");
  ASSERT_NE(bin, nullptr) << "GPUFLEET_BIN is not set";
  std::string cmd = std::string("'") + bin + "' sim inject --state-dir '" + state_dir +
                    "' --event '" + event + "' >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string results;
  bool applied = HostPkgEnv::eventually(
      [&] {
        results.clear();
        int n = 0;
        for (const auto& f : fs::directory_iterator(fs::path(state_dir) / "control" / "done")) {
          results += read_file(f.path());
          ++n;
        }
        return fs::is_empty(fs::path(state_dir) / "control" / "inbox") && n > 0;
      },
      10s);
  ASSERT_TRUE(applied) << "the simulator did not take the event";
  ASSERT_EQ(results.find("# error"), std::string::npos) << results;
}

std::string set_on(const std::string& name, const std::string& nodes, const std::string& policy,
                   const std::string& package) {
  return "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
         "}\nspec:\n  deploymentPolicy: " + policy +
         "\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
         "operator: In, values: " +
         nodes + "}\n  packages:\n    " + package +
         ":\n      version: 1.0.0\n      image: " + "example.com/" + package + "\n";
}

std::string one_at_a_time(const std::string& name, int failure_threshold, int safety_limit) {
  return "apiVersion: gpufleet.io/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: " + name +
         "}\nspec:\n  default:\n    budget: {count: 4}\n    strategy: {fixed: {initialBatch: 1, "
         "batchThreshold: 100, failureThreshold: " +
         std::to_string(failure_threshold) + ", safetyLimit: " + std::to_string(safety_limit) +
         "}}\n";
}

// Nodes of `set` whose record is Failed / that were never started (no record).
std::pair<int, int> failed_and_untouched(HostPkgEnv& env, const std::string& set, int from, int to,
                                         std::string* failures) {
  int failed = 0, untouched = 0;
  for (int i = from; i < to; ++i) {
    RecordRead rr = read_record(env.get_node(env.node(i)), set);
    if (!rr.record) {
      ++untouched;
    } else if (rr.record->state == NodeState::Failed) {
      ++failed;
      *failures += env.node(i) + ": " + rr.record->failure + "\n";
    }
  }
  return {failed, untouched};
}

// Two sets, four nodes each, one node per batch (a budget of 4: failed nodes stay cordoned and
// count as out). Set "gate": every apply of its package fails
// (a host-step outcome with the script's exit code): two failed batches in a row trip
// failureThreshold 2. Set "limit": its stage pods crash without a step result (a pod
// behaviour): the second failed node is over safetyLimit 25 % (failureThreshold 10 never
// trips). Each stops with two nodes failed and two never started.
TEST(HostPkgSim, InjectedFailuresTripFailureThresholdAndSafetyLimit) {
  const std::string dir = temp_state_dir("hostpkg-inject");
  HostPkgEnv env(8, true, dir);
  inject(dir, "{nodes: " + env.node_list(0, 4) +
                  ", type: hostStep, package: gate, stage: apply, outcome: fail, exitCode: 3, "
                  "message: \"injected: apply.sh exited 3\"}");
  inject(dir, "{nodes: " + env.node_list(4, 8) +
                  ", type: stagePod, package: limit, "
                  "behaviour: crash, exitCode: 137}");
  env.apply(one_at_a_time("gate-policy", 2, 100));
  env.apply(one_at_a_time("limit-policy", 10, 25));
  env.apply(set_on("gate", env.node_list(0, 4), "gate-policy", "gate"));
  env.apply(set_on("limit", env.node_list(4, 8), "limit-policy", "limit"));

  struct Case {
    std::string set, reason;
    int from;
  };
  for (const Case& c : {Case{"gate", "2 consecutive failed batches (failureThreshold 2)", 0},
                        Case{"limit", "2 of 4 nodes failed, over the safetyLimit of 25%", 4}}) {
    SCOPED_TRACE(c.set);
    ASSERT_TRUE(HostPkgEnv::eventually(
        [&] {
          return env.get_set(c.set).get_string({"status", "phase"}) == "Stopped";
        },
        90s))
        << core::to_json(env.get_set(c.set).get({"status"}) ? *env.get_set(c.set).get({"status"})
                                                            : core::Value());
    Cond stopped = condition(env.get_set(c.set), "Stopped");
    EXPECT_EQ(stopped.status, "True");
    EXPECT_NE(stopped.message.find(c.reason), std::string::npos) << stopped.message;
  }
  // Stopped stays stopped: nothing else starts.
  std::this_thread::sleep_for(3s);
  std::string failures;
  EXPECT_EQ(failed_and_untouched(env, "gate", 0, 4, &failures), std::make_pair(2, 2)) << failures;
  EXPECT_NE(failures.find("injected: apply.sh exited 3"), std::string::npos) << failures;
  failures.clear();
  EXPECT_EQ(failed_and_untouched(env, "limit", 4, 8, &failures), std::make_pair(2, 2)) << failures;
  EXPECT_NE(failures.find("exit code 137"), std::string::npos) << failures;
  env.remove_set("gate");
  env.remove_set("limit");
  fs::remove_all(dir);
}

// The host files a step leaves on the simulated host (its history, the service restarts) are
// mirrored under <state-dir>/nodes/<node>/, where docs/sim.md says they are.
TEST(HostPkgSim, HostHistoryFilesInTheStateDir) {
  const std::string dir = temp_state_dir("hostpkg-history");
  HostPkgEnv env(1, true, dir);
  env.apply(
      "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: history}\n"
      "spec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
      "operator: In, values: [" +
      env.node(0) +
      "]}\n  packages:\n    tuning:\n      version: 1.0.0\n      image: example.com/tuning\n"
      "      interrupt: {type: restartServices, services: [a.service]}\n");
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env.get_set("history").get_string({"status", "phase"}) == "Complete";
      },
      90s));
  const fs::path host = fs::path(dir) / "nodes" / env.node(0) / "var/lib/gpufleet/hostpkg";
  EXPECT_TRUE(HostPkgEnv::eventually(
      [&] {
        return read_file(host / "history").find("tuning/post-interrupt/") != std::string::npos;
      },
      5s))
      << "no host history under " << host
      << " (files there: " << (fs::exists(host) ? "some" : "none") << ")";
  EXPECT_NE(read_file(host / "history").find("tuning/apply/1.0.0/"), std::string::npos);
  EXPECT_NE(read_file(host / "restarts").find("restartServices a.service"), std::string::npos);
  env.remove_set("history");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::hostpkg::testing
