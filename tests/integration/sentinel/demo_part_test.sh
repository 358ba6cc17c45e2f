#!/usr/bin/env bash
# `make demo`'s sentinel part (scripts/demo.d/20-sentinel.sh), sourced as scripts/demo.sh sources
# it, against the test kube-local: a small copy of the demo fleet, the node agents, and the
# sentinel and certify controllers (the real certify answers sentinel's ValidationRequest). The
# part must close the loop (fault → cordon → drain → reboot → certify → Released, the node back
# in service) and report a fault → cordon latency of the controllers, not of their start-up, so
# the demo cannot rot unnoticed.
# Usage: demo_part_test.sh REPO_ROOT (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN).
set -euo pipefail
repo="$1"
cd "$repo"
test_name=sentinel_demo_part
policy=default
# shellcheck source=sentinel_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/sentinel_env.sh"
kubeconfig=${KUBECONFIG:?}
demo_dir=$work  # the part injects through $demo_dir/sim: sentinel_env.sh's $state
step() { printf '\n== %s\n' "$*"; }
cleanup_extra() {
  kubectl delete certifications -l gpufleet.io/validation-request --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete namespace train --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete configmaps -n gpufleet-system -l goodput.gpufleet.io/job-namespace=train --ignore-not-found >/dev/null 2>&1 || true
}

apply_sentinel_crds
for f in certification workloadrun; do
  kubectl apply --server-side --force-conflicts --field-manager="$test_name" -f "deploy/crds/$f.yaml" >/dev/null
done
kubectl wait --for=condition=Established --timeout=30s crd/certifications.gpufleet.io >/dev/null
start_fleet 4 0
node=${all[0]}
"$gpufleet" agent --sim-state-dir "$state" --fsync=false >"$work/agent.log" 2>&1 &
agent_pid=$!
kubectl create namespace gpufleet-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
"$gpufleet" controller --controllers=sentinel,certify,goodput --metrics-addr 127.0.0.1:0 \
  --set sentinel.sim-state-dir="$state" >"$work/controller.log" 2>&1 &
controller_pid=$!

# The part itself, as demo.sh runs it (sourced, errexit on).
# shellcheck source=/dev/null
source scripts/demo.d/20-sentinel.sh >"$work/part.txt" 2>&1 || { cat "$work/part.txt" >&2; fail "the demo part failed"; }
out=$work/part.txt
show() {
  cat "$out" >&2
  echo "--- certify's pods and Jobs" >&2
  kubectl get jobs,pods -A -l gpufleet.io/certify-run -o wide >&2 || true
  kubectl get pods -A -l gpufleet.io/certify-run -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.status.conditions}{"\n"}{end}' >&2 || true
  kubectl get certifications -A -o yaml >&2 | tail -n 40 || true
}
grep -q "the loop is closed: $node was quarantined, drained, rebooted, certified" "$out" ||
  { show; fail "the part did not close the loop"; }
# Draining and Remediating can pass between two polls (a drain of an empty node takes
# milliseconds), so those steps are checked in the incident's record, the phases that last by
# the part's polling.
for p in Validating Released; do
  grep -Eq "^  $p " "$out" || { show; fail "the part never showed phase $p"; }
done
grep -Eq "^  drain +[0-9]{4}-" "$out" || { show; fail "the record shows no drain"; }
grep -Eq "^  reboot +requested [0-9]{4}-.* → " "$out" || { show; fail "the record shows no reboot"; }
latency=$(grep -o 'fault → cordon [0-9]* ms' "$out" | grep -o '[0-9]*' | head -n 1)
[[ -n $latency ]] || { show; fail "no fault → cordon latency reported"; }
# Detection (the agent reads the kernel log) plus the cordon: seconds would mean the fault was
# injected before the controllers were up.
((latency < 5000)) || { show; fail "fault → cordon $latency ms: not the controllers' latency"; }
grep -q "validation  ValidationRequest .*: Passed" "$out" || { show; fail "certify did not pass the ValidationRequest"; }
[[ -z $(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}') ]] || fail "$node still cordoned"
# The fault hit the training job's node: goodput shows the job with one GpuXid interruption.
grep -q "training job train/llama running: pod 0 on $node" "$out" || { show; fail "the fault did not go to the training job's node"; }
grep -Eq "^  train/llama +Running +16 " "$out" || { show; fail "gpufleet goodput does not show the job running on 16 GPUs"; }
grep -Eq "^  train/llama .* 1 +GpuXid" "$out" || { show; fail "gpufleet goodput does not show one GpuXid interruption"; }
echo "ok: the demo's sentinel part closed the loop; fault → cordon $latency ms; goodput saw the interruption"
