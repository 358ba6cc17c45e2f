// The flux deployer: a HelmRepository per chart repository and a HelmRelease per component
// whose dependsOn mirrors the dependency graph, tied together by a kustomization.yaml.
#include "core/errors.h"
#include "core/yaml.h"
#include "recipe/builtin_charts.h"
#include "recipe/bundle/render.h"

namespace gpufleet::recipe::detail {

namespace {

using core::Value;

// A path of this bundle inside the Git repository (--repo-path, default the root).
std::string bundle_path(const BundleOptions& o, const std::string& leaf) {
  std::string base = o.repo_path;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (base.empty() || base == ".") return "./" + leaf;
  return (base.rfind("./", 0) == 0 || base.front() == '/' ? base : "./" + base) + "/" + leaf;
}

Value helm_repository(const std::string& url, const BundleOptions& o) {
  Value repo = Value::map();
  repo["apiVersion"] = "source.toolkit.fluxcd.io/v1";
  repo["kind"] = "HelmRepository";
  repo["metadata"]["name"] = repository_name(url);
  repo["metadata"]["namespace"] = o.flux_namespace;
  repo["spec"]["interval"] = "1h";
  repo["spec"]["url"] = url;
  if (url.rfind("oci://", 0) == 0) repo["spec"]["type"] = "oci";
  return repo;
}

Value helm_release(const Recipe& r, const Component& c, const BundleOptions& o) {
  Value rel = Value::map();
  rel["apiVersion"] = "helm.toolkit.fluxcd.io/v2";
  rel["kind"] = "HelmRelease";
  rel["metadata"]["name"] = c.name;
  rel["metadata"]["namespace"] = o.flux_namespace;
  rel["metadata"]["labels"]["gpufleet.io/recipe"] = r.name;
  Value& spec = rel["spec"];
  spec["interval"] = "10m";
  spec["releaseName"] = c.name;
  spec["targetNamespace"] = c.namespace_;
  spec["storageNamespace"] = c.namespace_;
  Value& chart = spec["chart"]["spec"];
  if (c.chart.in_bundle()) {
    // The wrapper chart in this bundle, read from the Git repository Flux syncs it from
    // (the GitRepository flux bootstrap creates, named flux-system).
    chart["chart"] = bundle_path(o, local_chart_dir(c));
    chart["version"] = c.chart.version;
    chart["interval"] = "1h";
    chart["sourceRef"]["kind"] = "GitRepository";
    chart["sourceRef"]["name"] = "flux-system";
    chart["sourceRef"]["namespace"] = o.flux_namespace;
  } else {
    chart["chart"] = c.chart.name;
    chart["version"] = c.chart.version;
    chart["interval"] = "1h";
    chart["sourceRef"]["kind"] = "HelmRepository";
    chart["sourceRef"]["name"] = repository_name(c.chart.repository);
    chart["sourceRef"]["namespace"] = o.flux_namespace;
  }
  spec["install"]["createNamespace"] = true;
  spec["install"]["remediation"]["retries"] = 3;
  spec["upgrade"]["remediation"]["retries"] = 3;
  spec["timeout"] = "15m";
  Value deps = Value::list();
  for (const std::string& d : c.dependencies) {
    Value e = Value::map();
    e["name"] = d;
    e["namespace"] = o.flux_namespace;
    deps.push_back(std::move(e));
  }
  if (!deps.as_list().empty()) spec["dependsOn"] = std::move(deps);
  if (!c.values.as_map().empty()) spec["values"] = c.values;
  return rel;
}

}  // namespace

void render_flux(const Recipe& r, const BundleOptions& o, Bundle& out) {
  std::map<std::string, std::string> repos;  // name -> url
  Value resources = Value::list();
  for (const Component& c : r.components) {
    if (!c.chart.in_bundle()) repos[repository_name(c.chart.repository)] = c.chart.repository;
  }
  for (const auto& [name, url] : repos) {
    out["sources/" + name + ".yaml"] = {generated_by(r) + core::to_yaml(helm_repository(url, o)),
                                        false};
    resources.push_back("sources/" + name + ".yaml");
  }
  for (const Component& c : r.components) {
    out["releases/" + c.name + ".yaml"] = {generated_by(r) + core::to_yaml(helm_release(r, c, o)),
                                           false};
    resources.push_back("releases/" + c.name + ".yaml");
  }
  add_local_charts(r, out);
  Value kustomization = Value::map();
  kustomization["apiVersion"] = "kustomize.config.k8s.io/v1beta1";
  kustomization["kind"] = "Kustomization";
  kustomization["resources"] = std::move(resources);
  out["kustomization.yaml"] = {generated_by(r) + core::to_yaml(kustomization), false};
  std::string readme = "# " + r.name + " (Flux)\n\n" + generated_by(r, "<!--");
  readme.pop_back();
  readme +=
      " -->\n\n"
      "Commit this folder to the Git repository Flux watches (a Flux `Kustomization`\n"
      "pointing at it), or apply it directly: `kubectl apply -k .`. HelmReleases live in\n"
      "`" +
      o.flux_namespace +
      "`, install into their own namespaces, and wait for their\n"
      "`dependsOn` releases to be ready.\n";
  for (const Component& c : r.components) {
    if (!c.chart.is_local()) continue;
    readme +=
        "\nManifest components (`local-charts/`) are installed from the `flux-system`\n"
        "GitRepository at `" +
        bundle_path(o, "local-charts/<name>") + "`: commit the bundle there (`--repo-path`).\n";
    break;
  }
  out["README.md"] = {readme, false};
}

}  // namespace gpufleet::recipe::detail
