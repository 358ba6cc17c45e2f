// A planned start: the cluster budget in force, its claims (shared with sentinel and other
// replicas), and the one Node patch that writes the record and hostpkg's cordon share.
#include "core/log.h"
#include "core/time.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/set_reconciler.h"
#include "kube/api/cordon.h"
#include "kube/api/disruption.h"
#include "kube/api/meta.h"

namespace gpufleet::hostpkg::detail {

namespace log = core::log;

const ClusterBudget* HostPkgReconciler::cluster_budget(ClusterBudget& storage) {
  controller::BudgetReader::Snapshot b = budget_.get();
  if (!b.present) {
    if (!b.error.empty() && b.error != warned_invalid_) {
      warned_invalid_ = b.error;
      log::warn(
          "hostpkg: DisruptionBudget default cannot be read; using the --set hostpkg.* "
          "budget settings",
          {{"error", b.error}});
    }
    return settings_.has_cluster_budget ? &settings_.cluster : nullptr;
  }
  if (settings_.has_cluster_budget && !warned_both_) {
    warned_both_ = true;
    log::warn(
        "hostpkg: both DisruptionBudget default and --set hostpkg.max-unavailable/"
        "topology-key/max-unavailable-per-domain are set; the DisruptionBudget wins",
        {});
  }
  storage = cluster_budget_from(b.spec);
  return &storage;
}

void HostPkgReconciler::start_node(Pass& p, const NodeStart& s, std::string_view claimed_rv) {
  kube::ObjectPtr node = nodes_.get(s.node);
  if (node == nullptr) return;
  // The claim counts on this write carrying the version it was decided on (a Node that moved
  // in between would free the claim while the start went ahead): start on the next pass.
  if (!claimed_rv.empty() && kube::resource_version_of(*node) != claimed_rv) return;
  RecordRead rr = read_record(*node, p.set.name);
  NodeRecord rec = rr.record.value_or(NodeRecord{});
  rec.state = NodeState::InProgress;
  rec.rollout = s.rollout;
  rec.batch = s.batch;
  rec.epoch = s.epoch;
  rec.failure.clear();
  rec.validation.clear();
  rec.started = clock_.unix_seconds();
  // Record and cordon share in one write: a node is never out without a record saying why.
  core::Value base = kube::cordon_patch(*node, kOwner).value_or(core::Value::map());
  patch_node(s.node, record_patch(*node, p.set.name, rec, std::move(base)), "start");
  log::info(
      "hostpkg: node started",
      {{"set", p.set.name}, {"node", s.node}, {"compartment", s.compartment}, {"batch", s.batch}});
}

std::unordered_map<std::string, std::string> HostPkgReconciler::claim_starts(
    Pass& p, const RolloutPlan& plan) {
  const ClusterBudget& cluster = *p.cluster;
  const std::unordered_set<std::string>& incidents = p.incidents;
  const std::string& key = cluster.topology_key;
  std::vector<kube::CountedNode> counted;
  std::size_t total = 0;
  nodes_.for_each_compact([&](const kube::CompactObject& o) {
    ++total;
    kube::NodeOutFacts f = kube::node_out_facts(o, key, incidents.contains(std::string(o.name())));
    if (kube::is_out(f)) counted.push_back({std::move(f.name), std::move(f.domain)});
  });
  auto lookup = [&](std::string_view name) {
    kube::ClaimedNodeView v;
    kube::CompactPtr o = nodes_.get_compact(std::string(name));
    if (o == nullptr) return v;
    v.present = true;
    v.rv = std::string(o->resource_version());
    v.out = kube::is_out(kube::node_out_facts(*o, key, incidents.contains(std::string(name))));
    return v;
  };
  std::vector<kube::ClaimRequest> requests;
  for (const NodeStart& s : plan.start) {
    kube::CompactPtr o = nodes_.get_compact(s.node);
    if (o == nullptr) continue;
    requests.push_back({s.node,
                        key.empty()
                            ? std::string()
                            : std::string(o->root().get_string({"metadata", "labels", key})),
                        "HostPackageSet/" + p.set.name, std::string(o->resource_version())});
  }
  kube::ClaimLimits limits;
  limits.total = cluster.max_total.resolve(static_cast<std::int64_t>(total));
  if (!key.empty()) limits.domain = cluster.max_per_domain;
  controller::DisruptionReservation::Outcome out =
      claims_.reserve(requests, counted, limits, lookup);
  if (out.writes > 0) metrics_.writes->with({"claim"}).inc(out.writes);
  std::unordered_map<std::string, std::string> granted;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (out.granted[i]) {
      granted.emplace(requests[i].node, requests[i].rv);
    } else {
      log::info("hostpkg: node start waits for the disruption budget's claims",
                {{"set", p.set.name}, {"node", requests[i].node}, {"why", out.why[i]}});
    }
  }
  return granted;
}

}  // namespace gpufleet::hostpkg::detail
