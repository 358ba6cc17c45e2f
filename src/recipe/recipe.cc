#include "recipe/recipe.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/dependency_graph.h"
#include "recipe/performance.h"
#include "recipe/pin.h"
#include "recipe/schema_check.h"

namespace gpufleet::recipe {

using core::InvalidInput;
using core::Value;
using detail::check_keys;
using detail::expect_list;
using detail::expect_map;
using detail::expect_string;

namespace {

Value string_list(const std::vector<std::string>& items) {
  Value out = Value::list();
  for (const std::string& s : items) out.push_back(s);
  return out;
}

Value constraint_list(const std::vector<Constraint>& cs) {
  Value out = Value::list();
  for (const Constraint& c : cs) {
    Value e = Value::map();
    e["name"] = c.name;
    e["fact"] = c.fact;
    e["requirement"] = c.requirement;
    e["severity"] = c.severity;
    if (!c.remediation.empty()) e["remediation"] = c.remediation;
    out.push_back(std::move(e));
  }
  return out;
}

std::string str(const Value& v, std::string_view key, std::string_view where,
                bool required = true) {
  const Value* f = v.find(key);
  if (f == nullptr) {
    if (!required) return {};
    throw InvalidInput(std::string(where) + "." + std::string(key) + ": missing");
  }
  return expect_string(*f, std::string(where) + "." + std::string(key));
}

std::vector<std::string> strings(const Value& v, std::string_view key, std::string_view where) {
  std::vector<std::string> out;
  const Value* f = v.find(key);
  if (f == nullptr) return out;
  std::string w = std::string(where) + "." + std::string(key);
  for (const Value& item : expect_list(*f, w)) out.push_back(expect_string(item, w));
  return out;
}

std::vector<Constraint> constraints_from(const Value& v, std::string_view where) {
  std::vector<Constraint> out;
  const Value* f = v.find("constraints");
  if (f == nullptr) return out;
  const core::List& list = expect_list(*f, std::string(where) + ".constraints");
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string w = std::string(where) + ".constraints[" + std::to_string(i) + "]";
    check_keys(expect_map(list[i], w), {"name", "fact", "requirement", "severity", "remediation"},
               w);
    Constraint c;
    c.name = str(list[i], "name", w);
    c.fact = str(list[i], "fact", w);
    c.requirement = str(list[i], "requirement", w);
    if (const Value* sv = list[i].find("severity")) {
      c.severity = expect_string(*sv, w + ".severity");
      if (c.severity != "error" && c.severity != "warning") {
        throw InvalidInput(w + ".severity: '" + c.severity +
                           "' is not a severity; use error or warning");
      }
    }
    c.remediation = str(list[i], "remediation", w, false);
    out.push_back(std::move(c));
  }
  return out;
}

// The rendered manifests of a local component. The content must still hash to the recorded
// digest: a recipe edited by hand after resolution is refused rather than deployed.
ManifestSource manifests_from(const Value& v, const std::string& where) {
  check_keys(expect_map(v, where), {"kind", "path", "sha256", "content"}, where);
  ManifestSource m{str(v, "kind", where), str(v, "path", where), str(v, "content", where),
                   str(v, "sha256", where)};
  if (m.kind != "manifests" && m.kind != "kustomize") {
    throw InvalidInput(where + ".kind: '" + m.kind +
                       "' is not a manifest kind; use manifests or kustomize");
  }
  std::string actual = core::sha256_hex(m.content);
  if (actual != m.sha256) {
    throw InvalidInput(where + ".content: its SHA-256 is " + actual + ", not the recorded " +
                       m.sha256 +
                       "; the rendered manifests were changed after resolution, "
                       "resolve the recipe again");
  }
  core::parse_yaml_documents(m.content, where + ".content");
  return m;
}

}  // namespace

Value recipe_to_value(const Recipe& r) {
  Value doc = Value::map();
  doc["apiVersion"] = "gpufleet.io/v1alpha1";
  doc["kind"] = "Recipe";
  doc["metadata"]["name"] = r.name;
  doc["metadata"]["digest"] = r.digest;
  Value& spec = doc["spec"];
  spec["criteria"] = r.criteria;
  Value overlays = Value::list();
  for (const AppliedOverlay& o : r.overlays) {
    Value e = Value::map();
    e["name"] = o.name;
    e["path"] = o.path;
    e["pools"] = string_list(o.pools);
    overlays.push_back(std::move(e));
  }
  spec["overlays"] = std::move(overlays);
  Value comps = Value::list();
  for (const Component& c : r.components) {
    Value e = Value::map();
    e["name"] = c.name;
    if (!c.description.empty()) e["description"] = c.description;
    if (!c.chart.is_local()) e["chart"]["repository"] = c.chart.repository;
    e["chart"]["name"] = c.chart.name;
    e["chart"]["version"] = c.chart.version;
    e["namespace"] = c.namespace_;
    e["values"] = c.values;
    e["dependencies"] = string_list(c.dependencies);
    e["level"] = c.level;
    if (c.manifests) {
      Value& m = e["manifests"];
      m["kind"] = c.manifests->kind;
      m["path"] = c.manifests->path;
      m["sha256"] = c.manifests->sha256;
      m["content"] = c.manifests->content;
    }
    if (c.external) {
      e["external"] = true;
      e["externalReason"] = c.external_reason;
    }
    if (!c.scheduling.as_map().empty()) e["scheduling"] = c.scheduling;
    if (!c.operator_images.empty())
      e["operatorImages"] = operator_images_to_value(c.operator_images);
    comps.push_back(std::move(e));
  }
  spec["components"] = std::move(comps);
  Value order = Value::list();
  for (const Component& c : r.components) order.push_back(c.name);
  spec["deployment"]["order"] = std::move(order);
  Value levels = Value::list();
  for (const auto& l : r.levels) levels.push_back(string_list(l));
  spec["deployment"]["levels"] = std::move(levels);
  spec["constraints"] = constraint_list(r.constraints);
  Value pools = Value::list();
  for (const NodePool& p : r.pools) {
    Value e = Value::map();
    e["name"] = p.name;
    e["accelerator"] = p.accelerator;
    if (p.node_count) e["nodeCount"] = *p.node_count;
    e["nodeSelector"] = p.node_selector;
    e["settings"] = p.settings;
    e["constraints"] = constraint_list(p.constraints);
    if (!p.performance.empty()) e["performance"] = performance_to_value(p.performance);
    e["overlays"] = string_list(p.overlays);
    pools.push_back(std::move(e));
  }
  spec["nodePools"] = std::move(pools);
  Value health = Value::list();
  for (const HealthCheck& h : r.health) {
    Value e = Value::map();
    e["component"] = h.component;
    e["kind"] = h.kind;
    if (!h.namespace_.empty()) e["namespace"] = h.namespace_;
    if (!h.name.empty()) e["name"] = h.name;
    health.push_back(std::move(e));
  }
  spec["health"] = std::move(health);
  return doc;
}

std::string recipe_to_yaml(const Recipe& r) { return core::to_yaml(recipe_to_value(r)); }

Recipe recipe_from_value(const Value& doc, std::string_view source) {
  std::string where(source);
  detail::check_header(doc, "Recipe", where);
  check_keys(doc.as_map(), {"apiVersion", "kind", "metadata", "spec"}, where);
  Recipe r;
  const Value* meta = doc.find("metadata");
  const Value* spec = doc.find("spec");
  if (meta == nullptr || spec == nullptr)
    throw InvalidInput(where + ": metadata and spec are required");
  check_keys(expect_map(*meta, where + ": metadata"), {"name", "digest"}, where + ": metadata");
  check_keys(
      expect_map(*spec, where + ": spec"),
      {"criteria", "overlays", "components", "deployment", "constraints", "nodePools", "health"},
      where + ": spec");
  r.name = str(*meta, "name", where + ": metadata");
  detail::expect_dns_label(r.name, where + ": metadata.name");
  r.digest = str(*meta, "digest", where + ": metadata");
  std::string sw = where + ": spec";
  if (const Value* c = spec->find("criteria")) r.criteria = *c;
  if (const Value* ov = spec->find("overlays")) {
    const core::List& list = expect_list(*ov, sw + ".overlays");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string w = sw + ".overlays[" + std::to_string(i) + "]";
      const Value& o = list[i];
      check_keys(expect_map(o, w), {"name", "path", "pools"}, w);
      r.overlays.push_back({str(o, "name", w), str(o, "path", w), strings(o, "pools", w)});
    }
  }
  const Value* comps = spec->find("components");
  if (comps == nullptr) throw InvalidInput(sw + ".components: missing");
  std::map<std::string, std::vector<std::string>> graph;
  const core::List& list = expect_list(*comps, sw + ".components");
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string w = sw + ".components[" + std::to_string(i) + "]";
    const Value& e = list[i];
    check_keys(expect_map(e, w),
               {"name", "description", "chart", "namespace", "values", "dependencies", "level",
                "manifests", "external", "externalReason", "scheduling", "operatorImages"},
               w);
    if (const Value* chart = e.find("chart")) {
      check_keys(expect_map(*chart, w + ".chart"), {"repository", "name", "version"}, w + ".chart");
    }
    Component c;
    c.name = str(e, "name", w);
    detail::expect_dns_label(c.name, w + ".name");
    w = sw + ".components[" + c.name + "]";
    c.description = str(e, "description", w, false);
    const Value* chart = e.find("chart");
    if (chart == nullptr) throw InvalidInput(w + ".chart: missing");
    expect_map(*chart, w + ".chart");
    const Value* manifests = e.find("manifests");
    c.chart = {str(*chart, "repository", w + ".chart", manifests == nullptr),
               str(*chart, "name", w + ".chart"),
               str(*chart, "version", w + ".chart"),
               {}};
    require_exact_pin(c.chart.version, w + ".chart.version");
    if (manifests != nullptr) {
      c.manifests = manifests_from(*manifests, w + ".manifests");
      if (!c.chart.repository.empty()) {
        throw InvalidInput(w +
                           ".chart.repository: a component with manifests is installed from "
                           "the local wrapper chart the bundle carries; remove the repository");
      }
    } else if (c.chart.repository.rfind("https://", 0) != 0 &&
               c.chart.repository.rfind("oci://", 0) != 0 && !c.chart.is_builtin()) {
      throw InvalidInput(w + ".chart.repository: '" + c.chart.repository +
                         "' must be an https:// Helm repository, an oci:// registry path or "
                         "`builtin` (a chart built into gpufleet)");
    }
    detail::expect_dns_label(c.chart.name, w + ".chart.name");
    c.namespace_ = str(e, "namespace", w);
    detail::expect_dns_label(c.namespace_, w + ".namespace");
    if (const Value* v = e.find("values")) {
      expect_map(*v, w + ".values");
      c.values = *v;
    }
    if (const Value* x = e.find("external")) c.external = detail::expect_bool(*x, w + ".external");
    c.external_reason = str(e, "externalReason", w, false);
    if (const Value* s = e.find("scheduling")) {
      const core::Map& m = expect_map(*s, w + ".scheduling");
      check_keys(m,
                 {"systemNodeSelector", "systemTolerations", "acceleratedNodeSelector",
                  "acceleratedTolerations", "storageClass"},
                 w + ".scheduling");
      for (const auto& k : m) {
        for (const Value& p : expect_list(k.value, w + ".scheduling." + k.key)) {
          if (!p.is_string())
            throw InvalidInput(w + ".scheduling." + k.key + ": expected value paths");
        }
      }
      c.scheduling = *s;
    }
    if (const Value* oi = e.find("operatorImages"))
      c.operator_images = operator_images_from_value(*oi, w + ".operatorImages", c.values);
    c.dependencies = strings(e, "dependencies", w);
    std::sort(c.dependencies.begin(), c.dependencies.end());
    if (std::adjacent_find(c.dependencies.begin(), c.dependencies.end()) != c.dependencies.end()) {
      throw InvalidInput(w + ".dependencies: lists a component twice");
    }
    if (graph.count(c.name)) throw InvalidInput(w + ": component listed twice");
    graph[c.name] = c.dependencies;
    r.components.push_back(std::move(c));
  }
  // Order and levels are derived from the graph, never trusted from the file.
  DeploymentPlan plan = plan_deployment(graph);
  std::map<std::string, Component> by_name;
  for (Component& c : r.components) by_name[c.name] = std::move(c);
  r.components.clear();
  for (const std::string& n : plan.order) {
    Component c = std::move(by_name.at(n));
    c.level = plan.level_of.at(n);
    r.components.push_back(std::move(c));
  }
  r.levels = plan.levels;
  r.constraints = constraints_from(*spec, sw);
  if (const Value* pools = spec->find("nodePools")) {
    const core::List& list = expect_list(*pools, sw + ".nodePools");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string w = sw + ".nodePools[" + std::to_string(i) + "]";
      const Value& p = list[i];
      check_keys(expect_map(p, w),
                 {"name", "accelerator", "nodeCount", "nodeSelector", "settings", "constraints",
                  "performance", "overlays"},
                 w);
      NodePool pool;
      pool.name = str(p, "name", w);
      pool.accelerator = str(p, "accelerator", w);
      if (const Value* n = p.find("nodeCount")) pool.node_count = n->as_int();
      if (const Value* s = p.find("nodeSelector")) pool.node_selector = *s;
      if (const Value* s = p.find("settings")) pool.settings = *s;
      pool.constraints = constraints_from(p, w);
      if (const Value* perf = p.find("performance"))
        pool.performance = performance_from_value(*perf, w + ".performance");
      pool.overlays = strings(p, "overlays", w);
      r.pools.push_back(std::move(pool));
    }
  }
  if (const Value* health = spec->find("health")) {
    const core::List& list = expect_list(*health, sw + ".health");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string w = sw + ".health[" + std::to_string(i) + "]";
      const Value& h = list[i];
      check_keys(expect_map(h, w), {"component", "kind", "namespace", "name"}, w);
      r.health.push_back({str(h, "component", w), str(h, "kind", w), str(h, "namespace", w, false),
                          str(h, "name", w, false)});
    }
  }
  return r;
}

Recipe recipe_from_yaml(std::string_view text, std::string_view source) {
  core::DocumentScope scope(source, text);
  return recipe_from_value(core::parse_yaml(text, source), source);
}

}  // namespace gpufleet::recipe
