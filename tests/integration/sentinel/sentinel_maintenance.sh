#!/usr/bin/env bash
# Cloud maintenance on the simulator, through the binaries as the chart runs them: the cloud
# (the simulator's Azure-format Scheduled Events document) schedules a host reboot of one node
# 15 s ahead; the agent's cloud-maintenance monitor reports it in NodeHealth ahead of the
# window (lead 20 s); a SentinelPolicy rule cordons, taints and drains the node BEFORE the
# window opens and waits (`remediate: wait`, no reboot asked) until the window is over; then
# certify (played by this test) passes the node and it is released. A second node's
# maintenance an hour ahead is only reported as upcoming and the node is left alone.
# Usage: sentinel_maintenance.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN)
set -euo pipefail
repo="$1"
test_name=sentinel_maintenance
policy=sentinel-maintenance
# shellcheck source=sentinel_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/sentinel_env.sh"

apply_sentinel_crds
start_fleet 2 1
node=${all[0]}
later=${all[1]}

kubectl apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: sentinel-maintenance}
spec:
  rules:
  - {name: cloud-maintenance, when: "event.check == 'maintenance' && event.state == 'Warning'",
     cordon: true, taint: "gpufleet.io/maintenance=scheduled:NoSchedule", remediate: wait}
  breaker: {maxNodes: 2}
  drain: {deadlineSeconds: 10, terminatingTimeoutSeconds: 5}
  remediation: {maxAttempts: 2, timeoutSeconds: 120}
  validation: {newNodes: false}
YAML

GPUFLEET_MAINTENANCE_LEAD=20s "$gpufleet" agent --sim-state-dir "$state" --monitors cloud-maintenance \
  --fsync=false --run-for 150s >"$work/agent.log" 2>&1 &
agent_pid=$!
"$gpufleet" controller --controllers=sentinel --metrics-addr 127.0.0.1:0 \
  --set sentinel.policy=sentinel-maintenance >"$work/controller.log" 2>&1 &
controller_pid=$!

"$gpufleet" sim inject --state-dir "$state" --event "{node: $later, type: maintenance, startsIn: 1h, duration: 10m}" >/dev/null
"$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: maintenance, startsIn: 15s, duration: 10s}" >/dev/null
injected=$SECONDS

entity_state() {  # node -> "state/reason" of its maintenance entity
  kubectl get nodehealth "$1" -o jsonpath='{range .status.checks[?(@.name=="maintenance")].entities[*]}{.state}/{.reason}{"\n"}{end}' 2>/dev/null | tail -n 1
}
is_state() { [[ $(entity_state "$1") == "$2" ]]; }
until_ok 12 "$node: NodeHealth reports the maintenance ahead of the window" is_state "$node" Warning/MaintenanceScheduled
cordoned() { [[ $(kubectl get node "$1" -o jsonpath='{.spec.unschedulable}') == true ]]; }
until_ok 10 "$node cordoned" cordoned "$node"
((SECONDS - injected < 15)) || fail "$node was cordoned only $((SECONDS - injected)) s after the maintenance was scheduled, after its window opened"
kubectl get node "$node" -o jsonpath='{range .spec.taints[*]}{.key}{"\n"}{end}' | grep -x gpufleet.io/maintenance >/dev/null \
  || fail "$node: no gpufleet.io/maintenance taint"
until_ok 20 "$node: incident Remediating (waiting for the window)" phase_in "$node" Remediating
until_ok 20 "$node: NodeHealth shows the maintenance in progress" is_state "$node" Warning/MaintenanceInProgress
phase_in "$node" Remediating || fail "$node left Remediating while its maintenance was in progress: $(phase "$node")"
until_ok 30 "$node: NodeHealth shows the maintenance completed" is_state "$node" Healthy/MaintenanceCompleted
until_ok 20 "$node: Validating once the window is over" phase_in "$node" Validating
[[ -z $(annotation "$node" sentinel.gpufleet.io/remediation-request) ]] || fail "$node: a remediation was requested; wait asks for none"
pass_validation "$node"
until_ok 30 "$node: Released" phase_in "$node" Released
! cordoned "$node" || fail "$node still cordoned after release"
((($(incidents "$node")) == 1)) || fail "$node: $(incidents "$node") incidents, want 1"

is_state "$later" Healthy/MaintenanceUpcoming || fail "$later: maintenance an hour ahead is '$(entity_state "$later")', want Healthy/MaintenanceUpcoming"
((($(incidents "$later")) == 0)) || fail "$later has an incident for maintenance an hour ahead"
! cordoned "$later" || fail "$later cordoned for maintenance an hour ahead"
echo "sentinel_maintenance: PASS ($node: scheduled → cordoned before the window → drained → waited → completed → validated → released; $later upcoming, untouched)"
