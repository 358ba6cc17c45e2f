// The argocd deployer: an app-of-apps. One Application per component, ordered by sync waves
// from the dependency levels; repository Secrets for OCI chart registries; and a root
// Application that points at the applications/ folder of the Git repository the bundle is
// pushed to.
#include "core/errors.h"
#include "core/yaml.h"
#include "recipe/builtin_charts.h"
#include "recipe/bundle/render.h"

namespace gpufleet::recipe::detail {

namespace {

using core::Value;

Value sync_policy() {
  Value p = Value::map();
  p["automated"]["prune"] = true;
  p["automated"]["selfHeal"] = true;
  Value opts = Value::list();
  opts.push_back("CreateNamespace=true");
  opts.push_back("ServerSideApply=true");
  p["syncOptions"] = std::move(opts);
  Value& retry = p["retry"];
  retry["limit"] = 5;
  retry["backoff"]["duration"] = "10s";
  retry["backoff"]["factor"] = 2;
  retry["backoff"]["maxDuration"] = "5m";
  return p;
}

Value application(const Recipe& r, const Component& c, const BundleOptions& o) {
  Value app = Value::map();
  app["apiVersion"] = "argoproj.io/v1alpha1";
  app["kind"] = "Application";
  app["metadata"]["name"] = c.name;
  app["metadata"]["namespace"] = o.argocd_namespace;
  app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] = std::to_string(c.level);
  app["metadata"]["labels"]["gpufleet.io/recipe"] = r.name;
  app["metadata"]["finalizers"].push_back("resources-finalizer.argocd.argoproj.io");
  Value& spec = app["spec"];
  spec["project"] = "default";
  if (c.chart.in_bundle()) {
    // The wrapper chart of a manifest component, from the Git repository of this bundle.
    spec["source"]["repoURL"] = o.repo_url;
    spec["source"]["path"] = path_join(o.repo_path, local_chart_dir(c));
    spec["source"]["targetRevision"] = o.revision;
  } else {
    // Argo CD names OCI Helm registries without the scheme (the repository is enableOCI).
    spec["source"]["repoURL"] = without_oci_scheme(c.chart.repository);
    spec["source"]["chart"] = c.chart.name;
    spec["source"]["targetRevision"] = c.chart.version;
  }
  spec["source"]["helm"]["releaseName"] = c.name;
  spec["source"]["helm"]["valuesObject"] = c.values;
  spec["destination"]["server"] = "https://kubernetes.default.svc";
  spec["destination"]["namespace"] = c.namespace_;
  spec["syncPolicy"] = sync_policy();
  return app;
}

Value oci_repository_secret(const std::string& url, const BundleOptions& o) {
  Value s = Value::map();
  s["apiVersion"] = "v1";
  s["kind"] = "Secret";
  s["metadata"]["name"] = "repo-" + repository_name(url);
  s["metadata"]["namespace"] = o.argocd_namespace;
  s["metadata"]["labels"]["argocd.argoproj.io/secret-type"] = "repository";
  s["stringData"]["name"] = repository_name(url);
  s["stringData"]["type"] = "helm";
  s["stringData"]["url"] = without_oci_scheme(url);
  s["stringData"]["enableOCI"] = "true";
  return s;
}

}  // namespace

void render_argocd(const Recipe& r, const BundleOptions& o, Bundle& out) {
  if (o.repo_url.empty()) {
    throw core::InvalidInput(
        "--deployer argocd needs --repo-url: the Git repository this bundle "
        "will be pushed to, which the app-of-apps Application syncs from");
  }
  std::map<std::string, bool> oci;
  for (const Component& c : r.components) {
    out["applications/" + c.name + ".yaml"] = {
        generated_by(r) + core::to_yaml(application(r, c, o)), false};
    if (c.chart.is_oci()) oci[c.chart.repository] = true;
  }
  add_local_charts(r, out);
  for (const auto& [url, _] : oci) {
    out["applications/repo-" + repository_name(url) + ".yaml"] = {
        generated_by(r) + core::to_yaml(oci_repository_secret(url, o)), false};
  }
  Value root = Value::map();
  root["apiVersion"] = "argoproj.io/v1alpha1";
  root["kind"] = "Application";
  root["metadata"]["name"] = r.name;
  root["metadata"]["namespace"] = o.argocd_namespace;
  root["metadata"]["labels"]["gpufleet.io/recipe"] = r.name;
  root["spec"]["project"] = "default";
  root["spec"]["source"]["repoURL"] = o.repo_url;
  root["spec"]["source"]["targetRevision"] = o.revision;
  root["spec"]["source"]["path"] = path_join(o.repo_path, "applications");
  root["spec"]["destination"]["server"] = "https://kubernetes.default.svc";
  root["spec"]["destination"]["namespace"] = o.argocd_namespace;
  root["spec"]["syncPolicy"] = sync_policy();
  out["app-of-apps.yaml"] = {generated_by(r) + core::to_yaml(root), false};
  std::string readme = "# " + r.name + " (Argo CD app of apps)\n\n" + generated_by(r, "<!--");
  readme.pop_back();
  readme +=
      " -->\n\n"
      "Push this folder to " +
      o.repo_url + " (path `" + o.repo_path +
      "`), then\n"
      "`kubectl apply -n " +
      o.argocd_namespace +
      " -f app-of-apps.yaml`.\n\n"
      "Each component is an Application in `applications/` whose sync wave is its\n"
      "dependency level. Argo CD waits for a wave to be healthy before the next only when\n"
      "Application health is assessed: enable the `argoproj.io/Application` health\n"
      "customization in `argocd-cm` (see the Argo CD documentation on sync waves).\n"
      "OCI chart registries get repository Secrets (`repo-*.yaml`, `enableOCI`).\n";
  out["README.md"] = {readme, false};
}

void render_argocd_helm(const Recipe& r, const BundleOptions& o, Bundle& out) {
  for (const Component& c : r.components) {
    if (c.chart.in_bundle() && o.repo_url.empty()) {
      throw core::InvalidInput(
          "--deployer argocd-helm needs --repo-url for component " + c.name +
          " (manifests installed from a wrapper chart in local-charts/): the Git repository "
          "this bundle is pushed to, which its Application reads the chart from");
    }
  }
  Value chart = Value::map();
  chart["apiVersion"] = "v2";
  chart["name"] = "gpufleet-recipe";
  chart["description"] =
      "Argo CD Applications for gpufleet recipe " + r.name + " (" + r.digest + ")";
  chart["type"] = "application";
  chart["version"] = "0.1.0";
  chart["appVersion"] = r.digest.substr(7, 12);
  out["Chart.yaml"] = {generated_by(r) + core::to_yaml(chart), false};

  Value values = Value::map();
  values["argocd"]["namespace"] = o.argocd_namespace;
  values["argocd"]["project"] = "default";
  values["argocd"]["destinationServer"] = "https://kubernetes.default.svc";
  values["recipe"] = r.name;
  std::map<std::string, bool> oci;
  for (const Component& c : r.components) {
    Value& e = values["components"][c.name];
    e["enabled"] = true;
    e["syncWave"] = c.level;
    e["namespace"] = c.namespace_;
    if (c.chart.in_bundle()) {
      e["chart"]["repoURL"] = o.repo_url;
      e["chart"]["path"] = path_join(o.repo_path, local_chart_dir(c));
      e["chart"]["version"] = o.revision;  // the Git revision the path is read at
    } else {
      e["chart"]["repoURL"] = without_oci_scheme(c.chart.repository);
      e["chart"]["name"] = c.chart.name;
      e["chart"]["version"] = c.chart.version;
    }
    e["values"] = c.values;
    if (c.chart.is_oci()) oci[c.chart.repository] = true;
  }
  values["ociRepositories"] = Value::list();
  for (const auto& [url, _] : oci) {
    Value e = Value::map();
    e["name"] = repository_name(url);
    e["url"] = without_oci_scheme(url);
    values["ociRepositories"].push_back(std::move(e));
  }
  out["values.yaml"] = {generated_by(r) +
                            "# Override any component's values, or disable one, at install:\n"
                            "#   helm install " +
                            r.name + " . --set components.gatekeeper.enabled=false\n" +
                            core::to_yaml(values),
                        false};
  out["templates/applications.yaml"] = {generated_by(r, "{{/*") + R"gen(*/}}
{{- range $name, $c := .Values.components }}
{{- if $c.enabled }}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: {{ $name }}
  namespace: {{ $.Values.argocd.namespace }}
  annotations:
    argocd.argoproj.io/sync-wave: {{ $c.syncWave | quote }}
  labels:
    gpufleet.io/recipe: {{ $.Values.recipe }}
  finalizers:
    - resources-finalizer.argocd.argoproj.io
spec:
  project: {{ $.Values.argocd.project }}
  source:
    repoURL: {{ $c.chart.repoURL }}
    {{- if $c.chart.path }}
    path: {{ $c.chart.path }}
    {{- else }}
    chart: {{ $c.chart.name }}
    {{- end }}
    targetRevision: {{ $c.chart.version | quote }}
    helm:
      releaseName: {{ $name }}
      valuesObject:
        {{- toYaml (default dict $c.values) | nindent 8 }}
  destination:
    server: {{ $.Values.argocd.destinationServer }}
    namespace: {{ $c.namespace }}
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
    syncOptions:
      - CreateNamespace=true
      - ServerSideApply=true
    retry:
      limit: 5
      backoff:
        duration: 10s
        factor: 2
        maxDuration: 5m
{{- end }}
{{- end }}
)gen",
                                        false};
  out["templates/repositories.yaml"] = {generated_by(r, "{{/*") + R"gen(*/}}
{{- range .Values.ociRepositories }}
---
apiVersion: v1
kind: Secret
metadata:
  name: repo-{{ .name }}
  namespace: {{ $.Values.argocd.namespace }}
  labels:
    argocd.argoproj.io/secret-type: repository
stringData:
  name: {{ .name }}
  type: helm
  url: {{ .url }}
  enableOCI: "true"
{{- end }}
)gen",
                                        false};
  add_local_charts(r, out);
  out[".helmignore"] = {"recipe.yaml\nchecksums.txt\nREADME.md\nlocal-charts/\n", false};
  std::string readme =
      "# " + r.name + " (Argo CD Applications as a Helm chart)\n\n" + generated_by(r, "<!--");
  readme.pop_back();
  readme +=
      " -->\n\n"
      "`helm install " +
      r.name + " . --namespace " + o.argocd_namespace +
      "` creates one Argo CD Application per component, sync waves from the dependency\n"
      "levels. Override a component's values or disable it with `--set` or `-f`.\n";
  out["README.md"] = {readme, false};
}

}  // namespace gpufleet::recipe::detail
