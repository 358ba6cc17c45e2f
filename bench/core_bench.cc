// Hot paths of the core utilities: parsing versions/quantities/durations, metric updates,
// log line formatting and exposition rendering.
#include <benchmark/benchmark.h>

#include <string>

#include "core/log.h"
#include "core/metrics.h"
#include "core/quantity.h"
#include "core/semver.h"
#include "core/time.h"

namespace {

using namespace gpufleet::core;

void BM_SemVerParse(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(SemVer::parse("1.32.4-rc.1+build.5"));
}
BENCHMARK(BM_SemVerParse);

void BM_ConstraintSatisfied(benchmark::State& state) {
  const VersionConstraint c = VersionConstraint::parse(">= 1.32, < 1.34, != 1.33.1");
  const SemVer v = SemVer::parse("1.33.2");
  for (auto _ : state) benchmark::DoNotOptimize(c.satisfied_by(v));
}
BENCHMARK(BM_ConstraintSatisfied);

void BM_QuantityParse(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Quantity::parse("1.5Gi"));
}
BENCHMARK(BM_QuantityParse);

void BM_QuantityToString(benchmark::State& state) {
  const Quantity q = Quantity::parse("1.5Gi");
  for (auto _ : state) benchmark::DoNotOptimize(q.to_string());
}
BENCHMARK(BM_QuantityToString);

void BM_DurationParse(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(parse_duration("1h30m15.5s"));
}
BENCHMARK(BM_DurationParse);

void BM_TimestampParse(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(Timestamp::parse_rfc3339("2024-05-01T12:00:00.123456+02:00"));
  }
}
BENCHMARK(BM_TimestampParse);

void BM_CounterHandleInc(benchmark::State& state) {
  static metrics::Registry r;
  static auto handle = r.counter("bench_handle_total", "h", {"k"}).with({"v"});
  for (auto _ : state) handle.inc();
}
BENCHMARK(BM_CounterHandleInc)->Threads(1)->Threads(2);

void BM_CounterWithLookupInc(benchmark::State& state) {
  static metrics::Registry r;
  static auto& c = r.counter("bench_lookup_total", "h", {"reason", "pool"});
  for (auto _ : state) c.with({"xid", "a100"}).inc();
}
BENCHMARK(BM_CounterWithLookupInc)->Threads(1)->Threads(2);

void BM_HistogramObserve(benchmark::State& state) {
  static metrics::Registry r;
  static auto h = r.histogram("bench_seconds", "h", metrics::default_buckets()).with({});
  double v = 0;
  for (auto _ : state) {
    h.observe(v);
    v = v > 10 ? 0 : v + 0.01;
  }
}
BENCHMARK(BM_HistogramObserve);

void BM_RegistryRender100Series(benchmark::State& state) {
  metrics::Registry r;
  auto& c = r.counter("render_total", "h", {"node"});
  for (int i = 0; i < 100; ++i) c.with({"gpu-node-" + std::to_string(i)}).inc(i);
  std::string out;
  for (auto _ : state) {
    out.clear();
    r.render(out);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_RegistryRender100Series);

void BM_LogFormatLine(benchmark::State& state) {
  const std::string node = "gpu-node-17";
  const Timestamp t = Timestamp::parse_rfc3339("2024-05-01T12:00:00Z");
  const log::Field fields[] = {{"node", node}, {"xid", 79}, {"reason", "fell off the bus"}};
  const auto format = static_cast<log::Format>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        log::format_line(log::Level::Info, "node quarantined", fields, format, t));
  }
}
BENCHMARK(BM_LogFormatLine)->Arg(0)->Arg(1);

void BM_LogDisabledLevel(benchmark::State& state) {
  log::set_level(log::Level::Info);
  for (auto _ : state) log::debug("hidden", {{"k", 1}});
}
BENCHMARK(BM_LogDisabledLevel);

}  // namespace
