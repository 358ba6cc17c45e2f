#include "recipe/library_content.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/text.h"
#include "recipe/operator_images.h"
#include "recipe/performance.h"
#include "recipe/pin.h"
#include "recipe/requirement.h"
#include "recipe/schema_check.h"

namespace gpufleet::recipe::detail {

using core::InvalidInput;
using core::Value;

namespace {

constexpr std::string_view kHealthKinds[] = {"CustomResourceDefinition", "Deployment", "DaemonSet",
                                             "StatefulSet", "Pods"};
constexpr std::string_view kClusterFacts[] = {"kubernetes.version", "node.os", "node.osVersion",
                                              "node.kernel", "node.containerRuntime"};
constexpr std::string_view kPoolFacts[] = {
    "node.os",     "node.osVersion", "node.kernel", "node.containerRuntime",
    "gpu.product", "gpu.family",     "gpu.driver",  "gpu.count"};

template <std::size_t N>
bool contains(const std::string_view (&items)[N], std::string_view s) {
  return std::find(std::begin(items), std::end(items), s) != std::end(items);
}

// chart.repository: where Helm finds the chart. Only https and oci registries, or `builtin`
// (a chart compiled into gpufleet, recipe/builtin_charts.h): a pinned recipe must not depend
// on a path on the machine that rendered it.
void check_repository(const std::string& repo, std::string_view where) {
  if (repo == "builtin") return;
  bool ok = repo.rfind("https://", 0) == 0 || repo.rfind("oci://", 0) == 0;
  if (!ok || repo.back() == '/') {
    throw InvalidInput(std::string(where) + ": repository '" + repo +
                       "' must be an https:// Helm repository, an oci:// registry path "
                       "(without a trailing '/') or `builtin` (a chart built into gpufleet)");
  }
}

Value normalize_chart(const Value& v, std::string_view where, bool required) {
  const core::Map& m = expect_map(v, where);
  check_keys(m, {"repository", "name", "version"}, where);
  Value out = Value::map();
  for (std::string_view key : {"repository", "name", "version"}) {
    const Value* f = m.find(key);
    std::string w = field_path(where, key);
    if (f == nullptr) {
      if (required)
        throw InvalidInput(w + ": missing; every registry chart names its " + std::string(key));
      continue;
    }
    const std::string& s = expect_string(*f, w);
    if (key == "version") require_exact_pin(s, w);
    if (key == "repository") check_repository(s, w);
    if (key == "name") expect_dns_label(s, w);
    out[key] = s;
  }
  return out;
}

// manifests: {kind: manifests|kustomize, path: manifests/<dir>, version: <exact pin>}. The
// directory's existence is checked by the loader, which knows the library's files.
Value normalize_manifests(const Value& v, std::string_view where, bool registry) {
  const core::Map& m = expect_map(v, where);
  check_keys(m, {"kind", "path", "version"}, where);
  Value out = Value::map();
  for (std::string_view key : {"kind", "path", "version"}) {
    const Value* f = m.find(key);
    std::string w = field_path(where, key);
    if (f == nullptr) {
      if (registry)
        throw InvalidInput(w + ": missing; give kind (manifests or kustomize), path and version");
      continue;
    }
    const std::string& s = expect_string(*f, w);
    if (key == "kind" && s != "manifests" && s != "kustomize") {
      throw InvalidInput(w + ": '" + s +
                         "' is not a manifest kind; use manifests (every *.yaml file of the "
                         "directory) or kustomize (a directory with kustomization.yaml)");
    }
    if (key == "path") {
      bool ok = s.rfind("manifests/", 0) == 0 && s.size() > 10 && s.back() != '/' &&
                s.find("..") == std::string::npos && s.find("//") == std::string::npos;
      if (!ok) {
        throw InvalidInput(w + ": '" + s +
                           "' must name a directory under manifests/ of the library "
                           "(\"manifests/<name>\"), without '..' or a trailing '/'");
      }
    }
    if (key == "version") require_exact_pin(s, w);
    out[key] = s;
  }
  return out;
}

Value normalize_health(const Value& v, std::string_view where) {
  Value out = Value::map();
  const core::List& list = expect_list(v, where);
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string w = std::string(where) + "[" + std::to_string(i) + "]";
    const core::Map& m = expect_map(list[i], w);
    check_keys(m, {"kind", "name", "namespace"}, w);
    const Value* kind = m.find("kind");
    if (kind == nullptr)
      throw InvalidInput(w + ".kind: missing; one of " + core::join(kHealthKinds));
    const std::string& k = expect_string(*kind, w + ".kind");
    if (!contains(kHealthKinds, k)) {
      throw InvalidInput(w + ".kind: '" + k + "' is not a health check kind; use one of " +
                         core::join(kHealthKinds));
    }
    Value check = Value::map();
    check["kind"] = k;
    const Value* name = m.find("name");
    if (k == "Pods") {
      if (name != nullptr)
        throw InvalidInput(w + ".name: a Pods check covers a whole namespace; remove the name");
    } else {
      if (name == nullptr)
        throw InvalidInput(w + ".name: missing; a " + k + " check names the object");
      check["name"] = expect_string(*name, w + ".name");
    }
    if (const Value* ns = m.find("namespace")) {
      if (k == "CustomResourceDefinition") {
        throw InvalidInput(w +
                           ".namespace: CustomResourceDefinitions are cluster-scoped; remove it");
      }
      expect_dns_label(expect_string(*ns, w + ".namespace"), w + ".namespace");
      check["namespace"] = *ns;
    }
    std::string key = k + "/" + std::string(check.get_string({"namespace"})) + "/" +
                      std::string(check.get_string({"name"}));
    out[key] = std::move(check);
  }
  return out;
}

Value normalize_constraints(const Value& v, std::string_view where, bool pool) {
  Value out = Value::map();
  for (const auto& e : expect_map(v, where)) {
    std::string w = field_path(where, e.key);
    expect_dns_label(e.key, w);
    const core::Map& m = expect_map(e.value, w);
    check_keys(m, {"fact", "requirement", "severity", "remediation"}, w);
    const Value* fact = m.find("fact");
    const Value* req = m.find("requirement");
    if (fact == nullptr || req == nullptr)
      throw InvalidInput(w + ": needs both fact and requirement");
    const std::string& f = expect_string(*fact, w + ".fact");
    bool known = pool ? contains(kPoolFacts, f) : contains(kClusterFacts, f);
    if (!known) {
      throw InvalidInput(w + ".fact: '" + f + "' is not a " + (pool ? "node-pool" : "cluster") +
                         " fact; use one of " +
                         (pool ? core::join(kPoolFacts) : core::join(kClusterFacts)));
    }
    Requirement r = parse_requirement(expect_string(*req, w + ".requirement"), w + ".requirement");
    Value c = Value::map();
    c["fact"] = f;
    c["requirement"] = r.text;
    // error (the default): validate fails; warning: reported, validate still passes.
    std::string severity = "error";
    if (const Value* sv = m.find("severity")) {
      severity = expect_string(*sv, w + ".severity");
      if (severity != "error" && severity != "warning") {
        throw InvalidInput(w + ".severity: '" + severity +
                           "' is not a severity; use error or warning");
      }
    }
    c["severity"] = severity;
    if (const Value* rem = m.find("remediation")) {
      const std::string& text = expect_string(*rem, w + ".remediation");
      if (core::trim(text).empty())
        throw InvalidInput(w + ".remediation: empty; say what to do when the constraint fails");
      c["remediation"] = text;
    }
    out[e.key] = std::move(c);
  }
  return out;
}

}  // namespace

Value normalize_component(const Value& v, std::string_view where, bool registry) {
  const core::Map& m = expect_map(v, where);
  if (registry) {
    check_keys(m,
               {"description", "chart", "manifests", "namespace", "values", "dependencies",
                "health", "scheduling", "operatorImages"},
               where);
  } else {
    check_keys(m,
               {"enabled", "chart", "manifests", "namespace", "values", "dependencies", "health",
                "pinExemption"},
               where);
  }
  Value out = Value::map();
  if (registry) {
    out["enabled"] = false;
    const Value* chart = m.find("chart");
    const Value* manifests = m.find("manifests");
    if (chart != nullptr && manifests != nullptr) {
      throw InvalidInput(std::string(where) +
                         ": has both chart and manifests; a component is either a Helm chart "
                         "or manifests rendered into a local chart");
    }
    if (chart == nullptr && manifests == nullptr)
      throw InvalidInput(field_path(where, "chart") +
                         ": missing; give repository, name and version (or manifests: kind, "
                         "path and version)");
    if (m.find("namespace") == nullptr)
      throw InvalidInput(field_path(where, "namespace") + ": missing");
    out["description"] = expect_string(m.find("description") ? *m.find("description") : Value(""),
                                       field_path(where, "description"));
  }
  if (const Value* f = m.find("enabled"))
    out["enabled"] = expect_bool(*f, field_path(where, "enabled"));
  if (const Value* f = m.find("chart"))
    out["chart"] = normalize_chart(*f, field_path(where, "chart"), registry);
  if (const Value* f = m.find("manifests"))
    out["manifests"] = normalize_manifests(*f, field_path(where, "manifests"), registry);
  if (const Value* f = m.find("pinExemption")) {
    // Why this overlay pins another version than the registry (recipe_test PinHygiene).
    std::string w = field_path(where, "pinExemption");
    if (core::trim(expect_string(*f, w)).empty())
      throw InvalidInput(w + ": empty; give the reason the pin differs from the registry's");
    out["pinExemption"] = *f;
  }
  if (const Value* f = m.find("namespace")) {
    std::string w = field_path(where, "namespace");
    expect_dns_label(expect_string(*f, w), w);
    out["namespace"] = *f;
  }
  if (const Value* f = m.find("values")) {
    expect_map(*f, field_path(where, "values"));
    out["values"] = *f;
  }
  if (const Value* f = m.find("dependencies")) {
    std::string w = field_path(where, "dependencies");
    Value deps = Value::map();
    for (const Value& d : expect_list(*f, w)) deps[expect_string(d, w)] = true;
    out["dependencies"] = std::move(deps);
  }
  if (const Value* f = m.find("health"))
    out["health"] = normalize_health(*f, field_path(where, "health"));
  // Registry only: the value paths bundle-time scheduling shortcuts write to.
  if (const Value* f = m.find("scheduling")) {
    std::string w = field_path(where, "scheduling");
    const core::Map& s = expect_map(*f, w);
    check_keys(s,
               {"systemNodeSelector", "systemTolerations", "acceleratedNodeSelector",
                "acceleratedTolerations", "storageClass"},
               w);
    for (const auto& e : s) {
      for (const Value& p : expect_list(e.value, field_path(w, e.key)))
        expect_string(p, field_path(w, e.key));
    }
    out["scheduling"] = *f;
  }
  // Registry only: the value paths of the images the component's operator creates at run
  // time (operator_images.h), checked against the component's own values.
  if (const Value* f = m.find("operatorImages")) {
    const Value* values = m.find("values");
    out["operatorImages"] = operator_images_to_value(operator_images_from_value(
        *f, field_path(where, "operatorImages"), values ? *values : Value()));
  }
  return out;
}

Value normalize_content(const core::Map& m, std::string_view where) {
  Value out = Value::map();
  if (const Value* comps = m.find("components")) {
    std::string w = field_path(where, "components");
    Value& dst = out["components"];
    dst = Value::map();
    for (const auto& e : expect_map(*comps, w)) {
      dst[e.key] = normalize_component(e.value, field_path(w, e.key), false);
    }
  }
  if (const Value* c = m.find("constraints")) {
    out["constraints"] = normalize_constraints(*c, field_path(where, "constraints"), false);
  }
  if (const Value* p = m.find("nodePool")) {
    std::string w = field_path(where, "nodePool");
    Value pool = *p;
    expect_map(pool, w);
    if (const Value* pc = p->find("constraints")) {
      pool["constraints"] = normalize_constraints(*pc, field_path(w, "constraints"), true);
    }
    // Checked here so that a typo fails at load; merged per field like the other settings.
    if (const Value* pp = p->find("performance")) {
      pool["performance"] =
          performance_to_value(performance_from_value(*pp, field_path(w, "performance")));
    }
    out["nodePool"] = std::move(pool);
  }
  return out;
}

}  // namespace gpufleet::recipe::detail
