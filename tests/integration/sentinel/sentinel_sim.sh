#!/usr/bin/env bash
# The whole loop on the simulator, through the binaries as the chart runs them: a simulated
# GPU falls off the bus (Xid 79, injected into the simulator), the node agent reports it in
# NodeHealth, `gpufleet controller --controllers=sentinel` quarantines and drains the node and
# asks the simulator (its control inbox) for a reboot; the node really reboots (new boot id),
# sentinel asks certify through a ValidationRequest, this test answers it as certify would,
# and the node is released.
# With MODE `agent`, sentinel asks as it does on a real cluster — the Node annotation
# sentinel.gpufleet.io/remediation-request — and the node agent carries the reboot out (through
# the simulator's inbox, its executor in simulation), once.
# Usage: sentinel_sim.sh REPO_ROOT [MODE]   (MODE: sim (default) or agent; env: KUBECONFIG,
#        GPUFLEET_BIN, KUBE_LOCAL_BIN)
set -euo pipefail
repo="$1"
mode="${2:-sim}"
[[ $mode == sim || $mode == agent ]] || { echo "sentinel_sim: MODE '$mode': use sim or agent" >&2; exit 2; }
test_name=sentinel_sim
policy=sentinel-sim
fail_context=$mode
# shellcheck source=sentinel_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/sentinel_env.sh"

apply_sentinel_crds
start_fleet 4  # the example's H100 pool, fewer nodes (and its H200 pool)
node=${all[0]}
boot_before=$(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.bootID}')
[[ -n $boot_before ]] || fail "node $node has no boot id"

kubectl apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: sentinel-sim}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     taint: "nvidia.com/gpu-error=fatal:NoSchedule", remediate: reboot}
  breaker: {maxNodes: 2}
  drain: {deadlineSeconds: 10, terminatingTimeoutSeconds: 5}
  remediation: {maxAttempts: 2, timeoutSeconds: 60}
  validation: {newNodes: false}
YAML

"$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --fsync=false --run-for 120s \
  --sim-reboot-down 2s >"$work/agent.log" 2>&1 &
agent_pid=$!
remediate=(--set sentinel.sim-state-dir="$state" --set sentinel.sim-reboot-down=2s)
[[ $mode == agent ]] && remediate=()  # the annotation, for the agent
"$gpufleet" controller --controllers=sentinel --metrics-addr 127.0.0.1:0 \
  --set sentinel.policy=sentinel-sim "${remediate[@]}" >"$work/controller.log" 2>&1 &
controller_pid=$!

"$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: xid, gpu: 3, code: 79}" >/dev/null
wait_phase() {  # seconds phase...
  local limit=$1; shift
  local deadline=$((SECONDS + limit)) p want
  while ((SECONDS < deadline)); do
    p=$(phase "$node")
    for want in "$@"; do [[ $p == "$want" ]] && return 0; done
    sleep 0.3
  done
  fail "node $node: phase '${p:-none}' after ${limit}s, want $*"
}
wait_phase 40 Quarantined Draining Remediating Validating
[[ $(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}') == true ]] || fail "$node not cordoned"
[[ $(kubectl get node "$node" -o jsonpath='{.metadata.annotations.gpufleet\.io/cordon-owners}') == sentinel ]] \
  || fail "$node: cordon owners not 'sentinel'"
wait_phase 60 Validating
boot_after=$(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.bootID}')
[[ $boot_after != "$boot_before" ]] || fail "$node did not reboot (boot id unchanged)"
ls "$state/control/done" | grep . >/dev/null || fail "no control event applied by the simulator"
grep -l 'type: reboot' "$state"/control/done/* >/dev/null || fail "no reboot in the simulator's control inbox"
if [[ $mode == agent ]]; then
  req=$(kubectl get node "$node" -o jsonpath='{.metadata.annotations.sentinel\.gpufleet\.io/remediation-request}')
  grep -q '"action":"reboot"' <<<"$req" || fail "$node: no remediation request annotation: '$req'"
  reboots=$(grep -l "node: $node" "$state"/control/done/* | xargs grep -l 'type: reboot' | wc -l)
  ((reboots == 1)) || fail "$node: the agent asked the simulator for $reboots reboots, want 1"
  st=""
  for _ in $(seq 1 50); do
    st=$(kubectl get nodehealth "$node" -o jsonpath='{.status.remediation.state}/{.status.remediation.action}')
    [[ $st == Succeeded/reboot ]] && break
    sleep 0.3
  done
  [[ $st == Succeeded/reboot ]] || fail "NodeHealth $node status.remediation is '$st', want Succeeded/reboot"
fi

pass_validation "$node"  # play certify
wait_phase 30 Released
[[ $(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}') != true ]] || fail "$node still cordoned after release"
n=$(kubectl get remediations -l "sentinel.gpufleet.io/node=$node" --no-headers | wc -l)
((n == 1)) || fail "$n incidents for $node, want 1"
# The operator's view: breaker state and incidents by phase, as JSON and as a table.
status=$("$gpufleet" sentinel status --policy sentinel-sim -o json)
grep -q '"state":"Closed"' <<<"$status" || fail "sentinel status: breaker not Closed: $status"
grep -qE '"Released":[1-9]' <<<"$status" || fail "sentinel status: no Released incident: $status"
"$gpufleet" sentinel status | grep -E '^  sentinel-sim +-?[0-9]+ +[0-9]+ +Closed' >/dev/null \
  || fail "sentinel status table has no row for the policy: $("$gpufleet" sentinel status)"
# A policy that does not exist is an error, not an empty report (exit 5: NotFound).
rc=0
"$gpufleet" sentinel status --policy nope 2>"$work/nope.err" >/dev/null || rc=$?
((rc == 5)) || fail "sentinel status --policy nope: exit $rc, want 5"
grep -q 'no SentinelPolicy of that name' "$work/nope.err" \
  || fail "sentinel status --policy nope: $(cat "$work/nope.err")"
echo "sentinel_sim: PASS ($mode: $node: Xid 79 → cordon → drain → reboot $boot_before → $boot_after → validated → released)"
