// sentinel against a real kube-apiserver (kube-local), with `gpufleet controller
// --controllers=sentinel` as a child process (its RSS is the controller's alone):
//   1. latency: N GPU Nodes with NodeHealth; faults written at R events/s (each a new node's
//      NodeHealth turning Fatal); fault -> cordon latency p50/p99 measured from the write to
//      the cordon seen on a Node watch;
//   2. burst: B nodes faulted at once; quarantine nodes/s until every one is cordoned;
//   3. storm: the breaker at K nodes; F > K nodes faulted at once; every admitted fault acted on
//      exactly once (one Remediation each), the breaker Tripped at K, the rest refused.
// Usage: sentinel_live_bench KUBECONFIG GPUFLEET_BIN SOURCE_DIR [NODES] [RATE] [SECONDS]
//        [BURST] [STORM] [THRESHOLD]
// Not a test (not in `make test`): run by scripts/bench-sentinel.sh.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/json.h"
#include "core/time.h"
#include "core/yaml.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "kube/config.h"
#include "process.h"
#include "sentinel/controller.h"

using namespace gpufleet;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Parallel over [0, n) with `threads` workers.
void parallel(int n, int threads, const std::function<void(int)>& f) {
  std::vector<std::jthread> ts;
  std::atomic<int> next{0};
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) f(i);
    });
}

struct Bench {
  kube::Client& client;
  std::string prefix;
  std::vector<core::Value> healths;  // as created (resourceVersion for the status write)
  std::mutex mu;
  std::map<std::string, Clock::time_point> faulted, cordoned;

  std::string node_name(int i) const { return prefix + "-" + std::to_string(i); }

  void create_nodes(int n) {
    healths.resize(static_cast<std::size_t>(n));
    parallel(n, 8, [&](int i) {
      core::Value node;
      node["apiVersion"] = "v1";
      node["kind"] = "Node";
      node["metadata"]["name"] = node_name(i);
      node["metadata"]["labels"]["nvidia.com/gpu.present"] = "true";
      node["metadata"]["labels"]["sentinel-bench"] = prefix;
      client.create(kube::resources::nodes(), node);
      core::Value nh;
      nh["apiVersion"] = "gpufleet.io/v1alpha1";
      nh["kind"] = "NodeHealth";
      nh["metadata"]["name"] = node_name(i);
      nh["metadata"]["labels"]["sentinel-bench"] = prefix;
      nh["spec"]["nodeName"] = node_name(i);
      healths[static_cast<std::size_t>(i)] = client.create(sentinel::api::node_healths(), nh);
    });
  }

  void fault(int i) {
    core::Value obj = healths[static_cast<std::size_t>(i)];
    core::Value e;
    e["id"] = "GPU-3";
    e["state"] = "Fatal";
    e["reason"] = "Xid79";
    e["lastTransitionTime"] = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Micros);
    core::Value c;
    c["name"] = "xid";
    c["state"] = "Fatal";
    c["entities"].push_back(e);
    obj["status"]["checks"].push_back(c);
    obj["status"]["state"] = "Fatal";
    {
      std::lock_guard l(mu);
      faulted[node_name(i)] = Clock::now();
    }
    client.update_status(sentinel::api::node_healths(), obj);
  }

  // Records when each node is first seen cordoned.
  std::jthread watch_nodes() {
    return std::jthread([this](std::stop_token stop) {
      kube::ListOptions lo;
      lo.label_selector = "sentinel-bench=" + prefix;
      std::string rv = client.list(kube::resources::nodes(), "", lo).resource_version;
      while (!stop.stop_requested()) {
        kube::WatchOptions wo;
        wo.resource_version = rv;
        wo.label_selector = lo.label_selector;
        wo.timeout_seconds = 2;
        try {
          auto w = client.watch(kube::resources::nodes(), "", wo);
          while (auto ev = w->next()) {
            rv = std::string(kube::resource_version_of(ev->object));
            if (kube::node::unschedulable(ev->object)) {
              std::lock_guard l(mu);
              cordoned.try_emplace(std::string(kube::name_of(ev->object)), Clock::now());
            }
            if (stop.stop_requested()) break;
          }
        } catch (const std::exception& e) {
          std::cerr << "watch: " << e.what() << "\n";
          std::this_thread::sleep_for(200ms);
        }
      }
    });
  }

  std::size_t cordoned_count() {
    std::lock_guard l(mu);
    return cordoned.size();
  }
};

void apply_policy(kube::Client& client, const std::string& name, int threshold) {
  core::Value p = core::parse_yaml(
      "apiVersion: gpufleet.io/v1alpha1\nkind: SentinelPolicy\nmetadata: {name: " + name +
      "}\nspec:\n  rules:\n  - {name: xid-fatal, when: \"event.check == 'xid' && event.state == "
      "'Fatal'\", cordon: true, taint: 'nvidia.com/gpu-error=fatal:NoSchedule'}\n"
      "  breaker: {maxNodes: " +
      std::to_string(threshold) +
      ", windowSeconds: 3600}\n"
      "  drain: {enabled: false}\n  remediation: {enabled: false}\n"
      "  validation: {newNodes: false}\n");
  client.apply(sentinel::api::sentinel_policies(), p,
               {.field_manager = "sentinel-bench", .force = true});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: sentinel_live_bench KUBECONFIG GPUFLEET_BIN SOURCE_DIR [NODES] [RATE] "
                 "[SECONDS] [BURST] [STORM] [THRESHOLD]\n";
    return 2;
  }
  const std::string kubeconfig = argv[1], bin = argv[2], src = argv[3];
  const int nodes = argc > 4 ? std::stoi(argv[4]) : 1000;
  const int rate = argc > 5 ? std::stoi(argv[5]) : 100;
  const int seconds = argc > 6 ? std::stoi(argv[6]) : 5;
  const int burst = argc > 7 ? std::stoi(argv[7]) : 200;
  const int storm = argc > 8 ? std::stoi(argv[8]) : 200;
  const int threshold = argc > 9 ? std::stoi(argv[9]) : 50;
  const int latency_faults = std::min(rate * seconds, nodes - burst - storm);
  if (latency_faults <= 0) {
    std::cerr << "NODES must exceed RATE*SECONDS + BURST + STORM\n";
    return 2;
  }
  kube::ClientConfig cc = kube::load_default_config(kubeconfig, "");
  cc.qps = 5000;  // the load generator must not be what limits the rate
  cc.burst = 5000;
  kube::Client client(cc);
  for (const char* f : {"nodehealth", "sentinelpolicy", "remediation", "validationrequest"}) {
    client.apply(kube::resources::custom_resource_definitions(),
                 core::parse_yaml(read_file(src + "/deploy/crds/" + f + ".yaml")),
                 {.field_manager = "sentinel-bench", .force = true});
  }
  std::this_thread::sleep_for(2s);  // CRDs established
  Bench b{client, "sb" + std::to_string(::getpid()), {}, {}, {}, {}};
  auto t0 = Clock::now();
  b.create_nodes(nodes);
  std::cout << "setup: " << nodes << " GPU Nodes + NodeHealth in "
            << std::chrono::duration<double>(Clock::now() - t0).count() << " s\n";
  // Generous breaker for the latency and burst parts.
  apply_policy(client, b.prefix, nodes);
  auto watcher = b.watch_nodes();
  controller::testing::Child ctl({bin, "controller", "--controllers=sentinel", "--metrics-addr", "",
                                  "--set", "sentinel.policy=" + b.prefix, "--kube-qps", "2000",
                                  "--kube-burst", "2000", "--kubeconfig", kubeconfig},
                                 "/dev/null");
  std::this_thread::sleep_for(5s);  // caches synced
  const long rss_idle = rss_kib(ctl.pid());

  // 1. Steady rate.
  int next = 0;
  {
    const auto start = Clock::now();
    std::vector<std::jthread> writers;
    std::atomic<int> issued{0};
    for (int t = 0; t < 8; ++t)
      writers.emplace_back([&, t] {
        for (int k = t; k < latency_faults; k += 8) {
          std::this_thread::sleep_until(start + std::chrono::microseconds(1'000'000LL * k / rate));
          b.fault(k);
          ++issued;
        }
      });
    writers.clear();
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    next = latency_faults;
    controller::testing::wait_until(
        [&] { return b.cordoned_count() >= static_cast<std::size_t>(latency_faults); }, 60s);
    std::vector<double> lat;
    {
      std::lock_guard l(b.mu);
      for (const auto& [n, t] : b.cordoned)
        if (auto f = b.faulted.find(n); f != b.faulted.end())
          lat.push_back(std::chrono::duration<double, std::milli>(t - f->second).count());
    }
    std::cout << "latency: " << latency_faults << " faults at " << rate << "/s (achieved "
              << latency_faults / took << "/s) on " << nodes << " nodes: cordoned " << lat.size()
              << ", fault->cordon p50 " << pct(lat, 0.5) << " ms, p99 " << pct(lat, 0.99)
              << " ms, max " << pct(lat, 1.0) << " ms\n";
  }
  // 2. Burst.
  {
    const std::size_t before = b.cordoned_count();
    const auto start = Clock::now();
    parallel(burst, 8, [&](int i) { b.fault(next + i); });
    controller::testing::wait_until(
        [&] { return b.cordoned_count() >= before + static_cast<std::size_t>(burst); }, 120s);
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    std::cout << "burst: " << b.cordoned_count() - before << " of " << burst
              << " nodes quarantined in " << took << " s = " << burst / took << " nodes/s\n";
    next += burst;
  }
  const long rss_busy = rss_kib(ctl.pid());
  std::cout << "controller RSS: " << rss_idle / 1024 << " MiB after sync, " << rss_busy / 1024
            << " MiB after the bursts (" << nodes << " Nodes, NodeHealth, Remediations cached)\n";
  // 3. Storm with the breaker at `threshold` more nodes.
  {
    const std::size_t before = b.cordoned_count();
    // The breaker counts unique nodes in its window: the threshold is what is already in it
    // plus `threshold`.
    const int already = static_cast<int>(before);
    apply_policy(client, b.prefix, already + threshold);
    std::this_thread::sleep_for(6s);  // the policy reconciler reloads it
    parallel(storm, 8, [&](int i) { b.fault(next + i); });
    std::this_thread::sleep_for(10s);
    const std::size_t acted = b.cordoned_count() - before;
    auto pol = client.get(sentinel::api::sentinel_policies(), "", b.prefix);
    // Every incident of the storm's nodes: exactly one each.
    std::map<std::string, int> per_node;
    for (const auto& r : client.list(sentinel::api::remediations(), "").items) {
      std::string n(r.get_string({"spec", "nodeName"}));
      if (n.rfind(b.prefix + "-", 0) == 0) ++per_node[n];
    }
    int dup = 0;
    for (const auto& [n, c] : per_node) dup += c > 1 ? 1 : 0;
    std::cout << "storm: " << storm << " nodes faulted at once, breaker threshold " << threshold
              << " new nodes: quarantined " << acted << ", breaker "
              << pol.get_string({"status", "breaker", "state"}) << " (refused "
              << core::to_json(pol.get({"status", "breaker", "refused"})
                                   ? *pol.get({"status", "breaker", "refused"})
                                   : core::Value(0))
              << "), incidents " << per_node.size() << " for " << b.cordoned_count()
              << " quarantined nodes, nodes with more than one incident: " << dup << "\n";
  }
  watcher.request_stop();
  ctl.signal(SIGTERM);
  ctl.wait(30s);
  // Cleanup.
  client.remove(sentinel::api::sentinel_policies(), "", b.prefix);
  parallel(nodes, 8, [&](int i) {
    try {
      client.remove(kube::resources::nodes(), "", b.node_name(i));
      client.remove(sentinel::api::node_healths(), "", b.node_name(i));
    } catch (const std::exception&) {
    }
  });
  return 0;
}
