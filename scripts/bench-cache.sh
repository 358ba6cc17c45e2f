#!/usr/bin/env bash
# The informer cache side by side with client-go, on one fresh kube-local (etcd + apiserver only:
# no node controller touches the Nodes between runs):
#   scripts/bench-cache.sh [NODES=1000] [ROUNDS=3] [UPDATES=2000]
# Seeds NODES simulated H100 Nodes (sim::node_object, as `gpufleet sim` registers them), then
# each round runs, one after the other, client-go (tools/bench-client-go) and gpufleet's informer
# (tests/integration/kube/cache_bench.cc) in five forms: plain core::Value tree, compact, and
# compact with the health projection over JSON, then compact and health over protobuf. Each syncs, reports memory, then counts UPDATES Node
# updates driven by `kube_cache_bench churn`. Prints every run, then the medians and ratios.
# Needs the release build (BENCH_BUILD, default build/release; the script builds
# kube_cache_bench) and kube-local (KUBE_LOCAL_BIN, default build/bin/kube-local).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes="${1:-1000}"
rounds="${2:-3}"
updates="${3:-2000}"
build="${BENCH_BUILD:-build/release}"
kube_local="${KUBE_LOCAL_BIN:-build/bin/kube-local}"
cache_bench="$build/tests/integration/kube/kube_cache_bench"
go_bench="build/bin/bench-client-go"

if [[ ! -x "$kube_local" ]]; then
  echo "bench-cache: no kube-local at $kube_local (make kube-local, or set KUBE_LOCAL_BIN)" >&2
  exit 1
fi
ninja -C "$build" kube_cache_bench >/dev/null
# client-go side: rebuilt when its sources are newer than the binary.
if [[ ! -x "$go_bench" ]] || [[ -n "$(find tools/bench-client-go -newer "$go_bench" -type f)" ]]; then
  mkdir -p build/bin
  (cd tools/bench-client-go &&
    GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -o "../../$go_bench" .)
fi

dir="$(mktemp -d /tmp/bench-cache.XXXXXX)"
trap '"$kube_local" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$kube_local" up --data-dir "$dir" --detach --components etcd,apiserver >/dev/null
kubeconfig="$dir/admin.kubeconfig"
"$cache_bench" seed "$kubeconfig" "$nodes"

results="$dir/results"
: >"$results"
# run_one COMMAND...: starts the cache program, drives the updates once it is READY, keeps RESULT.
run_one() {
  local out="$dir/run.out"
  "$@" >"$out" 2>&1 &
  local pid=$!
  for _ in $(seq 1 6000); do
    grep -q '^READY' "$out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q '^READY' "$out"; then
    cat "$out" >&2
    kill "$pid" 2>/dev/null || true
    echo "bench-cache: $* did not get ready" >&2
    exit 1
  fi
  "$cache_bench" churn "$kubeconfig" "$updates"
  if ! wait "$pid"; then
    cat "$out" >&2
    exit 1
  fi
  grep '^RESULT' "$out" | tee -a "$results"
}

for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  run_one "$go_bench" "$kubeconfig" "$nodes" "$updates"
  run_one env BENCH_PROTOBUF=1 "$go_bench" "$kubeconfig" "$nodes" "$updates"
  for form in plain compact health compact-pb health-pb; do
    run_one "$cache_bench" cache "$kubeconfig" "$nodes" "$updates" "$form"
  done
done

# Medians per implementation, then client-go's figure over gpufleet-compact's (and -health's).
awk -v rounds="$rounds" '
  function median(impl, key,   n, i, j, t, v) {
    n = 0
    # Runs that did not see every update within the deadline print "na": left out.
    for (i = 1; i <= count[impl]; i++) if (val[impl, i, key] ~ /^[0-9.]+$/) v[++n] = val[impl, i, key]
    if (n == 0) return "na"
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return v[int((n + 1) / 2)]
  }
  {
    impl = ""
    for (f = 2; f <= NF; f++) { split($f, kv, "="); if (kv[1] == "impl") impl = kv[2] }
    if (!(impl in count)) order[++impls] = impl
    c = ++count[impl]
    for (f = 2; f <= NF; f++) { split($f, kv, "="); val[impl, c, kv[1]] = kv[2] }
  }
  END {
    split("sync_s sync_cpu_s heap_B_per_node rss_start_MB rss_MB peak_rss_MB peak_over_steady cpu_ms_per_1000_updates", keys, " ")
    printf "\nmedians of %d rounds, %s Nodes\n", rounds, val[order[1], 1, "nodes"]
    printf "| %-17s |", "impl"; for (k = 1; k <= 8; k++) printf " %s |", keys[k]; printf "\n"
    printf "|---|---|---|---|---|---|---|---|---|\n"
    for (i = 1; i <= impls; i++) {
      printf "| %-17s |", order[i]
      for (k = 1; k <= 8; k++) printf " %s |", median(order[i], keys[k])
      printf "\n"
    }
    split("gpufleet-compact gpufleet-health gpufleet-compact-pb gpufleet-health-pb", ours, " ")
    for (o = 1; o <= 4; o++) {
      theirs = ours[o] ~ /-pb$/ ? "client-go-pb" : "client-go"
      if (!(ours[o] in count) || !(theirs in count)) continue
      printf "%s / %s:", theirs, ours[o]
      split("sync_s sync_cpu_s heap_B_per_node rss_MB peak_over_steady cpu_ms_per_1000_updates", rk, " ")
      for (k = 1; k <= 6; k++) {
        d = median(ours[o], rk[k]); g = median(theirs, rk[k])
        if (d == "na" || g == "na") printf " %s na", rk[k]; else printf " %s %.2fx", rk[k], (d > 0 ? g / d : 0)
      }
      printf "\n"
    }
  }' "$results"
