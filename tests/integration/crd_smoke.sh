#!/usr/bin/env bash
# Smoke test of CRD semantics on a real apiserver: schema + CEL validation.
#   crd_smoke.sh            (env: KUBECONFIG, the lane's control plane)
set -euo pipefail

[[ $# -eq 0 && -n "${KUBECONFIG:-}" ]] || { echo "usage: KUBECONFIG=PATH $0" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
crd="$here/testdata/widget-crd.yaml"
msg="minReplicas must not exceed replicas"
ns="crd-smoke-$$-$RANDOM"
tmp="$(mktemp -d)"
fail() { echo "crd_smoke: FAIL: $*" >&2; exit 1; }
cleanup() {
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

if ! command -v kubectl >/dev/null 2>&1; then
  # Fall back to the kubectl built into kube-local.
  kl="${KUBE_LOCAL_BIN:-$here/../../build/bin/kube-local}"
  [[ -x "$kl" ]] || fail "kubectl not found in PATH and no kube-local at $kl"
  kubectl() { "$kl" kubectl "$@"; }
fi
[[ -r "$KUBECONFIG" ]] || fail "kubeconfig $KUBECONFIG not readable"

kubectl apply --server-side --field-manager=crd-smoke -f "$crd" >/dev/null \
  || fail "server-side apply of $crd failed"
kubectl wait --for=condition=Established --timeout=30s crd/widgets.smoke.gpufleet.io >/dev/null \
  || fail "CRD widgets.smoke.gpufleet.io not Established within 30s"
kubectl create namespace "$ns" >/dev/null || fail "cannot create namespace $ns"

# Discovery of a just-established CRD can lag a little; retry the valid create.
cat >"$tmp/good.yaml" <<YAML
apiVersion: smoke.gpufleet.io/v1alpha1
kind: Widget
metadata: {name: good, namespace: $ns}
spec: {replicas: 3, minReplicas: 1, mode: Fast}
YAML
ok=0
for _ in $(seq 1 20); do
  if kubectl create -f "$tmp/good.yaml" >"$tmp/good.out" 2>&1; then ok=1; break; fi
  sleep 0.5
done
(( ok )) || fail "valid Widget was rejected: $(cat "$tmp/good.out")"
[[ "$(kubectl -n "$ns" get widget good -o jsonpath='{.spec.replicas}')" == 3 ]] \
  || fail "valid Widget not readable back"

expect_reject() { # name spec-yaml expected-stderr-substring
  cat >"$tmp/$1.yaml" <<YAML
apiVersion: smoke.gpufleet.io/v1alpha1
kind: Widget
metadata: {name: $1, namespace: $ns}
spec: $2
YAML
  if kubectl create -f "$tmp/$1.yaml" >"$tmp/$1.out" 2>"$tmp/$1.err"; then
    fail "invalid Widget $1 ($2) was accepted"
  fi
  grep -qF -- "$3" "$tmp/$1.err" || fail "Widget $1 rejected without '$3': $(cat "$tmp/$1.err")"
}
expect_reject bad-cel '{replicas: 1, minReplicas: 2, mode: Safe}' "$msg"
expect_reject bad-min '{replicas: -1}' "should be greater than or equal to 0"
expect_reject bad-enum '{replicas: 1, mode: Turbo}' "Unsupported value"

kubectl -n "$ns" delete widget good >/dev/null || fail "cannot delete Widget good"
kubectl delete namespace "$ns" --wait=false >/dev/null || fail "cannot delete namespace $ns"
echo "crd_smoke: PASS (CEL rule, minimum, enum enforced by the apiserver)"
