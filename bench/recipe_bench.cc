// Recipe engine speed: the issue's targets are "resolve a recipe and render all five bundles
// in under 20 ms" and "resolve the whole library matrix in under 2 s".
#include <benchmark/benchmark.h>

#include "recipe/bundle.h"
#include "recipe/library.h"
#include "recipe/resolver.h"

namespace gpufleet::recipe {
namespace {

Query example_query() {
  Query q;
  q.criteria = {"eks", "h100", "ubuntu", "inference", "dynamo"};
  return q;
}

BundleOptions options() {
  BundleOptions o;
  o.repo_url = "https://git.example.com/platform/gpu-cluster.git";
  return o;
}

std::size_t render_all(const Recipe& r) {
  std::size_t files = 0;
  for (std::string_view name : deployer_names()) {
    files += render_bundle(r, parse_deployer(name), options()).size();
  }
  return files;
}

// What one `gpufleet recipe` + five `gpufleet bundle` runs compute: load the built-in
// library, resolve, render every deployer (in memory; no disk writes).
void BM_LoadResolveRenderAllBundles(benchmark::State& state) {
  for (auto _ : state) {
    Library lib = load_library(builtin_library_files());
    Recipe r = resolve(lib, example_query());
    benchmark::DoNotOptimize(render_all(r));
  }
}
BENCHMARK(BM_LoadResolveRenderAllBundles)->Unit(benchmark::kMillisecond);

void BM_ResolveRenderAllBundles(benchmark::State& state) {
  Library lib = load_library(builtin_library_files());
  for (auto _ : state) {
    Recipe r = resolve(lib, example_query());
    benchmark::DoNotOptimize(render_all(r));
  }
}
BENCHMARK(BM_ResolveRenderAllBundles)->Unit(benchmark::kMillisecond);

void BM_LoadLibrary(benchmark::State& state) {
  std::vector<LibraryFile> files = builtin_library_files();
  for (auto _ : state) benchmark::DoNotOptimize(load_library(files));
}
BENCHMARK(BM_LoadLibrary)->Unit(benchmark::kMillisecond);

// Every supported criteria combination, library load included.
void BM_ResolveWholeMatrix(benchmark::State& state) {
  std::size_t combos = 0;
  for (auto _ : state) {
    Library lib = load_library(builtin_library_files());
    combos = 0;
    for (const CriteriaValues& c : lib.supported_combinations()) {
      Query q;
      q.criteria = c;
      benchmark::DoNotOptimize(resolve(lib, q));
      ++combos;
    }
  }
  state.counters["combinations"] = static_cast<double>(combos);
}
BENCHMARK(BM_ResolveWholeMatrix)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpufleet::recipe
