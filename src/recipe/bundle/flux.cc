// The flux deployer: a HelmRepository per chart repository and a HelmRelease per component
// whose dependsOn mirrors the dependency graph, tied together by a kustomization.yaml.
#include "core/errors.h"
#include "core/yaml.h"
#include "recipe/builtin_charts.h"
#include "recipe/bundle/render.h"

namespace gpufleet::recipe::detail {

namespace {

using core::Value;

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

// The Git repository the bundle is pushed to, for the charts it carries.
Value git_repository(const BundleOptions& o) {
  Value repo = Value::map();
  repo["apiVersion"] = "source.toolkit.fluxcd.io/v1";
  repo["kind"] = "GitRepository";
  repo["metadata"]["name"] = repository_name(o.repo_url);
  repo["metadata"]["namespace"] = o.flux_namespace;
  repo["spec"]["interval"] = "10m";
  repo["spec"]["url"] = o.repo_url;
  // Without a ref Flux follows the repository's default branch.
  if (o.revision != "HEAD") {
    if (o.revision.rfind("refs/", 0) == 0) {
      repo["spec"]["ref"]["name"] = o.revision;
    } else {
      repo["spec"]["ref"]["branch"] = o.revision;
    }
  }
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
  if (c.chart.is_builtin()) {
    // The chart is in the bundle, read from the Git repository the bundle is pushed to.
    chart["chart"] = "./" + path_join(o.repo_path, builtin_chart_dir(c.chart.name));
    chart["version"] = c.chart.version;  // Flux ignores it for Git sources; kept for the record
    chart["interval"] = "1h";
    chart["sourceRef"]["kind"] = "GitRepository";
    chart["sourceRef"]["name"] = repository_name(o.repo_url);
  } else {
    chart["chart"] = c.chart.name;
    chart["version"] = c.chart.version;
    chart["interval"] = "1h";
    chart["sourceRef"]["kind"] = "HelmRepository";
    chart["sourceRef"]["name"] = repository_name(c.chart.repository);
  }
  chart["sourceRef"]["namespace"] = o.flux_namespace;
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
  bool builtin = false;
  for (const Component& c : r.components) {
    if (c.chart.is_builtin()) {
      builtin = true;
      continue;
    }
    repos[repository_name(c.chart.repository)] = c.chart.repository;
  }
  if (builtin) {
    if (o.repo_url.empty()) {
      throw core::InvalidInput(
          "--deployer flux needs --repo-url when a chart travels in the bundle (local-charts/): "
          "the Git repository the bundle is pushed to, which Flux reads that chart from");
    }
    std::string name = repository_name(o.repo_url);
    out["sources/" + name + ".yaml"] = {generated_by(r) + core::to_yaml(git_repository(o)), false};
    resources.push_back("sources/" + name + ".yaml");
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
  out["README.md"] = {readme, false};
}

}  // namespace gpufleet::recipe::detail
