#!/usr/bin/env bash
# Controller runtime benchmarks against a fresh kube-local control plane (docs/performance.md):
#   tests/integration/controller/run-controller-bench.sh BUILD_DIR [PARTS] [NODES] [SECONDS]
# BUILD_DIR is a Release build containing controller_live_bench (ninja controller_live_bench).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
build="${1:?usage: $0 BUILD_DIR [PARTS] [NODES] [SECONDS]}"
shift
bin="${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}"
dir="$(mktemp -d /tmp/controller-bench.XXXXXX)"
trap '"$bin" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$bin" up --data-dir "$dir" --detach >/dev/null
# As the chart runs controllers (deploy/chart/gpufleet/templates/controllers.yaml).
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-1}"
"$build/tests/integration/controller/controller_live_bench" "$dir/admin.kubeconfig" "$@"
