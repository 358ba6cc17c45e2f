// Journal throughput: records/s made durable (fdatasync) one at a time and with group commit,
// on the file system of $GPUFLEET_BENCH_DIR (default: the system temp directory).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/journal.h"
#include "agent/nodehealth.h"

namespace {

namespace fs = std::filesystem;
using gpufleet::agent::Journal;
using gpufleet::agent::JournalOptions;
using gpufleet::agent::NewRecord;

fs::path bench_dir() {
  const char* env = std::getenv("GPUFLEET_BENCH_DIR");
  fs::path base = env != nullptr ? fs::path(env) : fs::temp_directory_path();
  std::string tmpl = (base / "journal-bench-XXXXXX").string();
  return ::mkdtemp(tmpl.data());
}

// A typical health record (an Xid on one GPU): ~200 bytes of JSON.
const std::string kPayload =
    R"({"check":"xid","entity":"GPU-8f3e2b9c-1d4a-4e6f-9a7b-3c2d1e0f4a5b","entityKind":"GPU",)"
    R"("state":"Fatal","reason":"Xid79","message":"GPU has fallen off the bus","time":"2026-12-01T04:00:00.000000Z"})";

// Arg 0: records per commit (1 = no group commit). Arg 1: fsync on/off.
void BM_JournalAppend(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  JournalOptions o;
  o.dir = bench_dir();
  o.fsync = state.range(1) != 0;
  {
    Journal j(o);
    std::vector<NewRecord> records(batch, NewRecord{"health", kPayload});
    for (auto _ : state) {
      if (batch == 1) {
        j.append("health", kPayload);
      } else {
        j.append_batch(records);
      }
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
    state.SetBytesProcessed(
        static_cast<std::int64_t>(state.iterations() * batch * (kPayload.size() + 27)));
  }
  fs::remove_all(o.dir);
}
BENCHMARK(BM_JournalAppend)
    ->Args({1, 1})
    ->Args({16, 1})
    ->Args({128, 1})
    ->Args({1, 0})
    ->Args({128, 0})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0)
    ->UseRealTime();

// Reading the backlog and acking it (delivery side, no sink), 128 records per batch.
void BM_JournalDrain(benchmark::State& state) {
  JournalOptions o;
  o.dir = bench_dir();
  o.fsync = false;
  {
    Journal j(o);
    std::vector<NewRecord> records(128, NewRecord{"health", kPayload});
    for (auto _ : state) {
      state.PauseTiming();
      j.append_batch(records);
      state.ResumeTiming();
      auto p = j.pending(128);
      j.ack(p.back().id);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 128));
  }
  fs::remove_all(o.dir);
}
BENCHMARK(BM_JournalDrain)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
