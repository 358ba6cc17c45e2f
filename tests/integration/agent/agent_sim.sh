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
# The simulator registers its nodes first and writes their files as each node comes up.
want=$(grep -oE '"nodes": *[0-9]+' "$state/status.json" | head -1 | grep -oE '[0-9]+$')
(( want >= 10 )) || fail "simulator status.json reports ${want:-no} nodes"
nodes=0
for _ in $(seq 1 200); do
  nodes=$(ls "$state"/nodes/*/proc/sys/kernel/random/boot_id 2>/dev/null | wc -l)
  (( nodes == want )) && break
  sleep 0.3
done
(( nodes == want )) || fail "simulator wrote boot ids for $nodes of $want nodes within 60s"

boots() {  # name=bootID=lastAppliedRecordId per NodeHealth
  kubectl get nodehealth -o jsonpath='{range .items[*]}{.metadata.name}={.status.bootID}={.status.lastAppliedRecordId}{"\n"}{end}'
}
check_all() {  # expected-mark-for-rebooted-node rebooted-node (returns 1 on the first mismatch)
  local got n want
  got="$(boots)"
  for n in $(ls "$state/nodes"); do
    want="$n=$(cat "$state/nodes/$n/proc/sys/kernel/random/boot_id")=1"
    [[ "$n" == "$2" ]] && want="${want%=1}=$1"
    if ! grep -qxF -- "$want" <<<"$got"; then
      mismatch="NodeHealth of $n is not '$want'; have: $(grep "^$n=" <<<"$got" || echo none)"
      return 1
    fi
  done
}
# /metrics of the running agent: aggregated over the nodes (no node label), every node
# counted, every record delivered, nothing rejected. (The gauges refresh every 2 s.)
check_metrics() {  # log
  local url m
  url="$(grep -o 'url=http://127.0.0.1:[0-9]*' "$1" | head -1 | cut -d= -f2)"
  [[ -n "$url" ]] || fail "agent logged no metrics URL: $(head -5 "$1")"
  curl -sf "$url/readyz" >/dev/null || fail "agent /readyz not ready"
  sleep 2.5
  m="$(curl -sf "$url/metrics")" || fail "agent /metrics unreachable at $url"
  grep -qx "gpufleet_agent_nodes $nodes" <<<"$m" || fail "agent /metrics: want gpufleet_agent_nodes $nodes: $(grep '^gpufleet_agent_nodes ' <<<"$m")"
  grep -qx 'gpufleet_agent_journal_backlog_records 0' <<<"$m" || fail "agent /metrics: backlog not drained: $(grep backlog <<<"$m")"
  grep -qE '^gpufleet_agent_records_delivered_total [1-9]' <<<"$m" || fail "agent /metrics: nothing delivered"
  grep -q 'gpufleet_agent_deliveries_total{result="rejected"} 0' <<<"$m" || fail "agent /metrics: rejected deliveries: $(grep rejected <<<"$m")"
  ! grep -q 'h100-' <<<"$m" || fail "agent /metrics names a node (labels must be bounded)"
}
# Runs the agent until every NodeHealth is as expected (at most 90 s), then stops it with SIGTERM.
run_agent_until() {  # log mark rebooted-node
  # Only kmsg-xid: it is silent on a clean simulated boot, so each journal holds exactly the
  # boot records this test counts (ib-port and gpu-nvml report every port and GPU once).
  "$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --run-for 90s --fsync=false \
    --metrics-address 127.0.0.1:0 >"$1" 2>&1 &
  local pid=$! ok=0
  for _ in $(seq 1 90); do
    sleep 1
    if check_all "$2" "$3"; then ok=1; break; fi
  done
  (( ok )) && check_metrics "$1"
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || fail "agent exited non-zero: $(tail -5 "$1")"
  (( ok )) || fail "$mismatch"
}

run_agent_until "$work/agent1.log" 1 none
[[ -s "$state/nodes/h100-00-01/var/lib/gpufleet/agent/journal/cursor" ]] || fail "no journal cursor for h100-00-01"

# A reboot while no agent runs: the next agent journals it (record 2) and delivers it.
old="$(cat "$state/nodes/h100-00-01/proc/sys/kernel/random/boot_id")"
"$gpufleet" sim inject --state-dir "$state" --event '{node: h100-00-01, type: reboot, down: 1s}' >/dev/null
for _ in $(seq 1 100); do
  [[ "$(cat "$state/nodes/h100-00-01/proc/sys/kernel/random/boot_id")" != "$old" ]] && break
  sleep 0.3
done
[[ "$(cat "$state/nodes/h100-00-01/proc/sys/kernel/random/boot_id")" != "$old" ]] || fail "simulated reboot did not change the boot id"
run_agent_until "$work/agent2.log" 2 h100-00-01
grep -q 'delivered=1 ' "$work/agent2.log" || fail "second run should deliver exactly the one boot record: $(grep status "$work/agent2.log")"

# Remediation in simulation: sentinel's request on one Node (quarantined for that incident) makes
# the agent — one Node watch for every simulated node — ask the simulator for a reboot, once:
# the boot id changes, NodeHealth shows the outcome, and later changes of the Node (the same
# request still on it) ask for nothing more.
n=h100-00-02
inc="$n-e2e"
old="$(cat "$state/nodes/$n/proc/sys/kernel/random/boot_id")"
reboots() { grep -l "node: $n" "$state"/control/done/* 2>/dev/null | xargs -r grep -l 'type: reboot' | wc -l; }
"$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --run-for 90s --fsync=false \
  --metrics-address 127.0.0.1:0 --sim-reboot-down 1s >"$work/agent3.log" 2>&1 &
pid=$!
kubectl annotate node "$n" --overwrite \
  "sentinel.gpufleet.io/quarantine={\"cordoned\":true,\"incident\":\"$inc\"}" \
  "sentinel.gpufleet.io/remediation-request={\"incident\":\"$inc\",\"attempt\":1,\"action\":\"reboot\"}" >/dev/null
for _ in $(seq 1 100); do
  [[ "$(cat "$state/nodes/$n/proc/sys/kernel/random/boot_id")" != "$old" ]] && break
  sleep 0.3
done
[[ "$(cat "$state/nodes/$n/proc/sys/kernel/random/boot_id")" != "$old" ]] \
  || fail "the remediation request did not reboot $n: $(grep -i remediation "$work/agent3.log" | tail -3)"
st=""
for _ in $(seq 1 100); do
  st="$(kubectl get nodehealth "$n" -o jsonpath='{.status.remediation.state}/{.status.remediation.incident}/{.status.remediation.attempt}')"
  [[ "$st" == "Succeeded/$inc/1" ]] && break
  sleep 0.3
done
[[ "$st" == "Succeeded/$inc/1" ]] || fail "NodeHealth $n status.remediation is '$st', not Succeeded/$inc/1"
kubectl annotate node "$n" --overwrite gpufleet-test/touched=1 >/dev/null
sleep 3
url="$(grep -o 'url=http://127.0.0.1:[0-9]*' "$work/agent3.log" | head -1 | cut -d= -f2)"
m="$(curl -sf "$url/metrics")" || fail "agent /metrics unreachable at '$url'"
grep -qx 'gpufleet_agent_remediation_requests_total{outcome="Succeeded"} 1' <<<"$m" \
  || fail "agent /metrics: want one Succeeded remediation: $(grep remediation <<<"$m")"
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || fail "agent exited non-zero: $(tail -5 "$work/agent3.log")"
[[ "$(reboots)" == 1 ]] || fail "$n was asked to reboot $(reboots) times, not once"
kubectl annotate node "$n" sentinel.gpufleet.io/quarantine- sentinel.gpufleet.io/remediation-request- \
  gpufleet-test/touched- >/dev/null

echo "agent_sim: PASS ($nodes simulated nodes, one process; reboot journalled and delivered once across an agent restart; a remediation request reboots its simulated node once)"
