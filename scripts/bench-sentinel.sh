#!/usr/bin/env bash
# sentinel against a fresh kube-local (docs/sentinel.md "Benchmark", docs/performance.md):
#   scripts/bench-sentinel.sh [BUILD_DIR] [NODES RATE SECONDS BURST STORM THRESHOLD DRAIN]
#     the API part: the reference write rate with no controller, fault -> cordon latency at a
#     steady event rate, quarantine nodes/s, drain nodes/s, controller RSS, a breaker storm;
#   scripts/bench-sentinel.sh [BUILD_DIR] sim [NODES RATE SECONDS THRESHOLD]
#     the real path: simulator -> agents (journal) -> API -> controller, a fault storm, agent
#     cost per node, journal vs API counts;
#   scripts/bench-sentinel.sh [BUILD_DIR] ref [NODES THREADS...]
#     the API server alone: NodeHealth status writes/s by writer threads, one client or one
#     each, as admin or as agents with pod-bound tokens, without and with the agents' admission
#     policy (the ceiling of the other modes, and where it comes from).
# The control plane (kube-local) is provisioned by SENTINEL_BENCH_ETCD:
#   disk      (default) etcd on the machine's disk with fsync, as tests and the demo run it;
#   no-fsync  etcd --unsafe-no-fsync: a BENCH-ONLY setting standing in for a production
#             control plane's disk (local NVMe, fsync in well under a millisecond), for
#             machines whose disk fsync is what limits the API server (docs/performance.md);
#   tmpfs     etcd's data dir in /dev/shm (fsync is free there; same purpose, same caveat).
# and SENTINEL_BENCH_APISERVER_ARGS (e.g. "--max-mutating-requests-inflight=400"). Both are
# printed first and belong next to every figure they produced.
# Exits 1 when a count check fails. BUILD_DIR (default build/release) must hold gpufleet and
# sentinel_live_bench (ninja -C BUILD_DIR gpufleet sentinel_live_bench).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
shift || true
mode=api
if [[ ${1:-} == sim || ${1:-} == api || ${1:-} == ref ]]; then
  mode=$1
  shift
fi
bin="${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}"
ninja -C "$build" gpufleet sentinel_live_bench >/dev/null
etcd="${SENTINEL_BENCH_ETCD:-disk}"
up_args=()
case "$etcd" in
  disk) dir="$(mktemp -d)" ;;
  no-fsync)
    dir="$(mktemp -d)"
    up_args+=(--etcd-arg=--unsafe-no-fsync)
    ;;
  tmpfs) dir="$(mktemp -d -p /dev/shm)" ;;
  *)
    echo "SENTINEL_BENCH_ETCD='$etcd' is not known; use one of disk, no-fsync, tmpfs" >&2
    exit 2
    ;;
esac
for a in ${SENTINEL_BENCH_APISERVER_ARGS:-}; do up_args+=("--apiserver-arg=$a"); done
echo "control plane: kube-local, etcd $etcd$([[ $etcd != disk ]] && echo ' (BENCH-ONLY setting, not how tests or the demo run)'), apiserver args: ${SENTINEL_BENCH_APISERVER_ARGS:-none}"
trap '"$bin" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$bin" up --data-dir "$dir" --detach "${up_args[@]}" >/dev/null
# As the chart runs controllers (deploy/chart/gpufleet/templates/controllers.yaml).
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-1}"
if [[ $mode == api && $# -eq 0 ]]; then set -- 5000; fi
"$build/tests/integration/sentinel/sentinel_live_bench" "$mode" "$dir/admin.kubeconfig" \
  "$build/bin/gpufleet" "$root" "$@"
