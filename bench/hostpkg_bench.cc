// One rollout planning pass over a 5,000-node fleet mid-rollout: what the hostpkg controller
// pays on every reconcile of a HostPackageSet (the target is well under 10 ms), and the
// per-node stage plan inside it.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <deque>
#include <unordered_set>

#include "core/yaml.h"
#include "hostpkg/rollout.h"
#include "hostpkg/stage_plan.h"

namespace gpufleet::hostpkg {
namespace {

const char* kSet = R"(
apiVersion: gpufleet.io/v1alpha1
kind: HostPackageSet
metadata: {name: sysctl}
spec:
  nodeSelector: {matchExpressions: [{key: nvidia.com/gpu.present, operator: Exists}]}
  packages:
    sysctl:
      version: 1.1.0
      image: registry.example/sysctl
      configMap: {90-gpu.conf: "vm.max_map_count=1048576\n", 91-net.conf: "net.core.rmem_max=67108864\n"}
      configInterrupts: {"*.conf": {type: restartServices, services: [systemd-sysctl.service]}}
)";

const char* kPolicy = R"(
apiVersion: gpufleet.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: racks}
spec:
  default: {budget: {percent: 5}, strategy: {exponential: {initialBatch: 10, growthFactor: 2}}}
  compartments:
    - {name: canary, selector: {matchLabels: {tier: canary}}, budget: {count: 2}, strategy: {fixed: {initialBatch: 1}}}
    - {name: zone-b, selector: {matchExpressions: [{key: zone, operator: In, values: [b]}]}, budget: {percent: 10}, strategy: {linear: {initialBatch: 5, step: 5}}}
)";

struct Fleet {
  HostPackageSet set = parse_host_package_set(core::parse_yaml(kSet));
  DeploymentPolicy policy = parse_deployment_policy(core::parse_yaml(kPolicy));
  ClusterBudget cluster{"topology.kubernetes.io/rack", 2, kube::IntOrPercent{true, 10}};
  std::deque<NodeRecord> records;
  std::vector<NodeInput> nodes;
  std::unordered_set<std::string> outside;
};

// 5,000 nodes in 100 racks: 40% done, 2% in progress, 0.2% failed, the rest pending on the
// previous version; sentinel has 10 nodes quarantined.
Fleet& fleet() {
  static Fleet f = [] {
    Fleet f;
    DesiredState d = digest(f.set);
    HostPackageSet old = f.set;
    old.packages[0].version_text = "1.0.0";
    old.packages[0].version = core::SemVer::parse("1.0.0");
    DesiredState dold = digest(old);
    for (int i = 0; i < 5000; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "gpu-%04d", i);
      NodeInput n;
      n.facts.name = name;
      n.facts.labels = {{"nvidia.com/gpu.present", "true"},
                        {"topology.kubernetes.io/rack", "rack-" + std::to_string(i / 50)},
                        {"zone", i % 2 ? "a" : "b"}};
      if (i < 20) n.facts.labels["tier"] = "canary";
      NodeRecord& r = f.records.emplace_back();
      r.set = "sysctl";
      // Everyone ran the old version to completion first.
      for (NodePlan p = plan_node(dold, r); !p.steps.empty(); p = plan_node(dold, r)) {
        record_step_done(r, dold, p.steps[0]);
      }
      mark_node_done(r, dold);
      int pct = i % 500;
      if (pct < 200) {  // done with the new version
        for (NodePlan p = plan_node(d, r); !p.steps.empty(); p = plan_node(d, r))
          record_step_done(r, d, p.steps[0]);
        mark_node_done(r, d);
        r.batch = pct / 50;
      } else if (pct < 210) {
        r.state = NodeState::InProgress;
        r.rollout = d.target;
        r.batch = 4;
        n.facts.unschedulable = n.facts.cordon_ours = true;
      } else if (pct == 210) {
        r.state = NodeState::Failed;
        r.rollout = d.target;
        r.batch = 4;
        n.facts.unschedulable = n.facts.cordon_ours = true;
      }
      n.record = &r;
      f.nodes.push_back(std::move(n));
      if (i % 500 == 499) f.outside.insert(name);
    }
    return f;
  }();
  return f;
}

void BM_PlanRollout5000(benchmark::State& state) {
  Fleet& f = fleet();
  RolloutInput in;
  in.set = &f.set;
  in.policy = &f.policy;
  in.cluster = &f.cluster;
  in.nodes = f.nodes;
  in.outside = &f.outside;
  std::size_t started = 0;
  for (auto _ : state) {
    RolloutPlan p = plan_rollout(in);
    started = p.start.size();
    benchmark::DoNotOptimize(p);
  }
  state.counters["started"] = static_cast<double>(started);
}
BENCHMARK(BM_PlanRollout5000)->Unit(benchmark::kMillisecond);

void BM_PlanNode(benchmark::State& state) {
  Fleet& f = fleet();
  DesiredState d = digest(f.set);
  const NodeRecord& r = *f.nodes[300].record;  // pending on the old version
  for (auto _ : state) benchmark::DoNotOptimize(plan_node(d, r));
}
BENCHMARK(BM_PlanNode);

}  // namespace
}  // namespace gpufleet::hostpkg
