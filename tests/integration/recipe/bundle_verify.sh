#!/usr/bin/env bash
# Verifies generated bundles with the real tools, against the kube-local control plane:
#  - argocd-helm: `helm lint` and `helm template` (helm built by tools/helm-lint/build.sh);
#  - argocd: the Applications and the app of apps, and the argocd-helm chart's rendered
#    output, pass `kubectl apply --dry-run=server` with Argo CD's Application CRD installed;
#  - flux: the HelmRepository sources pass `kubectl apply --dry-run=server` with Flux's
#    HelmRepository CRD installed.
# The CRDs come from the projects' Go modules (argo-cd manifests/crds, source-controller
# config/crd/bases) through the Go module proxy. Flux's HelmRelease CRD is not available
# there (the helm-controller module is not served): HelmReleases are decoded strictly into
# Flux's API types by fluxcheck (tools/helm-lint/fluxcheck) instead; the helmfile is read by
# helmfile itself (`helmfile list`, built with HELMFILE=1 tools/helm-lint/build.sh).
# Usage: bundle_verify.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN; HELM_BIN optional)
# Exit 77 (skipped) when neither helm nor the CRDs are available.
set -euo pipefail
repo="$1"
gpufleet="$GPUFLEET_BIN"
helm="${HELM_BIN:-$repo/build/bin/helm}"
fluxcheck="${FLUXCHECK_BIN:-$repo/build/bin/fluxcheck}"
helmfile="${HELMFILE_BIN:-$repo/build/bin/helmfile}"
argocd_version=v3.6.1
source_controller_version=v1.10.1
work="$(mktemp -d)"
created=()
cleanup() {
  local item
  for item in "${created[@]}"; do kubectl delete $item --ignore-not-found --wait=false >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
verified=0

"$gpufleet" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  -o "$work/recipe.yaml"
"$gpufleet" recipe --service oke --os ubuntu --intent training --platform kubeflow \
  --pool train=gb200:18 --pool serve=h100:4 --mixin gatekeeper -o "$work/mixed.yaml"
for r in recipe mixed; do
  "$gpufleet" bundle -r "$work/$r.yaml" --deployer argocd --repo-url https://git.example.com/gpu.git \
    -o "$work/$r-argocd" >/dev/null
  # gpufleet's own chart travels in the bundle (local-charts/): Argo CD and Flux read it from
  # the Git repository the bundle is pushed to.
  "$gpufleet" bundle -r "$work/$r.yaml" --deployer argocd-helm --repo-url https://git.example.com/gpu.git \
    -o "$work/$r-argocd-helm" >/dev/null
  "$gpufleet" bundle -r "$work/$r.yaml" --deployer flux --repo-url https://git.example.com/gpu.git \
    --revision main -o "$work/$r-flux" >/dev/null
  "$gpufleet" bundle -r "$work/$r.yaml" --deployer helmfile -o "$work/$r-helmfile" >/dev/null
done

# A file of a Go module, downloaded through the module proxy ("" when unavailable).
module_file() {
  local module="$1" version="$2" file="$3" dir
  command -v go >/dev/null || return 0
  dir="$(go env GOMODCACHE)/$module@$version"
  # The download may report that the module wants a newer Go; the files are extracted anyway.
  [[ -f "$dir/$file" ]] || GOTOOLCHAIN=local GOFLAGS=-mod=mod timeout 600 go mod download "$module@$version" >/dev/null 2>&1 || true
  [[ -f "$dir/$file" ]] && echo "$dir/$file"
  return 0
}

ensure_namespace() {
  if ! kubectl get namespace "$1" >/dev/null 2>&1; then
    kubectl create namespace "$1" >/dev/null
    created+=("namespace/$1")
  fi
}

install_crd() {
  local file="$1" name="$2"
  if ! kubectl get crd "$name" >/dev/null 2>&1; then
    kubectl apply --server-side -f "$file" >/dev/null
    created+=("crd/$name")
  fi
  # (kubectl wait errors out while the new CRD has no status yet, so poll.)
  local i
  for i in $(seq 120); do
    [[ "$(kubectl get crd "$name" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" == True ]] &&
      return 0
    sleep 0.5
  done
  fail "CRD $name not Established after 60s"
}

# 1. helm lint + helm template on the generated chart.
if [[ -x "$helm" ]]; then
  for r in recipe mixed; do
    "$helm" lint --strict "$work/$r-argocd-helm" || fail "helm lint $r-argocd-helm"
    "$helm" template "$r" "$work/$r-argocd-helm" --namespace argocd >"$work/$r-rendered.yaml" ||
      fail "helm template $r-argocd-helm"
    want=$(grep -c '^kind: Application$' <(cat "$work/$r-argocd/applications/"*.yaml))
    got=$(grep -c '^kind: Application$' "$work/$r-rendered.yaml")
    [[ $want == "$got" ]] || fail "$r: chart renders $got Applications, the argocd bundle has $want"
    # Overriding a component's values and disabling one at install.
    "$helm" template "$r" "$work/$r-argocd-helm" --set components.gpu-operator.enabled=false \
      --set components.cert-manager.values.replicaCount=3 >"$work/$r-override.yaml"
    grep -q 'name: gpu-operator$' "$work/$r-override.yaml" && fail "disabling gpu-operator had no effect"
    grep -q 'replicaCount: 3' "$work/$r-override.yaml" || fail "value override had no effect"
  done
  echo "helm lint/template: ok"
  verified=1
else
  echo "skip helm checks: no helm at $helm (run tools/helm-lint/build.sh)"
fi

# 2. Argo CD objects against the Application CRD.
crd="$(module_file github.com/argoproj/argo-cd/v3 "$argocd_version" manifests/crds/application-crd.yaml)"
if [[ -n "$crd" ]]; then
  install_crd "$crd" applications.argoproj.io
  ensure_namespace argocd
  for r in recipe mixed; do
    kubectl apply --dry-run=server -f "$work/$r-argocd/applications" -f "$work/$r-argocd/app-of-apps.yaml" \
      >/dev/null || fail "argocd bundle $r rejected by the API server"
    if [[ -f "$work/$r-rendered.yaml" ]]; then
      kubectl apply --dry-run=server -n argocd -f "$work/$r-rendered.yaml" >/dev/null ||
        fail "argocd-helm rendering $r rejected by the API server"
      # The chart renders the same Applications as the argocd deployer (as the server reads them).
      if command -v python3 >/dev/null; then
        kubectl apply --dry-run=server -o json -f "$work/$r-argocd/applications" >"$work/$r-a.json"
        kubectl apply --dry-run=server -n argocd -o json -f "$work/$r-rendered.yaml" >"$work/$r-b.json"
        python3 - "$work/$r-a.json" "$work/$r-b.json" <<'PY' || fail "$r: argocd and argocd-helm Applications differ"
import json, sys
def apps(path):
    doc = json.load(open(path))
    items = doc.get("items", [doc])
    return {i["metadata"]["name"]: (i["spec"], i["metadata"].get("annotations", {}))
            for i in items if i["kind"] == "Application"}
a, b = apps(sys.argv[1]), apps(sys.argv[2])
sys.exit(0 if a == b and a else 1)
PY
      fi
    fi
  done
  echo "argocd dry-run=server: ok"
  verified=1
else
  echo "skip Argo CD checks: github.com/argoproj/argo-cd/v3@$argocd_version not downloadable"
fi

# 3. Flux sources against the HelmRepository CRD.
crd="$(module_file github.com/fluxcd/source-controller "$source_controller_version" \
  config/crd/bases/source.toolkit.fluxcd.io_helmrepositories.yaml)"
if [[ -n "$crd" ]]; then
  install_crd "$crd" helmrepositories.source.toolkit.fluxcd.io
  install_crd "${crd%helmrepositories.yaml}gitrepositories.yaml" gitrepositories.source.toolkit.fluxcd.io
  ensure_namespace flux-system
  for r in recipe mixed; do
    kubectl apply --dry-run=server -f "$work/$r-flux/sources" >/dev/null ||
      fail "flux sources $r rejected by the API server"
  done
  echo "flux HelmRepository and GitRepository dry-run=server: ok"
  verified=1
else
  echo "skip Flux checks: github.com/fluxcd/source-controller@$source_controller_version not downloadable"
fi

# 4. Flux HelmReleases and HelmRepositories decoded strictly into Flux's API types.
if [[ -x "$fluxcheck" ]]; then
  for r in recipe mixed; do
    "$fluxcheck" "$work/$r-flux/sources" "$work/$r-flux/releases" || fail "fluxcheck $r-flux"
  done
  verified=1
else
  echo "skip fluxcheck: no $fluxcheck (run tools/helm-lint/build.sh)"
fi

# 5. helmfile reads the generated helmfile.yaml (its state is decoded strictly: an unknown or
# misspelt field is an error) and lists every release with its version. `helmfile lint` and
# `helmfile build` pull the charts, which needs the network, so they are not run here.
if [[ -x "$helmfile" && -x "$helm" ]]; then
  for r in recipe mixed; do
    (cd "$work/$r-helmfile" && "$helmfile" --helm-binary "$helm" list --output json >"$work/$r-helmfile.json") ||
      fail "helmfile list $r"
    want=$(grep -c '^- chart:' "$work/$r-helmfile/helmfile.yaml" || true)
    got=$(grep -o '"name":' "$work/$r-helmfile.json" | wc -l)
    [[ $want == "$got" && $want -gt 0 ]] || fail "helmfile lists $got releases, the bundle has $want"
  done
  echo "helmfile list: ok"
  verified=1
else
  echo "skip helmfile checks: no helmfile at $helmfile (tools/helm-lint/README.md)"
fi

# 6. gpufleet's own chart, as every recipe installs it: from the helm bundle (local-charts/,
# no registry), through the bundle's own install.sh with the recipe's values, accepted by the
# API server (helm's server-side dry run: every object validated, nothing created).
if [[ -x "$helm" ]]; then
  "$gpufleet" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/recipe-helm" >/dev/null
  "$helm" lint --strict "$work/recipe-helm/local-charts/gpufleet" \
    -f "$work/recipe-helm/components/gpufleet/values.yaml" >/dev/null || fail "helm lint of the bundled gpufleet chart"
  mkdir -p "$work/helm-bin" && ln -sf "$helm" "$work/helm-bin/helm"
  # install.sh applies the chart's CRDs first (CRD-safe upgrades); server-side dry run here too.
  grep -q "kubectl apply --server-side --force-conflicts.*local-charts/gpufleet/crds/" \
    "$work/recipe-helm/components/gpufleet/install.sh" || fail "gpufleet install.sh does not apply its CRDs"
  GPUFLEET_KUBECTL_DRY_RUN=1 PATH="$work/helm-bin:$PATH" "$work/recipe-helm/components/gpufleet/install.sh" --dry-run=server \
    >"$work/gpufleet-dry-run.txt" 2>&1 || fail "gpufleet install.sh --dry-run=server: $(tail -5 "$work/gpufleet-dry-run.txt")"
  grep -q 'kind: DaemonSet' "$work/gpufleet-dry-run.txt" || fail "gpufleet dry run rendered no agent DaemonSet"
  echo "gpufleet chart from the bundle: install.sh --dry-run=server ok"
  verified=1
fi

[[ $verified == 1 ]] || exit 77
echo "bundle_verify: ok"
