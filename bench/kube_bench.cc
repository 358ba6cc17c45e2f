// Kubernetes client benchmarks that need no API server: decoding a realistic GPU Node (~15 KB,
// 50 container images) into the cached, trimmed form, and the memory a cached Node takes.
// The kube-local benchmarks (list 5,000 Nodes vs kubectl, memory of an informer cache of
// 5,000 Nodes, watch latency) are in tests/integration/kube/run-live-bench.sh.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/json.h"
#include "kube/api/compact.h"
#include "kube/api/compact_json.h"
#include "kube/api/compact_protobuf.h"
#include "kube/api/disruption.h"
#include "kube/api/disruption_claims.h"
#include "kube/api/store.h"
#include "kube/api/trim.h"
#include "kube/watch_decoder.h"
#include "sim/node_object.h"
#include "support/source_paths.h"

namespace {

using namespace gpufleet;

// The fixture, re-serialized compactly as the API server sends it.
const std::string& node_json() {
  static const std::string text = [] {
    std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/node-gpu.json");
    std::ostringstream ss;
    ss << in.rdbuf();
    return core::to_json(core::parse_json(ss.str(), "node-gpu.json"));
  }();
  return text;
}

core::JsonPrune node_prune() {
  core::JsonPrune p;
  for (const auto& path : kube::node_prune_paths()) p.add(path);
  return p;
}

// Decode + prune while decoding + project to the controller's fields + share: exactly what an
// informer does per object before caching it.
void BM_DecodeNodeToCachedForm(benchmark::State& state) {
  const std::string& text = node_json();
  core::JsonPrune prune = node_prune();
  kube::Projection keep(kube::node_cache_fields());
  for (auto _ : state) {
    kube::ObjectPtr obj =
        std::make_shared<const core::Value>(keep.apply(core::parse_json(text, "node", &prune)));
    benchmark::DoNotOptimize(obj);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["node_bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_DecodeNodeToCachedForm);

// Pruning only (images and managedFields), no projection.
void BM_DecodeNodePruned(benchmark::State& state) {
  const std::string& text = node_json();
  core::JsonPrune prune = node_prune();
  for (auto _ : state) {
    core::Value v = core::parse_json(text, "node", &prune);
    benchmark::DoNotOptimize(v);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DecodeNodePruned);

// Baseline: the whole Node.
void BM_DecodeNodeFull(benchmark::State& state) {
  const std::string& text = node_json();
  for (auto _ : state) {
    core::Value v = core::parse_json(text, "node");
    benchmark::DoNotOptimize(v);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DecodeNodeFull);

// A watch event line carrying the Node, as the informer decodes it.
void BM_DecodeNodeWatchEvent(benchmark::State& state) {
  std::string line = "{\"type\":\"MODIFIED\",\"object\":" + node_json() + "}";
  core::JsonPrune prune = kube::watch_event_prune(kube::node_prune_paths());
  kube::Projection keep(kube::node_cache_fields());
  kube::RequestInfo info{"watch", "nodes", "", ""};
  for (auto _ : state) {
    kube::WatchEvent ev = kube::decode_watch_event(line, &prune, info);
    kube::ObjectPtr obj = std::make_shared<const core::Value>(keep.apply(std::move(ev.object)));
    benchmark::DoNotOptimize(obj);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * line.size()));
}
BENCHMARK(BM_DecodeNodeWatchEvent);

// The same Node as kube-apiserver served it as JSON and as protobuf
// (tests/kube/testdata/served, testdata/capture-protobuf.sh).
std::string served(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/served/" + name,
                   std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The informer's direct path per Node: bytes straight into the compact form, pruned (arg 0) or
// pruned and projected to the health fields (arg 1). JSON vs protobuf of the same object.
void BM_CompactNodeFromJson(benchmark::State& state) {
  // Compact, as the API server sends it to clients that are not curl.
  static const std::string text = core::to_json(core::parse_json(served("node.json")));
  core::JsonPrune prune = node_prune();
  core::JsonPrune keep = kube::projection_tree(kube::node_health_fields());
  kube::CompactDecodeShape shape{&prune, state.range(0) != 0 ? &keep : nullptr};
  for (auto _ : state) {
    kube::CompactPtr c = kube::decode_compact_json(text, shape, "node");
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_CompactNodeFromJson)->ArgName("health")->Arg(0)->Arg(1);

void BM_CompactNodeFromProtobuf(benchmark::State& state) {
  static const std::string body = served("node.pb");
  kube::ProtobufEnvelope env = kube::unwrap_protobuf(body, "node");
  kube::ProtobufKind kind = *kube::ProtobufKind::find("Node");
  core::JsonPrune prune = node_prune();
  core::JsonPrune keep = kube::projection_tree(kube::node_health_fields());
  kube::CompactDecodeShape shape{&prune, state.range(0) != 0 ? &keep : nullptr};
  for (auto _ : state) {
    kube::CompactPtr c = kube::decode_compact_protobuf(env.raw, kind, shape, &env, "node");
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * env.raw.size()));
}
BENCHMARK(BM_CompactNodeFromProtobuf)->ArgName("health")->Arg(0)->Arg(1);

// Heap bytes per cached Node for 5,000 distinct Nodes in a Store (with the namespace index),
// from glibc's allocator statistics. Arg 0: pruned only; 1: pruned and projected.
void BM_CachedNodeMemory(benchmark::State& state) {
  constexpr int kNodes = 5000;
  core::JsonPrune prune = node_prune();
  kube::Projection keep(kube::node_cache_fields());
  const bool project = state.range(0) == 1;
  std::string base = node_json();
  const std::string needle = "\"name\":\"gpu-node-a100-0042\"";
  std::size_t at = base.find(needle);
  for (auto _ : state) {
    malloc_trim(0);
    std::size_t before = mallinfo2().uordblks;
    {
      kube::Store store;
      store.add_index(kube::kNamespaceIndex, kube::index_by_namespace);
      for (int i = 0; i < kNodes; ++i) {
        std::string text = base;
        text.replace(at, needle.size(), "\"name\":\"gpu-node-" + std::to_string(100000 + i) + "\"");
        core::Value v = core::parse_json(text, "node", &prune);
        if (project) v = keep.apply(std::move(v));
        store.upsert(std::make_shared<const core::Value>(std::move(v)));
      }
      std::size_t after = mallinfo2().uordblks;
      state.counters["bytes_per_node"] =
          static_cast<double>(after - before) / static_cast<double>(kNodes);
    }
  }
}
BENCHMARK(BM_CachedNodeMemory)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

// Heap bytes per cached Node for 5,000 simulated H100 Nodes (sim::node_object: GFD/NFD labels,
// taints, conditions, capacity/allocatable, as `gpufleet sim` registers them), round-tripped
// through JSON as the API server serves them and pruned of managedFields and images while
// decoding. Counted with glibc's mallinfo2 (bytes in use), the interner included (a fresh one).
//   form 0: core::Value tree (today)         1: compact form
//   fields 0: everything left after pruning  1: node_cache_fields()  2: node_health_fields()
void BM_CachedSimNodeMemory(benchmark::State& state) {
  constexpr int kNodes = 5000;
  const bool compact = state.range(0) == 1;
  const int fields = static_cast<int>(state.range(1));
  sim::FleetSpec fleet = sim::load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  fleet.pools.resize(1);
  fleet.pools[0].count = kNodes;
  std::vector<std::string> texts;
  texts.reserve(kNodes);
  for (const sim::NodeIdentity& id : sim::expand_fleet(fleet)) {
    sim::NodeRuntime rt =
        sim::initial_runtime(fleet, id, sim::boot_id_for(id, 0), "2026-01-01T00:00:00Z");
    core::Value node = sim::node_object(fleet, id, rt, "2026-01-01T00:00:00Z");
    node["metadata"]["uid"] =
        "6c1f3e2a-0d4b-4c7e-9f1a-" + std::to_string(100000000000 + texts.size());
    node["metadata"]["resourceVersion"] = std::to_string(1000 + texts.size());
    node["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z";
    texts.push_back(core::to_json(node));
  }
  core::JsonPrune prune = node_prune();
  kube::Projection keep(fields == 1 ? kube::node_cache_fields() : kube::node_health_fields());
  std::size_t served = 0;
  for (const auto& t : texts) served += t.size();
  for (auto _ : state) {
    malloc_trim(0);
    std::size_t before = mallinfo2().uordblks;
    {
      kube::StringInterner interner;
      kube::Store store(kube::StoreOptions{compact});
      for (const std::string& text : texts) {
        core::Value v = core::parse_json(text, "node", &prune);
        if (fields != 0) v = keep.apply(std::move(v));
        if (compact) {
          store.upsert_compact(kube::CompactObject::encode(v, interner));
        } else {
          store.upsert(std::make_shared<const core::Value>(std::move(v)));
        }
      }
      std::size_t after = mallinfo2().uordblks;
      state.counters["bytes_per_node"] =
          static_cast<double>(after - before) / static_cast<double>(kNodes);
      state.counters["served_bytes_per_node"] =
          static_cast<double>(served) / static_cast<double>(kNodes);
      state.counters["interned_strings"] = static_cast<double>(interner.size());
    }
  }
}
BENCHMARK(BM_CachedSimNodeMemory)
    ->ArgNames({"compact", "fields"})
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Reads from the compact form: a label lookup in place, and rebuilding the whole core::Value
// (what Store::get pays in a compact store).
void BM_CompactNodeReads(benchmark::State& state) {
  core::JsonPrune prune = node_prune();
  core::Value v = core::parse_json(node_json(), "node", &prune);
  kube::CompactPtr c = kube::CompactObject::encode(v);
  const bool rebuild = state.range(0) == 1;
  for (auto _ : state) {
    if (rebuild) {
      benchmark::DoNotOptimize(c->to_value());
    } else {
      benchmark::DoNotOptimize(
          c->root().get_string({"metadata", "labels", "nvidia.com/gpu.product"}));
    }
  }
}
BENCHMARK(BM_CompactNodeReads)->ArgName("rebuild")->Arg(0)->Arg(1);

void BM_CompactNodeEncode(benchmark::State& state) {
  core::JsonPrune prune = node_prune();
  core::Value v = core::parse_json(node_json(), "node", &prune);
  for (auto _ : state) benchmark::DoNotOptimize(kube::CompactObject::encode(v));
}
BENCHMARK(BM_CompactNodeEncode);

// The budget controller's pass (controller/budget.cc) at 5,000 Nodes in the compact form: the
// one definition of "out" read from every Node, then the bounded status. A quarter of the
// nodes are out (cordoned, with hostpkg records and sentinel shares), racks of 18.
void BM_DisruptionBudgetPass(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  core::JsonPrune prune = node_prune();
  const core::Value base = core::parse_json(node_json(), "node", &prune);
  std::vector<kube::CompactPtr> nodes;
  for (int i = 0; i < n; ++i) {
    core::Value v = base;
    v["metadata"]["name"] = "node-" + std::to_string(i);
    v["metadata"]["labels"]["rack"] = "rack-" + std::to_string(i / 18);
    if (i % 4 == 0) {
      v["spec"]["unschedulable"] = true;
      v["metadata"]["annotations"]["gpufleet.io/cordon-owners"] =
          i % 8 == 0 ? "hostpkg" : "sentinel";
      v["metadata"]["annotations"]["hostpkg.gpufleet.io/record.driver"] =
          std::string("{\"set\":\"driver\",\"state\":\"") + (i % 8 == 0 ? "InProgress" : "Done") +
          "\",\"generation\":3}";
    }
    nodes.push_back(kube::CompactObject::encode(v));
  }
  kube::DisruptionBudgetSpec spec;
  spec.max_unavailable = kube::IntOrPercent{true, 10};
  spec.topology_key = "rack";
  spec.max_per_domain = 2;
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::vector<kube::NodeOutFacts> facts;
    facts.reserve(nodes.size());
    for (const auto& c : nodes) facts.push_back(kube::node_out_facts(*c, spec.topology_key, false));
    core::Value status = kube::budget_status(spec, facts);
    bytes = core::to_json(status).size();
    benchmark::DoNotOptimize(status);
  }
  state.counters["status_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_DisruptionBudgetPass)->Arg(5000)->Unit(benchmark::kMillisecond);

// One claim on the budget at 5,000 Nodes (controller/disruption_reservation.h, what hostpkg and
// sentinel do before a node goes): the scan of the cache for the nodes out, the claims' text
// read, the decision (every claim's liveness looked up in the cache), the text written. A
// quarter of the nodes out, racks of 18, `claims` live claims (each on a node out).
void BM_DisruptionClaim(benchmark::State& state) {
  const int n = 5000;
  const int claims = static_cast<int>(state.range(0));
  core::JsonPrune prune = node_prune();
  const core::Value base = core::parse_json(node_json(), "node", &prune);
  std::unordered_map<std::string, kube::CompactPtr> nodes;
  std::vector<kube::DisruptionClaim> stored;
  for (int i = 0; i < n; ++i) {
    core::Value v = base;
    const std::string name = "node-" + std::to_string(i);
    v["metadata"]["name"] = name;
    v["metadata"]["labels"]["rack"] = "rack-" + std::to_string(i / 18);
    if (i % 4 == 0) {
      v["spec"]["unschedulable"] = true;
      v["metadata"]["annotations"]["gpufleet.io/cordon-owners"] = "hostpkg";
      if (static_cast<int>(stored.size()) < claims)
        stored.push_back(
            {name, "rack-" + std::to_string(i / 18), "HostPackageSet/driver", 1'000'000, "100"});
    }
    nodes.emplace(name, kube::CompactObject::encode(v));
  }
  const std::string text = kube::disruption_claims_text(stored);
  const std::string key = "rack";
  // A node of a rack with nobody out (i % 4 == 1 of the last rack is not out).
  const std::string wanted = "node-" + std::to_string(n - 3);
  std::size_t granted = 0;
  for (auto _ : state) {
    std::vector<kube::CountedNode> counted;
    for (const auto& [name, c] : nodes) {
      kube::NodeOutFacts f = kube::node_out_facts(*c, key, false);
      if (kube::is_out(f)) counted.push_back({std::move(f.name), std::move(f.domain)});
    }
    auto lookup = [&](std::string_view name) {
      kube::ClaimedNodeView v;
      auto it = nodes.find(std::string(name));
      if (it == nodes.end()) return v;
      v.present = true;
      v.rv = std::string(it->second->resource_version());
      v.out = kube::is_out(kube::node_out_facts(*it->second, key, false));
      return v;
    };
    kube::ClaimDecision d =
        kube::decide_claims(kube::parse_disruption_claims(text),
                            {{wanted, "rack-" + std::to_string((n - 3) / 18), "Sentinel/x", "1"}},
                            counted, kube::ClaimLimits{n, INT64_MAX}, lookup, 1'000'000, 30);
    granted += d.granted[0] ? 1 : 0;
    std::string out = kube::disruption_claims_text(d.claims);
    benchmark::DoNotOptimize(out);
  }
  state.counters["claims_bytes"] = static_cast<double>(text.size());
  state.counters["granted"] = static_cast<double>(granted > 0);
}
BENCHMARK(BM_DisruptionClaim)->Arg(10)->Arg(500)->Arg(1250)->Unit(benchmark::kMillisecond);

}  // namespace
