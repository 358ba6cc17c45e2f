#!/usr/bin/env bash
# Issue 12's remediation actions through the binaries on the simulator (kube-local):
#  - MODE gpureset: a double-bit ECC error (Xid 48) on GPU 3 and a warning Xid (13) plus a
#    pending row remap on GPU 5; the rule resets GPUs on Fatal Xids. sentinel names GPU 3 only
#    (status.action.gpus and the request annotation), the agent collects a log bundle before
#    acting (its path and sha256 reach the Remediation through NodeHealth) and asks the
#    simulator for a reset of that GPU by UUID: GPU 3 recovers, GPU 5's faults stay.
#  - MODE replace: Xid 79 (fallen off the bus) with a reboot that never happens (the agent's
#    remediation is off) and maxAttempts 1: the reboot's attempts run out and the policy
#    escalates to a replacement through the "simulator" provider, which re-provisions the machine
#    and deletes the Node; the simulated kubelet registers it again (same name, new uid, new boot
#    id), sentinel cordons it and asks certify (a ValidationRequest) before it takes work. A
#    policy naming an unknown provider is refused (condition Ready=False/InvalidPolicy, the
#    message naming the field, the value and the providers there are).
#  - MODE escalate: Xid 79 (fallen off the bus) and a rule that asks for a GPU reset
#    (maxAttempts 1): the agent asks the simulator, which refuses to reset a GPU off the bus; the
#    agent's part is done, but the GPU stays Fatal past settleSeconds, so the incident escalates
#    to a reboot (request 2, status.escalations FaultPersisted), which brings the GPU back:
#    validated, released, one incident, one reset and one reboot in the simulator's inbox.
# Usage: sentinel_remed.sh REPO_ROOT MODE   (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN)
set -euo pipefail
repo="$1"
mode="${2:?MODE: gpureset, replace or escalate}"
[[ $mode == gpureset || $mode == replace || $mode == escalate ]] \
  || { echo "sentinel_remed: MODE '$mode': use gpureset, replace or escalate" >&2; exit 2; }
test_name=sentinel_remed
policy=sentinel-remed
fail_context=$mode
# shellcheck source=sentinel_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/sentinel_env.sh"

apply_sentinel_crds
start_fleet 2 0
node=${all[0]}
other=${all[1]}
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
csv_row() {  # node gpu-index: that GPU's row of the simulator's nvidia-smi CSV
  awk -F', ' -v i="$2" '$1 == i' "$state/nodes/$1/run/nvidia-smi/query-gpu.csv"
}
uuid_of() { csv_row "$1" "$2" | awk -F', ' '{print $3}'; }

if [[ $mode == gpureset ]]; then
  kubectl apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: sentinel-remed}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     remediate: gpu-reset}
  breaker: {maxNodes: 2}
  drain: {deadlineSeconds: 10}
  remediation: {maxAttempts: 2, timeoutSeconds: 60}
  validation: {newNodes: false}
YAML
  "$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --fsync=false --run-for 150s \
    >"$work/agent.log" 2>&1 &
  agent_pid=$!
  "$gpufleet" controller --controllers=sentinel --metrics-addr 127.0.0.1:0 --set sentinel.policy=$policy \
    >"$work/controller.log" 2>&1 &
  controller_pid=$!
  gpu3=$(uuid_of "$node" 3)
  gpu5=$(uuid_of "$node" 5)
  [[ $gpu3 == GPU-* && $gpu5 == GPU-* ]] || fail "no GPU UUIDs in the simulator's CSV: '$gpu3' '$gpu5'"
  # GPU 5 first: a warning and a pending remap, which no rule acts on; then GPU 3's DBE.
  "$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: xid, gpu: 5, code: 13}" >/dev/null
  "$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: rowRemap, gpu: 5, kind: pending}" >/dev/null
  entity_states() {  # "<id>=<state>" per entity of every check of the node's NodeHealth
    kubectl get nodehealth "$node" -o jsonpath='{range .status.checks[*].entities[*]}{.id}={.state}{"\n"}{end}'
  }
  has_gpu5_warning() { entity_states | grep -x "$gpu5=Warning" >/dev/null; }
  until_ok 40 "GPU 5's Xid 13 in NodeHealth" has_gpu5_warning
  "$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: ecc, gpu: 3, kind: doubleBit}" >/dev/null
  wait_phase 60 Validating
  rem=$(kubectl get remediations -l "sentinel.gpufleet.io/node=$node" -o jsonpath='{.items[-1:].metadata.name}')
  gpus=$(kubectl get remediation "$rem" -o jsonpath='{.status.action.gpus[*]}')
  [[ $gpus == "$gpu3" ]] || fail "status.action.gpus is '$gpus', want $gpu3 (GPU 3 only)"
  req=$(annotation "$node" sentinel.gpufleet.io/remediation-request)
  grep -q "\"gpus\":\[\"$gpu3\"\]" <<<"$req" || fail "request annotation does not name GPU 3 only: $req"
  resets=$(grep -l "node: $node" "$state"/control/done/* | xargs grep -l 'type: gpuReset' || true)
  [[ -n $resets ]] && (($(wc -l <<<"$resets") == 1)) || fail "want one gpuReset in the simulator's inbox, got: '$resets'"
  grep -q "uuid: $gpu3" $resets || fail "the reset does not name GPU 3: $(cat $resets)"
  grep -q "$gpu5" $resets && fail "GPU 5 was reset (it has no fault the rule acts on)"
  # The simulator: GPU 3 reset (no uncorrected errors, no pending remap), GPU 5 as it was.
  row3=$(csv_row "$node" 3)
  row5=$(csv_row "$node" 5)
  [[ $row3 == *", 0, 0, 1, No, No" ]] || fail "GPU 3 not reset in the simulator: $row3"
  [[ $row5 == *", Yes, No" ]] || fail "GPU 5's pending row remap is gone (it was reset?): $row5"
  entity_states | grep -x "$gpu5=Warning" >/dev/null || fail "GPU 5's Xid 13 no longer Warning in NodeHealth: $(entity_states | tr '\n' ' ')"
  ! entity_states | grep "^$gpu3=Fatal" >/dev/null || fail "GPU 3 still Fatal in NodeHealth after its reset: $(entity_states | tr '\n' ' ')"
  # The log bundle: collected before the reset, named in the incident, the file's digest right.
  bundle_ok() { [[ -n $(kubectl get remediation "$rem" -o jsonpath='{.status.logBundle.sha256}') ]]; }
  until_ok 30 "status.logBundle of $rem" bundle_ok
  [[ $(kubectl get remediation "$rem" -o jsonpath='{.status.logBundle.state}') == Collected ]] \
    || fail "log bundle not Collected: $(kubectl get remediation "$rem" -o jsonpath='{.status.logBundle}')"
  path=$(kubectl get remediation "$rem" -o jsonpath='{.status.logBundle.path}')
  sum=$(kubectl get remediation "$rem" -o jsonpath='{.status.logBundle.sha256}')
  bytes=$(kubectl get remediation "$rem" -o jsonpath='{.status.logBundle.bytes}')
  [[ -f $path ]] || fail "bundle file $path is not there"
  [[ $(sha256sum "$path" | cut -d' ' -f1) == "$sum" ]] || fail "bundle $path: sha256 differs from the status"
  (($(stat -c %s "$path") == bytes && bytes < 1048576)) || fail "bundle $path: $bytes bytes in status, $(stat -c %s "$path") on disk"
  gunzip -c "$path" | grep '): 48, ' >/dev/null || fail "bundle has no Xid 48 line"
  gunzip -c "$path" | grep '"nvidia-smi/query-gpu.csv"' >/dev/null || fail "bundle has no nvidia-smi state"
  gunzip -c "$path" | grep '"infiniband"' >/dev/null || fail "bundle has no IB counters"
  started=$(grep -n '"remediation.started"\|remediation started' "$work/agent.log" | head -1 | cut -d: -f1)
  collected=$(grep -n 'log bundle' "$work/agent.log" | head -1 | cut -d: -f1)
  [[ -n $collected && -n $started ]] && ((collected < started)) || fail "the bundle was not collected before the action (lines $collected, $started)"
  pass_validation "$node"
  wait_phase 30 Released
  echo "sentinel_remed: PASS (gpureset: $node GPU 3 $gpu3 reset alone, GPU 5 kept its faults; bundle $bytes bytes)"
  exit 0
fi

if [[ $mode == escalate ]]; then
  kubectl apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: sentinel-remed}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     remediate: gpu-reset}
  breaker: {maxNodes: 2}
  drain: {deadlineSeconds: 10}
  remediation: {maxAttempts: 1, timeoutSeconds: 120, settleSeconds: 4}
  validation: {newNodes: false}
YAML
  "$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --fsync=false --run-for 150s \
    --sim-reboot-down 2s >"$work/agent.log" 2>&1 &
  agent_pid=$!
  "$gpufleet" controller --controllers=sentinel --metrics-addr 127.0.0.1:0 --set sentinel.policy=$policy \
    >"$work/controller.log" 2>&1 &
  controller_pid=$!
  ready_policy() { [[ $(kubectl get sentinelpolicy $policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
  until_ok 60 "policy Ready" ready_policy
  boot_before=$(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.bootID}')
  "$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: xid, gpu: 3, code: 79}" >/dev/null
  wait_phase 40 Remediating
  rem=$(kubectl get remediations -l "sentinel.gpufleet.io/node=$node" -o jsonpath='{.items[-1:].metadata.name}')
  rebooting() { [[ $(kubectl get remediation "$rem" -o jsonpath='{.status.action.type}') == reboot ]]; }
  until_ok 60 "gpu-reset → reboot escalation" rebooting
  got=$(kubectl get remediation "$rem" -o jsonpath='{.status.escalatedFrom}/{.status.escalations[0].reason}/{.status.action.attempt}/{.status.action.request}')
  [[ $got == gpu-reset/FaultPersisted/1/2 ]] || fail "escalation recorded as '$got', want gpu-reset/FaultPersisted/1/2: $(kubectl get remediation "$rem" -o jsonpath='{.status}')"
  kubectl get remediation "$rem" -o jsonpath='{.status.escalations[0].message}' | grep 'still faulty 4 s after the agent reported the reset done' >/dev/null \
    || fail "escalation message: $(kubectl get remediation "$rem" -o jsonpath='{.status.escalations[0].message}')"
  wait_phase 60 Validating
  [[ $(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.bootID}') != "$boot_before" ]] || fail "$node did not reboot"
  resets=$(grep -l "node: $node" "$state"/control/done/* | xargs grep -l 'type: gpuReset' || true)
  reboots=$(grep -l "node: $node" "$state"/control/done/* | xargs grep -l 'type: reboot' || true)
  [[ -n $resets ]] && (($(wc -l <<<"$resets") == 1)) || fail "want one gpuReset in the simulator's inbox, got: '$resets'"
  grep -q 'off the bus' $resets || fail "the simulator did not refuse the reset of a GPU off the bus: $(cat $resets)"
  [[ -n $reboots ]] && (($(wc -l <<<"$reboots") == 1)) || fail "want one reboot in the simulator's inbox, got: '$reboots'"
  said=$(kubectl get nodehealth "$node" -o jsonpath='{.status.remediation.attempt}/{.status.remediation.action}/{.status.remediation.state}')
  [[ $said == 2/reboot/* ]] || fail "NodeHealth status.remediation is '$said', want the reboot as request 2"
  pass_validation "$node"
  wait_phase 30 Released
  ((  $(incidents "$node") == 1 )) || fail "$(incidents "$node") incidents for $node, want 1"
  ((  $(incidents "$other") == 0 )) || fail "$other has an incident"
  echo "sentinel_remed: PASS (escalate: $node GPU 3 off the bus, reset refused, fault persisted → reboot, released)"
  exit 0
fi

# ---- replace ----
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: sentinel-remed}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     taint: "nvidia.com/gpu-error=fatal:NoSchedule", remediate: reboot}
  breaker: {maxNodes: 2}
  drain: {deadlineSeconds: 10}
  remediation: {maxAttempts: 1, timeoutSeconds: 12,
                replacement: {provider: simulator, whenRebootFails: true}}
  validation: {newNodes: true}
YAML
# The reboot never happens: the agent reports health but does not act.
"$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --fsync=false --run-for 150s \
  --remediation=off >"$work/agent.log" 2>&1 &
agent_pid=$!
"$gpufleet" controller --controllers=sentinel --metrics-addr 127.0.0.1:0 --set sentinel.policy=$policy \
  --set sentinel.sim-replacement-state-dir="$state" --set sentinel.sim-reboot-down=2s \
  >"$work/controller.log" 2>&1 &
controller_pid=$!
ready_policy() { [[ $(kubectl get sentinelpolicy $policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
until_ok 60 "policy Ready" ready_policy
uid_before=$(kubectl get node "$node" -o jsonpath='{.metadata.uid}')
boot_before=$(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.bootID}')
"$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: xid, gpu: 3, code: 79}" >/dev/null
wait_phase 40 Remediating
escalated() { [[ $(kubectl get remediations -l "sentinel.gpufleet.io/node=$node" -o jsonpath='{.items[-1:].status.escalatedFrom}') == reboot ]]; }
until_ok 40 "reboot → replace escalation" escalated
wait_phase 60 Validating
uid_after=$(kubectl get node "$node" -o jsonpath='{.metadata.uid}')
boot_after=$(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.bootID}')
[[ -n $uid_after && $uid_after != "$uid_before" ]] || fail "$node: the Node was not replaced (uid $uid_before → $uid_after)"
[[ $boot_after != "$boot_before" ]] || fail "$node: same boot id after the replacement"
[[ $(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}') == true ]] || fail "the new $node is not cordoned before validation"
rem=$(kubectl get remediations -l "sentinel.gpufleet.io/node=$node" -o jsonpath='{.items[-1:].metadata.name}')
[[ $(kubectl get remediation "$rem" -o jsonpath='{.status.action.type}/{.status.action.provider}/{.status.action.nodeUID}') == "replace/simulator/$uid_before" ]] \
  || fail "status.action: $(kubectl get remediation "$rem" -o jsonpath='{.status.action}')"
[[ -n $(kubectl get validationrequest "$rem" -o name 2>/dev/null) ]] || fail "no ValidationRequest $rem for the new node"
grep -q 'type: clear' "$state"/control/done/* || fail "the simulator was not asked to re-provision $node"
pass_validation "$node"
wait_phase 30 Released
[[ $(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}') != true ]] || fail "$node still cordoned after release"
[[ -n $(annotation "$node" sentinel.gpufleet.io/validated) ]] || fail "$node not annotated validated"
((  $(incidents "$node") == 1 )) || fail "$(incidents "$node") incidents for $node, want 1"
((  $(incidents "$other") == 0 )) || fail "$other has an incident"
# An unknown provider: the reconciler names field, value and the providers it has.
kubectl patch sentinelpolicy $policy --type=merge -p '{"spec":{"remediation":{"replacement":{"provider":"acme-cloud"}}}}' >/dev/null
invalid() { [[ $(kubectl get sentinelpolicy $policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}') == InvalidPolicy ]]; }
until_ok 30 "unknown provider refused" invalid
msg=$(kubectl get sentinelpolicy $policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
grep -q 'spec.remediation.replacement.provider: "acme-cloud" is not a replacement provider' <<<"$msg" \
  && grep -q 'use one of: simulator' <<<"$msg" || fail "unknown provider message: $msg"
echo "sentinel_remed: PASS (replace: $node reboot timed out → replaced, uid $uid_before → $uid_after, validated, released)"
