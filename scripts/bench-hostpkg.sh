#!/usr/bin/env bash
# hostpkg at fleet scale (docs/performance.md, "hostpkg controller"): a fresh kube-local, a
# simulated fleet of NODES nodes, the hostpkg controller as the chart runs it (one process,
# MALLOC_ARENA_MAX=1), and the example sysctl package's stages (apply, config, restart,
# post-interrupt; 200 ms each in the simulator) rolled out with POLICY:
#   exponential  budget 10%, exponential batches from 10, growth 2 (the 5,000-node figure)
#   batches10    budget 10, fixed batches of 10 (the 100-node side-by-side figure)
# Prints: wall time, controller CPU seconds (total and per rolled node), peak RSS, API writes
# per node and package (the controller's own counter), and the overhead from a batch's last
# node done to the next batch's first start (from the controller's log).
# Usage: scripts/bench-hostpkg.sh NODES [exponential|batches10]
# Env: GPUFLEET_BIN (default build/release/bin/gpufleet), KUBE_LOCAL_BIN (build/bin/kube-local),
# BENCH_LIMIT_S (stop the rollout after that many seconds and report over the nodes done by
# then: for machines that cannot finish a large rollout in reasonable time; default none),
# BENCH_LOG (copy the controller's log there, for looking into the batch overhead),
# BENCH_PERF (record the controller with `perf record -g` into that file during the rollout),
# BENCH_METRICS_PORT (the controller's metrics port, default 18190: two runs side by side),
# BENCH_SAMPLES (write "seconds rss_kB hwm_kB cpu_s reconciles done" every 5 s there: when the
# peak is set, and whether passes happen while nothing changes), BENCH_SIM_WORKERS (64) and
# BENCH_LEASE_RENEW (30s): the simulator's concurrency and lease renewal interval,
# BENCH_NODE_GRACE (180s): kube-controller-manager's --node-monitor-grace-period.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes="${1:?usage: bench-hostpkg.sh NODES [exponential|batches10]}"
policy="${2:-exponential}"
gpufleet="${GPUFLEET_BIN:-build/release/bin/gpufleet}"
kube_local="${KUBE_LOCAL_BIN:-build/bin/kube-local}"
port="${BENCH_METRICS_PORT:-18190}"
work="$(mktemp -d)"
kc="$work/kube/admin.kubeconfig"
k() { "$kube_local" kubectl --kubeconfig "$kc" "$@"; }
cleanup() {
  [[ -n "${ctl:-}" ]] && kill "$ctl" 2>/dev/null || true
  [[ -n "${BENCH_LOG:-}" && -f "$work/controller.log" ]] && cp "$work/controller.log" "$BENCH_LOG"
  "$gpufleet" sim stop --state-dir "$work/sim" >/dev/null 2>&1 || true
  "$kube_local" down --data-dir "$work/kube" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The node lifecycle controller's grace before NotReady: 40 s by default, which a loaded
# 2-core machine cannot keep for 5,000 leases (below); NotReady nodes count out against the
# budget and hold the rollout, which is the simulator's limit here, not the controller's.
"$kube_local" up --data-dir "$work/kube" --detach \
  --controller-manager-arg=--node-monitor-grace-period="${BENCH_NODE_GRACE:-180s}" >/dev/null
# remediation: sentinel's incidents, which the controller watches (its cache never syncs without it).
k apply --server-side -f deploy/crds/hostpackageset.yaml -f deploy/crds/deploymentpolicy.yaml \
  -f deploy/crds/remediation.yaml -f deploy/crds/validationrequest.yaml >/dev/null
k wait --for=condition=Established --timeout=60s crd/hostpackagesets.gpufleet.io >/dev/null
k create namespace hostpkg-bench >/dev/null
cat >"$work/fleet.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: bench}
spec:
  seed: 1
  pools:
  - {name: b, count: $nodes, namePattern: "b-{index:05}", gpu: {product: h100}}
YAML
cat >"$work/behaviours.yaml" <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
behaviours:
- name: sysctl-package
  match: {image: "bench.example/*"}
  startDelay: 0s
  duration: 200ms
  hostStep:
    effects:
      apply: {files: {/etc/sysctl.d/60-sysctl-90-gpu.conf: "vm.max_map_count = 1048576\n"}}
      config: {sysctls: {vm.max_map_count: "1048576"}}
YAML
# Lease renewals: on the loaded shared machine the API server renewed ~92-100 leases/s
# (16 or 64 simulator workers alike), so 5,000 nodes renewed every ~50 s went NotReady under
# the default 40 s grace and, counted out, held the rollout (495 NotReady, budget 500). A 30 s
# renewal asks for less and the grace above covers the rest; the controller watches no
# Leases, so its figures are unchanged.
"$gpufleet" sim --fleet "$work/fleet.yaml" --behaviours "$work/behaviours.yaml" \
  --kubeconfig "$kc" --state-dir "$work/sim" --status-report 10m \
  --workers "${BENCH_SIM_WORKERS:-64}" --lease-renew "${BENCH_LEASE_RENEW:-30s}" --detach >/dev/null ||
  echo "(the simulator is still registering after its 2 minutes; waiting up to 10)"
for _ in $(seq 600); do
  n=$(k get nodes --no-headers 2>/dev/null | wc -l)
  ((n >= nodes)) && break
  sleep 1
done
if ((n < nodes)); then echo "error: only $n of $nodes nodes registered" >&2; exit 1; fi

MALLOC_ARENA_MAX=1 "$gpufleet" controller --controllers=hostpkg --kubeconfig "$kc" \
  --metrics-addr 127.0.0.1:$port --set hostpkg.namespace=hostpkg-bench \
  --set hostpkg.runner-image=bench.example/gpufleet:bench >"$work/controller.log" 2>&1 &
ctl=$!
for _ in $(seq 300); do curl -sf http://127.0.0.1:$port/readyz >/dev/null && break; sleep 0.5; done
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$ctl/stat"; }
idle_rss=$(awk '/VmRSS/ {print $2}' "/proc/$ctl/status")
cpu0=$(cpu)
reconciles() {
  curl -s http://127.0.0.1:$port/metrics |
    awk '/^gpufleet_controller_reconcile_total\{controller="hostpkg"/ {s += $2} END {print s + 0}'
}
if [[ -n "${BENCH_SAMPLES:-}" ]]; then
  (
    t0=$SECONDS
    while kill -0 "$ctl" 2>/dev/null; do
      echo "$((SECONDS - t0)) $(awk '/VmRSS/ {r = $2} /VmHWM/ {h = $2} END {print r, h}' \
        "/proc/$ctl/status") $(cpu) $(reconciles) $(k get hostpackageset bench-sysctl \
        -o jsonpath='{.status.done}' 2>/dev/null || echo -)"
      sleep 5
    done
  ) >"$BENCH_SAMPLES" 2>/dev/null &
fi
if [[ -n "${BENCH_PERF:-}" ]]; then
  perf record -F 199 -g -o "$BENCH_PERF" -p "$ctl" >/dev/null 2>&1 &
  perf_pid=$!
fi

if [[ $policy == exponential ]]; then
  strategy='{exponential: {initialBatch: 10, growthFactor: 2}}'; budget='{percent: 10}'
else
  strategy='{fixed: {initialBatch: 10}}'; budget='{count: 10}'
fi
k apply --server-side -f - >/dev/null <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: bench}
spec:
  default: {budget: $budget, strategy: $strategy}
---
apiVersion: gpufleet.io/v1alpha1
kind: HostPackageSet
metadata: {name: bench-sysctl}
spec:
  deploymentPolicy: bench
  validation: {when: Never}   # the rollout's own cost; no certify runs here
  packages:
    sysctl:
      version: 1.0.0
      image: bench.example/sysctl
      configMap: {90-gpu.conf: "vm.max_map_count = 1048576\n"}
      configInterrupts: {"*.conf": {type: restartServices, services: [systemd-sysctl.service]}}
      interrupt: {type: restartServices, services: [systemd-sysctl.service]}
YAML
start=$(date +%s.%N)
limit="${BENCH_LIMIT_S:-0}"
limited=""
until [[ "$(k get hostpackageset bench-sysctl -o jsonpath='{.status.phase}')" == Complete ]]; do
  if ((limit > 0)) && (($(date +%s) - ${start%.*} >= limit)); then limited=1; break; fi
  sleep 1
done
end=$(date +%s.%N)
cpu1=$(cpu)
if [[ -n "${perf_pid:-}" ]]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
rolled=$nodes
if [[ -n $limited ]]; then
  rolled=$(k get hostpackageset bench-sysctl -o jsonpath='{.status.done}')
  echo "stopped after ${limit}s (BENCH_LIMIT_S): $rolled of $nodes nodes done; figures are over those"
fi
peak_rss=$(awk '/VmHWM/ {print $2}' "/proc/$ctl/status")
passes=$(reconciles)
writes=$(curl -s http://127.0.0.1:$port/metrics | awk '/^gpufleet_hostpkg_api_writes_total/ {s += $2} END {print s}')
# Overhead per batch: first start of batch b+1 minus last done of batch b (controller log).
overhead=$(awk '
  function ts(line,  t) { match(line, /time=[^ ]+/); t = substr(line, RSTART + 5, RLENGTH - 5);
    split(t, a, /[T:Z]/); return a[2] * 3600 + a[3] * 60 + a[4] }
  /hostpkg: node started/ { match($0, /batch=[0-9]+/); b = substr($0, RSTART + 6, RLENGTH - 6) + 0;
    t = ts($0); if (!(b in first) || t < first[b]) first[b] = t }
  /hostpkg: node done/ { match($0, /batch=[0-9]+/); b = substr($0, RSTART + 6, RLENGTH - 6) + 0;
    t = ts($0); if (!(b in last) || t > last[b]) last[b] = t }
  END { n = 0; m = 0; for (b in last) if ((b + 1) in first) { d = first[b + 1] - last[b];
    if (d > m) m = d; s += d; n++ } if (n) printf "%.3f mean, %.3f max over %d batches", s / n, m, n;
    else print "n/a (one batch)" }' "$work/controller.log")
awk -v n="$nodes" -v r="$rolled" -v p="$policy" -v s="$start" -v e="$end" -v c0="$cpu0" -v c1="$cpu1" \
  -v idle="$idle_rss" -v peak="$peak_rss" -v w="$writes" -v o="$overhead" -v ps="$passes" 'BEGIN {
  printf "hostpkg bench: %d nodes, %s, %d rolled\n", n, p, r
  printf "  wall %.1f s, controller CPU %.2f s (%.4f s per rolled node)\n", e - s, c1 - c0, (c1 - c0) / r
  printf "  RSS idle %.1f MB, peak %.1f MB\n", idle / 1024, peak / 1024
  printf "  API writes %d (%.1f per rolled node and package)\n", w, w / r
  printf "  reconciles (passes) of the set: %d\n", ps
  printf "  batch overhead (last done -> next first start): %s s\n", o }'
