#!/usr/bin/env bash
# The simulated kubelet at fleet scale against a fresh kube-local (docs/performance.md, "sim"):
#   tests/integration/sim/run-sim-bench.sh GPUFLEET_BIN [NODES] [WINDOW_S] [PODS]
# Registers NODES simulated H100 nodes, then measures over WINDOW_S seconds of steady state the
# lease renewals per second and the simulator's CPU and RSS, then creates PODS pods bound
# round-robin to the nodes (spec.nodeName set, so the scheduler is not measured) and times
# until the simulator has started them all, then SIGTERM (every Node and Lease deleted).
# Prints one "name value" line per figure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
gpufleet="${1:?usage: $0 GPUFLEET_BIN [NODES] [WINDOW_S] [PODS]}"
nodes="${2:-5000}"
window="${3:-60}"
pods="${4:-1000}"
bin="${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}"
port="${SIM_BENCH_PORT:-19473}"
dir="$(mktemp -d /tmp/sim-bench.XXXXXX)"
sim_pid=""
cleanup() {
  if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
  "$bin" down --data-dir "$dir/kl" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$bin" up --data-dir "$dir/kl" --detach >/dev/null
export KUBECONFIG="$dir/kl/admin.kubeconfig"
kubectl() { "$bin" kubectl "$@"; }

cat >"$dir/fleet.yaml" <<EOF
apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: bench}
spec:
  seed: 7
  pools:
  - name: h100
    count: $nodes
    namePattern: "h100-{index:05}"
    gpu: {product: h100}
EOF
# Pods start at once and run until deleted: the kubelet's own work, not simulated work, counts.
cat >"$dir/behaviours.yaml" <<EOF
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
behaviours:
- name: instant-service
  match: {restartPolicy: Always}
  startDelay: 0s
  duration: forever
EOF

status() { curl -sf "http://127.0.0.1:$port/status"; }
field() { status | sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" | head -1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$sim_pid/stat"; }
now() { date +%s.%N; }

t0=$(now)
"$gpufleet" sim --fleet "$dir/fleet.yaml" --behaviours "$dir/behaviours.yaml" --workers 16 \
  --listen "127.0.0.1:$port" >"$dir/sim.log" 2>&1 &
sim_pid=$!
until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
  kill -0 "$sim_pid" 2>/dev/null || { tail -20 "$dir/sim.log"; exit 1; }
  sleep 0.2
done
echo "register_s $(echo "$(now) - $t0" | bc)"

sleep 15  # first renewals and status reports settle
hz=$(getconf CLK_TCK)
r0=$(field leaseRenewals); c0=$(cpu_ticks); w0=$(now)
sleep "$window"
r1=$(field leaseRenewals); c1=$(cpu_ticks); w1=$(now)
echo "lease_renewals_per_s $(echo "scale=1; ($r1 - $r0) / ($w1 - $w0)" | bc)"
echo "sim_cpu_cores $(echo "scale=3; ($c1 - $c0) / $hz / ($w1 - $w0)" | bc)"
echo "sim_rss_mb $(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$sim_pid/status")"
echo "api_errors $(field apiErrors)"

# Pods bound directly to nodes, created by 8 kubectl processes in parallel.
for part in 0 1 2 3 4 5 6 7; do
  : >"$dir/pods-$part.yaml"
done
for ((i = 0; i < pods; i++)); do
  printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: bench-%05d, namespace: default}\nspec:\n  nodeName: h100-%05d\n  containers: [{name: c, image: registry.k8s.io/pause:3.9}]\n' \
    "$i" "$((i % nodes))" >>"$dir/pods-$((i % 8)).yaml"
done
s0=$(field podsStarted)
p0=$(now)
creators=()
for part in 0 1 2 3 4 5 6 7; do
  kubectl create -f "$dir/pods-$part.yaml" >/dev/null &
  creators+=($!)
done
for c in "${creators[@]}"; do wait "$c"; done
p1=$(now)
until [ "$(field podsStarted)" -ge $((s0 + pods)) ]; do
  kill -0 "$sim_pid" 2>/dev/null || { tail -20 "$dir/sim.log"; exit 1; }
  sleep 0.1
done
p2=$(now)
echo "pods_created_s $(echo "$p1 - $p0" | bc)"
echo "pods_running_s $(echo "$p2 - $p0" | bc)"
echo "pods_started_per_s $(echo "scale=1; $pods / ($p2 - $p0)" | bc)"
echo "pods_last_start_after_create_s $(echo "$p2 - $p1" | bc)"

d0=$(now)
kill -TERM "$sim_pid"
wait "$sim_pid" || true
sim_pid=""
echo "remove_s $(echo "$(now) - $d0" | bc)"
