// Benchmarks against a real API server (kube-local): memory of an informer cache of N Nodes,
// listing N Nodes against `kubectl get nodes -o json`, and watch event -> handler latency at a
// fixed update rate. Run through run-live-bench.sh; prints one line per figure.
//   kube_live_bench KUBECONFIG [NODES=5000] [RATE=500] [SECONDS=10]
//   [PARTS=list,memory,watch-nodes,watch-configmaps]
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/json.h"
#include "kube/api/objects.h"
#include "kube/api/trim.h"
#include "kube/informer.h"
#include "support/source_paths.h"

using namespace gpufleet;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

const char* kSelector = "gpufleet.io/bench=kube";

core::Value fixture() {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/node-gpu.json");
  std::ostringstream ss;
  ss << in.rdbuf();
  return core::parse_json(ss.str(), "node-gpu.json");
}

kube::ListOptions bench_selector() {
  kube::ListOptions o;
  o.label_selector = kSelector;
  return o;
}

double seconds_since(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

void create_nodes(kube::Client& client, int n) {
  std::size_t existing = client.list(kube::resources::nodes(), "", bench_selector()).items.size();
  if (static_cast<int>(existing) >= n) {
    std::printf("setup: %zu bench Nodes already exist\n", existing);
    return;
  }
  core::Value base = fixture();
  auto start = Steady::now();
  std::atomic<int> next{static_cast<int>(existing)};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        core::Value node = base;
        node["metadata"].as_map().erase("managedFields");
        node["metadata"].as_map().erase("uid");
        node["metadata"].as_map().erase("resourceVersion");
        node["metadata"].as_map().erase("creationTimestamp");
        node["metadata"]["name"] = "bench-node-" + std::to_string(i);
        node["metadata"]["labels"]["gpufleet.io/bench"] = "kube";
        core::Value status = std::move(node["status"]);
        node.as_map().erase("status");
        try {
          client.create(kube::resources::nodes(), node);
          // A merge patch of the status subresource: the node controller may have touched the
          // Node since, and a patch does not conflict with that.
          core::Value patch;
          patch["status"] = std::move(status);
          client.patch(kube::resources::nodes(), "", kube::name_of(node), kube::PatchType::Merge,
                       patch, "status");
        } catch (const std::exception& e) {
          if (errors++ < 3) std::fprintf(stderr, "setup: %s\n", e.what());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::printf("setup: created %d Nodes (with 50-image status) in %.1f s, %d errors\n",
              n - static_cast<int>(existing), seconds_since(start), errors.load());
}

std::size_t heap_in_use() { return mallinfo2().uordblks; }

void measure_cache_memory(kube::Client& client, int n, const char* label,
                          std::function<void(core::Value&)> transform) {
  malloc_trim(0);
  std::size_t before = heap_in_use();
  {
    kube::InformerOptions o;
    o.resource = kube::resources::nodes();
    o.label_selector = kSelector;
    o.shape.prune = kube::node_prune_paths();
    o.transform = std::move(transform);
    kube::Informer inf(client, o);
    inf.start();
    if (!inf.wait_for_sync(300s)) {
      std::printf("memory %s: informer did not sync: %s\n", label, inf.last_error().c_str());
      return;
    }
    // Stop first: the informer thread's JSON parser keeps buffers sized for the largest list
    // page it decoded; they are freed with the thread and are not part of the cache.
    inf.stop();
    std::size_t after = heap_in_use();
    std::printf("memory %s: %zu Nodes cached, %.0f bytes per Node (heap in use, glibc mallinfo2)\n",
                label, inf.store().size(),
                static_cast<double>(after - before) / static_cast<double>(inf.store().size()));
    (void)n;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void measure_list(kube::Client& client, const std::string& kubeconfig) {
  std::vector<double> ours, kubectl;
  std::size_t count = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t = Steady::now();
    kube::ListResult r = client.list(kube::resources::nodes(), "", bench_selector());
    ours.push_back(seconds_since(t));
    count = r.items.size();
    t = Steady::now();
    std::string cmd =
        "kubectl --kubeconfig " + kubeconfig + " get nodes -l " + kSelector + " -o json >/dev/null";
    if (std::system(cmd.c_str()) != 0) std::printf("list: kubectl failed\n");
    kubectl.push_back(seconds_since(t));
  }
  std::printf(
      "list %zu Nodes (full objects, pages of 500): gpufleet %.3f s, kubectl get -o json %.3f s "
      "(medians of 3); kubectl/gpufleet = %.2fx\n",
      count, median(ours), median(kubectl), median(kubectl) / median(ours));
}

// Update sent -> handler latency for `total` merge patches at `rate`/s over objects
// name_prefix0..n-1 of `resource` in namespace `ns` ("" for cluster-scoped).
void measure_watch_latency(kube::Client& client, const kube::ResourceId& resource,
                           const std::string& ns, const std::string& name_prefix,
                           const std::string& selector, int n, int rate, int seconds,
                           const char* label) {
  std::mutex mu;
  std::vector<double> latencies_ms;
  kube::InformerOptions o;
  o.resource = resource;
  o.namespace_ = ns;
  o.label_selector = selector;
  if (resource == kube::resources::nodes()) {
    o.shape.prune = kube::node_prune_paths();
    kube::Projection keep(kube::node_cache_fields());
    o.transform = [keep](core::Value& v) { v = keep.apply(std::move(v)); };
  }
  kube::Informer inf(client, o);
  kube::EventHandlers handlers;
  handlers.on_update = [&](const core::Value& old_obj, const core::Value& new_obj) {
    std::string_view sent = kube::annotation_of(new_obj, "gpufleet.io/bench-sent");
    if (sent.empty() || sent == kube::annotation_of(old_obj, "gpufleet.io/bench-sent")) return;
    auto now = Steady::now().time_since_epoch().count();
    double ms = static_cast<double>(now - std::stoll(std::string(sent))) / 1e6;
    std::lock_guard lock(mu);
    latencies_ms.push_back(ms);
  };
  inf.add_handlers(std::move(handlers));
  inf.start();
  if (!inf.wait_for_sync(300s)) return;
  const int total = rate * seconds;
  std::atomic<int> sent{0}, errors{0};
  auto start = Steady::now();
  std::vector<std::thread> writers;
  // Enough writers that the request round trip does not cap the rate (HTTP/2 multiplexes them).
  for (int w = 0; w < 64; ++w) {
    writers.emplace_back([&] {
      for (int i = sent++; i < total; i = sent++) {
        // A fixed schedule: update i leaves at start + i/rate, whatever the server's pace.
        std::this_thread::sleep_until(start + std::chrono::microseconds(i * 1000000LL / rate));
        core::Value patch;
        patch["metadata"]["annotations"]["gpufleet.io/bench-sent"] =
            std::to_string(Steady::now().time_since_epoch().count());
        try {
          client.patch(resource, ns, name_prefix + std::to_string(i % n), kube::PatchType::Merge,
                       patch);
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  double elapsed = seconds_since(start);
  std::this_thread::sleep_for(2s);
  std::lock_guard lock(mu);
  std::vector<double> l = latencies_ms;
  std::sort(l.begin(), l.end());
  if (l.empty()) {
    std::printf("watch: no events seen\n");
    return;
  }
  auto pct = [&](double p) {
    return l[std::min(l.size() - 1, static_cast<std::size_t>(p * l.size()))];
  };
  std::printf(
      "watch %s: %d updates in %.1f s (%.0f/s), %zu seen by the handler, %d errors; update sent -> "
      "handler latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
      label, total, elapsed, total / elapsed, l.size(), errors.load(), pct(0.5), pct(0.9),
      pct(0.99), l.back());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s KUBECONFIG [NODES=5000] [RATE=500] [SECONDS=10]\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string kubeconfig = argv[1];
  int n = argc > 2 ? std::atoi(argv[2]) : 5000;
  int rate = argc > 3 ? std::atoi(argv[3]) : 500;
  int seconds = argc > 4 ? std::atoi(argv[4]) : 10;
  std::string parts = argc > 5 ? argv[5] : "list,memory,watch-nodes,watch-configmaps";
  kube::ClientConfig cfg = kube::load_kubeconfig({{kubeconfig}, ""});
  cfg.qps = 0;  // measure the server and the client, not the client-side limiter
  cfg.request_timeout = 120s;
  kube::Client client(cfg);
  if (parts.find("list") != std::string::npos || parts.find("memory") != std::string::npos ||
      parts.find("watch-nodes") != std::string::npos) {
    create_nodes(client, n);
  }
  if (parts.find("list") != std::string::npos) measure_list(client, kubeconfig);
  if (parts.find("memory") != std::string::npos) {
    measure_cache_memory(client, n, "pruned (images, managedFields)", {});
    kube::Projection keep(kube::node_cache_fields());
    measure_cache_memory(client, n, "pruned + node_cache_fields()",
                         [keep](core::Value& v) { v = keep.apply(std::move(v)); });
    // What a node-health controller reads: schedulability, taints and condition states.
    kube::Projection health({"metadata.name", "metadata.resourceVersion", "spec.unschedulable",
                             "spec.taints.key", "spec.taints.value", "spec.taints.effect",
                             "status.conditions.type", "status.conditions.status"});
    measure_cache_memory(client, n, "pruned + health projection",
                         [health](core::Value& v) { v = health.apply(std::move(v)); });
  }
  if (parts.find("watch-nodes") != std::string::npos) {
    measure_watch_latency(client, kube::resources::nodes(), "", "bench-node-", kSelector, n, rate,
                          seconds, "(Nodes)");
  }
  if (parts.find("watch-configmaps") != std::string::npos) {
    // Small objects: what the API server itself can carry at this rate on this machine.
    const std::string ns = "kube-live-bench";
    core::Value nsobj;
    nsobj["metadata"]["name"] = ns;
    try {
      client.create(kube::resources::namespaces(), nsobj);
    } catch (const kube::ApiError&) {
    }
    for (int i = 0; i < 100; ++i) {
      core::Value cm;
      cm["metadata"]["name"] = "bench-cm-" + std::to_string(i);
      cm["metadata"]["namespace"] = ns;
      try {
        client.create(kube::resources::config_maps(), cm);
      } catch (const kube::ApiError&) {
      }
    }
    measure_watch_latency(client, kube::resources::config_maps(), ns, "bench-cm-", "", 100, rate,
                          seconds, "(ConfigMaps)");
  }
  return 0;
}
