#!/usr/bin/env bash
# `make demo`: brings up the local control plane and walks through what gpufleet does on it.
# `scripts/demo.sh down` stops it. State lives in build/demo (kept across runs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
demo_dir=$root/build/demo
kube_local=${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}
gpufleet=$root/build/release/bin/gpufleet
kubeconfig=$demo_dir/kube-local/admin.kubeconfig

if [[ ${1:-} == down ]]; then
  "$kube_local" down --data-dir "$demo_dir/kube-local"
  echo "demo: control plane stopped (data kept in $demo_dir/kube-local)"
  exit 0
fi

mkdir -p "$demo_dir"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Local control plane (etcd, kube-apiserver, controller-manager, scheduler on 127.0.0.1)"
"$kube_local" up --data-dir "$demo_dir/kube-local" --detach
echo "API server ready: $(kubectl --kubeconfig "$kubeconfig" get --raw /readyz)"
kubectl --kubeconfig "$kubeconfig" version 2>/dev/null | sed -n '2p' || true

if "$gpufleet" recipe --help >/dev/null 2>&1; then
  step "2. A version-pinned recipe for EKS + H100 + Ubuntu, inference on Dynamo"
  "$gpufleet" recipe --service eks --accelerator h100 --os ubuntu --intent inference \
    --platform dynamo -o "$demo_dir/recipe.yaml"
  sed -n '1,25p' "$demo_dir/recipe.yaml"
  echo "... (full recipe: $demo_dir/recipe.yaml)"
  step "3. Bundles for every deployer"
  for d in helm argocd argocd-helm flux helmfile; do
    rm -rf "$demo_dir/bundle-$d"
    "$gpufleet" bundle -r "$demo_dir/recipe.yaml" --deployer "$d" -o "$demo_dir/bundle-$d"
    echo "$d: $(find "$demo_dir/bundle-$d" -type f | wc -l) files in $demo_dir/bundle-$d"
  done
fi

if "$gpufleet" sim --help >/dev/null 2>&1 && [[ -f examples/fleet-h100.yaml ]]; then
  step "4. A simulated H100 fleet on the control plane"
  "$gpufleet" sim --fleet examples/fleet-h100.yaml --kubeconfig "$kubeconfig" \
    --state-dir "$demo_dir/sim" --detach 2>/dev/null || true
fi

step "Reach the control plane yourself"
echo "  kubectl --kubeconfig $kubeconfig get --raw /readyz"
echo "  kubectl --kubeconfig $kubeconfig get nodes"
echo "Stop it with: make demo-down"
