// Re-verification (spec.reverify) on kube-local + the simulator: a node that finished the set
// drifts (its sysctl is changed behind hostpkg's back); the periodic check catches it without
// cordoning the node, the set reports Drifted naming the node, the package and the check's
// message (onDrift: Report re-applies nothing); switched to Reapply, the node goes back through
// the rollout, the package is applied again, the host is repaired and Drifted clears. The
// drifted node carries the HostPackageDrifted node condition while it is drifted (cleared by
// the re-apply, and by the set's deletion).
//
// The controller runs with hostpkg.reverify-interval=1s (the test override of the schema's 1m
// minimum, docs/hostpkg.md); the sets say 1h.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "api/resources.h"
#include "controller/clock.h"
#include "core/json.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/reverify.h"
#include "hostpkg/stage_plan.h"
#include "hostpkg_env.h"
#include "kube/api/objects.h"
#include "kube/errors.h"
#include "sim/host_step.h"
#include "sim/scenario.h"

namespace gpufleet::hostpkg::testing {
namespace {

using namespace std::chrono_literals;

// Set names unique per run (the pool's name), so a rerun never meets the last run's set while
// it is still being deleted.
std::string set_name(HostPkgEnv& env, const std::string& base) {
  std::string pool = env.node(0);
  return base + "-" + pool.substr(0, pool.size() - 4);
}

std::string set_yaml(HostPkgEnv& env, const std::string& on_drift) {
  return "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " +
         set_name(env, "drift") +
         "}\n"
         "spec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
         "operator: In, values: " +
         env.node_list(0, 2) + "}\n  reverify: {interval: 1h, onDrift: " + on_drift +
         "}\n  packages:\n    tune:\n      version: 1.0.0\n      image: example.com/tune\n";
}

std::string dump(HostPkgEnv& env, const std::string& name) {
  core::Value s = env.get_set(name);
  const core::Value* st = s.get({"status"});
  return st != nullptr ? core::to_json(*st) : "(no status)";
}

int count(const std::optional<std::string>& text, const std::string& needle) {
  int n = 0;
  if (!text) return 0;
  for (auto pos = text->find(needle); pos != std::string::npos; pos = text->find(needle, pos + 1))
    ++n;
  return n;
}

std::string transition_time(const core::Value& obj, const std::string& type) {
  const core::Value* conds = obj.get({"status", "conditions"});
  if (conds == nullptr || !conds->is_list()) return "";
  for (const auto& c : conds->as_list())
    if (c.get_string({"type"}) == type) return std::string(c.get_string({"lastTransitionTime"}));
  return "";
}

NodeRecord record_of(HostPkgEnv& env, int i) {
  RecordRead rr = read_record(env.get_node(env.node(i)), set_name(env, "drift"));
  if (!rr.record) throw std::runtime_error("no record: " + rr.error);
  return *rr.record;
}

TEST(HostPkgReverify, ReportsDriftThenReapplyRepairs) {
  HostPkgEnv env(2, false);
  env.reverify_interval = 1s;
  env.start_controller();
  const std::string n0 = env.node(0), n1 = env.node(1);
  const std::string name = set_name(env, "drift");
  env.apply(set_yaml(env, "Report"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env.get_set(name).get_string({"status", "phase"}) == "Complete";
      },
      30s))
      << dump(env, name);
  ASSERT_EQ(env.sim().host_read(n0, "/proc/sys/vm/max_map_count").value_or(""), "1048576\n");

  // The checks run again on both nodes and pass: the record moves `verified` forward.
  std::int64_t first = record_of(env, 0).verified;
  EXPECT_GT(first, 0) << "done stamps the verification time";
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return count(env.sim().host_read(n0, sim::kHostStepHistory), "tune/verify/") > 0 &&
               count(env.sim().host_read(n1, sim::kHostStepHistory), "tune/verify/") > 0;
      },
      15s));
  EXPECT_EQ(condition(env.get_set(name), "Drifted").status, "False") << dump(env, name);
  EXPECT_EQ(condition(env.get_set(name), "Drifted").reason, "NoDrift");

  // Someone edits node 0's host behind hostpkg's back.
  std::atomic<bool> cordoned{false}, watching{true};
  std::thread watch([&] {
    while (watching) {
      try {
        if (kube::node::unschedulable(env.get_node(n0))) cordoned = true;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  sim::SimEvent drift;
  drift.kind = sim::EventKind::Host;
  drift.nodes = {n0};
  drift.host.sysctls = {{"vm.max_map_count", "65530"}};
  drift.host.persist = false;
  env.sim().inject(drift);

  // Report: Drifted names the node, the package and what the check said; nothing else moves.
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        core::Value s = env.get_set(name);
        return status_int(s, "drifted") == 1 && condition(s, "Drifted").status == "True";
      },
      15s))
      << dump(env, name);
  Cond d = condition(env.get_set(name), "Drifted");
  EXPECT_EQ(d.reason, "ChecksFailed");
  EXPECT_NE(d.message.find(n0 + ": tune: "), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("vm.max_map_count is 65530, want 1048576"), std::string::npos)
      << d.message;
  NodeRecord r0 = record_of(env, 0);
  ASSERT_TRUE(r0.drift);
  EXPECT_EQ(r0.drift->package, "tune");
  EXPECT_EQ(r0.state, NodeState::Done);
  EXPECT_TRUE(r0.reapply.empty()) << "Report re-applies nothing";
  EXPECT_FALSE(record_of(env, 1).drift) << "node 1 did not drift";
  // The Node itself says so, naming set, package and check; the other node has no condition.
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return condition(env.get_node(n0), "HostPackageDrifted").status == "True"; }, 10s));
  Cond nc = condition(env.get_node(n0), "HostPackageDrifted");
  EXPECT_EQ(nc.reason, "ChecksFailed");
  EXPECT_NE(nc.message.find(name + "/tune: "), std::string::npos) << nc.message;
  EXPECT_NE(nc.message.find("vm.max_map_count is 65530, want 1048576"), std::string::npos)
      << nc.message;
  EXPECT_EQ(condition(env.get_node(n0), "Ready").status, "True") << "the kubelet's conditions stay";
  EXPECT_EQ(condition(env.get_node(n1), "HostPackageDrifted").status, "") << "node 1 did not drift";
  const std::string since = transition_time(env.get_node(n0), "HostPackageDrifted");
  EXPECT_FALSE(since.empty());
  std::this_thread::sleep_for(2s);  // two more rounds: still only reported
  EXPECT_EQ(transition_time(env.get_node(n0), "HostPackageDrifted"), since)
      << "failing again moved the condition's lastTransitionTime";
  EXPECT_EQ(count(env.sim().host_read(n0, sim::kHostStepHistory), "tune/apply/"), 1);
  EXPECT_EQ(env.sim().host_read(n0, "/proc/sys/vm/max_map_count").value_or(""), "65530\n");
  EXPECT_EQ(env.get_set(name).get_string({"status", "phase"}), "Complete") << dump(env, name);
  watching = false;
  watch.join();
  EXPECT_FALSE(cordoned) << "checking cordoned the node";

  // Reapply: the drifted node goes through the rollout again and is repaired.
  env.apply(set_yaml(env, "Reapply"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        core::Value s = env.get_set(name);
        return s.get_string({"status", "phase"}) == "Complete" && status_int(s, "drifted") == 0 &&
               condition(s, "Drifted").status == "False" &&
               count(env.sim().host_read(n0, sim::kHostStepHistory), "tune/apply/") == 2;
      },
      30s))
      << dump(env, name);
  EXPECT_EQ(env.sim().host_read(n0, "/proc/sys/vm/max_map_count").value_or(""), "1048576\n");
  NodeRecord after = record_of(env, 0);
  EXPECT_FALSE(after.drift);
  EXPECT_TRUE(after.reapply.empty());
  EXPECT_EQ(after.state, NodeState::Done);
  EXPECT_FALSE(kube::node::unschedulable(env.get_node(n0))) << "left cordoned";
  // The re-apply finished: the Node's condition goes False.
  EXPECT_TRUE(HostPkgEnv::eventually(
      [&] { return condition(env.get_node(n0), "HostPackageDrifted").status == "False"; }, 10s));
  EXPECT_EQ(condition(env.get_node(n0), "HostPackageDrifted").reason, "NoDrift");
  EXPECT_EQ(count(env.sim().host_read(n1, sim::kHostStepHistory), "tune/apply/"), 1)
      << "node 1 was re-applied";
  // Verification goes on after the repair, and passes.
  std::int64_t repaired = after.verified;
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return record_of(env, 0).verified > repaired; }, 10s));
  EXPECT_FALSE(record_of(env, 0).drift);
  env.remove_set(name);
}

// A drifted node's condition goes False when its set is deleted (the record, with its drift,
// stays on the Node as every record does).
TEST(HostPkgReverify, NodeConditionClearsWhenTheSetIsDeleted) {
  HostPkgEnv env(1, false);
  env.reverify_interval = 1s;
  env.start_controller();
  const std::string n0 = env.node(0);
  const std::string name = set_name(env, "gone");
  env.apply("apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
            "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: "
            "kubernetes.io/hostname, operator: In, values: " +
            env.node_list(0, 1) +
            "}\n  reverify: {interval: 1h}\n  packages:\n    tune:\n      version: "
            "1.0.0\n      image: example.com/tune\n");
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env.get_set(name).get_string({"status", "phase"}) == "Complete";
      },
      30s))
      << dump(env, name);
  sim::SimEvent drift;
  drift.kind = sim::EventKind::Host;
  drift.nodes = {n0};
  drift.host.sysctls = {{"vm.max_map_count", "65530"}};
  drift.host.persist = false;
  env.sim().inject(drift);
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return condition(env.get_node(n0), "HostPackageDrifted").status == "True"; }, 15s))
      << dump(env, name);
  env.remove_set(name);
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return condition(env.get_node(n0), "HostPackageDrifted").status == "False"; }, 15s))
      << core::to_json(env.get_node(n0));
  EXPECT_EQ(condition(env.get_node(n0), "HostPackageDrifted").reason, "NoDrift");
  EXPECT_TRUE(read_record(env.get_node(n0), name).record.value().drift) << "the record is kept";
}

// Restart safety: a controller killed after creating a round's verify pod finds that pod by
// name when it comes back and records its outcome (the check is not run twice), and verify
// pods no round expects (a round recorded before the kill) are deleted.
TEST(HostPkgReverify, RestartAdoptsTheRoundsPodAndCleansOrphans) {
  HostPkgEnv env(1, false);
  env.reverify_interval = 1s;
  env.start_controller();
  const std::string n0 = env.node(0);
  const std::string name = set_name(env, "adopt");
  std::string yaml =
      "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
      "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: "
      "kubernetes.io/hostname, operator: In, values: " +
      env.node_list(0, 1) +
      "}\n  reverify: {interval: 1h}\n  packages:\n    tune:\n      version: "
      "1.0.0\n      image: example.com/tune\n";
  env.apply(yaml);
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env.get_set(name).get_string({"status", "phase"}) == "Complete";
      },
      30s));
  env.stop_controller();  // "killed": the next round is due but nobody runs it

  std::int64_t round = read_record(env.get_node(n0), name).record.value().verified;
  HostPackageSet set = parse_host_package_set(env.get_set(name));
  DesiredState d = digest(set);
  StagePodOptions o{env.stage_namespace(), "example.com/gpufleet:test", ""};
  // What the killed controller had created: this round's pod, which runs to its end meanwhile.
  core::Value current = verify_pod(set, d, n0, set.packages[0], round, o);
  // And a pod of a round recorded long ago.
  core::Value stale = verify_pod(set, d, n0, set.packages[0], round - 1000, o);
  try {
    env.client().create(kube::resources::pods(), current);
  } catch (const kube::ApiError& e) {
    // The controller made it before it stopped (the round was already due): the same case.
    if (!e.is(kube::Reason::AlreadyExists)) throw;
  }
  env.client().create(kube::resources::pods(), stale);
  const std::string ns = env.stage_namespace();
  const std::string current_name(current.get_string({"metadata", "name"}));
  const std::string stale_name(stale.get_string({"metadata", "name"}));
  const std::string key = verify_key(set.packages[0], d, round);
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return count(env.sim().host_read(n0, sim::kHostStepHistory), key + " ") == 1; }, 15s));

  env.start_controller();
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        auto r = read_record(env.get_node(n0), name).record;
        return r && r->verified > round;
      },
      15s))
      << dump(env, name);
  EXPECT_TRUE(HostPkgEnv::eventually(
      [&] {
        return !env.client().try_get(kube::resources::pods(), ns, stale_name).has_value() &&
               !env.client().try_get(kube::resources::pods(), ns, current_name).has_value();
      },
      10s))
      << "the orphaned and the adopted pod are cleaned up";
  EXPECT_EQ(count(env.sim().host_read(n0, sim::kHostStepHistory), key + " "), 1)
      << "the round's check ran twice";
  EXPECT_FALSE(read_record(env.get_node(n0), name).record->drift);
  env.remove_set(name);
}

// The interval is counted on the Manager's clock (controller/clock.h), not the wall clock's:
// with a FakeClock (two hours behind, so the API server's timestamps never look old to it) the
// record stamps the clock's time, nothing is checked again while the clock stands still or
// stands two seconds before the node is due (1h + its jitter), and moving it past that runs
// the checks at once.
TEST(HostPkgReverify, IntervalIsCountedOnTheInjectedClock) {
  controller::FakeClock clock(std::chrono::system_clock::now() - 2h);  // outlives the env
  HostPkgEnv env(1, false);
  env.clock = &clock;  // no reverify_interval override: the set's 1h holds
  env.start_controller();
  const std::string n0 = env.node(0);
  const std::string name = set_name(env, "clock");
  env.apply("apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
            "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
            "operator: In, values: " +
            env.node_list(0, 1) +
            "}\n  reverify: {interval: 1h, onDrift: Report}\n  packages:\n    tune:\n      "
            "version: 1.0.0\n      image: example.com/tune\n");
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env.get_set(name).get_string({"status", "phase"}) == "Complete";
      },
      30s))
      << dump(env, name);
  auto verified = [&] {
    RecordRead rr = read_record(env.get_node(n0), name);
    return rr.record ? rr.record->verified : -1;
  };
  const std::int64_t first = verified();
  EXPECT_EQ(first, clock.unix_seconds()) << "done stamps the clock's time, not the wall clock's";

  NodeRecord stamped;
  stamped.verified = first;
  const std::int64_t due = reverify_due(stamped, name, n0, 1h);
  ASSERT_GE(due, first + 3600);
  auto touch = [&](const std::string& v) {  // wakes the set (its requeue is an hour away)
    core::Value patch;
    patch["metadata"]["annotations"]["clock-test/touch"] = v;
    env.client().patch(api::host_package_sets(), "", name, kube::PatchType::Merge, patch);
    std::this_thread::sleep_for(1500ms);  // a pass
  };
  auto checks = [&] {
    return count(env.sim().host_read(n0, sim::kHostStepHistory), "tune/verify/");
  };
  std::this_thread::sleep_for(2s);  // real time passes, the clock's does not
  touch("still");
  EXPECT_EQ(checks(), 0) << "checked again while the clock stood still";
  clock.advance(std::chrono::seconds(due - first - 2));
  touch("before-due");
  EXPECT_EQ(checks(), 0) << "checked again 2 s before the node was due on the clock";
  EXPECT_EQ(verified(), first);

  clock.advance(3s);
  touch("due");
  EXPECT_TRUE(HostPkgEnv::eventually(
      [&] {
        return count(env.sim().host_read(n0, sim::kHostStepHistory), "tune/verify/") > 0 &&
               verified() > first;
      },
      20s))
      << "the clock passed the 1h interval and no check ran: " << dump(env, name);
  EXPECT_LE(verified(), clock.unix_seconds());
  env.remove_set(name);
}

}  // namespace
}  // namespace gpufleet::hostpkg::testing
