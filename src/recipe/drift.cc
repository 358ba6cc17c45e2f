#include "recipe/drift.h"

#include <algorithm>
#include <map>

#include "core/json.h"
#include "core/semver.h"
#include "recipe/validate.h"

namespace gpufleet::recipe {

using core::Value;

namespace {

std::string show(const Value* v) {
  if (v == nullptr) return "(unset)";
  if (const std::string* s = v->if_string()) return *s;
  return core::to_json(*v);
}

// Every leaf of `want` that `have` lacks or holds differently, by dotted path.
void compare_values(const Value& want, const Value* have, const std::string& path,
                    const std::string& subject, std::vector<Drift>& out) {
  if (const core::Map* m = want.if_map(); m && !m->empty()) {
    for (const auto& e : *m) {
      const Value* h = have && have->is_map() ? have->find(e.key) : nullptr;
      compare_values(e.value, h, path.empty() ? e.key : path + "." + e.key, subject, out);
    }
    return;
  }
  if (want.is_map()) return;  // an empty mapping sets nothing
  if (have == nullptr || !(*have == want))
    out.push_back({"values", subject, path, show(&want), show(have)});
}

bool same_version(const std::string& a, const std::string& b) {
  if (a == b) return true;
  auto va = core::SemVer::try_parse(a), vb = core::SemVer::try_parse(b);
  return va && vb && *va == *vb && va->build == vb->build;
}

// The GPU driver each GPU node of a pool runs against the pool's pin (nodePool.driver.version),
// whoever installs it (the GPU Operator's driver pods, or the host image through a hostpkg
// rollout): a node that still runs another version, or does not say, is drift. One row per
// node, so that a rollout in progress shows exactly the nodes it has left.
void diff_node_drivers(const Recipe& recipe, const Snapshot& s, std::vector<Drift>& out) {
  std::map<std::string, std::string> pin_of;  // node -> pin, the first pool that selects it
  for (const NodePool& p : recipe.pools) {
    const Value* driver = p.settings.find("driver");
    const Value* version = driver && driver->is_map() ? driver->find("version") : nullptr;
    const std::string* pin = version ? version->if_string() : nullptr;
    if (pin == nullptr || pin->empty()) continue;
    for (const NodeFacts& n : s.nodes) {
      bool gpu_node = n.gpu_count > 0 || !n.gpu_product.empty();
      if (gpu_node && selector_matches(p.node_selector, n.labels)) pin_of.emplace(n.name, *pin);
    }
  }
  for (const NodeFacts& n : s.nodes) {
    auto it = pin_of.find(n.name);
    if (it == pin_of.end() || same_version(it->second, n.gpu_driver)) continue;
    out.push_back({"node-driver", n.name, "gpu.driver", it->second,
                   n.gpu_driver.empty() ? "unknown" : n.gpu_driver});
  }
}

}  // namespace

std::vector<Drift> diff_recipe(const Recipe& recipe, const Snapshot& s) {
  std::vector<Drift> out;
  std::map<std::string, const InstalledComponent*> installed;
  for (const InstalledComponent& c : s.components) installed[c.namespace_ + "/" + c.name] = &c;
  // External components are someone else's release, wherever it is: neither missing nor extra.
  for (const Component& c : recipe.components) {
    if (!c.external) continue;
    std::erase_if(installed, [&](const auto& e) { return e.second->chart == c.chart.name; });
  }
  for (const Component& c : recipe.components) {
    if (c.external) continue;
    std::string key = c.namespace_ + "/" + c.name;
    auto it = installed.find(key);
    if (it == installed.end()) {
      out.push_back({"missing", key, "", c.chart.name + " " + c.chart.version, "not installed"});
      continue;
    }
    const InstalledComponent& have = *it->second;
    installed.erase(it);
    if (have.chart != c.chart.name)
      out.push_back({"chart", key, "chart", c.chart.name, have.chart});
    if (!same_version(c.chart.version, have.version)) {
      out.push_back({"version", key, "chart version", c.chart.version, have.version});
    }
    if (have.status != "deployed")
      out.push_back({"status", key, "release status", "deployed", have.status});
    compare_values(c.values, &have.values, "", key, out);
  }
  for (const auto& [key, c] : installed)
    out.push_back({"extra", key, "", "not in recipe", c->chart + " " + c->version});
  diff_node_drivers(recipe, s, out);
  return out;
}

std::vector<Drift> diff_snapshots(const Snapshot& a, const Snapshot& b) {
  std::vector<Drift> out;
  if (a.kubernetes_version != b.kubernetes_version) {
    out.push_back({"kubernetes", "cluster", "kubernetes.version", a.kubernetes_version,
                   b.kubernetes_version});
  }
  std::map<std::string, const NodeFacts*> before, after;
  for (const NodeFacts& n : a.nodes) before[n.name] = &n;
  for (const NodeFacts& n : b.nodes) after[n.name] = &n;
  static const char* kFacts[] = {
      "node.os",     "node.osVersion", "node.kernel", "node.containerRuntime",
      "gpu.product", "gpu.family",     "gpu.driver",  "gpu.count"};
  for (const auto& [name, n] : before) {
    auto it = after.find(name);
    if (it == after.end()) {
      out.push_back({"node-removed", name, "", n->gpu_product.empty() ? "present" : n->gpu_product,
                     "absent"});
      continue;
    }
    for (const char* f : kFacts) {
      std::string x = n->fact(f), y = it->second->fact(f);
      if (x != y) out.push_back({"node", name, f, x, y});
    }
    if (n->kubelet != it->second->kubelet)
      out.push_back({"node", name, "kubelet", n->kubelet, it->second->kubelet});
  }
  for (const auto& [name, n] : after) {
    if (!before.count(name)) {
      out.push_back(
          {"node-added", name, "", "absent", n->gpu_product.empty() ? "present" : n->gpu_product});
    }
  }
  std::map<std::string, const InstalledComponent*> ca, cb;
  for (const InstalledComponent& c : a.components) ca[c.namespace_ + "/" + c.name] = &c;
  for (const InstalledComponent& c : b.components) cb[c.namespace_ + "/" + c.name] = &c;
  for (const auto& [key, c] : ca) {
    auto it = cb.find(key);
    if (it == cb.end()) {
      out.push_back({"missing", key, "", c->chart + " " + c->version, "not installed"});
      continue;
    }
    if (c->version != it->second->version)
      out.push_back({"version", key, "chart version", c->version, it->second->version});
    if (c->status != it->second->status)
      out.push_back({"status", key, "release status", c->status, it->second->status});
    if (!(c->values == it->second->values))
      compare_values(c->values, &it->second->values, "", key, out);
  }
  for (const auto& [key, c] : cb) {
    if (!ca.count(key))
      out.push_back({"extra", key, "", "not installed", c->chart + " " + c->version});
  }
  return out;
}

std::string drift_table(const std::vector<Drift>& drift) {
  if (drift.empty()) return "no drift\n";
  std::size_t w[3] = {4, 7, 5};
  for (const Drift& d : drift) {
    w[0] = std::max(w[0], d.kind.size());
    w[1] = std::max(w[1], d.subject.size());
    w[2] = std::max(w[2], d.field.size());
  }
  auto cell = [](const std::string& s, std::size_t width) {
    return s + std::string(width + 2 - s.size(), ' ');
  };
  std::string out =
      cell("KIND", w[0]) + cell("SUBJECT", w[1]) + cell("FIELD", w[2]) + "EXPECTED -> ACTUAL\n";
  for (const Drift& d : drift) {
    out += cell(d.kind, w[0]) + cell(d.subject, w[1]) + cell(d.field, w[2]) + d.expected + " -> " +
           d.actual + "\n";
  }
  out += std::to_string(drift.size()) + " differences\n";
  return out;
}

Value drift_to_value(const std::vector<Drift>& drift) {
  Value doc = Value::map();
  doc["drift"] = !drift.empty();
  Value items = Value::list();
  for (const Drift& d : drift) {
    Value e = Value::map();
    e["kind"] = d.kind;
    e["subject"] = d.subject;
    if (!d.field.empty()) e["field"] = d.field;
    e["expected"] = d.expected;
    e["actual"] = d.actual;
    items.push_back(std::move(e));
  }
  doc["differences"] = std::move(items);
  return doc;
}

}  // namespace gpufleet::recipe
