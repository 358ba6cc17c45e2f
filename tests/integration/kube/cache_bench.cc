// gpufleet's side of the informer-cache comparison with client-go (tools/bench-client-go; both
// print the same RESULT line; scripts/bench-cache.sh runs them alternately). Not a test.
//   kube_cache_bench seed  KUBECONFIG NODES        create NODES simulated H100 Nodes
//   kube_cache_bench churn KUBECONFIG UPDATES      patch bench Nodes UPDATES times (4 writers)
//   kube_cache_bench cache KUBECONFIG NODES UPDATES FORM
//       FORM: plain (core::Value tree), compact (the compact form), health (compact, health
//       projection), all over JSON; compact-pb and health-pb the same over protobuf. Syncs an
//       informer of the bench Nodes, prints READY with memory figures, waits for UPDATES update
//       events and prints the RESULT line.
#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kube/api/objects.h"
#include "kube/api/trim.h"
#include "kube/informer.h"
#include "sim/node_object.h"
#include "support/source_paths.h"

using namespace gpufleet;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

constexpr const char* kSelector = "gpufleet.io/bench=cache";

// VmRSS or VmHWM of this process, in bytes.
std::size_t proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

kube::Client make_client(const std::string& kubeconfig) {
  kube::ClientConfig cfg = kube::load_kubeconfig({{kubeconfig}, ""});
  cfg.qps = 0;  // no client-side rate limit: the server is what is measured
  return kube::Client(cfg);
}

int seed(const std::string& kubeconfig, int n) {
  kube::Client client = make_client(kubeconfig);
  sim::FleetSpec fleet = sim::load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  fleet.pools.resize(1);
  fleet.pools[0].count = n;
  std::vector<sim::NodeIdentity> ids = sim::expand_fleet(fleet);
  std::atomic<std::size_t> next{0};
  std::atomic<int> errors{0};
  auto start = Steady::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i = next++; i < ids.size(); i = next++) {
        sim::NodeRuntime rt = sim::initial_runtime(fleet, ids[i], sim::boot_id_for(ids[i], 0),
                                                   "2026-01-01T00:00:00Z");
        core::Value node = sim::node_object(fleet, ids[i], rt, "2026-01-01T00:00:00Z");
        node["metadata"]["labels"]["gpufleet.io/bench"] = "cache";
        try {
          client.create(kube::resources::nodes(), node);  // Nodes keep status on create
        } catch (const kube::ApiError& e) {
          if (!e.is(kube::Reason::AlreadyExists) && errors++ < 3) {
            std::fprintf(stderr, "seed: %s\n", e.what());
          }
        } catch (const std::exception& e) {
          if (errors++ < 3) std::fprintf(stderr, "seed: %s\n", e.what());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::printf("seed: %zu Nodes in %.1f s, %d errors\n", ids.size(),
              std::chrono::duration<double>(Steady::now() - start).count(), errors.load());
  return errors.load() == 0 ? 0 : 1;
}

int churn(const std::string& kubeconfig, int updates) {
  kube::Client client = make_client(kubeconfig);
  kube::ListOptions lo;
  lo.label_selector = kSelector;
  lo.resource_version = "0";
  std::vector<std::string> names;
  for (const auto& n : client.list(kube::resources::nodes(), "", lo, {}).items) {
    names.emplace_back(kube::name_of(n));
  }
  if (names.empty()) {
    std::fprintf(stderr, "churn: no Nodes labelled %s\n", kSelector);
    return 1;
  }
  // Values unique to this run: a patch that writes what is already there changes nothing and
  // sends no event.
  std::string run = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < updates; i = next++) {
        core::Value patch;
        patch["metadata"]["annotations"]["gpufleet.io/bench-tick"] = run + "-" + std::to_string(i);
        try {
          client.patch(kube::resources::nodes(), "", names[i % names.size()],
                       kube::PatchType::Merge, patch);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "churn: %s\n", e.what());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return 0;
}

int cache(const std::string& kubeconfig, int n, int updates, const std::string& form) {
  kube::Client client = make_client(kubeconfig);
  malloc_trim(0);
  std::size_t heap_before = mallinfo2().uordblks;
  // The process before its cache: code, libraries, TLS and HTTP state (a fixed cost in the
  // peak/steady ratio).
  std::size_t rss_start = proc_status_bytes("VmRSS");
  kube::InformerOptions o;
  o.resource = kube::resources::nodes();
  o.label_selector = kSelector;
  o.shape.prune = kube::node_prune_paths();  // managedFields and images, as the Go transform
  o.compact = form != "plain";
  // Projected while decoding (no transform: the compact forms decode JSON or protobuf straight
  // into the cached form).
  if (form == "health" || form == "health-pb") o.project = kube::node_health_fields();
  o.protobuf = form == "compact-pb" || form == "health-pb";
  kube::Informer inf(client, o);
  std::atomic<int> seen{0};
  kube::EventHandlers h;
  // The compact forms take the cached objects themselves, as client-go's handlers get pointers
  // to its cached objects; the plain form gets its core::Value trees.
  if (o.compact) {
    h.on_update_compact = [&](const kube::CompactObject&, const kube::CompactObject&) { ++seen; };
  } else {
    h.on_update = [&](const core::Value&, const core::Value&) { ++seen; };
  }
  inf.add_handlers(h);
  auto start = Steady::now();
  double sync_cpu0 = cpu_seconds();
  inf.start();
  if (!inf.wait_for_sync(600s)) {
    std::fprintf(stderr, "cache: no sync: %s\n", inf.last_error().c_str());
    return 1;
  }
  double sync_s = std::chrono::duration<double>(Steady::now() - start).count();
  double sync_cpu = cpu_seconds() - sync_cpu0;  // this process only: not the API server's
  if (o.protobuf != (inf.stats().protobuf_lists > 0)) {
    std::fprintf(stderr, "cache: the list did not come in the form asked for (%s)\n",
                 inf.last_error().c_str());
    return 1;
  }
  if (static_cast<int>(inf.store().size()) != n) {
    std::fprintf(stderr, "cache: %zu Nodes cached, expected %d\n", inf.store().size(), n);
    return 1;
  }
  std::size_t peak = proc_status_bytes("VmHWM");
  malloc_trim(0);  // return freed memory, as Go's debug.FreeOSMemory
  std::size_t heap = mallinfo2().uordblks - heap_before;
  std::size_t rss = proc_status_bytes("VmRSS");
  std::printf("READY\n");
  std::fflush(stdout);
  double cpu0 = cpu_seconds();
  // Generous: a loaded API server is slow to take 1,000 patches.
  auto deadline = Steady::now() + 120s;
  while (seen.load() < updates && Steady::now() < deadline) std::this_thread::sleep_for(1ms);
  double cpu = cpu_seconds() - cpu0;
  inf.stop();
  // A watch that stalls is reported, not hidden: the CPU figure is then "na".
  if (seen.load() < updates) {
    std::fprintf(stderr, "cache: %d of %d updates seen (watches %llu, last error: %s)\n",
                 seen.load(), updates, static_cast<unsigned long long>(inf.stats().watches),
                 inf.last_error().c_str());
  }
  char cpu_buf[32];
  std::snprintf(cpu_buf, sizeof cpu_buf, "%.1f", cpu * 1e6 / updates);
  std::string cpu_text = seen.load() < updates ? "na" : cpu_buf;
  std::printf(
      "RESULT impl=gpufleet-%s nodes=%d sync_s=%.3f sync_cpu_s=%.3f heap_B_per_node=%.0f "
      "rss_start_MB=%.1f rss_MB=%.1f peak_rss_MB=%.1f peak_over_steady=%.2f "
      "cpu_ms_per_1000_updates=%s updates_seen=%d\n",
      form.c_str(), n, sync_s, sync_cpu, static_cast<double>(heap) / n,
      static_cast<double>(rss_start) / 1e6, static_cast<double>(rss) / 1e6,
      static_cast<double>(peak) / 1e6, static_cast<double>(peak) / static_cast<double>(rss),
      cpu_text.c_str(), seen.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 3 && a[0] == "seed") return seed(a[1], std::stoi(a[2]));
    if (a.size() == 3 && a[0] == "churn") return churn(a[1], std::stoi(a[2]));
    if (a.size() == 5 && a[0] == "cache")
      return cache(a[1], std::stoi(a[2]), std::stoi(a[3]), a[4]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kube_cache_bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: kube_cache_bench seed KUBECONFIG NODES | churn KUBECONFIG UPDATES |\n"
               "       cache KUBECONFIG NODES UPDATES plain|compact|health|compact-pb|health-pb\n");
  return 2;
}
