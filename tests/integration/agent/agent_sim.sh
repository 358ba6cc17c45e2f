#!/usr/bin/env bash
# `gpufleet agent --sim-state-dir` against a running simulator on kube-local: one agent per
# simulated node in one process, each with the node's own identity (the simulator's boot id)
# and its own journal; a simulated reboot is journalled and delivered once, across an agent
# restart (the journal and its cursor persist in the node's state directory).
# Usage: agent_sim.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN)
set -euo pipefail
repo="$1"
gpufleet="$GPUFLEET_BIN"
work="$(mktemp -d)"
state="$work/sim"
fail() { echo "agent_sim: FAIL: $*" >&2; exit 1; }
if ! command -v kubectl >/dev/null 2>&1; then
  kubectl() { "$KUBE_LOCAL_BIN" kubectl "$@"; }
fi
cleanup() {
  "$gpufleet" sim stop --state-dir "$state" >/dev/null 2>&1 || true
  for n in $(ls "$state/nodes" 2>/dev/null); do
    kubectl delete nodehealth "$n" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

kubectl apply --server-side --force-conflicts --field-manager=agent-sim -f "$repo/deploy/crds/nodehealth.yaml" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/nodehealths.gpufleet.io >/dev/null

"$gpufleet" sim --fleet "$repo/examples/fleet-h100.yaml" --state-dir "$state" --detach >/dev/null \
  || fail "simulator did not start: $(tail -5 "$state/sim.log")"
nodes=$(ls "$state/nodes" | wc -l)
(( nodes >= 10 )) || fail "simulator wrote only $nodes node directories"

boots() {  # name=bootID=lastAppliedRecordId per NodeHealth
  kubectl get nodehealth -o jsonpath='{range .items[*]}{.metadata.name}={.status.bootID}={.status.lastAppliedRecordId}{"\n"}{end}'
}
check_all() {  # expected-mark-for-rebooted-node rebooted-node
  local got n want
  got="$(boots)"
  for n in $(ls "$state/nodes"); do
    want="$n=$(cat "$state/nodes/$n/proc/sys/kernel/random/boot_id")=1"
    [[ "$n" == "$2" ]] && want="${want%=1}=$1"
    grep -qxF -- "$want" <<<"$got" || fail "NodeHealth of $n is not '$want'; have: $(grep "^$n=" <<<"$got" || echo none)"
  done
}

"$gpufleet" agent --sim-state-dir "$state" --run-for 8s --fsync=false >"$work/agent1.log" 2>&1 \
  || fail "agent exited non-zero: $(tail -5 "$work/agent1.log")"
check_all 1 none
[[ -s "$state/nodes/h100-00-01/var/lib/gpufleet/agent/journal/cursor" ]] || fail "no journal cursor for h100-00-01"

# A reboot while no agent runs: the next agent journals it (record 2) and delivers it.
old="$(cat "$state/nodes/h100-00-01/proc/sys/kernel/random/boot_id")"
"$gpufleet" sim inject --state-dir "$state" --event '{node: h100-00-01, type: reboot, down: 1s}' >/dev/null
for _ in $(seq 1 100); do
  [[ "$(cat "$state/nodes/h100-00-01/proc/sys/kernel/random/boot_id")" != "$old" ]] && break
  sleep 0.3
done
[[ "$(cat "$state/nodes/h100-00-01/proc/sys/kernel/random/boot_id")" != "$old" ]] || fail "simulated reboot did not change the boot id"
"$gpufleet" agent --sim-state-dir "$state" --run-for 6s --fsync=false >"$work/agent2.log" 2>&1 \
  || fail "agent (second run) exited non-zero: $(tail -5 "$work/agent2.log")"
check_all 2 h100-00-01
grep -q 'delivered=1 ' "$work/agent2.log" || fail "second run should deliver exactly the one boot record: $(grep status "$work/agent2.log")"
echo "agent_sim: PASS ($nodes simulated nodes, one process; reboot journalled and delivered once across an agent restart)"
