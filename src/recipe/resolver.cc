#include "recipe/resolver.h"

#include <algorithm>
#include <set>

#include "core/errors.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/text.h"
#include "recipe/dependency_graph.h"
#include "recipe/layered_merge.h"
#include "recipe/manifests.h"
#include "recipe/performance.h"

namespace gpufleet::recipe {

using core::InvalidInput;
using core::Value;

namespace {

constexpr int kUserMixinSpecificity = 1000;

void check_value(const Library& lib, std::size_t d, const std::string& v, std::string_view flag) {
  if (v == kAny) return;
  const auto& valid = lib.valid[d];
  if (std::find(valid.begin(), valid.end(), v) != valid.end()) return;
  throw InvalidInput(std::string(flag) + " '" + v + "' is not a known " +
                     std::string(kDimensionNames[d]) + "; valid values are " + core::join(valid) +
                     " (or any)");
}

// Overlays in merge order: ascending specificity, then inheritance depth, then name.
std::vector<const Overlay*> sorted(std::vector<const Overlay*> v) {
  std::sort(v.begin(), v.end(), [](const Overlay* a, const Overlay* b) {
    if (a->specificity != b->specificity) return a->specificity < b->specificity;
    if (a->depth != b->depth) return a->depth < b->depth;
    return a->name < b->name;
  });
  return v;
}

Value without(const Value& content, std::string_view key) {
  Value out = content;
  out.as_map().erase(key);
  return out;
}

// Applies one overlay (after its mixins) through `pick`, which selects the part that matters.
template <typename Pick>
void apply_overlay(LayeredMerge& merge, const Library& lib, const Overlay& o, Pick pick) {
  std::vector<std::string> lineage{o.name};
  lineage.insert(lineage.end(), o.ancestors.begin(), o.ancestors.end());
  for (const std::string& m : o.mixins) {
    const Mixin& mx = lib.mixins.at(m);
    merge.apply(pick(mx.content), Layer{mx.origin + " (mixin of " + o.origin + ")", o.specificity,
                                        o.name, lineage, true});
  }
  merge.apply(pick(o.content), Layer{o.origin, o.specificity, o.name, lineage, false});
}

template <typename Pick>
void apply_user_mixins(LayeredMerge& merge, const Library& lib,
                       const std::vector<std::string>& mixins, Pick pick) {
  for (const std::string& m : mixins) {
    const Mixin& mx = lib.mixins.at(m);
    merge.apply(pick(mx.content), Layer{mx.origin + " (--mixin " + m + ")",
                                        kUserMixinSpecificity,
                                        "user:" + m,
                                        {"user:" + m},
                                        false});
  }
}

std::vector<Constraint> constraints_of(const Value* map) {
  std::vector<Constraint> out;
  if (map == nullptr) return out;
  for (const auto& e : map->as_map()) {
    Constraint c;
    c.name = e.key;
    c.fact = std::string(e.value.get_string({"fact"}));
    c.requirement = std::string(e.value.get_string({"requirement"}));
    if (std::string_view sv = e.value.get_string({"severity"}); !sv.empty()) c.severity = sv;
    c.remediation = std::string(e.value.get_string({"remediation"}));
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<PoolQuery> pools_of(const Library& lib, const Query& q) {
  std::vector<PoolQuery> pools = q.pools;
  if (pools.empty()) {
    pools.push_back({"default", q.criteria[kAccelerator], q.node_count});
    return pools;
  }
  if (q.criteria[kAccelerator] != kAny) {
    throw InvalidInput(
        "--accelerator and --pool both given; with node pools, give each pool's "
        "accelerator in --pool NAME=ACCELERATOR[:NODES] and omit --accelerator");
  }
  if (q.node_count) {
    throw InvalidInput("--nodes and --pool both given; give each pool's node count in --pool");
  }
  std::set<std::string> names;
  for (const PoolQuery& p : pools) {
    check_value(lib, kAccelerator, p.accelerator, "--pool " + p.name + ": accelerator");
    if (!names.insert(p.name).second) {
      throw InvalidInput("--pool: pool name '" + p.name +
                         "' is given twice; pool names are unique");
    }
  }
  return pools;
}

}  // namespace

bool overlay_matches(const Overlay& o, const CriteriaValues& query,
                     const std::optional<std::int64_t>& node_count) {
  for (std::size_t d = 0; d < kDimensions; ++d) {
    // A wildcard overlay matches anything; a wildcard query only matches wildcard overlays.
    if (o.criteria[d] != kAny && o.criteria[d] != query[d]) return false;
  }
  if (o.node_count) return node_count && satisfies_count(*o.node_count, *node_count);
  return true;
}

namespace {

// The overlays each pool selects, and their union (the cluster-wide ones, in merge order).
struct Selection {
  std::set<std::string> accelerators;
  std::map<std::string, std::vector<const Overlay*>> per_pool;
  std::map<std::string, std::vector<std::string>> pools_of_overlay;
  std::vector<const Overlay*> cluster;
};

Selection select_overlays(const Library& lib, const Query& query,
                          const std::vector<PoolQuery>& pools) {
  Selection s;
  for (const PoolQuery& p : pools) {
    CriteriaValues c = query.criteria;
    c[kAccelerator] = p.accelerator;
    if (auto why = lib.unsupported_reason(c)) {
      std::string combo;
      for (std::size_t d = 0; d < kDimensions; ++d) {
        if (c[d] != kAny)
          combo += (combo.empty() ? "" : ", ") + std::string(kDimensionNames[d]) + " " + c[d];
      }
      throw InvalidInput("the library does not support " + combo + ": " + *why);
    }
    s.accelerators.insert(p.accelerator);
    std::vector<const Overlay*>& mine = s.per_pool[p.name];
    for (const auto& [name, o] : lib.overlays) {
      if (!overlay_matches(o, c, p.node_count)) continue;
      mine.push_back(&o);
      std::vector<std::string>& owners = s.pools_of_overlay[name];
      if (owners.empty()) s.cluster.push_back(&o);
      owners.push_back(p.name);
    }
    mine = sorted(mine);
  }
  s.cluster = sorted(s.cluster);
  return s;
}

// Cluster-wide content: registry defaults, then the selected overlays, then user mixins.
Value merge_cluster(const Library& lib, const std::vector<const Overlay*>& cluster,
                    const std::vector<std::string>& user_mixins) {
  LayeredMerge merge;
  Value registry = Value::map();
  registry["components"] = lib.components;
  merge.apply(registry, Layer{lib.registry_origin, -1, "registry", {"registry"}, false});
  auto cluster_part = [](const Value& content) { return without(content, "nodePool"); };
  for (const Overlay* o : cluster) apply_overlay(merge, lib, *o, cluster_part);
  apply_user_mixins(merge, lib, user_mixins, cluster_part);
  merge.finish();
  return merge.result();
}

// Components and deployment order (with their health checks) and cluster constraints.
void add_components(Recipe& r, const Library& lib, const Value& merged) {
  std::map<std::string, std::vector<std::string>> graph;
  std::map<std::string, const Value*> enabled;
  for (const auto& e : merged.find("components")->as_map()) {
    if (const bool* on = e.value.find("enabled")->if_bool(); on == nullptr || !*on) continue;
    enabled[e.key] = &e.value;
    std::vector<std::string>& deps = graph[e.key];
    if (const Value* ds = e.value.find("dependencies")) {
      for (const auto& d : ds->as_map()) {
        if (d.value.is_bool() && d.value.as_bool()) deps.push_back(d.key);
      }
    }
  }
  DeploymentPlan plan = plan_deployment(graph);
  for (const std::string& name : plan.order) {
    const Value& c = *enabled.at(name);
    Component comp;
    comp.name = name;
    comp.description = std::string(c.get_string({"description"}));
    if (const Value* m = c.find("manifests")) {
      // Raw manifests or a kustomize directory, installed as a local wrapper chart named after
      // the component, versioned by the manifest set's pin.
      if (c.find("chart") != nullptr) {
        throw InvalidInput("component " + name +
                           ": an overlay gives it a chart, but the registry declares it as "
                           "manifests; a component is one or the other");
      }
      comp.chart = {"", name, std::string(m->get_string({"version"})), {}};
      comp.manifests = render_manifests(lib, name, std::string(m->get_string({"kind"})),
                                        std::string(m->get_string({"path"})));
    } else {
      comp.chart = {std::string(c.get_string({"chart", "repository"})),
                    std::string(c.get_string({"chart", "name"})),
                    std::string(c.get_string({"chart", "version"})),
                    {}};
    }
    comp.namespace_ = std::string(c.get_string({"namespace"}));
    if (const Value* v = c.find("values")) comp.values = *v;
    if (const Value* s = c.find("scheduling")) comp.scheduling = *s;
    if (const Value* oi = c.find("operatorImages"))
      comp.operator_images = operator_images_from_value(*oi, "component " + name);
    comp.dependencies = graph.at(name);
    comp.level = plan.level_of.at(name);
    if (const Value* h = c.find("health")) {
      for (const auto& e : h->as_map()) {
        std::string kind(e.value.get_string({"kind"}));
        std::string ns(e.value.get_string({"namespace"}));
        if (ns.empty() && kind != "CustomResourceDefinition") ns = comp.namespace_;
        r.health.push_back({name, kind, ns, std::string(e.value.get_string({"name"}))});
      }
    }
    r.components.push_back(std::move(comp));
  }
  r.levels = plan.levels;
  r.constraints = constraints_of(merged.find("constraints"));
}

// Components someone else runs stay in the recipe (dependents order after them) but are not
// installed; their health checks go too, because another installer names and places the
// objects its own way (validate's deployment phase checks their Helm release instead).
void mark_external(Recipe& r, const std::map<std::string, std::string>& external) {
  for (const auto& entry : external) {
    // Named members, not a structured binding: clang 14 (the fuzz build) cannot capture one.
    const std::string& name = entry.first;
    const std::string& reason = entry.second;
    auto it = std::find_if(r.components.begin(), r.components.end(),
                           [&](const Component& c) { return c.name == name; });
    if (it == r.components.end()) {
      std::vector<std::string> names;
      for (const Component& c : r.components) names.push_back(c.name);
      throw InvalidInput("external: '" + name +
                         "' is not a component of this recipe; its components are " +
                         core::join(names));
    }
    it->external = true;
    it->external_reason = reason;
    std::erase_if(r.health, [&](const HealthCheck& h) { return h.component == name; });
  }
}

// Per-pool settings: the nodePool parts of the overlays that selected the pool.
void add_pools(Recipe& r, const Library& lib, const Query& query,
               const std::vector<PoolQuery>& pools, const Selection& sel,
               const std::vector<std::string>& user_mixins) {
  auto pool_part = [](const Value& content) {
    Value out = Value::map();
    if (const Value* p = content.find("nodePool")) out["nodePool"] = *p;
    return out;
  };
  for (const PoolQuery& p : pools) {
    LayeredMerge pm;
    NodePool pool;
    pool.name = p.name;
    pool.accelerator = p.accelerator;
    pool.node_count = p.node_count;
    if (query.pools.empty()) {
      pool.node_selector["nvidia.com/gpu.present"] = "true";
    } else if (!p.node_selector.as_map().empty()) {
      pool.node_selector = p.node_selector;
    } else {
      pool.node_selector["gpufleet.io/node-pool"] = p.name;
    }
    for (const Overlay* o : sel.per_pool.at(p.name)) {
      apply_overlay(pm, lib, *o, pool_part);
      pool.overlays.push_back(o->name);
    }
    apply_user_mixins(pm, lib, user_mixins, pool_part);
    pm.finish();
    if (const Value* np = pm.result().find("nodePool")) {
      pool.settings = without(without(*np, "constraints"), "performance");
      pool.constraints = constraints_of(np->find("constraints"));
      if (const Value* perf = np->find("performance"))
        pool.performance = performance_from_value(*perf, "nodePool.performance of pool " + p.name);
    }
    r.pools.push_back(std::move(pool));
  }
}

// Applied overlays, in cluster merge order, with the pools that selected each.
void add_overlays(Recipe& r, const Library& lib, const std::vector<PoolQuery>& pools,
                  const Selection& sel, const std::vector<std::string>& user_mixins) {
  for (const Overlay* o : sel.cluster) {
    for (const std::string& m : o->mixins) {
      r.overlays.push_back({m, lib.mixins.at(m).path, sel.pools_of_overlay.at(o->name)});
    }
    r.overlays.push_back({o->name, o->path, sel.pools_of_overlay.at(o->name)});
  }
  for (const std::string& m : user_mixins) {
    std::vector<std::string> all;
    for (const PoolQuery& p : pools) all.push_back(p.name);
    r.overlays.push_back({m, lib.mixins.at(m).path, all});
  }
}

// Criteria as given, and the name.
void add_criteria_and_name(Recipe& r, const Query& query, const std::vector<PoolQuery>& pools,
                           const Selection& sel) {
  const bool heterogeneous = sel.accelerators.size() > 1;
  for (std::size_t d = 0; d < kDimensions; ++d) {
    if (d == kAccelerator && !query.pools.empty()) continue;
    r.criteria[kDimensionNames[d]] = query.criteria[d];
  }
  if (query.node_count) r.criteria["nodeCount"] = *query.node_count;
  if (!query.pools.empty()) {
    Value list = Value::list();
    for (const PoolQuery& p : pools) {
      Value e = Value::map();
      e["name"] = p.name;
      e["accelerator"] = p.accelerator;
      if (p.node_count) e["nodeCount"] = *p.node_count;
      if (!p.node_selector.as_map().empty()) e["nodeSelector"] = p.node_selector;
      list.push_back(std::move(e));
    }
    r.criteria["pools"] = std::move(list);
  }
  if (!query.mixins.empty()) {
    Value list = Value::list();
    for (const std::string& m : query.mixins) list.push_back(m);
    r.criteria["mixins"] = std::move(list);
  }
  if (!query.external.empty()) {
    Value list = Value::list();
    for (const auto& [name, _] : query.external) list.push_back(name);
    r.criteria["external"] = std::move(list);
  }
  std::string accel = heterogeneous ? "mixed" : *sel.accelerators.begin();
  r.name = query.criteria[kService] + "-" + accel + "-" + query.criteria[kOs] + "-" +
           query.criteria[kIntent] + "-" + query.criteria[kPlatform];
}

// Digest of the inputs: format, criteria and the content of every library file used.
std::string inputs_digest(const Recipe& r, const Library& lib) {
  Value inputs = Value::map();
  inputs["format"] = "gpufleet.io/v1alpha1/Recipe";
  inputs["criteria"] = r.criteria;
  Value& files = inputs["files"];
  files = Value::map();
  files[lib.registry_path] = lib.file_sha256.at(lib.registry_path);
  files[lib.criteria_path] = lib.file_sha256.at(lib.criteria_path);
  for (const AppliedOverlay& o : r.overlays) files[o.path] = lib.file_sha256.at(o.path);
  // What manifest components render to (kustomize output depends on the tool as well as on
  // the library files).
  for (const Component& c : r.components) {
    if (c.manifests) inputs["rendered"][c.name] = c.manifests->sha256;
  }
  return "sha256:" + core::sha256_hex(core::to_json(inputs));
}

}  // namespace

Recipe resolve(const Library& lib, const Query& query) {
  for (std::size_t d = 0; d < kDimensions; ++d) {
    check_value(lib, d, query.criteria[d], "--" + std::string(kDimensionNames[d]));
  }
  for (const std::string& m : query.mixins) {
    if (!lib.mixins.count(m)) {
      std::vector<std::string> names;
      for (const auto& [n, _] : lib.mixins) names.push_back(n);
      throw InvalidInput("--mixin '" + m +
                         "' is not a library mixin; available: " + core::join(names));
    }
  }
  const std::vector<PoolQuery> pools = pools_of(lib, query);
  const Selection sel = select_overlays(lib, query, pools);
  std::vector<std::string> user_mixins = query.mixins;
  if (sel.accelerators.size() > 1 && lib.mixins.count(std::string(kHeterogeneousMixin))) {
    user_mixins.insert(user_mixins.begin(), std::string(kHeterogeneousMixin));
  }

  Recipe r;
  add_components(r, lib, merge_cluster(lib, sel.cluster, user_mixins));
  mark_external(r, query.external);
  add_pools(r, lib, query, pools, sel, user_mixins);
  add_overlays(r, lib, pools, sel, user_mixins);
  add_criteria_and_name(r, query, pools, sel);
  r.digest = inputs_digest(r, lib);
  return r;
}

}  // namespace gpufleet::recipe
