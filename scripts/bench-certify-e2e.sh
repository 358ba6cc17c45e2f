#!/usr/bin/env bash
# End-to-end wall time of a diagnose Certification on the simulator (docs/performance.md,
# "certify: end to end"): a fresh kube-local (etcd, apiserver, controller-manager, scheduler),
# NODES simulated HGX H100 nodes (`gpufleet sim`, --time-scale 40 so a 20 s nccl-tests run takes
# half a second), K of them with half their network bandwidth (and, with LINKS=1, a degraded
# link between two healthy nodes), `gpufleet controller --controllers=certify`, and one
# Certification: communication/nccl-all-reduce, scale diagnose, busBandwidthGBps >= 300.
# Prints the wall time, rounds, tests, the nodes found and the infrastructure findings.
#   scripts/bench-certify-e2e.sh [NODES=256] [K=4] [LINKS=0]
# Needs the gpufleet binary (BENCH_BUILD, default build/release) and kube-local (KUBE_LOCAL_BIN,
# default build/bin/kube-local). Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes="${1:-256}"
k="${2:-4}"
links="${3:-0}"
build="${BENCH_BUILD:-build/release}"
kube_local="${KUBE_LOCAL_BIN:-build/bin/kube-local}"
gpufleet="$build/bin/gpufleet"
for b in "$kube_local" "$gpufleet"; do
  [[ -x "$b" ]] || { echo "bench-certify-e2e: $b not found (make build kube-local)" >&2; exit 1; }
done
kubectl() { "$kube_local" kubectl --kubeconfig "$dir/admin.kubeconfig" "$@"; }
dir="$(mktemp -d /tmp/bench-certify.XXXXXX)"
cleanup() {
  [[ -n "${ctl:-}" ]] && kill "$ctl" 2>/dev/null || true
  "$gpufleet" sim stop --state-dir "$dir/sim" >/dev/null 2>&1 || true
  "$kube_local" down --data-dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$kube_local" up --data-dir "$dir" --detach >/dev/null
cat >"$dir/fleet.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: bench}
spec:
  seed: 7
  pools:
  - name: h100
    count: $nodes
    namePattern: "h100-{index:04}"
    gpu: {product: h100}
YAML
"$gpufleet" sim --fleet "$dir/fleet.yaml" --kubeconfig "$dir/admin.kubeconfig" \
  --state-dir "$dir/sim" --time-scale 40 --kubelet-listen 127.0.0.1:0 \
  --kubelet-cert "$dir/pki/kubelet-serving.crt" --kubelet-key "$dir/pki/kubelet-serving.key" \
  --kubelet-client-ca "$dir/pki/ca.crt" --detach >/dev/null
# Every node registered and Ready before the Certification selects its targets.
for _ in $(seq 600); do
  ready=$(kubectl get nodes -l gpufleet.io/pool=h100 --no-headers 2>/dev/null | grep -c ' Ready ' || true)
  ((ready >= nodes)) && break
  sleep 0.5
done
echo "nodes ready: $ready of $nodes"
# ... and kube-controller-manager's node lifecycle controller has lifted the not-ready taint
# (it lags the Ready condition by seconds at this scale; a tainted node would be excluded).
for _ in $(seq 600); do
  tainted=$(kubectl get nodes -l gpufleet.io/pool=h100 \
    -o jsonpath='{range .items[*]}{.spec.taints[*].key}{"\n"}{end}' 2>/dev/null |
    grep -c 'node.kubernetes.io/not-ready' || true)
  ((tainted == 0)) && break
  sleep 0.5
done
echo "nodes still tainted not-ready: $tainted"
for i in $(seq 1 "$k"); do
  n=$(printf 'h100-%04d' $(((i * 97) % nodes)))
  "$gpufleet" sim inject --state-dir "$dir/sim" --event "{node: $n, type: networkDegraded, factor: 0.5}" >/dev/null
  echo "degraded: $n"
done
if ((links > 0)); then
  # Two healthy nodes in one screen group without a degraded node (at 256: h100-0162 and
  # h100-0165; the degraded ones are 35, 97, 132, 194): the planner probes across to the pair.
  a=$(printf 'h100-%04d' $((nodes * 5 / 8 + 2)))
  b=$(printf 'h100-%04d' $((nodes * 5 / 8 + 5)))
  "$gpufleet" sim inject --state-dir "$dir/sim" \
    --event "{node: $a, type: linkDegraded, peer: $b, factor: 0.5}" >/dev/null
  echo "degraded link: $a <-> $b"
fi
# The simulator applies inbox events within half a second; wait until it has taken them all.
for _ in $(seq 60); do
  [[ -z "$(ls -A "$dir/sim/control/inbox" 2>/dev/null)" ]] && break
  sleep 0.5
done
kubectl apply --server-side -f deploy/crds/ >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/certifications.gpufleet.io >/dev/null
"$gpufleet" controller --controllers=certify --kubeconfig "$dir/admin.kubeconfig" \
  --metrics-addr "" >"$dir/controller.log" 2>&1 &
ctl=$!
start=$(date +%s.%N)
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: Certification
metadata: {name: e2e, namespace: default}
spec:
  targets: {nodeSelector: {matchLabels: {gpufleet.io/pool: h100}}}
  categories:
    - name: communication/nccl-all-reduce
      scale: diagnose
      thresholds: {busBandwidthGBps: "value >= 300.0"}
YAML
for _ in $(seq 1800); do
  phase=$(kubectl get certification e2e -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ $phase == Passed || $phase == Failed ]] && break
  sleep 0.5
done
end=$(date +%s.%N)
echo "certification: $phase after $(echo "$end - $start" | bc) s wall ($nodes nodes, $k degraded, $links links)"
kubectl get certification e2e -o jsonpath='nodes: {.status.nodeCount}, excluded: {.status.excludedCount}, failed: {.status.failedCount}, {.status.categories[0].message}{"\n"}'
kubectl get certification e2e -o jsonpath='{range .status.failedNodes[*]}found: {.node} {.reason}{"\n"}{end}'
kubectl get certification e2e -o jsonpath='{range .status.infrastructure[*]}infrastructure: {.message}{"\n"}{end}'
excluded=$(kubectl get certification e2e -o jsonpath='{range .status.excluded[*]}excluded: {.node} {.reason} {.message}{"\n"}{end}')
head -5 <<<"$excluded"
# The report an operator reads: every node's verdict, the rounds, tests and wall time.
"$gpufleet" certify report e2e -n default --kubeconfig "$dir/admin.kubeconfig"
