// Re-verification of finished nodes (spec.reverify): a due node gets its packages' verify
// pods one at a time (decide_verify_round, verify_round.h, says create, wait or record), the
// round's outcome goes into its record, and verify pods no round wants are cleaned up.
#include <algorithm>

#include "core/log.h"
#include "core/time.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/set_reconciler.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/controller/verify_round.h"
#include "hostpkg/reverify.h"
#include "kube/api/meta.h"
#include "kube/errors.h"

namespace gpufleet::hostpkg::detail {

namespace log = core::log;

// What a reverify pass keeps across the set's nodes.
struct HostPkgReconciler::Verifying {
  std::chrono::seconds interval{0};
  std::int64_t now = 0;  // Unix seconds
  // The verify pods this set has now, by name; the ones no current round expects are cleaned
  // up at the end.
  std::unordered_map<std::string, kube::ObjectPtr> pods;
  std::int64_t in_flight = 0;
  std::unordered_set<std::string> expected;
  std::int64_t next_due = 0;  // 0: none
  void due(std::int64_t t) { next_due = next_due == 0 ? t : std::min(next_due, t); }
};

std::chrono::seconds HostPkgReconciler::reverify_interval(const HostPackageSet& set) const {
  if (settings_.reverify_interval.count() > 0 && set.reverify.enabled())
    return std::max(std::chrono::seconds(1),
                    std::chrono::duration_cast<std::chrono::seconds>(settings_.reverify_interval));
  return set.reverify.interval;
}

void HostPkgReconciler::remove_verify_pod(const std::string& name) {
  try {
    metrics_.writes->with({"pod-delete"}).inc();
    client_.remove(kube::resources::pods(), settings_.namespace_, name);
  } catch (const kube::ApiError& e) {
    if (!e.is(kube::Reason::NotFound)) throw;
  }
}

std::int64_t HostPkgReconciler::reverify(Pass& p) {
  const std::string& set_name = p.set.name;
  const bool enabled = p.set.reverify.enabled() && !p.deleting;
  Verifying v;
  v.interval = reverify_interval(p.set);
  v.now = clock_.unix_seconds();
  // Picked out in place: only verify pods are rebuilt as Values, not every stage pod per pass.
  std::vector<std::string> verify_keys;
  stage_pods_.for_each_compact([&](const kube::CompactObject& sp) {
    kube::CompactView m = sp.root();
    if (m.get_string({"metadata", "labels", kSetLabel}) == set_name &&
        m.get_string({"metadata", "labels", kStageLabel}) == kVerifyStage)
      verify_keys.push_back(kube::object_key(sp.namespace_(), sp.name()));
  });
  for (const std::string& key : verify_keys) {
    if (kube::ObjectPtr sp = stage_pods_.get(key))
      v.pods.emplace(std::string(kube::name_of(*sp)), std::move(sp));
  }
  for (const auto& [_, pod] : v.pods) {
    if (!stage_outcome(*pod)) ++v.in_flight;
  }

  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const NodeScan& n = p.nodes[i];
    const NodeRecord* seen_rec = p.inputs[i].record;
    if (seen_rec == nullptr || !p.set.node_selector.matches(p.inputs[i].facts.labels) || !enabled)
      continue;
    if (seen_rec->drift) {
      ++p.drifted;
      if (p.drift_messages.size() < kMaxNamedNodes)
        p.drift_messages.push_back(n.name + ": " + seen_rec->drift->package + ": " +
                                   seen_rec->drift->message);
    }
    if (!reverify_eligible(*seen_rec, p.desired)) continue;
    if (!v.pods.empty()) {
      // This round's pods are wanted even while the node is not due (yet, or any more after a
      // clock step): deleting one now would run its check a second time later.
      for (const Package& pkg : p.set.packages)
        v.expected.insert(
            verify_pod_name(set_name, n.name, verify_key(pkg, p.desired, seen_rec->verified)));
    }
    const bool reapply = p.set.reverify.on_drift == DriftAction::Reapply && seen_rec->drift &&
                         p.set.find(seen_rec->drift->package) != nullptr;
    std::int64_t due = reverify_due(*seen_rec, set_name, n.name, v.interval);
    if (!reapply && due > v.now) {
      v.due(due);
      continue;
    }
    if (!n.ready && !reapply) continue;  // looked at again when it is Ready (a Node event)
    try {
      verify_node(p, v, n.name);
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::Conflict)) throw;
      p.verifying = true;  // the Node changed under us: re-read it next pass
    }
  }
  // Verify pods of rounds already recorded, of nodes that left or started a change, of a
  // set that no longer re-verifies: adopted above when still wanted, removed here otherwise.
  for (const auto& [name, pod] : v.pods) {
    if (!v.expected.contains(name)) remove_verify_pod(name);
  }
  return v.next_due;
}

void HostPkgReconciler::verify_node(Pass& p, Verifying& v, const std::string& node_name) {
  const std::string& set_name = p.set.name;
  kube::ObjectPtr cached = nodes_.get(node_name);
  if (cached == nullptr) return;
  RecordRead rr = read_record(*cached, set_name);
  if (!rr.record || !reverify_eligible(*rr.record, p.desired)) return;
  NodeRecord rec = *rr.record;
  // onDrift: Reapply for a node drifted before the policy said so: straight to the rollout.
  if (reapply_drifted(rec, p.set)) {
    patch_node(node_name, record_patch(*cached, set_name, rec), "record");
    return;
  }
  std::vector<VerifyPodFacts> round;
  for (const Package& pkg : p.set.packages) {
    VerifyPodFacts f;
    f.package = pkg.name;
    f.pod_name = verify_pod_name(set_name, node_name, verify_key(pkg, p.desired, rec.verified));
    if (auto it = v.pods.find(f.pod_name); it != v.pods.end()) {
      f.exists = true;
      f.outcome = stage_outcome(*it->second);
      if (!f.outcome) {
        f.created = kube::parse_rfc3339(it->second->get_string({"metadata", "creationTimestamp"}));
        for (Stage st : verify_stages(pkg)) f.limit = std::max(f.limit, pkg.timeout(st));
      }
    }
    round.push_back(std::move(f));
  }
  const VerifyRound r =
      decide_verify_round(round, v.in_flight < settings_.reverify_max_in_flight, clock_.now());
  for (std::size_t i = 0; i < r.looked_at; ++i) v.expected.insert(round[i].pod_name);
  if (r.kind == VerifyRound::Kind::Create) {
    StagePodOptions o{settings_.namespace_, settings_.runner_image, ""};
    try {
      metrics_.writes->with({"pod-create"}).inc();
      client_.create(
          kube::resources::pods(),
          verify_pod(p.set, p.desired, node_name, p.set.packages[r.looked_at - 1], rec.verified, o),
          kFieldManager);
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::AlreadyExists)) throw;  // created before a restart
    }
    ++v.in_flight;
  }
  if (r.kind != VerifyRound::Kind::Record) {
    p.verifying = true;
    return;
  }
  round.resize(r.looked_at);
  record_round(p, v, *cached, rec, r.outcome, round);
}

void HostPkgReconciler::record_round(Pass& p, Verifying& v, const core::Value& node, NodeRecord rec,
                                     const VerifyOutcome& outcome,
                                     const std::vector<VerifyPodFacts>& round) {
  const std::string& set_name = p.set.name;
  const std::string node_name(kube::name_of(node));
  const bool was_drifted = rec.drift.has_value();
  record_verification(rec, v.now, outcome, p.set.reverify.on_drift);
  patch_node(node_name, record_patch(node, set_name, rec), "record");
  metrics_.verifications->with({set_name, outcome.ok ? "passed" : "drifted"}).inc();
  if (!outcome.ok) {
    metrics_.drift->with({set_name, outcome.package}).inc();
    record_event(*p.object, kube::EventType::Warning, "NodeDrifted",
                 node_name + ": " + outcome.package + ": " + outcome.message +
                     (p.set.reverify.on_drift == DriftAction::Reapply
                          ? " (re-applying it through the rollout)"
                          : " (onDrift: Report)"));
    if (!was_drifted) {
      ++p.drifted;
      if (p.drift_messages.size() < kMaxNamedNodes)
        p.drift_messages.push_back(node_name + ": " + outcome.package + ": " + outcome.message);
    }
    log::warn("hostpkg: node drifted",
              {{"set", set_name}, {"node", node_name}, {"package", outcome.package}});
  } else if (was_drifted) {
    --p.drifted;
    std::erase_if(p.drift_messages,
                  [&](const std::string& m) { return m.starts_with(node_name + ": "); });
    record_event(*p.object, kube::EventType::Normal, "NodeVerified",
                 node_name + ": every package passed its checks again; no longer drifted");
  }
  // The round is recorded: its pods have served (a later pass cleans up any left over).
  for (const VerifyPodFacts& f : round) {
    if (v.pods.contains(f.pod_name)) remove_verify_pod(f.pod_name);
    v.expected.erase(f.pod_name);
    v.pods.erase(f.pod_name);
  }
  v.due(reverify_due(rec, set_name, node_name, v.interval));
}

}  // namespace gpufleet::hostpkg::detail
