#!/usr/bin/env bash
# sentinel against a fresh kube-local (docs/sentinel.md "Benchmark", docs/performance.md):
#   scripts/bench-sentinel.sh [BUILD_DIR] [NODES RATE SECONDS BURST STORM THRESHOLD DRAIN]
#     the API part: the reference write rate with no controller, fault -> cordon latency at a
#     steady event rate, quarantine nodes/s, drain nodes/s, controller RSS, a breaker storm;
#   scripts/bench-sentinel.sh [BUILD_DIR] sim [NODES RATE SECONDS THRESHOLD]
#     the real path: simulator -> agents (journal) -> API -> controller, a fault storm, agent
#     cost per node, journal vs API counts.
# Exits 1 when a count check fails. BUILD_DIR (default build/release) must hold gpufleet and
# sentinel_live_bench (ninja -C BUILD_DIR gpufleet sentinel_live_bench).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
shift || true
mode=api
if [[ ${1:-} == sim || ${1:-} == api ]]; then
  mode=$1
  shift
fi
bin="${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}"
ninja -C "$build" gpufleet sentinel_live_bench >/dev/null
dir="$(mktemp -d)"
trap '"$bin" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$bin" up --data-dir "$dir" --detach >/dev/null
# As the chart runs controllers (deploy/chart/gpufleet/templates/controllers.yaml).
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-1}"
if [[ $mode == api && $# -eq 0 ]]; then set -- 5000; fi
"$build/tests/integration/sentinel/sentinel_live_bench" "$mode" "$dir/admin.kubeconfig" \
  "$build/bin/gpufleet" "$root" "$@"
