#!/usr/bin/env bash
# sentinel against a fresh kube-local (docs/sentinel.md, docs/performance.md): fault -> cordon
# latency at a steady event rate, quarantine nodes/s, controller RSS, a breaker storm.
#   scripts/bench-sentinel.sh [BUILD_DIR] [NODES] [RATE] [SECONDS] [BURST] [STORM] [THRESHOLD]
# BUILD_DIR (default build/release) must hold gpufleet and sentinel_live_bench
# (ninja -C BUILD_DIR gpufleet sentinel_live_bench).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
shift || true
bin="${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}"
ninja -C "$build" gpufleet sentinel_live_bench >/dev/null
dir="$(mktemp -d)"
trap '"$bin" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$bin" up --data-dir "$dir" --detach >/dev/null
# As the chart runs controllers (deploy/chart/gpufleet/templates/controllers.yaml).
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-1}"
"$build/tests/integration/sentinel/sentinel_live_bench" "$dir/admin.kubeconfig" \
  "$build/bin/gpufleet" "$root" "${@:-5000}"
