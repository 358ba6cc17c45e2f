// CEL evaluation benchmarks: the certification threshold, the sentinel quarantine rule over
// a Node object, and macros over a 100-element list. This binary replaces the global
// operator new to count allocations; "allocs/eval" must be 0 for the first two.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "cel/cel.h"
#include "cel/cost.h"
#include "core/json.h"

namespace {
std::atomic<long> g_allocs{0};
void* counted(std::size_t n) noexcept {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
}  // namespace

// The replacements pair malloc with free on purpose; GCC's -Wmismatched-new-delete cannot
// see that once they are inlined into the static initializers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using namespace gpufleet;

// Runs `p` in the benchmark loop and reports allocations per evaluation.
void run(benchmark::State& state, const cel::Program& p, const cel::Activation& act, bool want) {
  long before = g_allocs.load();
  for (auto _ : state) {
    bool r = p.evaluate_bool(act);
    if (r != want) state.SkipWithError("unexpected result");
    benchmark::DoNotOptimize(r);
  }
  state.counters["allocs/eval"] =
      static_cast<double>(g_allocs.load() - before) /
      static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
}

void BM_Threshold(benchmark::State& state) {
  cel::Env env;
  env.variable("value", "int");
  cel::Program p = cel::compile("value >= 300", env);
  core::Value value(512);
  cel::Activation act;
  act.bind("value", value);
  run(state, p, act, true);
}
BENCHMARK(BM_Threshold);

const char* kNode = R"({
  "apiVersion": "v1", "kind": "Node",
  "metadata": {"name": "gpu-node-017", "uid": "6f1c2b1e-0c5d-4b8e-9a3e-2f7d8c1b0a99",
    "labels": {"kubernetes.io/hostname": "gpu-node-017", "kubernetes.io/os": "linux",
      "node.kubernetes.io/instance-type": "p5.48xlarge", "nvidia.com/gpu.count": "8",
      "nvidia.com/gpu.machine": "p5.48xlarge", "nvidia.com/gpu.memory": "81559",
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/cuda.driver.major": "550",
      "topology.kubernetes.io/zone": "us-east-1a"},
    "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
  "status": {"capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "8"},
    "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]}
})";

void BM_QuarantineRule(benchmark::State& state) {
  cel::Env env;
  env.variable("event").variable("node", "map(string, dyn)");
  cel::Program p = cel::compile(
      "event.isFatal && event.errorCode in ['79', '48', '94'] && "
      "node.metadata.labels['nvidia.com/gpu.product'].startsWith('NVIDIA-H100')",
      env);
  core::Value node = core::parse_json(kNode);
  core::Value event = core::parse_json(R"({"isFatal": true, "errorCode": "94", "gpu": 3})");
  cel::Activation act;
  act.bind("event", event).bind("node", node);
  run(state, p, act, true);
}
BENCHMARK(BM_QuarantineRule);

core::Value hundred() {
  core::Value xs = core::Value::list();
  for (int i = 0; i < 100; ++i) xs.push_back(i * 7 % 100);
  return xs;
}

void BM_MacroAll100(benchmark::State& state) {
  cel::Env env;
  env.variable("xs", "list(int)");
  cel::Program p = cel::compile("xs.all(x, x >= 0 && x < 100)", env);
  core::Value xs = hundred();
  cel::Activation act;
  act.bind("xs", xs);
  run(state, p, act, true);
}
BENCHMARK(BM_MacroAll100);

void BM_MacroFilterMap100(benchmark::State& state) {
  cel::Env env;
  env.variable("xs", "list(int)");
  cel::Program p = cel::compile("xs.filter(x, x % 2 == 0).map(x, x * 2).size() == 50", env);
  core::Value xs = hundred();
  cel::Activation act;
  act.bind("xs", xs);
  run(state, p, act, true);
}
BENCHMARK(BM_MacroFilterMap100);

void BM_Compile(benchmark::State& state) {
  cel::Env env;
  env.variable("event").variable("node", "map(string, dyn)");
  for (auto _ : state) {
    cel::Program p = cel::compile(
        "event.isFatal && event.errorCode in ['79', '48', '94'] && "
        "node.metadata.labels['nvidia.com/gpu.product'].startsWith('NVIDIA-H100')",
        env);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_Compile);

// The static cost estimate of a rule at admission: the quarantine rule, and the pattern rule
// over a bounded history (a comprehension with a conjunction of field comparisons).
void estimate(benchmark::State& state, const char* rule) {
  cel::Env env;
  env.variable("event").variable("node").variable("history");
  cel::Program p = cel::compile(rule, env);
  const auto entry = cel::Shape::object({{"type", cel::Shape::string(32)},
                                         {"code", cel::Shape::scalar()},
                                         {"entity", cel::Shape::string(512)},
                                         {"ageSeconds", cel::Shape::scalar()}});
  cel::Sizes sizes;
  sizes.variable("history", cel::Shape::list(32, entry))
      .variable("event", cel::Shape::object({{"isFatal", cel::Shape::scalar()},
                                             {"errorCode", cel::Shape::string(8)}}))
      .variable("node",
                cel::Shape::object(
                    {{"metadata", cel::Shape::object(
                                      {{"labels", cel::Shape::map(cel::Shape::kUnbounded, nullptr,
                                                                  cel::Shape::string(63))}},
                                      nullptr)}},
                    nullptr));
  for (auto _ : state) {
    cel::CostEstimate c = cel::estimate_cost(p, sizes);
    benchmark::DoNotOptimize(c);
  }
}
void BM_EstimateQuarantineRule(benchmark::State& state) {
  estimate(state,
           "event.isFatal && event.errorCode in ['79', '48', '94'] && "
           "node.metadata.labels['nvidia.com/gpu.product'].startsWith('NVIDIA-H100')");
}
BENCHMARK(BM_EstimateQuarantineRule);
void BM_EstimatePatternRule(benchmark::State& state) {
  estimate(state,
           "event.isFatal && history.filter(h, h.type == 'Xid' && h.code == 79 && "
           "h.entity == 'GPU-0' && h.ageSeconds < 86400).size() >= 5");
}
BENCHMARK(BM_EstimatePatternRule);

}  // namespace
