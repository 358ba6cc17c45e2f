// Controller runtime benchmarks against a real API server (kube-local; see
// docs/performance.md and run-controller-bench.sh):
//   controller_live_bench KUBECONFIG [PARTS=events,queue,rss] [NODES=5000] [SECONDS=20]
// events: ConfigMap patches from 4 writer threads for SECONDS; events/s through
//         watch -> cache -> queue -> reconcile with a no-op reconciler, counted once every
//         event has reached the cache and the queue is empty.
// queue:  the work loop alone (no API server): 500,000 enqueues of 5,000 keys, no-op reconciles.
// rss:    NODES real-looking Nodes (the simulator's labels, status, GFD/NFD labels) in a
//         Manager cache with a no-op controller; process RSS before and after.
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "controller/manager.h"
#include "core/log.h"
#include "core/yaml.h"
#include "kube/api/trim.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "sim/fleet_spec.h"
#include "sim/node_identity.h"
#include "sim/node_object.h"
#include "support/source_paths.h"

using namespace gpufleet;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

class Noop : public controller::Reconciler {
 public:
  controller::Result reconcile(const controller::Request&, std::stop_token) override {
    calls.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  std::atomic<std::uint64_t> calls{0};
};

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

controller::ManagerOptions options(const char* name) {
  controller::ManagerOptions mo;
  mo.name = name;
  mo.metrics_address = "";
  return mo;
}

void bench_events(kube::Client& client, int seconds) {
  auto cms = kube::resources::config_maps();
  std::string ns = "controller-bench-" + std::to_string(::getpid());
  core::Value nsobj;
  nsobj["apiVersion"] = "v1";
  nsobj["kind"] = "Namespace";
  nsobj["metadata"]["name"] = ns;
  client.create(kube::resources::namespaces(), nsobj);
  const int objects = 200;
  for (int i = 0; i < objects; ++i) {
    core::Value cm;
    cm["apiVersion"] = "v1";
    cm["kind"] = "ConfigMap";
    cm["metadata"]["name"] = "cm-" + std::to_string(i);
    cm["metadata"]["namespace"] = ns;
    cm["data"]["v"] = "0";
    client.create(cms, cm);
  }
  controller::Manager mgr(client, options("bench-events"));
  controller::SourceOptions src;
  src.cache.namespace_ = ns;
  auto noop = std::make_shared<Noop>();
  auto& cache = mgr.cache(cms, src.cache);
  controller::Controller& ctl = mgr.controller("noop")
                                    .for_resource(cms, "ConfigMap", src)
                                    .max_concurrent_reconciles(2)
                                    .complete(noop);
  std::jthread run([&](std::stop_token stop) { mgr.run(stop); });
  while (!mgr.caches_synced()) std::this_thread::sleep_for(10ms);
  while (ctl.stats().depth > 0) std::this_thread::sleep_for(10ms);
  std::uint64_t events0 = cache.informer().stats().events, calls0 = noop->calls.load();

  std::atomic<std::uint64_t> writes{0};
  auto t0 = Clock::now();
  auto until = t0 + std::chrono::seconds(seconds);
  {
    std::vector<std::jthread> writers;
    for (int w = 0; w < 4; ++w) {
      writers.emplace_back([&, w] {
        for (std::uint64_t n = 0; Clock::now() < until; ++n) {
          core::Value p;
          p["data"]["v"] = std::to_string(w) + "-" + std::to_string(n);
          client.patch(cms, ns, "cm-" + std::to_string((w * 50 + n) % objects),
                       kube::PatchType::Merge, p);
          writes.fetch_add(1);
        }
      });
    }
  }
  auto written = Clock::now();
  while (cache.informer().stats().events - events0 < writes.load() && Clock::now() - written < 60s)
    std::this_thread::sleep_for(1ms);
  while (ctl.stats().depth > 0 || ctl.stats().active_workers == 0) {
    if (ctl.stats().depth == 0) break;
    std::this_thread::sleep_for(1ms);
  }
  auto drained = Clock::now();
  std::uint64_t events = cache.informer().stats().events - events0;
  std::uint64_t calls = noop->calls.load() - calls0;
  std::printf(
      "events: %llu patches by 4 writers in %.1f s (%.0f writes/s); %llu watch events reached "
      "the cache and queue, all drained %.3f s after the last write: %.0f events/s end to end; "
      "%llu reconciles (keys de-duplicated while queued)\n",
      (unsigned long long)writes.load(), secs(written - t0), writes.load() / secs(written - t0),
      (unsigned long long)events, secs(drained - written), events / secs(drained - t0),
      (unsigned long long)calls);
  run.request_stop();
  run.join();
  client.remove(kube::resources::namespaces(), "", ns);
}

void create_nodes(kube::Client& client, int n) {
  std::string path = std::string(GPUFLEET_SOURCE_DIR) + "/examples/fleet-h100.yaml";
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  core::Value doc = core::parse_yaml(text, path);
  doc["spec"]["pools"].as_list()[0]["count"] = n;
  doc["metadata"]["name"] = "controller-bench";
  sim::FleetSpec fleet = sim::parse_fleet(doc, path);
  auto ids = sim::expand_fleet(fleet);
  kube::ListOptions lo;
  lo.label_selector = "gpufleet.io/fleet=controller-bench";
  std::size_t existing = client.list(kube::resources::nodes(), "", lo).items.size();
  if (existing >= ids.size()) {
    std::printf("setup: %zu bench Nodes already exist\n", existing);
    return;
  }
  std::string now = "2026-12-01T00:00:00Z";
  std::atomic<std::size_t> next{0};
  auto t0 = Clock::now();
  std::vector<std::jthread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < ids.size();) {
        const auto& id = ids[i];
        sim::NodeRuntime rt = sim::initial_runtime(fleet, id, sim::boot_id_for(id, 1), now);
        core::Value node = sim::node_object(fleet, id, rt, now);
        core::Value status = std::move(node["status"]);
        node.as_map().erase("status");
        try {
          client.create(kube::resources::nodes(), node);
          core::Value p;
          p["status"] = std::move(status);
          client.patch(kube::resources::nodes(), "", kube::name_of(node), kube::PatchType::Merge, p,
                       "status");
        } catch (const std::exception& e) {
          std::fprintf(stderr, "create node: %s\n", e.what());
        }
      }
    });
  }
  ts.clear();
  std::printf("setup: created %zu simulator Nodes in %.1f s\n", ids.size(),
              secs(Clock::now() - t0));
}

// The same Nodes in a bare informer (no manager, no controller): what the cache alone costs.
void measure_informer_heap(kube::Client& client) {
  malloc_trim(0);
  std::size_t heap0 = mallinfo2().uordblks;
  kube::InformerOptions o;
  o.resource = kube::resources::nodes();
  o.label_selector = "gpufleet.io/fleet=controller-bench";
  o.shape.prune = kube::node_prune_paths();
  o.shape.prune.push_back("metadata.managedFields");
  kube::Informer inf(client, o);
  inf.start();
  inf.wait_for_sync(300s);
  inf.stop();
  std::size_t heap1 = mallinfo2().uordblks;
  std::printf("cache: %zu Nodes in a bare informer: heap %.1f MB (%.0f B/Node)\n",
              inf.store().size(), (heap1 - heap0) / 1048576.0,
              double(heap1 - heap0) / double(inf.store().size()));
}

// The work loop alone, without an API server: keys through the queue to a no-op reconciler.
void bench_queue() {
  core::metrics::Registry reg;
  auto noop = std::make_shared<Noop>();
  controller::ControllerOptions o;
  o.max_concurrent_reconciles = 2;
  controller::Controller c("queue-bench", noop, o, reg);
  c.start();
  const int keys = 5000, rounds = 100;
  auto t0 = Clock::now();
  std::vector<controller::Request> requests;
  for (int k = 0; k < keys; ++k)
    requests.push_back({"ns", std::string("k").append(std::to_string(k))});
  for (int r = 0; r < rounds; ++r)
    for (const auto& req : requests) c.enqueue(req);
  while (c.stats().depth > 0) std::this_thread::sleep_for(1ms);
  c.drain(10s);
  auto t = secs(Clock::now() - t0);
  std::printf("queue: %d enqueues (%d keys) in %.2f s: %.0f enqueues/s, %llu reconciles (%.0f/s)\n",
              keys * rounds, keys, t, keys * rounds / t, (unsigned long long)noop->calls.load(),
              noop->calls.load() / t);
}

void bench_rss(kube::Client& client, int n) {
  create_nodes(client, n);
  measure_informer_heap(client);
  malloc_trim(0);
  long before = rss_kib();
  std::size_t heap0 = mallinfo2().uordblks;
  {
    controller::Manager mgr(client, options("bench-rss"));
    controller::SourceOptions src;
    src.cache.label_selector = "gpufleet.io/fleet=controller-bench";
    src.cache.shape.prune = kube::node_prune_paths();
    auto noop = std::make_shared<Noop>();
    auto& cache = mgr.cache(kube::resources::nodes(), src.cache);
    mgr.controller("noop").for_resource(kube::resources::nodes(), "Node", src).complete(noop);
    std::jthread run([&](std::stop_token stop) { mgr.run(stop); });
    auto t0 = Clock::now();
    while (noop->calls.load() < cache.size() || !mgr.caches_synced())
      std::this_thread::sleep_for(10ms);
    auto t1 = Clock::now();
    std::this_thread::sleep_for(2s);  // let list buffers go
    malloc_trim(0);
    long after = rss_kib();
    std::size_t heap1 = mallinfo2().uordblks;
    std::printf(
        "rss: %zu Nodes cached and reconciled in %.1f s; process RSS %.1f MB (%.1f MB before the "
        "manager started: client, libraries); heap in use by the manager %.1f MB (%.0f B/Node)\n",
        cache.size(), secs(t1 - t0), after / 1024.0, before / 1024.0, (heap1 - heap0) / 1048576.0,
        double(heap1 - heap0) / double(cache.size()));
    run.request_stop();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s KUBECONFIG [PARTS=events,queue,rss] [NODES=5000] [SECONDS=20]\n",
                 argv[0]);
    return 2;
  }
  core::log::set_level(core::log::Level::Warn);
  kube::ClientConfig cfg = kube::load_kubeconfig({{argv[1]}, ""});
  cfg.qps = 0;
  kube::Client client(cfg);
  std::string parts = argc > 2 ? argv[2] : "events,queue,rss";
  int nodes = argc > 3 ? std::atoi(argv[3]) : 5000;
  int seconds = argc > 4 ? std::atoi(argv[4]) : 20;
  if (parts.find("events") != std::string::npos) bench_events(client, seconds);
  if (parts.find("queue") != std::string::npos) bench_queue();
  if (parts.find("rss") != std::string::npos) bench_rss(client, nodes);
  return 0;
}
