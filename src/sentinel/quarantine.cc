#include "sentinel/quarantine.h"

#include <algorithm>

#include "core/errors.h"
#include "core/json.h"
#include "kube/api/cordon.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::sentinel {
namespace {

// The node's taints as (key, effect) -> value.
std::vector<Taint> node_taints(const core::Value& node) {
  std::vector<Taint> out;
  const core::Value* list = node.get({"spec", "taints"});
  if (list == nullptr || !list->is_list()) return out;
  for (const auto& t : list->as_list()) {
    out.push_back({std::string(t.get_string({"key"})), std::string(t.get_string({"value"})),
                   std::string(t.get_string({"effect"}))});
  }
  return out;
}

bool has_key_effect(const std::vector<Taint>& taints, const Taint& t) {
  return std::any_of(taints.begin(), taints.end(),
                     [&](const Taint& o) { return o.key == t.key && o.effect == t.effect; });
}

}  // namespace

QuarantineRecord QuarantineRecord::from_node(const core::Value& node) {
  QuarantineRecord r;
  const std::string_view text = node.get_string({"metadata", "annotations", kQuarantineAnnotation});
  if (text.empty()) return r;
  const std::string where = "annotation " + std::string(kQuarantineAnnotation);
  core::Value v;
  try {
    v = core::parse_json(text, where);
  } catch (const core::InvalidInput& e) {
    throw core::InvalidInput(where + ": not JSON (" + e.what() +
                             "); remove the annotation after checking the node by hand");
  }
  if (!v.is_map()) throw core::InvalidInput(where + ": must be a JSON object");
  if (const core::Value* c = v.find("cordoned"); c != nullptr) {
    if (!c->is_bool()) throw core::InvalidInput(where + ": cordoned must be true or false");
    r.cordoned = c->as_bool();
  }
  if (const core::Value* c = v.find("foreignCordon"); c != nullptr) {
    if (!c->is_bool()) throw core::InvalidInput(where + ": foreignCordon must be true or false");
    r.foreign_cordon = c->as_bool();
  }
  if (const core::Value* t = v.find("taints"); t != nullptr && t->is_list()) {
    for (const auto& s : t->as_list()) {
      if (!s.is_string()) throw core::InvalidInput(where + ": taints must be strings");
      r.taints.push_back(Taint::parse(s.as_string(), where + ".taints"));
    }
  }
  if (const core::Value* e = v.find("entities"); e != nullptr && e->is_list()) {
    for (const auto& s : e->as_list()) {
      if (!s.is_string()) throw core::InvalidInput(where + ": entities must be strings");
      r.entities.insert(s.as_string());
    }
  }
  if (const core::Value* i = v.find("incident"); i != nullptr && i->is_string()) {
    r.incident = i->as_string();
  }
  if (const core::Value* p = v.find("policy"); p != nullptr && p->is_string()) {
    r.admission.policy = p->as_string();
  }
  if (const core::Value* a = v.find("admittedAtMs"); a != nullptr) {
    if (!a->is_int()) throw core::InvalidInput(where + ": admittedAtMs must be an integer");
    r.admission.at_ms = a->as_int();
  }
  return r;
}

std::string QuarantineRecord::to_annotation() const {
  core::Value v = core::Value::map();
  v["cordoned"] = cordoned;
  if (foreign_cordon) v["foreignCordon"] = true;
  core::Value t = core::Value::list();
  for (const auto& taint : taints) t.push_back(taint.to_string());
  v["taints"] = std::move(t);
  core::Value e = core::Value::list();
  for (const auto& entity : entities) e.push_back(entity);
  v["entities"] = std::move(e);
  if (!incident.empty()) v["incident"] = incident;
  if (!admission.policy.empty()) v["policy"] = admission.policy;
  if (admission.at_ms > 0) v["admittedAtMs"] = admission.at_ms;
  return core::to_json(v);
}

std::set<std::string> faulty_entities(const core::Value& health) {
  std::set<std::string> out;
  const core::Value* checks = health.get({"status", "checks"});
  if (checks == nullptr || !checks->is_list()) return out;
  auto faulty = [](std::string_view s) { return s == "Warning" || s == "Fatal"; };
  for (const auto& c : checks->as_list()) {
    const std::string check(c.get_string({"name"}));
    const core::Value* entities = c.find("entities");
    if (entities != nullptr && entities->is_list() && entities->size() > 0) {
      for (const auto& e : entities->as_list()) {
        if (faulty(e.get_string({"state"}))) {
          out.insert(check + "/" + std::string(e.get_string({"id"})));
        }
      }
    } else if (faulty(c.get_string({"state"}))) {
      out.insert(check);
    }
  }
  return out;
}

NodeChange plan_quarantine(const core::Value& node, const Decision& decision,
                           const std::set<std::string>& entities, const std::string& incident,
                           bool take_over, const Admission& admission) {
  NodeChange change;
  QuarantineRecord rec = QuarantineRecord::from_node(node);
  const QuarantineRecord before = rec;
  if (!incident.empty()) rec.incident = incident;
  if (admission.at_ms > 0) rec.admission = admission;
  if (decision.cordon) {
    const kube::CordonState cs = kube::cordon_state(node);
    // A foreign cordon (a person's, no owners) is left as it was and never claimed; an
    // uncordoned node, or one held by other gpufleet owners, gets sentinel's share.
    if (!cs.foreign() && !(cs.unschedulable && cs.owned_by(kCordonOwner))) change.cordon = true;
    if (!cs.foreign()) rec.cordoned = true;
    if (cs.foreign() && !rec.cordoned) rec.foreign_cordon = true;
  }
  const std::vector<Taint> present = node_taints(node);
  for (const auto& t : decision.taints) {
    if (has_key_effect(present, t)) continue;  // someone's (or ours already): leave it
    change.add_taints.push_back(t);
    rec.taints.push_back(t);
  }
  if (take_over) rec.entities.clear();
  rec.entities.insert(entities.begin(), entities.end());
  if (rec.cordoned != before.cordoned || rec.foreign_cordon != before.foreign_cordon ||
      rec.taints != before.taints || rec.entities != before.entities ||
      rec.incident != before.incident || rec.admission.at_ms != before.admission.at_ms ||
      rec.admission.policy != before.admission.policy) {
    change.annotation = rec.to_annotation();
  }
  return change;
}

bool handed_back(const core::Value& node, const QuarantineRecord& rec) {
  if (rec.cordoned || rec.foreign_cordon) return !kube::node::unschedulable(node);
  if (rec.taints.empty()) return false;
  const std::vector<Taint> present = node_taints(node);
  return std::none_of(rec.taints.begin(), rec.taints.end(), [&](const Taint& t) {
    return std::find(present.begin(), present.end(), t) != present.end();
  });
}

std::optional<std::string> forget_recovered(const QuarantineRecord& rec,
                                            const std::set<std::string>& faulty) {
  QuarantineRecord out = rec;
  std::erase_if(out.entities, [&](const std::string& e) { return !faulty.contains(e); });
  if (out.entities == rec.entities) return std::nullopt;
  return out.to_annotation();
}

NodeChange plan_release(const core::Value& node, const std::set<std::string>& faulty) {
  NodeChange change;
  QuarantineRecord rec = QuarantineRecord::from_node(node);
  if (rec.empty()) return change;
  std::set<std::string> still;
  for (const auto& e : rec.entities) {
    if (faulty.contains(e)) still.insert(e);
  }
  if (!still.empty()) {
    // Some entity is still faulty: stay quarantined, but forget the recovered ones.
    if (still != rec.entities) {
      rec.entities = std::move(still);
      change.annotation = rec.to_annotation();
    }
    return change;
  }
  return plan_release_all(node);
}

NodeChange plan_release_all(const core::Value& node) {
  NodeChange change;
  QuarantineRecord rec = QuarantineRecord::from_node(node);
  if (rec.empty()) return change;
  // Undo only sentinel's own marks: its share of the cordon (the last owner uncordons).
  if (rec.cordoned && kube::cordon_state(node).owned_by(kCordonOwner)) change.uncordon = true;
  const std::vector<Taint> present = node_taints(node);
  for (const auto& t : rec.taints) {
    // Only when it is still exactly ours (same key, value and effect).
    if (std::find(present.begin(), present.end(), t) != present.end()) {
      change.remove_taints.push_back(t);
    }
  }
  change.annotation = "";
  return change;
}

std::optional<core::Value> node_patch(const core::Value& node, const NodeChange& change) {
  if (change.empty()) return std::nullopt;
  core::Value patch = core::Value::map();
  if (change.cordon) {
    if (auto p = kube::cordon_patch(node, kCordonOwner)) patch = std::move(*p);
  } else if (change.uncordon) {
    if (auto p = kube::uncordon_patch(node, kCordonOwner)) patch = std::move(*p);
  }
  std::string_view rv = kube::resource_version_of(node);
  if (!rv.empty()) patch["metadata"]["resourceVersion"] = core::Value(rv);
  if (change.annotation) {
    patch["metadata"]["annotations"][kQuarantineAnnotation] =
        change.annotation->empty() ? core::Value(nullptr) : core::Value(*change.annotation);
  }
  if (!change.add_taints.empty() || !change.remove_taints.empty()) {
    // A merge patch replaces the whole list: rebuilt from the Node as read, which the
    // resourceVersion guarantees is what the server holds.
    core::Value taints = core::Value::list();
    if (const core::Value* list = node.get({"spec", "taints"}); list && list->is_list()) {
      for (const auto& t : list->as_list()) {
        Taint have{std::string(t.get_string({"key"})), std::string(t.get_string({"value"})),
                   std::string(t.get_string({"effect"}))};
        if (std::find(change.remove_taints.begin(), change.remove_taints.end(), have) ==
            change.remove_taints.end()) {
          taints.push_back(t);
        }
      }
    }
    for (const auto& t : change.add_taints) {
      core::Value x = core::Value::map();
      x["key"] = t.key;
      if (!t.value.empty()) x["value"] = t.value;
      x["effect"] = t.effect;
      taints.push_back(std::move(x));
    }
    patch["spec"]["taints"] = std::move(taints);
  }
  return patch;
}

}  // namespace gpufleet::sentinel
