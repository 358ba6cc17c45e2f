#include "recipe/live/performance_run.h"

#include <algorithm>
#include <chrono>
#include <ostream>
#include <stdexcept>
#include <thread>

#include "api/resources.h"
#include "core/time.h"
#include "kube/api/meta.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"

namespace gpufleet::recipe {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const kube::ResourceId& kCertifications = api::certifications();
constexpr auto kPoll = 2s;

bool final_phase(const core::Value& c) {
  std::string_view p = c.get_string({"status", "phase"});
  return p == "Passed" || p == "Failed";
}

// What an operator does about a refused request.
[[noreturn]] void explain(const kube::ApiError& e, const std::string& ns, const std::string& what) {
  const kube::RequestInfo& req = e.request();
  if (e.is(kube::Reason::Forbidden)) {
    throw std::runtime_error(
        "--phase performance: forbidden to " + req.verb +
        " certifications.gpufleet.io in "
        "namespace " +
        ns + " (" + e.server_message() +
        "); it needs a Role rule {apiGroups: [\"gpufleet.io\"], resources: [\"certifications\"], "
        "verbs: [\"get\", \"create\", \"delete\"]} in that namespace");
  }
  if (e.is(kube::Reason::NotFound) && what == "create") {
    throw std::runtime_error("--phase performance: cannot create the Certification in namespace " +
                             ns + ": " + e.server_message() +
                             "; create the namespace or give --performance-namespace NS");
  }
  throw std::runtime_error("--phase performance: cannot " + what + " Certification in " + ns +
                           ": " + std::string(kube::reason_name(e.reason())) + " (HTTP " +
                           std::to_string(e.code()) + "): " + e.server_message());
}

struct PoolRun {
  const NodePool* pool;
  std::vector<std::string> nodes;
  core::Value desired;
  core::Value current;
  std::string last_progress;
};

std::string progress_line(const core::Value& c) {
  std::string phase(c.get_string({"status", "phase"}));
  std::string line = phase.empty() ? "waiting for the certify controller" : phase;
  if (const core::Value* cats = c.get({"status", "categories"}); cats && cats->is_list()) {
    for (const core::Value& cat : cats->as_list()) {
      if (cat.get_string({"phase"}) != "Running") continue;
      const core::Value* done = cat.get({"groupsDone"});
      const core::Value* groups = cat.get({"groups"});
      line += ", " + std::string(cat.get_string({"name"}));
      if (done && groups && done->is_number() && groups->is_number()) {
        line += " " + std::to_string(done->as_int()) + "/" + std::to_string(groups->as_int()) +
                " groups";
      }
    }
  }
  return line;
}

// Creates the Certification, or finds the one a previous validate created: one still running
// with the same spec is waited for; one that finished, or asked something else, is deleted
// (foreground, so its Jobs and ConfigMaps go first and the new run cannot read the old run's
// state ConfigMaps of the same name) and created again.
core::Value ensure(kube::Client& client, const core::Value& desired, Clock::time_point deadline,
                   std::ostream& progress) {
  std::string ns(kube::namespace_of(desired));
  std::string name(kube::name_of(desired));
  std::string ref = ns + "/" + name;
  try {
    if (auto existing = client.try_get(kCertifications, ns, name)) {
      const core::Value* spec = existing->find("spec");
      bool same = spec != nullptr && *spec == *desired.find("spec");
      if (same && !final_phase(*existing)) {
        progress << "performance: Certification " << ref << " is already running; waiting for it\n";
        return *existing;
      }
      progress << "performance: replacing Certification " << ref << " ("
               << (same ? "finished " + std::string(existing->get_string({"status", "phase"}))
                        : std::string("another spec: nodes or thresholds changed"))
               << ")\n";
      kube::DeleteOptions del;
      del.propagation_policy = "Foreground";
      del.precondition_uid = std::string(kube::uid_of(*existing));
      try {
        client.remove(kCertifications, ns, name, del);
      } catch (const kube::ApiError& e) {
        if (!e.is(kube::Reason::NotFound) && !e.is(kube::Reason::Conflict)) throw;
      }
      // The old run's deletion has its own bound: garbage collection of its Jobs, their pods
      // (each with a 30 s termination grace period by default) and its ConfigMaps takes tens
      // of seconds on a busy control plane (30 s was exceeded in CI), and a short
      // --performance-timeout bounds the new run, not the removal of the last one.
      progress << "performance: waiting up to 2 min for its deletion (its Jobs and pods first)\n";
      const Clock::time_point deletion_deadline = std::max(deadline, Clock::now() + 120s);
      while (client.try_get(kCertifications, ns, name)) {
        if (Clock::now() >= deletion_deadline) {
          throw std::runtime_error(
              "--phase performance: the previous Certification " + ref +
              " is still being deleted (foreground: its Jobs and ConfigMaps first); is the "
              "cluster's garbage collector (kube-controller-manager) running? Delete it with "
              "kubectl delete certification -n " +
              ns + " " + name + " and run validate again");
        }
        std::this_thread::sleep_for(500ms);
      }
    }
    core::Value created = client.create(kCertifications, desired);
    progress << "performance: created Certification " << ref << "\n";
    return created;
  } catch (const kube::ApiError& e) {
    if (e.is(kube::Reason::AlreadyExists)) return client.get(kCertifications, ns, name);
    explain(e, ns, e.request().verb.empty() ? "create" : e.request().verb);
  }
}

}  // namespace

void run_performance_phase(ValidationReport& out, const Recipe& recipe, const Snapshot& s,
                           const LiveClusterOptions& cluster, const PerformanceOptions& options,
                           std::ostream& progress) {
  bool crd = std::any_of(s.workloads.begin(), s.workloads.end(), [](const WorkloadState& w) {
    return w.kind == "CustomResourceDefinition" && w.name == "certifications.gpufleet.io" &&
           w.established;
  });
  if (!crd) {
    throw std::runtime_error(
        "--phase performance: the cluster does not serve certify's Certification resource (CRD "
        "certifications.gpufleet.io is missing or not Established); install gpufleet's chart "
        "(its CRDs) or kubectl apply -f deploy/crds/certification.yaml, and run the certify "
        "controller (gpufleet controller --controllers=certify)");
  }
  std::vector<PoolRun> runs;
  for (const NodePool& p : recipe.pools) {
    if (p.performance.empty()) {
      CheckResult r{"performance",
                    "NCCL bus bandwidth",
                    "pool " + p.name,
                    "bandwidth floors in the library",
                    "none for accelerator " + p.accelerator,
                    false,
                    "error",
                    ""};
      r.skipped = true;
      out.results.push_back(std::move(r));
      continue;
    }
    PoolRun run{&p, {}, {}, {}, {}};
    for (const NodeFacts& n : s.nodes) {
      if (selector_matches(p.node_selector, n.labels)) run.nodes.push_back(n.name);
    }
    std::sort(run.nodes.begin(), run.nodes.end());
    if (run.nodes.empty()) {
      out.results.push_back({"performance", "pool " + p.name + " nodes", "pool " + p.name,
                             "nodes to measure", "no node matches the pool's nodeSelector", false,
                             "error", ""});
      continue;
    }
    run.desired = pool_certification(recipe, p, run.nodes, options);
    runs.push_back(std::move(run));
  }
  if (runs.empty()) return;

  kube::Client client(kube::load_default_config(cluster.kubeconfig, cluster.context));
  const Clock::time_point deadline = Clock::now() + options.timeout;
  for (PoolRun& r : runs) r.current = ensure(client, r.desired, deadline, progress);
  // Every pool's run goes on at once; poll them until all are final or the deadline passes.
  for (;;) {
    bool all_final = true;
    for (PoolRun& r : runs) {
      if (final_phase(r.current)) continue;
      try {
        auto now = client.try_get(kCertifications, kube::namespace_of(r.desired),
                                  kube::name_of(r.desired));
        if (!now) {
          throw std::runtime_error("--phase performance: Certification " +
                                   std::string(kube::namespace_of(r.desired)) + "/" +
                                   std::string(kube::name_of(r.desired)) +
                                   " was deleted while validate waited for it");
        }
        r.current = std::move(*now);
      } catch (const kube::ApiError& e) {
        explain(e, std::string(kube::namespace_of(r.desired)), "get");
      }
      std::string line = progress_line(r.current);
      if (line != r.last_progress) {
        progress << "performance: pool " << r.pool->name << ": " << line << "\n";
        r.last_progress = line;
      }
      all_final = all_final && final_phase(r.current);
    }
    if (all_final || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(kPoll);
  }
  std::string waited = core::format_duration(options.timeout);
  for (const PoolRun& r : runs) {
    report_certification(out, *r.pool, r.nodes, r.current, final_phase(r.current), waited);
  }
}

}  // namespace gpufleet::recipe
