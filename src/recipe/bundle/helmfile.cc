// The helmfile deployer: one helmfile.yaml with repositories and releases whose `needs`
// mirror the dependency graph, values in values/<component>.yaml.
#include "core/yaml.h"
#include "recipe/builtin_charts.h"
#include "recipe/bundle/render.h"

namespace gpufleet::recipe::detail {

void render_helmfile(const Recipe& r, const BundleOptions&, Bundle& out) {
  using core::Value;
  std::map<std::string, const Component*> by_name;
  std::map<std::string, std::string> repos;
  for (const Component& c : r.components) {
    by_name[c.name] = &c;
    if (!c.chart.in_bundle()) repos[repository_name(c.chart.repository)] = c.chart.repository;
  }
  Value doc = Value::map();
  doc["helmDefaults"]["wait"] = true;
  doc["helmDefaults"]["timeout"] = 900;
  doc["helmDefaults"]["createNamespace"] = true;
  Value& repositories = doc["repositories"];
  repositories = Value::list();
  for (const auto& [name, url] : repos) {
    Value e = Value::map();
    e["name"] = name;
    e["url"] = without_oci_scheme(url);
    if (url.rfind("oci://", 0) == 0) e["oci"] = true;
    repositories.push_back(std::move(e));
  }
  Value& releases = doc["releases"];
  releases = Value::list();
  for (const Component& c : r.components) {
    Value e = Value::map();
    e["name"] = c.name;
    e["namespace"] = c.namespace_;
    if (c.chart.in_bundle()) {
      e["chart"] = "./" + local_chart_dir(c);  // the wrapper chart in this bundle
    } else {
      e["chart"] = repository_name(c.chart.repository) + "/" + c.chart.name;
      e["version"] = c.chart.version;
    }
    e["values"].push_back("values/" + c.name + ".yaml");
    e["labels"]["level"] = std::to_string(c.level);
    if (!c.dependencies.empty()) {
      Value needs = Value::list();
      for (const std::string& d : c.dependencies)
        needs.push_back(by_name.at(d)->namespace_ + "/" + d);
      e["needs"] = std::move(needs);
    }
    releases.push_back(std::move(e));
    out["values/" + c.name + ".yaml"] = {generated_by(r) + core::to_yaml(c.values), false};
  }
  add_local_charts(r, out);
  out["helmfile.yaml"] = {generated_by(r) + core::to_yaml(doc), false};
  std::string readme = "# " + r.name + " (helmfile)\n\n" + generated_by(r, "<!--");
  readme.pop_back();
  readme +=
      " -->\n\n`helmfile apply` installs the releases; `needs` orders them by the\n"
      "recipe's dependency graph. `helmfile destroy` removes them in reverse order.\n";
  out["README.md"] = {readme, false};
}

}  // namespace gpufleet::recipe::detail
