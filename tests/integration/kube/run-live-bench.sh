#!/usr/bin/env bash
# Kube client benchmarks against a fresh kube-local control plane (see docs/performance.md):
#   tests/integration/kube/run-live-bench.sh BUILD_DIR [NODES] [RATE] [SECONDS]
# BUILD_DIR is a Release build containing kube_live_bench (ninja kube_live_bench).
# With KUBE_LIVE_BENCH_KUBECONFIG set, it uses that cluster instead of a fresh kube-local
# (the 5,000 bench Nodes are created once and reused).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
build="${1:?usage: $0 BUILD_DIR [NODES] [RATE] [SECONDS]}"
shift
if [[ -n "${KUBE_LIVE_BENCH_KUBECONFIG:-}" ]]; then
  exec "$build/tests/integration/kube/kube_live_bench" "$KUBE_LIVE_BENCH_KUBECONFIG" "$@"
fi
bin="${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}"
dir="$(mktemp -d /tmp/kube-live-bench.XXXXXX)"
trap '"$bin" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$bin" up --data-dir "$dir" --detach >/dev/null
"$build/tests/integration/kube/kube_live_bench" "$dir/admin.kubeconfig" "$@"
