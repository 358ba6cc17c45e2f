#!/usr/bin/env bash
# Manifest components (raw manifests, kustomize directories) through the real tools: the
# recipe renders the library's kustomize directory with kube-local's built-in kubectl
# (GPUFLEET_KUBECTL), the helm bundle carries them as local wrapper charts, `helm lint` accepts
# the charts, `helm template` yields exactly the objects the recipe recorded, and the API
# server of kube-local accepts them (`kubectl apply --dry-run=server`; the Kueue objects only
# up to their missing CRD). The helm bundle's install script names the wrapper chart.
# Usage: local_charts_verify.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN;
# HELM_BIN optional). Exit 77 (skipped) without helm.
set -euo pipefail
repo="$1"
gpufleet="$GPUFLEET_BIN"
helm="${HELM_BIN:-$repo/build/bin/helm}"
[[ -x "$helm" ]] || { echo "skip: no helm at $helm (run tools/helm-lint/build.sh)"; exit 77; }
export GPUFLEET_KUBECTL="$KUBE_LOCAL_BIN kubectl"
kubectl() { "$KUBE_LOCAL_BIN" kubectl "$@"; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$gpufleet" recipe --service gke --accelerator h100 --os cos --intent training --platform kubeflow \
  --mixin kueue-gpu-queues -o "$work/recipe.yaml"
"$gpufleet" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/helm" >/dev/null
(cd "$work/helm" && sha256sum -c --quiet checksums.txt) || fail "checksums of the helm bundle"

# Objects of a multi-document stream, without comments and separators, for comparison.
objects() { grep -v -e '^#' -e '^---' -e '^$' "$1" || true; }

for c in gke-nccl-tcpxo kueue-gpu-queues; do
  chart="$work/helm/local-charts/$c"
  [[ -f "$chart/Chart.yaml" ]] || fail "$c: no wrapper chart in the bundle"
  "$helm" lint --strict "$chart" >/dev/null || fail "helm lint $c"
  "$helm" template "$c" "$chart" --namespace kube-system >"$work/$c.yaml" || fail "helm template $c"
  diff <(objects "$chart/files/manifests.yaml") <(objects "$work/$c.yaml") >/dev/null ||
    fail "$c: helm template does not give the recipe's objects"
  grep -q "'../../local-charts/$c'" "$work/helm/components/$c/install.sh" ||
    fail "$c: install.sh does not install the wrapper chart"
done
grep -q '^kind: ClusterQueue$' "$work/kueue-gpu-queues.yaml" || fail "kustomize output lacks the ClusterQueue"
grep -q 'app.kubernetes.io/part-of: gpufleet-recipe' "$work/kueue-gpu-queues.yaml" ||
  fail "kustomize labels were not applied"

kubectl apply --dry-run=server -f "$work/gke-nccl-tcpxo.yaml" >/dev/null ||
  fail "the TCPXO installer was rejected by the API server"
# Without Kueue installed its kinds are unknown: the server must say exactly that.
if out=$(kubectl apply --dry-run=server -f "$work/kueue-gpu-queues.yaml" 2>&1); then
  fail "Kueue objects applied without Kueue's CRDs"
fi
[[ $out == *'no matches for kind "ClusterQueue"'* ]] || fail "unexpected error for the Kueue objects: $out"

# The other deployers: the argocd-helm chart (with --repo-url) lints and renders an
# Application whose source is the wrapper chart's path; Flux's HelmRelease decodes strictly
# with a GitRepository source; helmfile names the local chart.
"$gpufleet" bundle -r "$work/recipe.yaml" --deployer argocd-helm \
  --repo-url https://git.example.com/gpu.git --repo-path clusters/prod -o "$work/argocd-helm" >/dev/null
"$helm" lint --strict "$work/argocd-helm" >/dev/null || fail "helm lint argocd-helm"
"$helm" template r "$work/argocd-helm" --namespace argocd >"$work/apps.yaml" || fail "helm template argocd-helm"
grep -q 'path: clusters/prod/local-charts/gke-nccl-tcpxo' "$work/apps.yaml" ||
  fail "argocd-helm: no Application reads the TCPXO wrapper chart"
"$gpufleet" bundle -r "$work/recipe.yaml" --deployer flux -o "$work/flux" >/dev/null
fluxcheck="${FLUXCHECK_BIN:-$repo/build/bin/fluxcheck}"
if [[ -x "$fluxcheck" ]]; then
  "$fluxcheck" "$work/flux/sources" "$work/flux/releases" >/dev/null || fail "fluxcheck flux bundle"
fi
grep -q 'kind: GitRepository' "$work/flux/releases/gke-nccl-tcpxo.yaml" || fail "flux: no GitRepository source"
"$gpufleet" bundle -r "$work/recipe.yaml" --deployer helmfile -o "$work/helmfile" >/dev/null
grep -q 'chart: ./local-charts/gke-nccl-tcpxo' "$work/helmfile/helmfile.yaml" || fail "helmfile: no local chart"

# The digest covers the rendered output: an edited kustomize directory changes it.
mkdir -p "$work/data/manifests/kueue-gpu-queues"
cp "$repo/data/recipes/manifests/kueue-gpu-queues/"*.yaml "$work/data/manifests/kueue-gpu-queues/"
sed -i 's/nominalQuota: "10000"/nominalQuota: "64"/' "$work/data/manifests/kueue-gpu-queues/cluster-queue.yaml"
"$gpufleet" recipe --service gke --accelerator h100 --os cos --intent training --platform kubeflow \
  --mixin kueue-gpu-queues --data "$work/data" -o "$work/edited.yaml"
d1=$(grep -m1 'digest:' "$work/recipe.yaml"); d2=$(grep -m1 'digest:' "$work/edited.yaml")
[[ $d1 != "$d2" ]] || fail "editing the kustomize directory left the digest unchanged"
grep -q 'nominalQuota: "64"' "$work/edited.yaml" || fail "the --data kustomize directory was not used"
echo "local wrapper charts: ok"
