#!/usr/bin/env bash
# Issue 17's fault proof (docs/hostpkg.md, "Fault runs"): on a fresh kube-local, a simulated
# fleet of 500 nodes gets a reboot package (a reboot plus a dependent service restart, coalesced
# into one interrupt) in fixed batches within a budget of 50, while the hostpkg controller
# (`gpufleet controller --controllers=hostpkg`, a child process) is killed with SIGKILL 20
# times at random points and the API server (the whole kube-local control plane, `down` / `up`
# on the same data directory) is restarted twice, each time while a controller runs. Then:
# the rollout completes, the budget was never exceeded (one LIST of every Node per sample),
# every node was interrupted exactly once (its host history, boot ID changed), none is left
# cordoned. It is the gtest case HostPkgFault.DISABLED_FleetScaleKillsAndApiRestarts, not in
# `make test` (it takes many minutes); the CI case is the 9-node hostpkg_fault_integration.
# Usage: scripts/fault-hostpkg.sh [BUILD_DIR]   (default build/release: a tree with the
#        gpufleet and hostpkg_fault_integration targets built)
# Env: KUBE_LOCAL_BIN (default build/bin/kube-local), FAULT_NODES (500), FAULT_KILLS (20),
#      FAULT_API_RESTARTS (2), FAULT_BUDGET (50), FAULT_SEED (replays the kill moments).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
kube_local="$(realpath "${KUBE_LOCAL_BIN:-build/bin/kube-local}")"
test_bin="$build/tests/integration/hostpkg/hostpkg_fault_integration"
[[ -x $test_bin ]] || { echo "fault-hostpkg: $test_bin not built; run ninja -C $build hostpkg_fault_integration gpufleet" >&2; exit 2; }
work="$(mktemp -d)"
cleanup() {
  "$kube_local" down --data-dir "$work/kube" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$kube_local" up --data-dir "$work/kube" --detach >/dev/null
KUBECONFIG="$work/kube/admin.kubeconfig" GPUFLEET_KUBE_LOCAL_DIR="$work/kube" \
  KUBE_LOCAL_BIN="$kube_local" GPUFLEET_BIN="$(realpath "$build/bin/gpufleet")" \
  "$test_bin" --gtest_also_run_disabled_tests \
  --gtest_filter=HostPkgFault.DISABLED_FleetScaleKillsAndApiRestarts
