#!/usr/bin/env bash
# `make demo`'s hostpkg part (scripts/demo.d/30-hostpkg.sh), sourced as scripts/demo.sh sources
# it, against the test kube-local: the demo's simulated fleet (examples/fleet-h100.yaml), the
# hostpkg controller as a process, then the part itself. It must succeed, show the progress view
# (`kubectl get hostpackagesets` columns, `gpufleet hostpkg status` bars) and have rolled the
# sysctl package out to some nodes, so the demo cannot rot unnoticed.
# Usage: demo_part_test.sh SOURCE_DIR (env: KUBECONFIG, KUBE_LOCAL_BIN, GPUFLEET_BIN).
set -euo pipefail
cd "$1"
gpufleet=${GPUFLEET_BIN:?}
kube_local=${KUBE_LOCAL_BIN:?}
kubeconfig=${KUBECONFIG:?}
work=$(mktemp -d)
demo_dir=$work
node=""
if ! command -v kubectl >/dev/null 2>&1; then kubectl() { "$kube_local" kubectl "$@"; }; fi
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
step() { printf '\n== %s\n' "$*"; }
fail() {
  echo "FAIL: $*"
  echo "--- the part's output:"
  cat "$work/part.txt" 2>/dev/null || true
  echo "--- certify's Jobs and pods:"
  k get jobs,pods -A -l gpufleet.io/certify-run -o wide 2>/dev/null | head -20 || true
  k get certifications -A 2>/dev/null | head -10 || true
  echo "--- controller log (tail):"
  tail -n 30 "$work/controller.log" 2>/dev/null || true
  exit 1
}
cleanup() {
  [[ -n "${ctl:-}" ]] && kill "$ctl" 2>/dev/null && wait "$ctl" 2>/dev/null || true
  # No controller left to uninstall on deletion: drop the finalizer, then the objects.
  k patch hostpackageset gpu-sysctl --type merge -p '{"metadata":{"finalizers":null}}' \
    >/dev/null 2>&1 || true
  k delete hostpackageset gpu-sysctl --wait=false >/dev/null 2>&1 || true
  k delete deploymentpolicy rack-safe --wait=false >/dev/null 2>&1 || true
  k -n gpufleet-system delete pods,configmaps -l hostpkg.gpufleet.io/set=gpu-sysctl \
    --wait=false >/dev/null 2>&1 || true
  k delete validationrequests -l hostpkg.gpufleet.io/set=gpu-sysctl --wait=false >/dev/null 2>&1 || true
  "$gpufleet" sim stop --state-dir "$work/sim" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# remediation, validationrequest: the controller watches sentinel's incidents and certify's
# requests and starts only once those caches sync, so on a fresh control plane without the
# CRDs it never started.
k apply --server-side -f deploy/crds/hostpackageset.yaml -f deploy/crds/deploymentpolicy.yaml \
  -f deploy/crds/remediation.yaml -f deploy/crds/validationrequest.yaml \
  -f deploy/crds/certification.yaml -f deploy/crds/workloadrun.yaml >/dev/null
k wait --for=condition=Established --timeout=60s crd/hostpackagesets.gpufleet.io >/dev/null
# A set of an earlier, interrupted run would start this one half done.
k patch hostpackageset gpu-sysctl --type merge -p '{"metadata":{"finalizers":null}}' \
  >/dev/null 2>&1 || true
k delete hostpackageset gpu-sysctl --ignore-not-found >/dev/null
"$gpufleet" sim --fleet examples/fleet-h100.yaml --kubeconfig "$kubeconfig" \
  --state-dir "$work/sim" --time-scale 4 --detach >/dev/null
fleet=$(grep -o 'count: [0-9]*' examples/fleet-h100.yaml | head -n 1 | awk '{print $2}')
for _ in $(seq 60); do
  ready=$(k get nodes --no-headers 2>/dev/null | grep -Ec '^h100-[0-9]+-[0-9]+ +Ready' || true)
  ((ready >= fleet)) && break
  sleep 1
done
((ready >= fleet)) || fail "only $ready of the demo's $fleet nodes Ready"
# A free loopback port: integration lanes run side by side, so no fixed one.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# certify answers the ValidationRequests the part's set asks for each node.
"$gpufleet" controller --controllers=hostpkg,certify --kubeconfig "$kubeconfig" \
  --metrics-addr "127.0.0.1:$port" >"$work/controller.log" 2>&1 &
ctl=$!
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.5; done

# The part itself, as demo.sh runs it (sourced, errexit on).
# shellcheck source=/dev/null
source scripts/demo.d/30-hostpkg.sh >"$work/part.txt" 2>&1 || fail "the demo part failed ($?)"

out=$work/part.txt
grep -Eq '^NAME +PHASE +PROGRESS +ACTIVE +FAILED +BLOCKED +DRIFTED' "$out" ||
  fail "no progress view (kubectl get hostpackagesets columns)"
views=$(grep -Ec '^gpu-sysctl +(Progressing|Complete) +[0-9]+/[0-9]+' "$out" || true)
((views >= 4)) || fail "the progress view showed the set $views times, want the part's 8 views"
# The last view and the status table: the rollout moved (some nodes done).
last=$(grep -E '^gpu-sysctl +(Progressing|Complete) ' "$out" | tail -n 1 | awk '{print $3}')
done_nodes=${last%%/*}
((done_nodes > 0)) || fail "no node done by the end of the part (last progress $last)"
grep -Eq '^  default +\[#*-*\] [0-9]+/[0-9]+ +active' "$out" ||
  fail "gpufleet hostpkg status printed no progress bar"
grep -Eq '^hp-[0-9a-f]+ ' "$out" || fail "no stage pod listed"
# Every node done was certified before its uncordon: certify passed its ValidationRequest.
passed=$(k get validationrequests -l hostpkg.gpufleet.io/set=gpu-sysctl \
  -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Passed$' || true)
((passed >= done_nodes)) || fail "$done_nodes nodes done but only $passed ValidationRequests passed"
grep -Eq '^hostpkg-gpu-sysctl-' "$out" || fail "the part listed no ValidationRequest"
echo "ok: demo part shows the progress view; last progress $last; $passed nodes certified"
