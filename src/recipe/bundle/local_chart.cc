// Local wrapper charts: a component rendered from raw manifests or a kustomize directory
// (Component::manifests) is installed as a chart the bundle carries, so that helm, Argo CD,
// Flux and helmfile all apply the same objects the recipe recorded, with the same release
// semantics (upgrade, rollback, uninstall) as the other components.
#include "core/yaml.h"
#include "recipe/bundle/render.h"

namespace gpufleet::recipe::detail {

std::string local_chart_dir(const Component& c) {
  return c.chart.is_vendored() ? c.chart.vendored : "local-charts/" + c.name;
}

void add_local_charts(const Recipe& r, Bundle& out) {
  for (const Component& c : r.components) {
    if (!c.manifests) continue;
    const std::string dir = local_chart_dir(c) + "/";
    core::Value chart = core::Value::map();
    chart["apiVersion"] = "v2";
    chart["name"] = c.name;
    chart["description"] =
        c.description.empty() ? "gpufleet wrapper chart for " + c.name : c.description;
    chart["type"] = "application";
    chart["version"] = c.chart.version;
    chart["annotations"]["gpufleet.io/manifests-kind"] = c.manifests->kind;
    chart["annotations"]["gpufleet.io/manifests-path"] = c.manifests->path;
    chart["annotations"]["gpufleet.io/manifests-sha256"] = c.manifests->sha256;
    out[dir + "Chart.yaml"] = {generated_by(r) + core::to_yaml(chart), false};
    // The objects stay a plain file read by .Files.Get: Helm never evaluates them as a
    // template, so "{{" in a manifest is applied as written.
    out[dir + "files/manifests.yaml"] = {c.manifests->content, false};
    out[dir + "templates/manifests.yaml"] = {
        generated_by(r, "{{/*") + "*/}}\n{{ .Files.Get \"files/manifests.yaml\" }}\n", false};
  }
}

}  // namespace gpufleet::recipe::detail
