// Costs of the simulator's per-node work: what a 5,000-node fleet pays per heartbeat, per
// tick and per fault, and the nccl-tests output generator.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "core/json.h"
#include "core/yaml.h"
#include "sim/fleet_model.h"
#include "sim/kubelet/pod_run.h"
#include "sim/nccl_output.h"
#include "sim/node_object.h"
#include "support/source_paths.h"

namespace gpufleet::sim {
namespace {

const FleetSpec& h100() {
  static const FleetSpec f = load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  return f;
}

FleetSpec big_fleet(int nodes) {
  FleetSpec f = h100();
  f.pools.resize(1);
  f.pools[0].count = nodes;
  return f;
}

void BM_NodeObject(benchmark::State& state) {
  NodeIdentity id = make_node_identity(h100(), 0, 7);
  NodeRuntime rt = initial_runtime(h100(), id, boot_id_for(id, 0), "2026-01-01T00:00:00Z");
  for (auto _ : state) {
    benchmark::DoNotOptimize(node_object(h100(), id, rt, "2026-01-01T00:00:10Z"));
  }
}
BENCHMARK(BM_NodeObject);

// The status patch body and its JSON, sent at every status report.
void BM_NodeStatusJson(benchmark::State& state) {
  NodeIdentity id = make_node_identity(h100(), 0, 7);
  NodeRuntime rt = initial_runtime(h100(), id, boot_id_for(id, 0), "2026-01-01T00:00:00Z");
  for (auto _ : state) {
    benchmark::DoNotOptimize(core::to_json(node_status(h100(), id, rt, "2026-01-01T00:00:10Z")));
  }
}
BENCHMARK(BM_NodeStatusJson);

void BM_NodeModelCreate(benchmark::State& state) {
  int i = 0;
  for (auto _ : state) {
    NodeModel n(h100(), make_node_identity(h100(), 0, i++ % 32), 0);
    benchmark::DoNotOptimize(n.boot_id());
  }
}
BENCHMARK(BM_NodeModelCreate);

void BM_ApplyXid(benchmark::State& state) {
  NodeModel n(h100(), make_node_identity(h100(), 0, 0), 0);
  Fault f;
  f.type = FaultType::Xid;
  f.gpu = 2;
  f.code = 13;
  double t = 1;
  for (auto _ : state) n.apply(f, t += 0.001);
}
BENCHMARK(BM_ApplyXid);

void BM_RenderSignalFiles(benchmark::State& state) {
  NodeModel n(h100(), make_node_identity(h100(), 0, 0), 0);
  for (auto _ : state) benchmark::DoNotOptimize(n.signal_files());
}
BENCHMARK(BM_RenderSignalFiles);

// One simulator tick over a whole fleet with nothing due: what runs twice a second.
void BM_FleetAdvanceIdle(benchmark::State& state) {
  FleetModel fleet(big_fleet(static_cast<int>(state.range(0))), 0);
  double t = 0;
  for (auto _ : state) benchmark::DoNotOptimize(fleet.advance(t += 0.5));
  state.counters["nodes"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_FleetAdvanceIdle)->Arg(1000)->Arg(5000);

// Mirroring signal files when nothing changed (the steady state with --state-dir).
void BM_WriteSignalsUnchanged(benchmark::State& state) {
  FleetModel fleet(big_fleet(static_cast<int>(state.range(0))), 0);
  // Mark every node mirrored without touching the disk (the first mirror is measured below).
  auto root = std::filesystem::temp_directory_path() / ("sim-bench-" + std::to_string(::getpid()));
  while (!fleet.take_signal_writes(root.string(), 1000).empty()) {
  }
  for (auto _ : state) benchmark::DoNotOptimize(fleet.write_signals(root.string()));
  std::filesystem::remove_all(root);
}
BENCHMARK(BM_WriteSignalsUnchanged)->Arg(5000);

// The first mirror of a node (about 105 files: kmsg, IB ports, nvidia-smi, /proc, host files).
void BM_FirstMirrorOfANode(benchmark::State& state) {
  auto root = std::filesystem::temp_directory_path() / ("sim-bench1-" + std::to_string(::getpid()));
  int i = 0;
  for (auto _ : state) {
    NodeModel n(h100(), make_node_identity(h100(), 0, i++ % 32), 0);
    benchmark::DoNotOptimize(n.write_signal_files(root.string()));
  }
  std::filesystem::remove_all(root);
}
BENCHMARK(BM_FirstMirrorOfANode)->Unit(benchmark::kMillisecond);

void BM_AllReducePerfOutput(benchmark::State& state) {
  FleetModel fleet(big_fleet(8), 0);
  std::vector<std::string> hosts;
  for (int i = 0; i < state.range(0); ++i)
    hosts.push_back(fleet.node_names()[static_cast<std::size_t>(i)]);
  auto members = fleet.group(hosts);
  for (auto _ : state) benchmark::DoNotOptimize(run_allreduce_test(members, NcclTestConfig{}));
}
BENCHMARK(BM_AllReducePerfOutput)->Arg(1)->Arg(4);

// A pod's whole life as the simulated kubelet runs it (2 init containers, one a sidecar, 2
// containers): plan, every transition and the status bodies (JSON) it posts on the way.
void BM_PodLifecycle(benchmark::State& state) {
  core::Value pod = core::parse_yaml(R"(
metadata: {name: p, namespace: ns, uid: 0b7c-4f1e}
spec:
  nodeName: h100-00000
  restartPolicy: Never
  initContainers:
  - {name: setup, image: busybox:1.36}
  - {name: proxy, image: envoyproxy/envoy:v1.31, restartPolicy: Always}
  containers:
  - {name: main, image: ghcr.io/example/trainer:2}
  - {name: side, image: busybox:1.36}
)");
  BehaviourTable table = BehaviourTable::defaults();
  PodEnv env;
  env.wall = [](double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s));
  };
  auto t0 = std::chrono::steady_clock::now();
  std::size_t bytes = 0;
  for (auto _ : state) {
    PodRun run = make_pod_run(pod, table.plan(pod), table.back_off(), "10.64.0.1", "10.128.0.2");
    for (int s = 0; s <= 8 && !run.terminal(); ++s) {
      if (advance_pod(run, t0 + env.wall(s), "2026-01-01T00:00:00Z", env)) {
        bytes += core::to_json(pod_status(run, "2026-01-01T00:00:00Z")).size();
      }
    }
    benchmark::DoNotOptimize(run.stage);
  }
  state.counters["status_bytes"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_PodLifecycle);

}  // namespace
}  // namespace gpufleet::sim
