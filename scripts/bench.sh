#!/usr/bin/env bash
# Runs every benchmark binary of the release build. Extra arguments go to each binary
# (for example --benchmark_filter=Cel).
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
benches=(build/release/bench/*_bench)
if ((${#benches[@]} == 0)); then
  echo "bench: no benchmark binaries in build/release/bench (run 'make build' first)" >&2
  exit 1
fi
for b in "${benches[@]}"; do
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true "$@"
done
# The informer cache beside client-go on a fresh kube-local, 1,000 Nodes (docs/performance.md).
echo "== cache vs client-go (scripts/bench-cache.sh 1000)"
scripts/bench-cache.sh 1000
# sentinel: fault -> cordon latency, quarantine rate, RSS, breaker storm (docs/sentinel.md).
echo "== sentinel (scripts/bench-sentinel.sh build/release 5000 500 5)"
scripts/bench-sentinel.sh build/release 5000 500 5

# hostpkg at fleet scale: the 100-node side-by-side figure and the 5,000-node exponential run
# (docs/performance.md, "hostpkg controller").
echo "== hostpkg (scripts/bench-hostpkg.sh)"
scripts/bench-hostpkg.sh 100 batches10
scripts/bench-hostpkg.sh 5000 exponential

# goodput: ETTR and GPU-hours lost on 1,024 simulated nodes at the Llama 3 fault rate, with and
# without gpufleet (docs/goodput.md "The goodput benchmark", docs/performance.md).
echo "== goodput (scripts/bench-goodput.sh build/release)"
scripts/bench-goodput.sh build/release

# certify end to end: a diagnose Certification of 256 simulated nodes, 4 degraded (docs/performance.md).
echo "== certify diagnose e2e (scripts/bench-certify-e2e.sh 256 4)"
scripts/bench-certify-e2e.sh 256 4
