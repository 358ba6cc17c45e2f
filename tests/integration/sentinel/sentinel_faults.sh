#!/usr/bin/env bash
# Issue 12's reliability proofs on the simulator, through the binaries as the chart runs them
# (`gpufleet controller --controllers=sentinel`, `gpufleet agent --sim-state-dir`, sentinel
# asking through the Node annotation and the agent rebooting the simulated node):
#
#   apirestart  Xid 79 on 3 of 6 H100 nodes, each running a pod held by a PodDisruptionBudget
#               (so its drain waits for the 10 s deadline). Once two incidents are Draining the
#               whole kube-local control plane is stopped and started again (`kube-local down`
#               / `up --detach` on the same data directory, as the controller runtime's restart
#               test does); the third fault happens while it is down. The controller and the
#               agent keep running. Every incident still completes: one Remediation per faulty
#               node (attempt 1), one cordon owner and one taint, one reboot, its pod drained,
#               validated, released; the healthy nodes (one with a pod under a PDB too) are
#               never touched; the breaker still counts 3 nodes.
#   agentkill   Xid 79 on one node; the agent is killed with SIGKILL four times and started
#               again each time: a random moment in the 1.5 s after the fault (sentinel paused
#               with SIGSTOP meanwhile, so the kill lands before any request), before sentinel's
#               request (which then comes while the agent is down; the controller is then
#               killed -9 and restarted as well), right after the reboot reached the simulator's
#               inbox, and a random moment in the 2 s after that. The fault reaches
#               NodeHealth, the remediation's journal records are delivered (NodeHealth shows
#               Succeeded for the incident's attempt 1), the simulator reboots the node exactly
#               once, one Remediation with attempt 1, and the incident completes.
#
# Waits are on conditions with deadlines; the random delays only choose the kill moments
# (SEED=N replays one run; the seed is printed).
# Usage: sentinel_faults.sh REPO_ROOT MODE   (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN,
#        GPUFLEET_KUBE_LOCAL_DIR for apirestart)
set -euo pipefail
repo="$1"
mode="$2"
[[ $mode == apirestart || $mode == agentkill ]] || { echo "sentinel_faults: MODE '$mode': use apirestart or agentkill" >&2; exit 2; }
seed="${SEED:-$(( $(date +%s) % 100000 ))}"
RANDOM=$seed
echo "sentinel_faults: $mode, SEED=$seed"
agent_starts=0
ns="sentinel-faults-$$"  # the workload pods' namespace (apirestart)
test_name=sentinel_faults
policy=sentinel-faults
fail_context="$mode, SEED=$seed"
cleanup_extra() { kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true; }
# shellcheck source=sentinel_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/sentinel_env.sh"

reboots() {  # reboot events for node $1 the simulator's inbox holds (pending and done)
  local f n=0
  for f in "$state"/control/* "$state"/control/done/*; do
    [[ -f $f ]] || continue
    grep -qE "^ *node: $1\$" "$f" && grep -q 'type: reboot' "$f" && n=$((n + 1))
  done
  echo "$n"
}
xid_reported() { [[ $(kubectl get nodehealth "$node" -o jsonpath='{.status.history[*].reason}' 2>/dev/null) == *Xid79* ]]; }
rebooted() { (($(reboots "$1") >= 1)); }
has_request() { [[ -n $(annotation "$1" sentinel.gpufleet.io/remediation-request) ]]; }
start_agent() {
  agent_starts=$((agent_starts + 1))
  "$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --run-for 300s \
    --sim-reboot-down 2s >>"$work/agent.log" 2>&1 &
  agent_pid=$!
}
kill_agent() {  # SIGKILL, the way the kernel ends an OOM-killed or evicted pod's process
  kill -9 "$agent_pid" 2>/dev/null || fail "the agent was not running before kill -9 ($1)"
  wait "$agent_pid" 2>/dev/null || true
  echo "sentinel_faults: agent killed -9 $1 (Xid 79 in NodeHealth: $(xid_reported && echo yes || echo no), remediation: '$(kubectl get nodehealth "$node" -o jsonpath='{.status.remediation.state}' 2>/dev/null)', reboots in the inbox: $(reboots "$node"))"
  agent_pid=""
}
start_controller() {
  "$gpufleet" controller --controllers=sentinel --metrics-addr 127.0.0.1:0 \
    --set sentinel.policy=sentinel-faults >>"$work/controller.log" 2>&1 &
  controller_pid=$!
}
alive() { kill -0 "$1" 2>/dev/null; }
# check_once NODE: one incident, attempt 1, one cordon owner, one sentinel taint, one reboot.
check_once() {
  local n=$1 c
  c=$(incidents "$n"); ((c == 1)) || fail "$n: $c incidents, want 1"
  c=$(kubectl get remediations -l "sentinel.gpufleet.io/node=$n" -o jsonpath='{.items[0].status.action.attempt}')
  [[ $c == 1 ]] || fail "$n: remediation attempt '$c', want 1"
  c=$(reboots "$n"); ((c == 1)) || fail "$n: the simulator got $c reboots, want 1"
}
check_quarantine_once() {
  local n=$1 c
  [[ $(kubectl get node "$n" -o jsonpath='{.spec.unschedulable}') == true ]] || fail "$n not cordoned"
  c=$(annotation "$n" gpufleet.io/cordon-owners)
  [[ $c == sentinel ]] || fail "$n: cordon owners '$c', want 'sentinel' once"
  c=$(kubectl get node "$n" -o jsonpath='{range .spec.taints[*]}{.key}{"\n"}{end}' | grep -c '^nvidia.com/gpu-error$' || true)
  ((c == 1)) || fail "$n: $c nvidia.com/gpu-error taints, want 1"
}
check_released() {
  local n=$1
  [[ $(kubectl get node "$n" -o jsonpath='{.spec.unschedulable}') != true ]] || fail "$n still cordoned after release"
  [[ -z $(annotation "$n" gpufleet.io/cordon-owners) ]] || fail "$n: cordon owners left after release"
  ! kubectl get node "$n" -o jsonpath='{range .spec.taints[*]}{.key}{"\n"}{end}' | grep '^nvidia.com/gpu-error$' >/dev/null \
    || fail "$n: sentinel's taint left after release"
}
check_untouched() {  # a healthy node: no incident, no cordon, no request, no reboot
  local n=$1
  (($(incidents "$n") == 0)) || fail "healthy $n has an incident"
  [[ $(kubectl get node "$n" -o jsonpath='{.spec.unschedulable}') != true ]] || fail "healthy $n cordoned"
  [[ -z $(annotation "$n" gpufleet.io/cordon-owners) ]] || fail "healthy $n has cordon owners"
  [[ -z $(annotation "$n" sentinel.gpufleet.io/remediation-request) ]] || fail "healthy $n got a remediation request"
  (($(reboots "$n") == 0)) || fail "healthy $n was rebooted"
}

apply_sentinel_crds
nodes_n=4
[[ $mode == apirestart ]] && nodes_n=6
start_fleet "$nodes_n" 1  # the example's H100 pool with fewer nodes, and one H200 node

kubectl apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: sentinel-faults}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     taint: "nvidia.com/gpu-error=fatal:NoSchedule", remediate: reboot}
  breaker: {maxNodes: 4}
  drain: {deadlineSeconds: 10, terminatingTimeoutSeconds: 5}
  remediation: {maxAttempts: 2, timeoutSeconds: 60}
  validation: {newNodes: false}
YAML

start_agent
start_controller

if [[ $mode == apirestart ]]; then
  faulty=("${all[@]:0:3}")
  healthy=("${all[@]:3}")
  [[ -n ${GPUFLEET_KUBE_LOCAL_DIR:-} ]] || fail "GPUFLEET_KUBE_LOCAL_DIR unset"
  # A workload pod on every faulty node and on one healthy node, each held by a
  # PodDisruptionBudget: the eviction is refused until the drain's deadline (10 s), so the
  # incidents sit in Draining when the control plane goes down.
  kubectl create namespace "$ns" >/dev/null
  for n in "${faulty[@]}" "${healthy[0]}"; do
    kubectl apply -n "$ns" -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: work-$n, labels: {app: work-$n}}
spec:
  nodeName: $n
  terminationGracePeriodSeconds: 1
  tolerations: [{operator: Exists}]
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: work-$n}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: work-$n}}
YAML
  done
  # Running first: the eviction API lets a Pending pod go whatever its budget says, and a
  # drain that finds the pod not yet started finishes at once (seen in CI: Draining for 73 ms).
  kubectl wait -n "$ns" --for=condition=Ready pod --all --timeout=60s >/dev/null ||
    fail "the workload pods did not start"
  # Two faults; the control plane goes down once both incidents are Draining; the third fault
  # happens while the API server is down (the agent must journal it and deliver it afterwards).
  for n in "${faulty[@]:0:2}"; do
    "$gpufleet" sim inject --state-dir "$state" --event "{node: $n, type: xid, gpu: 3, code: 79}" >/dev/null
  done
  for n in "${faulty[@]:0:2}"; do
    until_ok 40 "$n: an incident Draining" phase_in "$n" Draining
  done
  before="${faulty[0]}=$(phase "${faulty[0]}") ${faulty[1]}=$(phase "${faulty[1]}")"
  t0=$SECONDS
  "$KUBE_LOCAL_BIN" down --data-dir "$GPUFLEET_KUBE_LOCAL_DIR" >/dev/null
  echo "sentinel_faults: API server down; incidents just before: $before"
  "$gpufleet" sim inject --state-dir "$state" --event "{node: ${faulty[2]}, type: xid, gpu: 3, code: 79}" >/dev/null
  sleep 2  # the agent reads the fault and fails to deliver it (not an assertion)
  "$KUBE_LOCAL_BIN" up --data-dir "$GPUFLEET_KUBE_LOCAL_DIR" --detach >/dev/null
  until_ok 60 "the API server ready after the restart" kubectl get --raw /readyz
  echo "sentinel_faults: control plane restarted in $((SECONDS - t0))s"
  alive "$controller_pid" || fail "the controller exited during the API server restart"
  alive "$agent_pid" || fail "the agent exited during the API server restart"
  for n in "${faulty[@]}"; do
    until_ok 90 "$n: Validating after the restart" phase_in "$n" Validating
    check_quarantine_once "$n"
    check_once "$n"
  done
  uniq=$(kubectl get sentinelpolicy sentinel-faults -o jsonpath='{.status.breaker.uniqueNodes}')
  [[ $uniq == 3 ]] || fail "breaker: uniqueNodes '$uniq' after the restart, want 3"
  for n in "${faulty[@]}"; do pass_validation "$n"; done
  for n in "${faulty[@]}"; do
    until_ok 30 "$n: Released" phase_in "$n" Released
    check_released "$n"
    check_once "$n"
  done
  for n in "${healthy[@]}"; do check_untouched "$n"; done
  kubectl get pod -n "$ns" "work-${healthy[0]}" >/dev/null 2>&1 \
    || fail "the pod on healthy ${healthy[0]} was removed"
  for n in "${faulty[@]}"; do
    ! kubectl get pod -n "$ns" "work-$n" >/dev/null 2>&1 || fail "the pod on $n was not drained"
  done
  status=$("$gpufleet" sentinel status --policy sentinel-faults -o json)
  grep -q '"state":"Closed"' <<<"$status" || fail "sentinel status: breaker not Closed: $status"
  grep -q '"uniqueNodes":3' <<<"$status" || fail "sentinel status: breaker lost its count: $status"
  echo "sentinel_faults: PASS (apirestart: ${faulty[*]} quarantined once, rebooted once, released; ${healthy[*]} untouched)"
  exit 0
fi

# agentkill
node=${all[0]}
healthy=("${all[@]:1}")
# Sentinel acts within a second of a fault, faster than a kill can be aimed; the controller is
# paused (SIGSTOP) while the agent alone is killed around the fault, so that the request comes
# while the agent is down, and resumed (SIGCONT) afterwards. Pausing is not a restart: the
# controller's connections and caches stay as they were.
kill -STOP "$controller_pid"
"$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: xid, gpu: 3, code: 79}" >/dev/null
# 1. A random moment in the first 1.5 s after the fault: before, while or after the agent read
#    it from the kernel log, journalled it and delivered it.
sleep "$((RANDOM % 15 / 10)).$((RANDOM % 10))"
kill_agent "after the fault"
start_agent
until_ok 30 "$node: NodeHealth shows the Xid 79 after the agent's restart" xid_reported
# 2. The agent is down when sentinel asks: the request is found when it starts again.
kill_agent "before the request"
kill -CONT "$controller_pid"
until_ok 60 "$node: sentinel's remediation request" has_request "$node"
(($(reboots "$node") == 0)) || fail "$node rebooted while the agent was down"
# The controller killed -9 as well while its request waits (it must not ask again with a new
# attempt, nor quarantine the node a second time).
kill -9 "$controller_pid"
wait "$controller_pid" 2>/dev/null || true
start_controller
start_agent
# 3. Right after the reboot reached the simulator (the agent acted; its success record may not
#    be journalled or delivered yet), then at a random moment in the next 2 s.
until_ok 60 "$node: a reboot in the simulator's inbox" rebooted "$node"
kill_agent "right after the reboot was asked"
start_agent
sleep "$((RANDOM % 2)).$((RANDOM % 10))"
kill_agent "after the reboot"
start_agent
until_ok 90 "$node: Validating" phase_in "$node" Validating
check_quarantine_once "$node"
incident=$(kubectl get remediations -l "sentinel.gpufleet.io/node=$node" -o jsonpath='{.items[0].metadata.name}')
# Nothing lost: the fault and the remediation's outcome are in NodeHealth.
health_ok() {
  xid_reported &&
    [[ $(kubectl get nodehealth "$node" -o jsonpath='{.status.remediation.incident}/{.status.remediation.attempt}/{.status.remediation.state}/{.status.remediation.action}') == "$incident/1/Succeeded/reboot" ]]
}
until_ok 30 "$node: NodeHealth shows Xid79 and $incident/1 Succeeded/reboot" health_ok
check_once "$node"
pass_validation "$node"
until_ok 30 "$node: Released" phase_in "$node" Released
check_released "$node"
check_once "$node"
for n in "${healthy[@]}"; do check_untouched "$n"; done
echo "sentinel_faults: PASS (agentkill: $node: agent killed -9 four times, $agent_starts starts; one reboot; released)"
