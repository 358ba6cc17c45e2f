// sentinel against a real kube-apiserver (kube-local), with `gpufleet controller
// --controllers=sentinel` as a child process (its RSS and CPU are the controller's alone).
//
// Mode `api` (the bench writes NodeHealth itself, playing the agents):
//   0. reference: the raw NodeHealth status write rate the API server accepts from this
//      generator with no controller running (the ceiling every other figure sits under);
//   1. latency: faults written at R events/s (each a new node's NodeHealth turning Fatal);
//      fault -> cordon p50/p99 from the write to the cordon seen on a Node watch, and the
//      controller's API writes per quarantine (the API server's apiserver_request_total, and
//      the controller's own share from its gpufleet_kube_requests_total);
//   1b. sweep: the same at offered fault rates of 10, 30, 50 and 70 % of the reference
//      capacity divided by the writes one quarantine costs (the fault plus the controller's
//      writes measured in 1), SECONDS each, on the nodes after the storm's: p99 fault -> cordon
//      against the 100 ms target, the writes on the fault -> cordon path (the fault, the
//      cordon, and any controller write whose resourceVersion precedes the cordon's), and
//      controller CPU per quarantine;
//   2. burst: B nodes faulted at once; quarantine nodes/s until every one is cordoned;
//   3. drain: D nodes, each running one pod (the bench plays their kubelet: a pod marked for
//      deletion is deleted with grace 0), faulted at once with drain on; drained nodes/s
//      until every incident has left Draining;
//   4. storm: the breaker at K more nodes; F > K nodes faulted at once; after the backlog
//      drained: exactly K quarantined, one incident each, the breaker Tripped, the rest
//      untouched. Exit 1 when the counts disagree.
// Mode `sim` (the real path): `gpufleet sim` with N nodes, `gpufleet agent --sim-state-dir`,
//   the controller; the agents' cost per node idle; Xid faults injected through the
//   simulator's inbox at R/s for S seconds; after the backlog drained: journal records vs what
//   NodeHealth applied, Fatal entities in the journals vs NodeHealth, quarantines vs nodes
//   with a matching fault (each once), the breaker vs its threshold K. Exit 1 on a mismatch.
//
// Usage: sentinel_live_bench api KUBECONFIG GPUFLEET_BIN SOURCE_DIR [NODES] [RATE] [SECONDS]
//          [BURST] [STORM] [THRESHOLD] [DRAIN]
//        sentinel_live_bench sim KUBECONFIG GPUFLEET_BIN SOURCE_DIR [NODES] [RATE] [SECONDS]
//          [THRESHOLD]
//        sentinel_live_bench ref KUBECONFIG GPUFLEET_BIN SOURCE_DIR [NODES] [THREADS...]
//          (the API server's own write rate by identity, client and admission; see run_ref)
// Not a test (not in `make test`): run by scripts/bench-sentinel.sh.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "agent/journal.h"
#include "core/json.h"
#include "core/time.h"
#include "core/yaml.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "process.h"
#include "sentinel/controller.h"
#include "sim/control_inbox.h"

using namespace gpufleet;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using controller::testing::wait_until;

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

// CPU seconds (user + system) the process used so far.
double cpu_s(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 2));
  std::string f;
  long long ut = 0, st = 0;
  for (int i = 3; i <= 15 && in >> f; ++i) {
    if (i == 14) ut = std::stoll(f);
    if (i == 15) st = std::stoll(f);
  }
  return static_cast<double>(ut + st) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double loadavg() {
  double l = 0;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

// The pid kube-local recorded for a component of the control plane whose admin kubeconfig is
// `kubeconfig` (DIR/admin.kubeconfig, DIR/pids/<component>.pid), or 0.
pid_t control_plane_pid(const std::string& kubeconfig, const std::string& component) {
  const fs::path f = fs::path(kubeconfig).parent_path() / "pids" / (component + ".pid");
  std::ifstream in(f);
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The agents' fault writes come from this many threads: 5,000 agents write concurrently, and
// with 8 (the figures before 2026-12-02) the generator itself capped the rate it could offer at
// 8 / (the time of one write): 136-182/s where a write took 44-60 ms.
constexpr int kWriters = 32;

// Parallel over [0, n) with `threads` workers.
void parallel(int n, int threads, const std::function<void(int)>& f) {
  std::vector<std::jthread> ts;
  std::atomic<int> next{0};
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) f(i);
    });
}

// The value of label `key` in one Prometheus text line ("" when absent).
std::string metric_label(const std::string& line, const std::string& key) {
  auto b = line.find(key + "=\"");
  if (b == std::string::npos) return std::string();
  b += key.size() + 2;
  return line.substr(b, line.find('"', b) - b);
}

// Writes the API server answered so far, by resource, from its own /metrics
// (apiserver_request_total), leaving out what is not the controller's: the bench's NodeHealth
// writes and the control plane's leader-election leases.
std::map<std::string, double> api_writes(kube::Client& client) {
  std::map<std::string, double> out;
  std::istringstream in(client.get_raw("/metrics"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("apiserver_request_total{", 0) != 0) continue;
    const std::string verb = metric_label(line, "verb");
    if (verb != "POST" && verb != "PUT" && verb != "PATCH" && verb != "DELETE" && verb != "APPLY")
      continue;
    std::string res = metric_label(line, "resource");
    if (res == "nodehealths" || res == "leases") continue;
    const std::string sub = metric_label(line, "subresource");
    if (!sub.empty()) res += "/" + sub;
    out[res + " " + verb] += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return out;
}

// after - before, as "resource VERB=n ..." and the total.
std::pair<double, std::string> writes_between(const std::map<std::string, double>& before,
                                              const std::map<std::string, double>& after) {
  double total = 0;
  std::string text;
  for (const auto& [k, v] : after) {
    auto b = before.find(k);
    const double d = v - (b == before.end() ? 0 : b->second);
    if (d <= 0) continue;
    total += d;
    text += (text.empty() ? "" : ", ") + k + " " + std::to_string(static_cast<long>(d));
  }
  return {total, text};
}

// The controller's own writes so far, from its /metrics (gpufleet_kube_requests_total, every
// answer by verb, resource and code): what sentinel wrote, without kube-local's node
// lifecycle controller that shares the API server's count.
std::map<std::string, double> own_writes(int port) {
  std::map<std::string, double> out;
  std::istringstream in(controller::testing::http_get(port, "/metrics").second);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("gpufleet_kube_requests_total{", 0) != 0) continue;
    const std::string verb = metric_label(line, "verb");
    if (verb == "get" || verb == "list" || verb == "watch") continue;
    out[metric_label(line, "resource") + " " + verb + " " + metric_label(line, "code")] +=
        std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return out;
}

std::string controller_metrics_line(int port, const std::string& prefix) {
  auto [code, body] = controller::testing::http_get(port, "/metrics");
  std::string out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) {
      auto b = line.find('"'), e = line.rfind('"');
      if (b != std::string::npos && e > b)
        out += (out.empty() ? "" : " ") + line.substr(b + 1, e - b - 1) + "=" +
               line.substr(line.rfind(' ') + 1);
    }
  return out;
}

// Records, per node, when it was first seen cordoned; per Remediation node, when each phase
// was first seen; counts incidents per node.
struct Watcher {
  kube::Client& client;
  std::string node_selector;  // nodes of this run
  std::mutex mu;
  std::map<std::string, Clock::time_point> cordoned;
  std::map<std::string, std::map<std::string, Clock::time_point>> phases;  // node -> phase -> t
  std::map<std::string, std::set<std::string>> incidents;                  // node -> names
  // resourceVersions (etcd's one revision counter, so comparable across kinds in a bench):
  // the cordon, and the node's first Remediation and first Event. A write whose revision is
  // below the cordon's sat on the fault -> cordon path.
  std::map<std::string, unsigned long long> cordon_rv{}, remediation_rv{}, event_rv{};
  std::vector<std::jthread> threads{};

  static unsigned long long rv_of(const core::Value& o) {
    const std::string rv(kube::resource_version_of(o));
    return rv.empty() ? 0 : std::stoull(rv);
  }

  template <typename F>
  void loop(std::stop_token stop, const kube::ResourceId& r, const std::string& selector, F on) {
    kube::ListOptions lo;
    lo.label_selector = selector;
    std::string rv;
    while (rv.empty() && !stop.stop_requested()) {
      try {
        auto l = client.list(r, "", lo);
        for (const auto& o : l.items) on(o);
        rv = l.resource_version;
      } catch (const std::exception&) {
        std::this_thread::sleep_for(200ms);
      }
    }
    while (!stop.stop_requested()) {
      kube::WatchOptions wo;
      wo.resource_version = rv;
      wo.label_selector = selector;
      wo.timeout_seconds = 2;
      try {
        auto w = client.watch(r, "", wo);
        while (auto ev = w->next()) {
          rv = std::string(kube::resource_version_of(ev->object));
          on(ev->object);
          if (stop.stop_requested()) break;
        }
      } catch (const std::exception& e) {
        std::cerr << "watch: " << e.what() << "\n";
        std::this_thread::sleep_for(200ms);
      }
    }
  }

  void start() {
    threads.emplace_back([this](std::stop_token stop) {
      loop(stop, kube::resources::nodes(), node_selector, [this](const core::Value& n) {
        if (!kube::node::unschedulable(n)) return;
        std::lock_guard l(mu);
        cordoned.try_emplace(std::string(kube::name_of(n)), Clock::now());
        cordon_rv.try_emplace(std::string(kube::name_of(n)), rv_of(n));
      });
    });
    threads.emplace_back([this](std::stop_token stop) {
      loop(stop, kube::resources::events(), "", [this](const core::Value& e) {
        // sentinel's own (kube-local's controllers write Events about Nodes too).
        if (e.get_string({"regarding", "kind"}) != "Node" ||
            e.get_string({"reportingController"}) != "gpufleet.io/sentinel")
          return;
        std::lock_guard l(mu);
        event_rv.try_emplace(std::string(e.get_string({"regarding", "name"})), rv_of(e));
      });
    });
    threads.emplace_back([this](std::stop_token stop) {
      loop(stop, sentinel::api::remediations(), "", [this](const core::Value& r) {
        std::string node(r.get_string({"spec", "nodeName"}));
        std::string p(r.get_string({"status", "phase"}));
        std::lock_guard l(mu);
        incidents[node].insert(std::string(kube::name_of(r)));
        remediation_rv.try_emplace(node, rv_of(r));
        phases[node].try_emplace(p.empty() ? "Detected" : p, Clock::now());
      });
    });
  }
  void stop() {
    for (auto& t : threads) t.request_stop();
    threads.clear();
  }
  std::size_t cordoned_count() {
    std::lock_guard l(mu);
    return cordoned.size();
  }
  bool is_cordoned(const std::string& n) {
    std::lock_guard l(mu);
    return cordoned.contains(n);
  }
  // The first time the node's incident was seen in one of `ps`, or nullopt.
  std::optional<Clock::time_point> first_phase(const std::string& n,
                                               std::initializer_list<const char*> ps) {
    std::lock_guard l(mu);
    auto it = phases.find(n);
    if (it == phases.end()) return std::nullopt;
    std::optional<Clock::time_point> best;
    for (const char* p : ps)
      if (auto f = it->second.find(p); f != it->second.end())
        if (!best || f->second < *best) best = f->second;
    return best;
  }
  // Writes of the controller that came before the node's cordon (its Remediation, its first
  // Event): 0 where the cordon is the controller's only write on the path.
  int writes_before_cordon(const std::string& n) {
    std::lock_guard l(mu);
    auto c = cordon_rv.find(n);
    if (c == cordon_rv.end()) return -1;
    int k = 0;
    for (const auto* m : {&remediation_rv, &event_rv})
      if (auto f = m->find(n); f != m->end() && f->second < c->second) ++k;
    return k;
  }
  std::size_t incidents_of(const std::string& n) {
    std::lock_guard l(mu);
    auto it = incidents.find(n);
    return it == incidents.end() ? 0 : it->second.size();
  }
};

void apply_policy(kube::Client& client, const std::string& name, int threshold, bool drain) {
  core::Value p = core::parse_yaml(
      "apiVersion: gpufleet.io/v1alpha1\nkind: SentinelPolicy\nmetadata: {name: " + name +
      "}\nspec:\n  rules:\n  - {name: xid-fatal, when: \"event.check == 'xid' && event.state == "
      "'Fatal'\", cordon: true, taint: 'nvidia.com/gpu-error=fatal:NoSchedule'}\n"
      "  breaker: {maxNodes: " +
      std::to_string(threshold) +
      ", windowSeconds: 3600}\n"
      "  drain: {enabled: " +
      (drain ? "true, defaultMode: Evict" : "false") +
      "}\n  remediation: {enabled: false}\n"
      "  validation: {newNodes: false}\n");
  client.apply(sentinel::api::sentinel_policies(), p,
               {.field_manager = "sentinel-bench", .force = true});
}

// Waits until the controller follows `threshold` (the policy reconciler reloads it).
bool policy_loaded(kube::Client& client, const std::string& name, int threshold) {
  return wait_until(
      [&] {
        auto pol = client.get(sentinel::api::sentinel_policies(), "", name);
        const core::Value* t = pol.get({"status", "breaker", "threshold"});
        const core::Value* g = pol.get({"status", "observedGeneration"});
        const core::Value* mg = pol.get({"metadata", "generation"});
        return t != nullptr && t->as_int() == threshold && g != nullptr && mg != nullptr &&
               g->as_int() == mg->as_int();
      },
      30s);
}

// SENTINEL_BENCH_SET="sentinel.workers=32 ..." adds --set options (to compare settings).
std::vector<std::string> controller_argv(const std::string& bin, const std::string& kubeconfig,
                                         const std::string& policy, int port) {
  std::vector<std::string> argv{bin,
                                "controller",
                                "--controllers=sentinel",
                                "--metrics-addr",
                                "127.0.0.1:" + std::to_string(port),
                                "--set",
                                "sentinel.policy=" + policy,
                                "--kube-qps",
                                "2000",
                                "--kube-burst",
                                "2000",
                                "--kubeconfig",
                                kubeconfig};
  if (const char* extra = std::getenv("SENTINEL_BENCH_SET")) {
    std::istringstream in(extra);
    std::string s;
    while (in >> s) {
      argv.push_back("--set");
      argv.push_back(s);
    }
  }
  return argv;
}

void apply_crds(kube::Client& client, const std::string& src) {
  for (const char* f : {"nodehealth", "sentinelpolicy", "remediation", "validationrequest"}) {
    client.apply(kube::resources::custom_resource_definitions(),
                 core::parse_yaml(read_file(src + "/deploy/crds/" + f + ".yaml")),
                 {.field_manager = "sentinel-bench", .force = true});
  }
  std::this_thread::sleep_for(2s);  // CRDs established
}

// ---------------------------------------------------------------------------------------
// Mode api

struct ApiBench {
  kube::Client& client;
  std::string prefix;
  std::vector<core::Value> healths;  // as created (resourceVersion for the status write)
  std::mutex mu;
  std::map<std::string, Clock::time_point> faulted;

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

  // One pod on the node (no kubelet: the bench's pod watcher finishes its deletion).
  void create_pod(int i) {
    core::Value pod;
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    pod["metadata"]["name"] = node_name(i) + "-work";
    pod["metadata"]["namespace"] = "default";
    pod["metadata"]["labels"]["sentinel-bench"] = prefix;
    pod["spec"]["nodeName"] = node_name(i);
    pod["spec"]["terminationGracePeriodSeconds"] = 30;
    core::Value c;
    c["name"] = "work";
    c["image"] = "example.invalid/train:1";
    pod["spec"]["containers"].push_back(c);
    client.create(kube::resources::pods(), pod);
  }

  core::Value status_doc(int i, const std::string& state) {
    core::Value obj = healths[static_cast<std::size_t>(i)];
    obj["status"] = core::Value::map();
    core::Value e;
    e["id"] = "GPU-3";
    e["state"] = state;
    e["reason"] = state == "Fatal" ? "Xid79" : "Ok";
    e["lastTransitionTime"] = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Micros);
    core::Value c;
    c["name"] = "xid";
    c["state"] = state;
    c["entities"].push_back(e);
    obj["status"]["checks"].push_back(c);
    obj["status"]["state"] = state;
    return obj;
  }

  void fault(int i) {
    core::Value obj = status_doc(i, "Fatal");
    {
      std::lock_guard l(mu);
      faulted[node_name(i)] = Clock::now();
    }
    healths[static_cast<std::size_t>(i)] = client.update_status(sentinel::api::node_healths(), obj);
  }
};

// Plays the kubelet of the bench's pods: a pod marked for deletion is deleted with grace 0.
std::jthread play_kubelet(kube::Client& client, const std::string& prefix) {
  return std::jthread([&client, prefix](std::stop_token stop) {
    std::string rv;
    while (!stop.stop_requested()) {
      try {
        if (rv.empty()) {
          kube::ListOptions lo;
          lo.label_selector = "sentinel-bench=" + prefix;
          rv = client.list(kube::resources::pods(), "default", lo).resource_version;
        }
        kube::WatchOptions wo;
        wo.resource_version = rv;
        wo.label_selector = "sentinel-bench=" + prefix;
        wo.timeout_seconds = 2;
        auto w = client.watch(kube::resources::pods(), "default", wo);
        while (auto ev = w->next()) {
          rv = std::string(kube::resource_version_of(ev->object));
          if (ev->object.get({"metadata", "deletionTimestamp"}) == nullptr) continue;
          kube::DeleteOptions o;
          o.grace_period_seconds = 0;
          try {
            client.remove(kube::resources::pods(), "default", kube::name_of(ev->object), o);
          } catch (const kube::ApiError&) {
          }
          if (stop.stop_requested()) break;
        }
      } catch (const std::exception&) {
        rv.clear();
        std::this_thread::sleep_for(200ms);
      }
    }
  });
}

int run_api(kube::Client& client, const std::string& kubeconfig, const std::string& bin,
            const std::vector<int>& a) {
  auto arg = [&](std::size_t i, int def) { return a.size() > i ? a[i] : def; };
  const int nodes = arg(0, 1000), rate = arg(1, 100), seconds = arg(2, 5), burst = arg(3, 200),
            storm = arg(4, 200), threshold = arg(5, 50), drain = arg(6, 100);
  const int latency_faults = std::min(rate * seconds, nodes - burst - storm - drain);
  if (latency_faults <= 0 || storm <= threshold) {
    std::cerr << "NODES must exceed RATE*SECONDS + BURST + STORM + DRAIN, STORM must exceed "
                 "THRESHOLD\n";
    return 2;
  }
  int failures = 0;
  ApiBench b{client, "sb" + std::to_string(::getpid()), {}, {}, {}};
  auto t0 = Clock::now();
  b.create_nodes(nodes);
  std::cout << "setup: " << nodes << " GPU Nodes + NodeHealth in " << since(t0)
            << " s (load average " << loadavg() << ")\n";
  // Pods for the drain part, on the nodes right after the burst's. The API server refuses a
  // pod until the controller-manager made the namespace's default ServiceAccount (a small
  // fleet is set up before that).
  if (!wait_until(
          [&] {
            return client.try_get(kube::resources::service_accounts(), "default", "default")
                .has_value();
          },
          60s))
    std::cerr << "ServiceAccount default/default not there in 60 s\n";
  const int drain_first = latency_faults + burst;
  parallel(drain, 8, [&](int i) { b.create_pod(drain_first + i); });

  double capacity = 0;  // NodeHealth status writes/s with no controller
  // 0. Reference: the same generator, no controller, Healthy statuses (no rule matches) on
  // the storm's nodes, kWriters threads as in the other parts, for 3 s.
  {
    const int first = drain_first + drain;
    std::atomic<int> writes{0};
    const auto start = Clock::now();
    std::vector<std::jthread> ts;
    for (int t = 0; t < kWriters; ++t)
      ts.emplace_back([&, t] {
        // Each thread its own nodes: two writers on one object would meet 409.
        const int mine = (storm - t + kWriters - 1) / kWriters;
        if (mine <= 0) return;
        for (int j = 0; since(start) < 3.0; ++j) {
          const int i = first + t + kWriters * (j % mine);
          b.healths[static_cast<std::size_t>(i)] =
              client.update_status(sentinel::api::node_healths(), b.status_doc(i, "Healthy"));
          ++writes;
        }
      });
    ts.clear();
    capacity = writes / since(start);
    std::cout << "reference: " << capacity << " NodeHealth status writes/s accepted from "
              << kWriters
              << " threads, no controller (load "
                 "average "
              << loadavg() << ")\n";
  }

  apply_policy(client, b.prefix, nodes, false);
  Watcher w{client, "sentinel-bench=" + b.prefix, {}, {}, {}, {}, {}, {}, {}, {}};
  w.start();
  auto kubelet = play_kubelet(client, b.prefix);
  const int port = controller::testing::free_port();
  controller::testing::Child ctl(controller_argv(bin, kubeconfig, b.prefix, port), "/dev/null");
  wait_until([&] { return controller::testing::http_get(port, "/metrics").first == 200; }, 30s);
  if (!policy_loaded(client, b.prefix, nodes)) std::cerr << "policy not loaded in 30 s\n";
  std::this_thread::sleep_for(2s);  // caches synced, the start's reconciles done
  const long rss_idle = rss_kib(ctl.pid());
  const double cpu_idle = cpu_s(ctl.pid());
  // What the controller spends with nothing to do (resyncs, the policy reconciler's 5 s
  // recount, watches' bookmarks), per second: taken out of the CPU per quarantine below so a
  // slow rate does not charge its idle seconds to its few quarantines.
  std::this_thread::sleep_for(3s);
  const double idle_ms_per_s = (cpu_s(ctl.pid()) - cpu_idle) * 1000 / 3.0;

  // A steady rate: `count` faults on nodes [first, first + count) at `per_s`; prints one line
  // starting with `label` and returns the fault -> cordon p99 and the controller's writes per
  // quarantine (the API server's count: what the controller wrote, faults aside).
  struct Steady {
    double p99_ms = 0, writes_per_quarantine = 0;
  };
  auto steady = [&](const std::string& label, int first, int count, double per_s) {
    const auto writes_before = api_writes(client);
    const auto own_before = own_writes(port);
    const double cpu_before = cpu_s(ctl.pid());
    const pid_t apiserver = control_plane_pid(kubeconfig, "apiserver");
    const pid_t etcd = control_plane_pid(kubeconfig, "etcd");
    const double plane_before =
        (apiserver > 0 ? cpu_s(apiserver) : 0) + (etcd > 0 ? cpu_s(etcd) : 0);
    const auto start = Clock::now();
    std::vector<std::jthread> writers;
    for (int t = 0; t < kWriters; ++t)
      writers.emplace_back([&, t] {
        for (int k = t; k < count; k += kWriters) {
          std::this_thread::sleep_until(
              start + std::chrono::microseconds(static_cast<long long>(1e6 * k / per_s)));
          b.fault(first + k);
        }
      });
    writers.clear();
    const double took = since(start);
    wait_until(
        [&] {
          for (int i = first; i < first + count; ++i)
            if (!w.is_cordoned(b.node_name(i))) return false;
          return true;
        },
        120s);
    // The incidents' own status writes after the cordon, too.
    wait_until(
        [&] {
          for (int i = first; i < first + count; ++i)
            if (!w.first_phase(b.node_name(i), {"Validating", "Released", "Failed"})) return false;
          return true;
        },
        60s);
    std::this_thread::sleep_for(1s);
    const auto [writes, writes_text] = writes_between(writes_before, api_writes(client));
    const auto [own, own_text] = writes_between(own_before, own_writes(port));
    std::vector<double> lat;
    int before_cordon = 0, cordoned = 0;
    for (int i = first; i < first + count; ++i) {
      const std::string n = b.node_name(i);
      if (int k = w.writes_before_cordon(n); k >= 0) {
        before_cordon += k;
        ++cordoned;
      }
      std::lock_guard l(w.mu);
      auto c = w.cordoned.find(n);
      std::lock_guard l2(b.mu);
      if (auto f = b.faulted.find(n); c != w.cordoned.end() && f != b.faulted.end())
        lat.push_back(std::chrono::duration<double, std::milli>(c->second - f->second).count());
    }
    const double marginal_cpu_ms =
        ((cpu_s(ctl.pid()) - cpu_before) * 1000 - idle_ms_per_s * since(start)) / count;
    Steady out{pct(lat, 0.99), writes / count};
    std::cout << label << count << " faults at " << per_s << "/s (achieved " << count / took
              << "/s) on " << nodes << " nodes: cordoned " << lat.size() << ", fault->cordon p50 "
              << pct(lat, 0.5) << " ms, p99 " << out.p99_ms << " ms, max " << pct(lat, 1.0)
              << " ms; writes on the fault->cordon path per quarantine "
              << 2.0 + (cordoned > 0 ? static_cast<double>(before_cordon) / cordoned : 0)
              << " (the fault, the cordon, and the controller's writes seen before the cordon); "
                 "controller writes per quarantine "
              << out.writes_per_quarantine << " (" << writes_text << "), of them sentinel's own "
              << own / count << " (its /metrics: " << own_text << "), controller CPU "
              << (cpu_s(ctl.pid()) - cpu_before) * 1000 / count << " ms per quarantine ("
              << marginal_cpu_ms << " ms above its idle rate of " << idle_ms_per_s
              << " ms/s), kube-apiserver + etcd CPU "
              << ((apiserver > 0 ? cpu_s(apiserver) : 0) + (etcd > 0 ? cpu_s(etcd) : 0) -
                  plane_before) *
                     1000 / count
              << " ms per quarantine (load average " << loadavg() << ")\n";
    return out;
  };

  // 1. Steady rate.
  int next = 0;
  const Steady measured = steady("latency: ", 0, latency_faults, rate);
  next = latency_faults;
  // 1b. The sweep: offered fault rates at 10/30/50/70 % of the reference capacity, each fault
  // costing 1 + (controller writes per quarantine) writes; `seconds` each, on the nodes after
  // the storm's (fewer faults where the fleet has too few left).
  {
    int first = drain_first + drain + storm;
    for (int percent : {10, 30, 50, 70}) {
      const double per_s = capacity * percent / 100.0 / (1.0 + measured.writes_per_quarantine);
      const int count = std::min(static_cast<int>(per_s * seconds), nodes - first);
      if (count < 10) {
        std::cout << "sweep " << percent << " %: too few nodes left (NODES " << nodes
                  << "); skipped\n";
        continue;
      }
      const Steady s = steady("sweep " + std::to_string(percent) + " % of " +
                                  std::to_string(static_cast<int>(capacity)) + " writes/s: ",
                              first, count, per_s);
      first += count;
      std::cout << "sweep " << percent << " % p99 " << s.p99_ms << " ms ("
                << (s.p99_ms <= 100 ? "within" : "over") << " the 100 ms target)\n";
    }
  }
  // 2. Burst.
  {
    const std::size_t before = w.cordoned_count();
    const auto start = Clock::now();
    parallel(burst, kWriters, [&](int i) { b.fault(next + i); });
    const double wrote = since(start);
    wait_until([&] { return w.cordoned_count() >= before + static_cast<std::size_t>(burst); },
               120s);
    const double took = since(start);
    std::cout << "burst: " << w.cordoned_count() - before << " of " << burst
              << " nodes quarantined in " << took << " s = " << burst / took
              << " nodes/s (the faults took " << wrote << " s to write; load average " << loadavg()
              << ")\n";
    next += burst;
  }
  const long rss_busy = rss_kib(ctl.pid());
  std::cout << "controller RSS: " << rss_idle / 1024 << " MiB after sync, " << rss_busy / 1024
            << " MiB after the bursts (" << nodes
            << " Nodes, NodeHealth, Remediations cached); CPU at start " << cpu_idle << " s\n";
  // 3. Drain: nodes with a pod each, drain on.
  {
    apply_policy(client, b.prefix, nodes + 1, true);
    if (!policy_loaded(client, b.prefix, nodes + 1)) std::cerr << "policy not loaded in 30 s\n";
    const auto start = Clock::now();
    parallel(drain, kWriters, [&](int i) { b.fault(drain_first + i); });
    auto drained = [&](int i) {
      return w.first_phase(b.node_name(drain_first + i),
                           {"Remediating", "Validating", "Released", "Failed", "Cancelled"});
    };
    wait_until(
        [&] {
          for (int i = 0; i < drain; ++i)
            if (!drained(i)) return false;
          return true;
        },
        180s);
    Clock::time_point last = start;
    int done = 0;
    for (int i = 0; i < drain; ++i)
      if (auto t = drained(i)) {
        ++done;
        last = std::max(last, *t);
      }
    const double took = std::chrono::duration<double>(last - start).count();
    kube::ListOptions lo;
    lo.label_selector = "sentinel-bench=" + b.prefix;
    const std::size_t left = client.list(kube::resources::pods(), "default", lo).items.size();
    std::cout << "drain: " << done << " of " << drain << " nodes (one pod each) drained in " << took
              << " s = " << done / took << " nodes/s; pods left " << left << "; "
              << controller_metrics_line(port, "gpufleet_sentinel_drain_pod_actions_total{")
              << " (load average " << loadavg() << ")\n";
    if (done != drain || left != 0) ++failures;
    next = drain_first + drain;
  }
  // 4. Storm with the breaker at `threshold` more nodes.
  {
    const std::size_t before = w.cordoned_count();
    // The breaker counts unique nodes in its window: the threshold is what is already in it
    // plus `threshold`.
    const int already = static_cast<int>(before);
    apply_policy(client, b.prefix, already + threshold, false);
    if (!policy_loaded(client, b.prefix, already + threshold))
      std::cerr << "policy not loaded in 30 s\n";
    const auto start = Clock::now();
    parallel(storm, kWriters, [&](int i) { b.fault(next + i); });
    // The backlog: every admitted node cordoned, and nothing more for 5 s.
    std::size_t seen = 0;
    auto stable_since = Clock::now();
    while (since(start) < 180) {
      const std::size_t c = w.cordoned_count();
      if (c != seen) {
        seen = c;
        stable_since = Clock::now();
      }
      if (c - before >= static_cast<std::size_t>(threshold) && since(stable_since) > 5) break;
      std::this_thread::sleep_for(200ms);
    }
    const std::size_t acted = w.cordoned_count() - before;
    auto pol = client.get(sentinel::api::sentinel_policies(), "", b.prefix);
    int dup = 0, with_incident = 0, cordoned_without = 0;
    for (int i = 0; i < storm; ++i) {
      const std::string n = b.node_name(next + i);
      const std::size_t k = w.incidents_of(n);
      dup += k > 1 ? 1 : 0;
      with_incident += k > 0 ? 1 : 0;
      cordoned_without += k == 0 && w.is_cordoned(n) ? 1 : 0;
    }
    const std::string state(pol.get_string({"status", "breaker", "state"}));
    const core::Value* un = pol.get({"status", "breaker", "uniqueNodes"});
    std::cout << "storm: " << storm << " nodes faulted at once, breaker at " << threshold
              << " new nodes (" << already + threshold << " in its window): quarantined " << acted
              << ", incidents " << with_incident << ", nodes with more than one " << dup
              << ", cordoned without one " << cordoned_without << ", breaker " << state << " at "
              << (un != nullptr ? un->as_int() : -1) << " unique nodes, "
              << controller_metrics_line(port, "gpufleet_sentinel_quarantines_refused_total")
              << " refusals (load average " << loadavg() << ")\n";
    const bool ok = acted == static_cast<std::size_t>(threshold) && with_incident == threshold &&
                    dup == 0 && cordoned_without == 0 && state == "Tripped" && un != nullptr &&
                    un->as_int() == already + threshold;
    std::cout << "storm check: " << (ok ? "OK" : "FAILED") << "\n";
    if (!ok) ++failures;
  }
  w.stop();
  kubelet.request_stop();
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
  return failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------
// Mode ref: what the API server itself accepts, and where its ceiling comes from

// One object per writer thread, written again and again (its own resourceVersion, so no 409):
// writes/s and the mean time of a write, for `threads` writers through `clients` (one client
// shared by every thread, or one each).
struct RefResult {
  double per_s = 0;
  double mean_ms = 0;
  long errors = 0;
  double apiserver_ms = -1;  // CPU of kube-apiserver per write (-1: its pid is unknown)
  double etcd_ms = -1;       // CPU of etcd per write
};

RefResult ref_writes(const std::vector<kube::Client*>& clients, std::vector<core::Value>& objs,
                     int threads, double seconds, pid_t apiserver, pid_t etcd) {
  std::atomic<long> writes{0}, errors{0};
  std::atomic<long long> busy_us{0};
  const double api_cpu = apiserver > 0 ? cpu_s(apiserver) : 0;
  const double etcd_cpu = etcd > 0 ? cpu_s(etcd) : 0;
  const auto start = Clock::now();
  {
    std::vector<std::jthread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        kube::Client& c = *clients[static_cast<std::size_t>(t) % clients.size()];
        core::Value& obj = objs[static_cast<std::size_t>(t)];
        for (long j = 0; since(start) < seconds; ++j) {
          obj["status"]["state"] = j % 2 == 0 ? "Healthy" : "Unknown";
          const auto t0 = Clock::now();
          try {
            obj = c.update_status(sentinel::api::node_healths(), obj);
            ++writes;
          } catch (const std::exception& e) {
            if (++errors == 1) std::cerr << "ref write: " << e.what() << "\n";
            obj = c.get(sentinel::api::node_healths(), "", kube::name_of(obj));
          }
          busy_us +=
              std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
        }
      });
  }
  const double took = since(start);
  RefResult r;
  r.per_s = static_cast<double>(writes) / took;
  r.mean_ms = writes > 0 ? static_cast<double>(busy_us) / 1000.0 / static_cast<double>(writes) : 0;
  r.errors = errors;
  if (writes > 0 && apiserver > 0)
    r.apiserver_ms = (cpu_s(apiserver) - api_cpu) * 1000 / static_cast<double>(writes);
  if (writes > 0 && etcd > 0)
    r.etcd_ms = (cpu_s(etcd) - etcd_cpu) * 1000 / static_cast<double>(writes);
  return r;
}

// `sentinel_live_bench ref KUBECONFIG GPUFLEET_BIN SOURCE_DIR [NODES] [THREADS...]`: NODES
// NodeHealth objects (default 1000), then for each thread count (default 8 32 128), 3 s each:
//   admin-shared  the admin identity, one client for every thread (as the other modes write);
//   admin-own     the admin identity, one client (connection) per thread;
//   agent         each thread as the gpufleet-agent ServiceAccount with a token bound to a
//                 Pod on its node (as the DaemonSet's agents write: RBAC, not system:masters);
//   agent+policy  the same with deploy/admission/agent-node-identity.yaml installed (its CEL
//                 runs on every write).
// The control plane's own settings (etcd fsync, tmpfs, apiserver flags) are the script's
// (scripts/bench-sentinel.sh: SENTINEL_BENCH_ETCD, SENTINEL_BENCH_APISERVER_ARGS).
int run_ref(kube::Client& admin, const kube::ClientConfig& cc, const std::string& kubeconfig,
            const std::string& src, const std::vector<int>& a) {
  // The CPU the control plane spends per write does not depend on what else the machine runs
  // (the rate does): the figure to compare settings by on a shared machine.
  const pid_t apiserver = control_plane_pid(kubeconfig, "apiserver");
  const pid_t etcd = control_plane_pid(kubeconfig, "etcd");
  const int nodes = a.empty() ? 1000 : a[0];
  std::vector<int> threads(a.size() > 1 ? a.begin() + 1 : a.end(), a.end());
  if (threads.empty()) threads = {8, 32, 128};
  const int most = *std::max_element(threads.begin(), threads.end());
  if (nodes < most) {
    std::cerr << "NODES (" << nodes << ") must be at least the largest THREADS (" << most << ")\n";
    return 2;
  }
  const std::string prefix = "sr" + std::to_string(::getpid());
  std::vector<core::Value> objs(static_cast<std::size_t>(nodes));
  const auto t0 = Clock::now();
  parallel(nodes, 8, [&](int i) {
    const std::string name = prefix + "-" + std::to_string(i);
    core::Value node;
    node["apiVersion"] = "v1";
    node["kind"] = "Node";
    node["metadata"]["name"] = name;
    if (i < most) admin.create(kube::resources::nodes(), node);
    core::Value nh;
    nh["apiVersion"] = "gpufleet.io/v1alpha1";
    nh["kind"] = "NodeHealth";
    nh["metadata"]["name"] = name;
    nh["spec"]["nodeName"] = name;
    objs[static_cast<std::size_t>(i)] = admin.create(sentinel::api::node_healths(), nh);
  });
  std::cout << "setup: " << nodes << " NodeHealth in " << since(t0) << " s (load average "
            << loadavg() << ")\n";

  // The agents' identities: a ServiceAccount gpufleet-agent, the chart's RBAC for NodeHealth,
  // one Pod per writer bound to its node, and a token bound to that Pod (it carries the node).
  const std::string ns = prefix + "-agents";
  {
    core::Value n;
    n["apiVersion"] = "v1";
    n["kind"] = "Namespace";
    n["metadata"]["name"] = ns;
    admin.create(kube::resources::namespaces(), n);
    core::Value sa;
    sa["apiVersion"] = "v1";
    sa["kind"] = "ServiceAccount";
    sa["metadata"]["name"] = "gpufleet-agent";
    sa["metadata"]["namespace"] = ns;
    admin.create(kube::resources::service_accounts(), sa);
    const kube::ResourceId roles{"rbac.authorization.k8s.io", "v1", "clusterroles", false};
    const kube::ResourceId bindings{"rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                    false};
    core::Value cr;
    cr["apiVersion"] = "rbac.authorization.k8s.io/v1";
    cr["kind"] = "ClusterRole";
    cr["metadata"]["name"] = ns;
    core::Value rule;
    rule["apiGroups"].push_back("gpufleet.io");
    rule["resources"].push_back("nodehealths");
    rule["resources"].push_back("nodehealths/status");
    for (const char* v : {"get", "create", "update", "patch"}) rule["verbs"].push_back(v);
    cr["rules"].push_back(rule);
    admin.create(roles, cr);
    core::Value crb;
    crb["apiVersion"] = "rbac.authorization.k8s.io/v1";
    crb["kind"] = "ClusterRoleBinding";
    crb["metadata"]["name"] = ns;
    crb["roleRef"]["apiGroup"] = "rbac.authorization.k8s.io";
    crb["roleRef"]["kind"] = "ClusterRole";
    crb["roleRef"]["name"] = ns;
    core::Value subject;
    subject["kind"] = "ServiceAccount";
    subject["name"] = "gpufleet-agent";
    subject["namespace"] = ns;
    crb["subjects"].push_back(subject);
    admin.create(bindings, crb);
  }
  // The ServiceAccount's token controller needs a moment before a TokenRequest works.
  std::vector<std::string> tokens(static_cast<std::size_t>(most));
  parallel(most, 8, [&](int i) {
    const std::string node = prefix + "-" + std::to_string(i);
    core::Value pod;
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    pod["metadata"]["name"] = "agent-" + node;
    pod["metadata"]["namespace"] = ns;
    pod["spec"]["nodeName"] = node;
    pod["spec"]["serviceAccountName"] = "gpufleet-agent";
    core::Value c;
    c["name"] = "agent";
    c["image"] = "registry.invalid/gpufleet:bench";
    pod["spec"]["containers"].push_back(c);
    core::Value created;
    wait_until(
        [&] {
          try {
            created = admin.create(kube::resources::pods(), pod);
            return true;
          } catch (const kube::ApiError& e) {
            return e.is(kube::Reason::AlreadyExists);
          }
        },
        30s);
    core::Value req;
    req["apiVersion"] = "authentication.k8s.io/v1";
    req["kind"] = "TokenRequest";
    req["spec"]["expirationSeconds"] = 3600;
    req["spec"]["boundObjectRef"]["apiVersion"] = "v1";
    req["spec"]["boundObjectRef"]["kind"] = "Pod";
    req["spec"]["boundObjectRef"]["name"] = "agent-" + node;
    req["spec"]["boundObjectRef"]["uid"] = std::string(kube::uid_of(created));
    core::Value tr = admin.create_subresource(kube::resources::service_accounts(), ns,
                                              "gpufleet-agent", "token", req);
    tokens[static_cast<std::size_t>(i)] = std::string(tr.get_string({"status", "token"}));
  });

  std::vector<std::unique_ptr<kube::Client>> own, agents;
  for (int t = 0; t < most; ++t) {
    own.push_back(std::make_unique<kube::Client>(cc));
    kube::ClientConfig ac = cc;
    ac.client_cert_pem.clear();
    ac.client_key_pem.clear();
    ac.token = tokens[static_cast<std::size_t>(t)];
    agents.push_back(std::make_unique<kube::Client>(ac));
  }
  auto ptrs = [](const std::vector<std::unique_ptr<kube::Client>>& v) {
    std::vector<kube::Client*> out;
    for (const auto& c : v) out.push_back(c.get());
    return out;
  };
  const std::string policy_file = src + "/deploy/admission/agent-node-identity.yaml";
  auto policy_docs = core::parse_yaml_documents(read_file(policy_file), policy_file);
  const kube::ResourceId vaps{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                              false};
  const kube::ResourceId vapbs{"admissionregistration.k8s.io", "v1",
                               "validatingadmissionpolicybindings", false};
  struct Variant {
    const char* name;
    std::vector<kube::Client*> clients;
    bool policy;
  };
  const std::vector<Variant> variants{{"admin-shared", {&admin}, false},
                                      {"admin-own", ptrs(own), false},
                                      {"agent", ptrs(agents), false},
                                      {"agent+policy", ptrs(agents), true}};
  std::map<std::string, double> first;
  for (const auto& v : variants) {
    if (v.policy) {
      for (const auto& d : policy_docs)
        admin.apply(d.get_string({"kind"}) == "ValidatingAdmissionPolicy" ? vaps : vapbs, d,
                    {.field_manager = "sentinel-bench", .force = true});
      // Takes effect a moment after it is stored: wait until a write of another node's object
      // is denied.
      core::Value other = objs[static_cast<std::size_t>(most - 1)];
      const bool active = wait_until(
          [&] {
            try {
              other["status"]["state"] = "Unknown";
              other = agents[0]->update_status(sentinel::api::node_healths(), other);
              return false;
            } catch (const kube::ApiError& e) {
              return e.is(kube::Reason::Forbidden);
            }
          },
          30s);
      objs[static_cast<std::size_t>(most - 1)] =
          admin.get(sentinel::api::node_healths(), "", kube::name_of(other));
      if (!active) std::cerr << "the admission policy did not take effect in 30 s\n";
    }
    for (int t : threads) {
      const RefResult r = ref_writes(v.clients, objs, t, 3.0, apiserver, etcd);
      const std::string key = std::to_string(t);
      if (!first.contains(key)) first[key] = r.per_s;
      std::cout << "ref " << v.name << " threads " << t << ": " << r.per_s
                << " NodeHealth status writes/s (" << r.mean_ms << " ms a write, ratio "
                << r.per_s / first[key] << " to admin-shared";
      if (r.errors > 0) std::cout << ", " << r.errors << " errors";
      if (r.apiserver_ms >= 0)
        std::cout << "; CPU per write: kube-apiserver " << r.apiserver_ms << " ms, etcd "
                  << r.etcd_ms << " ms";
      std::cout << "; load average " << loadavg() << ")\n";
    }
  }
  for (const auto& d : policy_docs) try {
      admin.remove(d.get_string({"kind"}) == "ValidatingAdmissionPolicy" ? vaps : vapbs, "",
                   d.get_string({"metadata", "name"}));
    } catch (const std::exception&) {
    }
  try {
    admin.remove(kube::resources::namespaces(), "", ns);
  } catch (const std::exception&) {
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// Mode sim

// What one node's journal holds: every record, its Xid health records, its Fatal entities.
struct JournalCount {
  std::uint64_t last_id = 0;
  std::uint64_t xid_records = 0;
  std::set<std::string> fatal;  // xid entities whose last record was Fatal
};

JournalCount read_journal(const fs::path& dir) {
  JournalCount out;
  std::vector<fs::path> segs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("seg-", 0) == 0) segs.push_back(e.path());
  std::sort(segs.begin(), segs.end(), [](const fs::path& a, const fs::path& b) {
    auto id = [](const fs::path& p) {
      return std::stoull(p.stem().string().substr(4).empty() ? "0" : p.stem().string().substr(4));
    };
    return id(a) < id(b);
  });
  std::map<std::string, std::string> state;
  for (const auto& s : segs) {
    std::string bytes = read_file(s.string());
    std::size_t valid = 0;
    for (const auto& r : agent::decode_records(bytes, &valid)) {
      out.last_id = std::max(out.last_id, r.id);
      if (r.kind != "health") continue;
      core::Value p;
      try {
        p = core::parse_json(r.payload, "record");
      } catch (const std::exception&) {
        continue;
      }
      if (p.get_string({"check"}) != "xid") continue;
      ++out.xid_records;
      state[std::string(p.get_string({"entity"}))] = std::string(p.get_string({"state"}));
    }
  }
  for (const auto& [e, st] : state)
    if (st == "Fatal") out.fatal.insert(e);
  return out;
}

int run_sim(kube::Client& client, const std::string& kubeconfig, const std::string& bin,
            const std::vector<int>& a) {
  auto arg = [&](std::size_t i, int def) { return a.size() > i ? a[i] : def; };
  const int nodes = arg(0, 1000), rate = arg(1, 100), seconds = arg(2, 60), threshold = arg(3, 50);
  const fs::path work =
      fs::temp_directory_path() / ("sentinel-storm-" + std::to_string(::getpid()));
  const fs::path state = work / "sim";
  fs::create_directories(work);
  const std::string policy = "storm" + std::to_string(::getpid());
  {
    std::ofstream f(work / "fleet.yaml");
    f << "apiVersion: gpufleet.io/v1alpha1\nkind: Fleet\nmetadata: {name: " << policy
      << "}\nspec:\n  seed: 12\n  pools:\n  - name: h100\n    count: " << nodes
      << "\n    namePattern: \"" << policy << "-{rack:03}-{slot:02}\"\n    nodesPerRack: 16\n"
      << "    gpu: {product: h100, count: 8}\n";
  }
  auto t0 = Clock::now();
  // Leases every 30 s (of their 40 s) and status every 10 min: the fleet's own heartbeat
  // writes stay a small share of what the API server can take.
  controller::testing::Child sim(
      {bin, "sim", "--fleet", (work / "fleet.yaml").string(), "--kubeconfig", kubeconfig,
       "--state-dir", state.string(), "--lease-renew", "30s", "--status-report", "10m"},
      (work / "sim.log").string());
  auto node_dirs = [&] {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state / "nodes", ec))
      if (fs::exists(e.path() / "proc/sys/kernel/random/boot_id"))
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  if (!wait_until([&] { return node_dirs().size() == static_cast<std::size_t>(nodes); }, 600s)) {
    std::cerr << "simulator: " << node_dirs().size() << " of " << nodes << " nodes in 600 s\n";
    return 1;
  }
  const std::vector<std::string> names = node_dirs();
  std::cout << "setup: simulator with " << nodes << " nodes in " << since(t0) << " s\n";
  controller::testing::Child agent({bin, "agent", "--sim-state-dir", state.string(), "--kubeconfig",
                                    kubeconfig, "--fsync", "false", "--remediation", "off"},
                                   (work / "agent.log").string());
  auto healths = [&] {
    kube::ListOptions lo;
    return client.list(sentinel::api::node_healths(), "", lo).items;
  };
  auto count_ours = [&] {
    std::size_t n = 0;
    for (const auto& h : healths()) n += kube::name_of(h).starts_with(policy) ? 1 : 0;
    return n;
  };
  if (!wait_until([&] { return count_ours() == static_cast<std::size_t>(nodes); }, 600s)) {
    std::cerr << "agent: NodeHealth for " << count_ours() << " of " << nodes << " nodes\n";
    return 1;
  }
  std::cout << "setup: agents reported every NodeHealth after " << since(t0) << " s\n";
  // Every journal delivered (NodeHealth's lastAppliedRecordId at the journal's last id):
  // fills `journals` and returns the nodes still behind.
  std::map<std::string, JournalCount> journals;
  auto undelivered_nodes = [&] {
    journals.clear();
    for (const auto& n : names)
      journals[n] = read_journal(state / "nodes" / n / "var/lib/gpufleet/agent/journal");
    std::map<std::string, std::int64_t> applied;
    for (const auto& h : healths()) {
      const core::Value* v = h.get({"status", "lastAppliedRecordId"});
      applied[std::string(kube::name_of(h))] = v != nullptr ? v->as_int() : 0;
    }
    std::size_t behind = 0;
    for (const auto& n : names)
      behind += applied[n] < static_cast<std::int64_t>(journals[n].last_id) ? 1 : 0;
    return behind;
  };
  // Agent cost per node, idle (every monitor polling, nothing to report): measured once the
  // first reports of every node are delivered, which at 5,000 nodes take minutes after the
  // last NodeHealth exists and would otherwise count as idle cost.
  {
    if (!wait_until([&] { return undelivered_nodes() == 0; }, 600s))
      std::cerr << "agent: first reports not delivered in 600 s; idle figure includes them\n";
    std::cout << "setup: first reports delivered after " << since(t0) << " s\n";
    std::this_thread::sleep_for(5s);
    const double c0 = cpu_s(agent.pid());
    const auto s = Clock::now();
    std::this_thread::sleep_for(60s);
    const double cores = (cpu_s(agent.pid()) - c0) / since(s);
    const long rss = rss_kib(agent.pid());
    std::cout << "agent: " << nodes
              << " simulated nodes in one `gpufleet agent --sim-state-dir`: " << cores
              << " cores idle = " << cores * 1e6 / nodes << " µs CPU/s per node, RSS " << rss / 1024
              << " MiB = " << static_cast<double>(rss) / nodes << " KiB per node (load average "
              << loadavg() << ")\n";
  }
  apply_policy(client, policy, threshold, false);
  Watcher w{client, "gpufleet.io/fleet=" + policy, {}, {}, {}, {}, {}, {}, {}, {}};
  w.start();
  const int port = controller::testing::free_port();
  controller::testing::Child ctl(controller_argv(bin, kubeconfig, policy, port),
                                 (work / "controller.log").string());
  wait_until([&] { return controller::testing::http_get(port, "/metrics").first == 200; }, 30s);
  if (!policy_loaded(client, policy, threshold)) std::cerr << "policy not loaded in 30 s\n";

  // The storm: Xids on random nodes and GPUs; 79 and 48 are Fatal (the rule matches), 13 and
  // 31 Warning (it does not).
  std::mt19937 rng(12);
  const int codes[] = {79, 13, 48, 31};
  std::map<std::string, Clock::time_point> first_fault;  // first Fatal Xid injected per node
  const int total = rate * seconds;
  const double agent_cpu0 = cpu_s(agent.pid()), ctl_cpu0 = cpu_s(ctl.pid());
  const auto start = Clock::now();
  for (int k = 0; k < total; ++k) {
    std::this_thread::sleep_until(start + std::chrono::microseconds(1'000'000LL * k / rate));
    const std::string& n = names[rng() % names.size()];
    const int code = codes[rng() % 4];
    core::Value ev;
    ev["node"] = n;
    ev["type"] = "xid";
    ev["gpu"] = static_cast<std::int64_t>(rng() % 8);
    ev["code"] = code;
    sim::submit_control_event(state.string(), ev);
    if (code == 79 || code == 48) first_fault.try_emplace(n, Clock::now());
  }
  const double took = since(start);
  const double agent_cores = (cpu_s(agent.pid()) - agent_cpu0) / took;
  const double ctl_cores = (cpu_s(ctl.pid()) - ctl_cpu0) / took;
  std::cout << "storm: " << total << " Xids injected in " << took << " s (" << total / took
            << "/s) on " << nodes << " nodes, " << first_fault.size()
            << " nodes with a Fatal one; agent " << agent_cores << " cores, controller "
            << ctl_cores << " cores (load average " << loadavg() << ")\n";

  // Drain the backlog: the simulator's inbox empty, every journal delivered (NodeHealth's
  // lastAppliedRecordId at the journal's last id) and stable, the controller quiet.
  auto inbox_left = [&] { return sim::list_control_inbox(state.string()).size(); };
  wait_until([&] { return inbox_left() == 0; }, 300s);
  std::size_t undelivered = 0;
  const auto drain_start = Clock::now();
  std::uint64_t stable_sum = 0;
  auto stable_since = Clock::now();
  while (since(drain_start) < 600) {
    std::this_thread::sleep_for(2s);
    undelivered = undelivered_nodes();
    std::uint64_t sum = 0;
    for (const auto& [n, j] : journals) sum += j.last_id;
    if (sum != stable_sum) {
      stable_sum = sum;
      stable_since = Clock::now();
    }
    if (undelivered == 0 && since(stable_since) >= 6) break;
  }
  // The controller: no new cordon for 5 s.
  {
    std::size_t seen = w.cordoned_count();
    auto quiet = Clock::now();
    while (since(quiet) < 5 && since(drain_start) < 900) {
      std::this_thread::sleep_for(200ms);
      if (w.cordoned_count() != seen) {
        seen = w.cordoned_count();
        quiet = Clock::now();
      }
    }
  }
  std::cout << "backlog drained " << since(start) - took << " s after the last injection\n";

  // Counts.
  std::uint64_t journal_records = 0, journal_xid = 0, api_applied = 0, rejected = 0;
  std::size_t fatal_journal = 0, fatal_api = 0, entity_mismatch = 0;
  std::set<std::string> matching;  // nodes whose journal holds a Fatal Xid entity
  std::map<std::string, core::Value> by_name;
  for (auto& h : healths()) by_name[std::string(kube::name_of(h))] = h;
  for (const auto& n : names) {
    const JournalCount& j = journals[n];
    journal_records += j.last_id;
    journal_xid += j.xid_records;
    fatal_journal += j.fatal.size();
    if (!j.fatal.empty()) matching.insert(n);
    const core::Value& h = by_name[n];
    if (const core::Value* v = h.get({"status", "lastAppliedRecordId"})) api_applied += v->as_int();
    if (const core::Value* v = h.get({"status", "rejectedRecords"})) rejected += v->as_int();
    std::set<std::string> api_fatal;
    if (const core::Value* checks = h.get({"status", "checks"}); checks && checks->is_list())
      for (const auto& c : checks->as_list())
        if (c.get_string({"name"}) == "xid")
          if (const core::Value* es = c.find("entities"); es && es->is_list())
            for (const auto& e : es->as_list())
              if (e.get_string({"state"}) == "Fatal")
                api_fatal.insert(std::string(e.get_string({"id"})));
    fatal_api += api_fatal.size();
    entity_mismatch += api_fatal != j.fatal ? 1 : 0;
  }
  int quarantined = 0, dup = 0, unmatched = 0;
  std::vector<double> lat;
  for (const auto& n : names) {
    const std::size_t k = w.incidents_of(n);
    quarantined += k > 0 ? 1 : 0;
    dup += k > 1 ? 1 : 0;
    if (k > 0 && !matching.contains(n)) ++unmatched;
    if (w.is_cordoned(n))
      if (auto f = first_fault.find(n); f != first_fault.end()) {
        std::lock_guard l(w.mu);
        lat.push_back(std::chrono::duration<double, std::milli>(w.cordoned[n] - f->second).count());
      }
  }
  auto pol = client.get(sentinel::api::sentinel_policies(), "", policy);
  const std::string bstate(pol.get_string({"status", "breaker", "state"}));
  const core::Value* un = pol.get({"status", "breaker", "uniqueNodes"});
  const int expect = std::min(static_cast<int>(matching.size()), threshold);
  const bool trip_expected = static_cast<int>(matching.size()) >= threshold;
  std::cout << "journals: " << journal_records << " records (" << journal_xid
            << " Xid health records), NodeHealth applied " << api_applied << ", rejected "
            << rejected << "; Fatal Xid entities: journals " << fatal_journal << ", NodeHealth "
            << fatal_api << ", nodes differing " << entity_mismatch << "\n";
  std::cout << "quarantine: " << matching.size() << " nodes with a matching fault, breaker at "
            << threshold << ": quarantined " << quarantined << " (expected " << expect
            << "), nodes with more than one incident " << dup << ", without a matching fault "
            << unmatched << "; breaker " << bstate << " at " << (un ? un->as_int() : -1)
            << " unique nodes (expected " << (trip_expected ? "Tripped" : "Closed") << " at "
            << expect << "); fault->cordon through sim+agent p50 " << pct(lat, 0.5) << " ms, p99 "
            << pct(lat, 0.99) << " ms; controller RSS " << rss_kib(ctl.pid()) / 1024 << " MiB\n";
  const bool ok = journal_records == api_applied && rejected == 0 && entity_mismatch == 0 &&
                  quarantined == expect && dup == 0 && unmatched == 0 &&
                  bstate == (trip_expected ? "Tripped" : "Closed") && un != nullptr &&
                  un->as_int() == expect;
  std::cout << "storm check: " << (ok ? "OK" : "FAILED") << "\n";
  w.stop();
  ctl.signal(SIGTERM);
  ctl.wait(30s);
  agent.signal(SIGTERM);
  agent.wait(30s);
  sim.signal(SIGTERM);
  sim.wait(300s);
  client.remove(sentinel::api::sentinel_policies(), "", policy);
  std::error_code ec;
  if (ok)
    fs::remove_all(work, ec);
  else
    std::cout << "logs kept in " << work.string() << "\n";
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::set<std::string> modes{"api", "sim", "ref"};
  if (argc < 5 || !modes.contains(argv[1])) {
    std::cerr << "usage: sentinel_live_bench api|sim|ref KUBECONFIG GPUFLEET_BIN SOURCE_DIR "
                 "[NUMBERS...] (see the file's header)\n";
    return 2;
  }
  const std::string mode = argv[1], kubeconfig = argv[2], bin = argv[3], src = argv[4];
  std::vector<int> nums;
  for (int i = 5; i < argc; ++i) nums.push_back(std::stoi(argv[i]));
  kube::ClientConfig cc = kube::load_default_config(kubeconfig, "");
  cc.qps = 5000;  // the load generator must not be what limits the rate
  cc.burst = 5000;
  kube::Client client(cc);
  apply_crds(client, src);
  if (mode == "ref") return run_ref(client, cc, kubeconfig, src, nums);
  return mode == "api" ? run_api(client, kubeconfig, bin, nums)
                       : run_sim(client, kubeconfig, bin, nums);
}
