// What a set leaves on its Nodes besides records and cordons: the runtime-required taint
// (runtime_taint_action, runtime_taint.h, decides per node) and the HostPackageDrifted node
// condition (drift_condition_patch, node_condition.h).
#include <exception>

#include "hostpkg/controller/runtime_taint.h"
#include "hostpkg/controller/set_reconciler.h"
#include "kube/api/meta.h"
#include "kube/errors.h"

namespace gpufleet::hostpkg::detail {

namespace {

// The other runtime-required sets: the taint goes only when all of them are done on the node.
struct OtherSet {
  HostPackageSet set;
  std::string target;
};

std::vector<OtherSet> other_runtime_required(const controller::Cache& sets,
                                             const std::string& self) {
  std::vector<OtherSet> others;
  for (const auto& o : sets.list()) {
    if (kube::name_of(*o) == self) continue;
    try {
      HostPackageSet s = parse_host_package_set(*o);
      if (!s.runtime_required || s.disable) continue;
      std::string target = digest(s).target;
      others.push_back({std::move(s), std::move(target)});
    } catch (const std::exception&) {
      // An invalid set reports itself; it holds no node back.
    }
  }
  return others;
}

bool others_done(const std::vector<OtherSet>& others, const NodeScan& n, const Labels& labels) {
  bool all_done = true;
  for (const OtherSet& o : others) {
    if (!o.set.node_selector.matches(labels)) continue;
    all_done = all_done && record_done_at(n, o.set.name, o.target);
  }
  return all_done;
}

// The node's taints with the runtime-required one taken out, or added.
core::Value taint_patch(const core::Value& node, TaintAction action) {
  core::Value taints = core::Value::list();
  if (const core::Value* t = node.get({"spec", "taints"}); t && t->is_list()) {
    if (action == TaintAction::Add) {
      taints = *t;
    } else {
      for (const auto& taint : t->as_list())
        if (taint.get_string({"key"}) != kRuntimeRequiredTaint) taints.push_back(taint);
    }
  }
  if (action == TaintAction::Add) {
    core::Value taint;
    taint["key"] = std::string(kRuntimeRequiredTaint);
    taint["effect"] = "NoSchedule";
    taints.push_back(std::move(taint));
  }
  core::Value patch;
  patch["spec"]["taints"] = std::move(taints);
  patch["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(node));
  return patch;
}

}  // namespace

void HostPkgReconciler::taints(Pass& p) {
  if (!p.set.runtime_required || p.deleting) return;
  const std::vector<OtherSet> others = other_runtime_required(sets_, p.set.name);
  auto created = kube::parse_rfc3339(p.object->get_string({"metadata", "creationTimestamp"}));
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const NodeScan& n = p.nodes[i];
    const Labels& labels = p.inputs[i].facts.labels;  // moved there by the pass
    if (!p.set.node_selector.matches(labels)) continue;
    TaintFacts f;
    f.tainted = n.runtime_taint;
    f.has_record = n.records.contains(p.set.name);
    f.done_here = record_done_at(n, p.set.name, p.desired.target);
    f.others_done = f.tainted && f.done_here && others_done(others, n, labels);
    f.auto_taint = p.set.auto_taint_new_nodes;
    f.set_created = created;
    if (f.auto_taint && !f.tainted && !f.has_record && created)
      f.node_joined = kube::parse_rfc3339(n.created);
    const TaintAction action = runtime_taint_action(f);
    if (action == TaintAction::Keep) continue;
    kube::ObjectPtr node = nodes_.get(n.name);
    if (node == nullptr) continue;
    patch_node(n.name, taint_patch(*node, action), "taint");
    if (action == TaintAction::Remove)
      record_event(*p.object, kube::EventType::Normal, "RuntimeReady",
                   n.name + ": every runtime-required set is done; taint " +
                       std::string(kRuntimeRequiredTaint) + " removed");
  }
}

void HostPkgReconciler::sync_drift_conditions(const std::vector<NodeScan>& nodes) {
  // Drift counts while its set exists, is not being deleted and re-verifies (the set's own
  // Drifted condition follows the same rule), so every set's pass computes the same condition.
  std::unordered_set<std::string> reporting;
  for (const auto& o : sets_.list()) {
    if (o->get({"metadata", "deletionTimestamp"}) != nullptr) continue;
    const core::Value* rv = o->get({"spec", "reverify"});
    if (rv == nullptr || !rv->is_map()) continue;  // off: skip the parse
    try {
      if (parse_host_package_set(*o).reverify.enabled()) reporting.emplace(kube::name_of(*o));
    } catch (const std::exception&) {
      // An invalid set reports itself; its drift shows once it is valid again.
    }
  }
  const auto now = clock_.now();
  for (const NodeScan& n : nodes) {
    std::optional<core::Value> patch =
        drift_condition_patch(n.records, reporting, n.drift_condition, now);
    if (!patch) continue;
    metrics_.writes->with({"node-condition"}).inc();
    try {
      core::Value out =
          client_.patch(kube::resources::nodes(), "", n.name, kube::PatchType::StrategicMerge,
                        *patch, "status", kFieldManager);
      written_.emplace_back(n.name, std::string(kube::resource_version_of(out)));
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::NotFound)) throw;
    }
  }
}

}  // namespace gpufleet::hostpkg::detail
