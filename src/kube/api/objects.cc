#include "kube/api/objects.h"

#include "kube/api/meta.h"

namespace gpufleet::kube {

using core::Value;

namespace {
std::int64_t int_at(const Value& v, std::initializer_list<std::string_view> path) noexcept {
  const Value* x = v.get(path);
  if (x == nullptr) return 0;
  if (const std::int64_t* i = x->if_int()) return *i;
  return 0;
}
}  // namespace

const Value* find_condition(const Value& obj, std::string_view type) noexcept {
  const Value* conds = obj.get({"status", "conditions"});
  if (conds == nullptr || !conds->is_list()) return nullptr;
  for (const Value& c : *conds->if_list()) {
    if (c.get_string({"type"}) == type) return &c;
  }
  return nullptr;
}

std::optional<bool> condition_is_true(const Value& obj, std::string_view type) noexcept {
  const Value* c = find_condition(obj, type);
  if (c == nullptr) return std::nullopt;
  std::string_view s = c->get_string({"status"});
  if (s == "True") return true;
  if (s == "False") return false;
  return std::nullopt;
}

std::string_view label_of(const Value& obj, std::string_view key) noexcept {
  const Value* labels = obj.get({"metadata", "labels"});
  if (labels == nullptr) return {};
  const Value* v = labels->find(key);
  const std::string* s = v ? v->if_string() : nullptr;
  return s ? std::string_view(*s) : std::string_view();
}

std::string_view annotation_of(const Value& obj, std::string_view key) noexcept {
  const Value* annotations = obj.get({"metadata", "annotations"});
  if (annotations == nullptr) return {};
  const Value* v = annotations->find(key);
  const std::string* s = v ? v->if_string() : nullptr;
  return s ? std::string_view(*s) : std::string_view();
}

const Value* controller_of(const Value& obj) noexcept {
  const Value* refs = obj.get({"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_list()) return nullptr;
  for (const Value& r : *refs->if_list()) {
    const Value* c = r.find("controller");
    if (c && c->if_bool() && *c->if_bool()) return &r;
  }
  return nullptr;
}

namespace node {
bool unschedulable(const Value& n) noexcept {
  const Value* u = n.get({"spec", "unschedulable"});
  return u && u->if_bool() && *u->if_bool();
}
bool ready(const Value& n) noexcept { return condition_is_true(n, "Ready").value_or(false); }
std::vector<Taint> taints(const Value& n) {
  std::vector<Taint> out;
  const Value* ts = n.get({"spec", "taints"});
  if (ts == nullptr || !ts->is_list()) return out;
  for (const Value& t : *ts->if_list()) {
    out.push_back({std::string(t.get_string({"key"})), std::string(t.get_string({"value"})),
                   std::string(t.get_string({"effect"}))});
  }
  return out;
}
bool has_taint(const Value& n, std::string_view key, std::string_view effect) noexcept {
  const Value* ts = n.get({"spec", "taints"});
  if (ts == nullptr || !ts->is_list()) return false;
  for (const Value& t : *ts->if_list()) {
    if (t.get_string({"key"}) == key && (effect.empty() || t.get_string({"effect"}) == effect)) {
      return true;
    }
  }
  return false;
}
std::string_view allocatable(const Value& n, std::string_view resource) noexcept {
  const Value* a = n.get({"status", "allocatable"});
  const Value* v = a ? a->find(resource) : nullptr;
  const std::string* s = v ? v->if_string() : nullptr;
  return s ? std::string_view(*s) : std::string_view();
}
std::string_view capacity(const Value& n, std::string_view resource) noexcept {
  const Value* a = n.get({"status", "capacity"});
  const Value* v = a ? a->find(resource) : nullptr;
  const std::string* s = v ? v->if_string() : nullptr;
  return s ? std::string_view(*s) : std::string_view();
}
std::string_view kubelet_version(const Value& n) noexcept {
  return n.get_string({"status", "nodeInfo", "kubeletVersion"});
}
std::string_view internal_ip(const Value& n) noexcept {
  const Value* as = n.get({"status", "addresses"});
  if (as == nullptr || !as->is_list()) return {};
  for (const Value& a : *as->if_list()) {
    if (a.get_string({"type"}) == "InternalIP") return a.get_string({"address"});
  }
  return {};
}
}  // namespace node

namespace pod {
std::string_view node_name(const Value& p) noexcept { return p.get_string({"spec", "nodeName"}); }
std::string_view phase(const Value& p) noexcept { return p.get_string({"status", "phase"}); }
bool ready(const Value& p) noexcept { return condition_is_true(p, "Ready").value_or(false); }
bool terminal(const Value& p) noexcept {
  std::string_view ph = phase(p);
  return ph == "Succeeded" || ph == "Failed";
}
bool owned_by_daemon_set(const Value& p) noexcept {
  const Value* c = controller_of(p);
  return c && c->get_string({"kind"}) == "DaemonSet";
}
bool mirror(const Value& p) noexcept {
  const Value* a = p.get({"metadata", "annotations"});
  return a && a->find("kubernetes.io/config.mirror") != nullptr;
}
}  // namespace pod

namespace pdb {
std::int64_t disruptions_allowed(const Value& b) noexcept {
  return int_at(b, {"status", "disruptionsAllowed"});
}
std::int64_t current_healthy(const Value& b) noexcept {
  return int_at(b, {"status", "currentHealthy"});
}
std::int64_t desired_healthy(const Value& b) noexcept {
  return int_at(b, {"status", "desiredHealthy"});
}
std::int64_t expected_pods(const Value& b) noexcept {
  return int_at(b, {"status", "expectedPods"});
}
}  // namespace pdb

namespace lease {
std::string_view holder_identity(const Value& l) noexcept {
  return l.get_string({"spec", "holderIdentity"});
}
std::int64_t duration_seconds(const Value& l) noexcept {
  return int_at(l, {"spec", "leaseDurationSeconds"});
}
std::int64_t transitions(const Value& l) noexcept {
  return int_at(l, {"spec", "leaseTransitions"});
}
std::optional<std::chrono::system_clock::time_point> renew_time(const Value& l) {
  return parse_rfc3339(l.get_string({"spec", "renewTime"}));
}
std::optional<std::chrono::system_clock::time_point> acquire_time(const Value& l) {
  return parse_rfc3339(l.get_string({"spec", "acquireTime"}));
}
}  // namespace lease

namespace event {
std::string_view reason(const Value& e) noexcept { return e.get_string({"reason"}); }
std::string_view note(const Value& e) noexcept { return e.get_string({"note"}); }
std::string_view type(const Value& e) noexcept { return e.get_string({"type"}); }
std::string_view regarding_name(const Value& e) noexcept {
  return e.get_string({"regarding", "name"});
}
std::string_view regarding_kind(const Value& e) noexcept {
  return e.get_string({"regarding", "kind"});
}
std::int64_t count(const Value& e) noexcept {
  std::int64_t n = int_at(e, {"series", "count"});
  return n > 0 ? n : 1;
}
}  // namespace event

namespace job {
std::int64_t active(const Value& j) noexcept { return int_at(j, {"status", "active"}); }
std::int64_t succeeded(const Value& j) noexcept { return int_at(j, {"status", "succeeded"}); }
std::int64_t failed(const Value& j) noexcept { return int_at(j, {"status", "failed"}); }
bool complete(const Value& j) noexcept { return condition_is_true(j, "Complete").value_or(false); }
bool failed_permanently(const Value& j) noexcept {
  return condition_is_true(j, "Failed").value_or(false);
}
}  // namespace job

namespace config_map {
std::optional<std::string_view> data(const Value& cm, std::string_view key) noexcept {
  const Value* d = cm.find("data");
  const Value* v = d ? d->find(key) : nullptr;
  const std::string* s = v ? v->if_string() : nullptr;
  if (s == nullptr) return std::nullopt;
  return std::string_view(*s);
}
}  // namespace config_map

}  // namespace gpufleet::kube
