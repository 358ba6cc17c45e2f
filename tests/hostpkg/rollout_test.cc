#include <gtest/gtest.h>

#include <map>
#include <random>

#include "hostpkg/rollout.h"
#include "hostpkg/stage_plan.h"
#include "test_util.h"

namespace gpufleet::hostpkg {
namespace {

using testing::policy_from_yaml;
using testing::set_from_yaml;

const char* kSet =
    "  packages:\n    sysctl: {version: 1.0.0, image: r/sysctl, configMap: {a.conf: x}}\n";

// A fleet with records, driven the way the controller drives it: plan, start the chosen
// nodes (record InProgress + cordon), finish them with success or failure.
struct Fleet {
  HostPackageSet set = set_from_yaml(kSet);
  DeploymentPolicy policy;
  std::optional<ClusterBudget> cluster;
  std::map<std::string, NodeFacts> facts;
  std::map<std::string, NodeRecord> records;
  std::map<std::string, std::string> bad_records;
  std::unordered_set<std::string> outside, gated;
  std::int64_t epoch = 0;

  void add(const std::string& name, Labels labels = {}) {
    facts[name] = NodeFacts{name, std::move(labels)};
  }

  RolloutPlan plan() {
    std::vector<NodeInput> in;
    for (auto& [name, f] : facts) {
      NodeInput n{f, nullptr, {}};
      if (auto it = records.find(name); it != records.end()) n.record = &it->second;
      if (auto it = bad_records.find(name); it != bad_records.end()) n.record_error = it->second;
      in.push_back(std::move(n));
    }
    RolloutInput ri;
    ri.set = &set;
    ri.policy = &policy;
    ri.cluster = cluster ? &*cluster : nullptr;
    ri.nodes = in;
    ri.outside = &outside;
    ri.gated = &gated;
    ri.reset_epoch = epoch;
    return plan_rollout(ri);
  }
  // Plans and starts what the plan says; returns the started names.
  std::vector<std::string> start() {
    RolloutPlan p = plan();
    std::vector<std::string> names;
    for (const NodeStart& s : p.start) {
      NodeRecord& r = records[s.node];
      r.set = set.name;
      r.state = NodeState::InProgress;
      r.batch = s.batch;
      r.epoch = s.epoch;
      r.rollout = s.rollout;
      facts[s.node].unschedulable = true;
      facts[s.node].cordon_ours = true;
      names.push_back(s.node);
    }
    return names;
  }
  void finish(const std::string& node, bool ok) {
    NodeRecord& r = records.at(node);
    if (!ok) {
      r.state = NodeState::Failed;
      r.failure = "sysctl/apply: exit 1";
      return;  // stays cordoned
    }
    DesiredState d = digest(set);
    for (NodePlan p = plan_node(d, r); !p.steps.empty(); p = plan_node(d, r))
      record_step_done(r, d, p.steps[0]);
    mark_node_done(r, d);
    facts[node].unschedulable = false;
    facts[node].cordon_ours = false;
  }
  void finish_all(const std::vector<std::string>& nodes, bool ok = true) {
    for (const auto& n : nodes) finish(n, ok);
  }
};

std::string pad(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "n%03d", i);
  return buf;
}

Fleet fleet(int n, const std::string& policy_yaml) {
  Fleet f;
  f.policy = policy_from_yaml(policy_yaml);
  for (int i = 0; i < n; ++i) f.add(pad(i));
  return f;
}

TEST(Rollout, FixedBatchesWaitForTheWholeBatch) {
  Fleet f = fleet(5, "  default: {budget: {count: 5}, strategy: {fixed: {initialBatch: 2}}}\n");
  auto b0 = f.start();
  EXPECT_EQ(b0, (std::vector<std::string>{"n000", "n001"}));
  EXPECT_TRUE(f.start().empty());  // batch 0 still running
  f.finish("n000", true);
  EXPECT_TRUE(f.start().empty());  // barrier: n001 still running
  f.finish("n001", true);
  auto b1 = f.start();
  EXPECT_EQ(b1, (std::vector<std::string>{"n002", "n003"}));
  EXPECT_EQ(f.records.at("n002").batch, 1);
  f.finish_all(b1);
  EXPECT_EQ(f.start(), (std::vector<std::string>{"n004"}));
  f.finish("n004", true);
  RolloutPlan p = f.plan();
  EXPECT_TRUE(p.complete);
  EXPECT_TRUE(p.start.empty());
  EXPECT_EQ(p.compartments.at(0).done, 5);
}

TEST(Rollout, ExponentialAndLinearGrowth) {
  Fleet f = fleet(40,
                  "  default: {budget: {count: 100}, strategy: {exponential: {initialBatch: 1, "
                  "growthFactor: 2}}}\n");
  std::vector<std::size_t> sizes;
  for (auto b = f.start(); !b.empty(); b = f.start()) {
    sizes.push_back(b.size());
    f.finish_all(b);
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 2, 4, 8, 16, 9}));
  Fleet g = fleet(
      20, "  default: {budget: {count: 100}, strategy: {linear: {initialBatch: 2, step: 3}}}\n");
  sizes.clear();
  for (auto b = g.start(); !b.empty(); b = g.start()) {
    sizes.push_back(b.size());
    g.finish_all(b);
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 5, 8, 5}));
}

TEST(Rollout, BudgetCapsABatchThatIsLargerThanIt) {
  Fleet f = fleet(10, "  default: {budget: {percent: 30}, strategy: {fixed: {initialBatch: 5}}}\n");
  auto first = f.start();
  EXPECT_EQ(first.size(), 3u);  // 30% of 10
  f.finish(first[0], true);
  auto more = f.start();  // the batch of 5 fills up as budget frees
  EXPECT_EQ(more.size(), 1u);
  EXPECT_EQ(f.records.at(more[0]).batch, 0);
  f.finish(first[1], true);
  EXPECT_EQ(f.start().size(), 1u);
  EXPECT_TRUE(f.start().empty());  // batch 0 full (5), barrier
}

TEST(Rollout, FailureThresholdStopsAndOnlyResetResumes) {
  Fleet f = fleet(10,
                  "  default: {budget: {count: 10}, strategy: {fixed: {initialBatch: 1, "
                  "failureThreshold: 2, safetyLimit: 100}}}\n");
  f.finish(f.start().at(0), false);
  RolloutPlan p1 = f.plan();
  EXPECT_FALSE(p1.stopped);
  EXPECT_EQ(p1.compartments[0].consecutive_failures, 1);
  auto second = f.start();
  ASSERT_EQ(second.size(), 1u);
  f.finish(second[0], false);
  RolloutPlan p = f.plan();
  EXPECT_TRUE(p.stopped);
  EXPECT_TRUE(p.start.empty());
  EXPECT_TRUE(p.compartments[0].stopped);
  EXPECT_NE(p.compartments[0].stop_reason.find("2 consecutive failed batches"), std::string::npos);
  EXPECT_EQ(p.compartments[0].failing_nodes, (std::vector<std::string>{"n000", "n001"}));
  EXPECT_TRUE(f.plan().start.empty());  // stays stopped: nothing changes by itself
  // Explicit reset: a new epoch. Failures of the old one no longer count, and the failed
  // nodes (still cordoned by hostpkg) are retried first.
  f.epoch = 1;
  RolloutPlan after = f.plan();
  EXPECT_FALSE(after.stopped);
  ASSERT_EQ(after.start.size(), 1u);
  EXPECT_EQ(after.start[0].node, "n000");
  EXPECT_EQ(after.start[0].epoch, 1);
}

TEST(Rollout, BatchThresholdCountsPartialSuccess) {
  Fleet f =
      fleet(30,
            "  default: {budget: {count: 30}, strategy: {exponential: {initialBatch: 4, "
            "growthFactor: 2, batchThreshold: 75, failureThreshold: 1, safetyLimit: 100}}}\n");
  auto b0 = f.start();
  ASSERT_EQ(b0.size(), 4u);
  f.finish(b0[0], false);
  for (int i = 1; i < 4; ++i) f.finish(b0[i], true);  // 3/4 = 75%: passes
  auto b1 = f.start();
  EXPECT_EQ(b1.size(), 8u);  // grew
  f.finish(b1[0], false);
  f.finish(b1[1], false);
  for (std::size_t i = 2; i < b1.size(); ++i) f.finish(b1[i], true);  // 6/8 = 75%: passes
  auto b2 = f.start();
  ASSERT_EQ(b2.size(), 16u);
  for (std::size_t i = 0; i < 5; ++i) f.finish(b2[i], false);
  for (std::size_t i = 5; i < b2.size(); ++i) f.finish(b2[i], true);  // 11/16 < 75%: fails
  RolloutPlan p = f.plan();
  EXPECT_TRUE(p.stopped);
  EXPECT_EQ(p.compartments[0].failed, 8);
  EXPECT_TRUE(f.plan().start.empty());
}

TEST(Rollout, SafetyLimitStopsOnTotalFailures) {
  Fleet f = fleet(10,
                  "  default: {budget: {count: 10}, strategy: {fixed: {initialBatch: 5, "
                  "batchThreshold: 1, failureThreshold: 100, safetyLimit: 20}}}\n");
  auto b0 = f.start();
  f.finish(b0[0], false);
  f.finish(b0[1], false);
  for (int i = 2; i < 5; ++i) f.finish(b0[i], true);
  EXPECT_FALSE(f.plan().stopped);  // 2 of 10 = 20%: at the limit, not over it
  auto b1 = f.start();
  f.finish(b1[0], false);
  for (std::size_t i = 1; i < b1.size(); ++i) f.finish(b1[i], true);
  RolloutPlan p = f.plan();
  EXPECT_TRUE(p.stopped);
  EXPECT_NE(p.compartments[0].stop_reason.find("safetyLimit"), std::string::npos);
}

TEST(Rollout, OverlappingCompartmentsResolveToTheSaferOne) {
  Fleet f = fleet(0, R"(
  default: {budget: {count: 10}, strategy: {fixed: {initialBatch: 10}}}
  compartments:
    - {name: wide, selector: {matchLabels: {gpu: h100}}, budget: {count: 4}, strategy: {fixed: {initialBatch: 4}}}
    - {name: careful, selector: {matchLabels: {rack: r1}}, budget: {count: 1}, strategy: {fixed: {initialBatch: 1}}}
)");
  for (int i = 0; i < 6; ++i) f.add(pad(i), {{"gpu", "h100"}, {"rack", i < 3 ? "r1" : "r2"}});
  f.add("other");
  RolloutPlan p = f.plan();
  std::map<std::string, std::int64_t> nodes;
  for (const auto& c : p.compartments) nodes[c.name] = c.nodes;
  EXPECT_EQ(nodes["careful"], 3);  // r1 nodes match both; careful has the smaller budget
  EXPECT_EQ(nodes["wide"], 3);
  EXPECT_EQ(nodes["default"], 1);
  std::map<std::string, int> started;
  for (const auto& s : p.start) ++started[s.compartment];
  EXPECT_EQ(started["careful"], 1);
  EXPECT_EQ(started["wide"], 3);
  EXPECT_EQ(started["default"], 1);
}

TEST(Rollout, ClusterBudgetPerTopologyDomainCountsOutsideDisruptions) {
  Fleet f = fleet(0, "  default: {budget: {count: 100}, strategy: {fixed: {initialBatch: 100}}}\n");
  for (int i = 0; i < 12; ++i) f.add(pad(i), {{"rack", "r" + std::to_string(i % 3)}});
  f.cluster = ClusterBudget{"rack", 2, kube::IntOrPercent{false, 100}};
  f.outside = {"n000"};  // sentinel has a node of r0 quarantined
  RolloutPlan p = f.plan();
  std::map<std::string, int> per_rack;
  for (const auto& s : p.start) ++per_rack[f.facts.at(s.node).labels.at("rack")];
  EXPECT_EQ(per_rack["r0"], 1);  // 2 minus the quarantined one
  EXPECT_EQ(per_rack["r1"], 2);
  EXPECT_EQ(per_rack["r2"], 2);
  EXPECT_GT(p.waiting_on_cluster_budget, 0);
  // A cluster-wide total too.
  f.cluster = ClusterBudget{"rack", 10, kube::IntOrPercent{false, 3}};
  EXPECT_EQ(f.plan().start.size(), 2u);  // 3 minus the quarantined one
}

TEST(Rollout, PauseDisableGatesAndOthersCordons) {
  Fleet f = fleet(4, "  default: {budget: {count: 4}, strategy: {fixed: {initialBatch: 4}}}\n");
  f.set.pause = true;
  RolloutPlan p = f.plan();
  EXPECT_TRUE(p.paused);
  EXPECT_TRUE(p.start.empty());
  EXPECT_EQ(p.compartments[0].pending, 4);
  f.set.pause = false;
  f.set.disable = true;
  EXPECT_TRUE(f.plan().start.empty());
  EXPECT_TRUE(f.plan().compartments.empty());
  f.set.disable = false;
  f.gated = {"n000"};
  f.facts["n001"].unschedulable = true;  // someone else's cordon: never ours to take
  f.facts["n002"].ready = false;
  RolloutPlan q = f.plan();
  ASSERT_EQ(q.start.size(), 1u);
  EXPECT_EQ(q.start[0].node, "n003");
  EXPECT_EQ(q.compartments[0].out, 3);  // the cordoned, the not-ready and the started node
}

TEST(Rollout, MalformedAndBlockedNodesAreReportedWhileOthersProceed) {
  Fleet f = fleet(3, "  default: {budget: {count: 3}, strategy: {fixed: {initialBatch: 3}}}\n");
  f.bad_records["n000"] = "record.state: \"Dancing\" is not Idle, InProgress, Done or Failed";
  NodeRecord newer;
  newer.set = "test";
  newer.installed["sysctl"] = InstalledPackage{"9.0.0", "r/sysctl:9.0.0", {}, false, {}, {}, {}};
  f.records["n001"] = newer;  // downgrade refused
  RolloutPlan p = f.plan();
  EXPECT_EQ(p.malformed_count, 1);
  EXPECT_NE(p.malformed[0].find("n000: record.state"), std::string::npos);
  EXPECT_EQ(p.blocked_count, 1);
  EXPECT_NE(p.blocked[0].find("n001: package sysctl"), std::string::npos);
  ASSERT_EQ(p.start.size(), 1u);
  EXPECT_EQ(p.start[0].node, "n002");
  EXPECT_FALSE(p.complete);
}

TEST(Rollout, NoPlanEverExceedsABudget) {
  // Random fleets in random states: every plan keeps every compartment, the fleet and every
  // topology domain within its budget (or starts nothing where it already is over).
  std::mt19937 rng(1234);
  for (int round = 0; round < 120; ++round) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::string pol = "  default: {budget: {count: " + std::to_string(pick(1, 6)) +
                      "}, strategy: {exponential: {initialBatch: " + std::to_string(pick(1, 5)) +
                      ", failureThreshold: 3, safetyLimit: 60}}}\n  compartments:\n"
                      "    - {name: c1, selector: {matchLabels: {zone: a}}, budget: {percent: " +
                      std::to_string(pick(1, 60)) +
                      "}, strategy: {linear: {initialBatch: " + std::to_string(pick(1, 8)) +
                      ", step: 2}}}\n"
                      "    - {name: c2, selector: {matchLabels: {rack: r1}}, budget: {count: " +
                      std::to_string(pick(1, 4)) +
                      "}, strategy: {fixed: {initialBatch: " + std::to_string(pick(1, 8)) + "}}}\n";
    Fleet f;
    f.policy = policy_from_yaml(pol);
    f.cluster = ClusterBudget{"rack", pick(1, 4), kube::IntOrPercent{pick(0, 1) == 1, pick(1, 30)}};
    int n = pick(1, 80);
    for (int i = 0; i < n; ++i) {
      Labels l{{"rack", "r" + std::to_string(pick(0, 5))}};
      if (pick(0, 1)) l["zone"] = "a";
      f.add(pad(i), l);
      if (pick(0, 9) == 0) f.facts[pad(i)].ready = false;
      if (pick(0, 14) == 0) f.outside.insert(pad(i));
    }
    // Let the rollout run some steps with random outcomes, checking each plan.
    for (int step = 0; step < 12; ++step) {
      RolloutPlan p = f.plan();
      // Recompute out counts independently of the planner.
      std::map<std::string, std::int64_t> comp_out, dom_out;
      std::map<std::string, std::string> comp_of;
      std::int64_t total = 0;
      for (auto& [name, fa] : f.facts) {
        auto r = f.records.find(name);
        bool ours = r != f.records.end() &&
                    (r->second.state == NodeState::InProgress ||
                     (r->second.state == NodeState::Failed && r->second.epoch == f.epoch));
        if (ours || !fa.ready || fa.unschedulable || f.outside.contains(name)) {
          ++total;
          ++dom_out[fa.labels.at("rack")];
        }
      }
      std::map<std::string, std::int64_t> starts_c, starts_d;
      for (const NodeStart& s : p.start) {
        ++starts_c[s.compartment];
        ++starts_d[f.facts.at(s.node).labels.at("rack")];
        EXPECT_FALSE(f.outside.contains(s.node));
        EXPECT_TRUE(f.facts.at(s.node).ready);
      }
      std::int64_t limit_total = f.cluster->max_total.resolve(n);
      if (!p.start.empty()) {
        EXPECT_LE(total + static_cast<std::int64_t>(p.start.size()), limit_total);
      }
      for (auto& [d, k] : starts_d)
        EXPECT_LE(dom_out[d] + k, f.cluster->max_per_domain) << "domain " << d;
      for (const auto& c : p.compartments) {
        if (starts_c[c.name] > 0) {
          EXPECT_LE(c.out, c.budget) << c.name;  // out includes the starts
        }
        EXPECT_LE(starts_c[c.name], c.batch_size);
      }
      f.start();
      // Finish a random subset of the running nodes.
      for (auto& [name, r] : f.records) {
        if (r.state == NodeState::InProgress && pick(0, 2) > 0) f.finish(name, pick(0, 5) > 0);
      }
    }
  }
}

}  // namespace
}  // namespace gpufleet::hostpkg
