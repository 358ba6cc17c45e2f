#!/usr/bin/env bash
# `gpufleet agent --sim-state-dir --sim-agent-pods NS/SELECTOR`: every simulated node's agent
# writes with a token bound to its own agent pod (a TokenRequest, as the kubelet projects it),
# so the identity admission policy (deploy/admission/agent-node-identity.yaml) judges simulated
# agents as it judges real ones. Proven on kube-local + the simulator:
#   1. without RBAC for the agent's ServiceAccount nothing is written (the process's own admin
#      identity is not used) and the deliveries count as rejected;
#   2. with it, every node that has an agent pod gets its NodeHealth; a node without one waits
#      (its records stay in its journal) until its pod appears;
#   3. a node's journal delivered with ANOTHER node's token is denied by the policy, naming both
#      nodes: the tokens carry the node, the API server enforces it.
# Usage: agent_sim_identity.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN)
set -euo pipefail
repo="$1"
gpufleet="$GPUFLEET_BIN"
work="$(mktemp -d)"
state="$work/sim"
ns="agent-simid-$$"
role="gpufleet-agent-simid-$$"
sel="app.kubernetes.io/name=agent-simid"
fail() { echo "agent_sim_identity: FAIL: $*" >&2; exit 1; }
if ! command -v kubectl >/dev/null 2>&1; then
  kubectl() { "$KUBE_LOCAL_BIN" kubectl "$@"; }
fi
agent_pid=""
cleanup() {
  set +e  # every step runs: a failed one must not leave the simulator running
  [[ -n "$agent_pid" ]] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  "$gpufleet" sim stop --state-dir "$state" >/dev/null 2>&1 || true
  for n in $(ls "$state/nodes" 2>/dev/null); do
    kubectl delete nodehealth "$n" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  kubectl delete clusterrolebinding "$role" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete clusterrole "$role" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  # Cluster-wide: a later `helm install` of the chart must be able to own it.
  kubectl delete --ignore-not-found -f "$repo/deploy/admission/agent-node-identity.yaml" >/dev/null 2>&1 || true
  [[ -n "${KEEP_WORK:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

kubectl apply --server-side --force-conflicts --field-manager=agent-simid -f "$repo/deploy/crds/nodehealth.yaml" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/nodehealths.gpufleet.io >/dev/null
kubectl apply --server-side --force-conflicts --field-manager=agent-simid -f "$repo/deploy/admission/agent-node-identity.yaml" >/dev/null

"$gpufleet" sim --fleet "$repo/examples/fleet-h100.yaml" --state-dir "$state" --detach >/dev/null \
  || fail "simulator did not start: $(tail -5 "$state/sim.log")"
want=$(grep -oE '"nodes": *[0-9]+' "$state/status.json" | head -1 | grep -oE '[0-9]+$')
(( want >= 4 )) || fail "simulator status.json reports ${want:-no} nodes"
for _ in $(seq 1 200); do
  (( $(ls "$state"/nodes/*/proc/sys/kernel/random/boot_id 2>/dev/null | wc -l) == want )) && break
  sleep 0.3
done
mapfile -t nodes < <(ls "$state/nodes")
(( ${#nodes[@]} == want )) || fail "simulator wrote ${#nodes[@]} of $want nodes"
last="${nodes[-1]}"
a="${nodes[0]}"
b="${nodes[1]}"

kubectl create namespace "$ns" >/dev/null
kubectl -n "$ns" create serviceaccount gpufleet-agent >/dev/null
kubectl create clusterrole "$role" --verb=get,create,update,patch \
  --resource=nodehealths.gpufleet.io,nodehealths.gpufleet.io/status >/dev/null
agent_pods() {  # node...: each node's agent pod (bound to it; whether it runs does not matter)
  local n
  for n in "$@"; do
    printf -- '---\napiVersion: v1\nkind: Pod\nmetadata: {name: agent-%s, namespace: %s, labels: {app.kubernetes.io/name: agent-simid}}\nspec: {nodeName: %s, serviceAccountName: gpufleet-agent, containers: [{name: agent, image: registry.invalid/gpufleet:test}]}\n' "$n" "$ns" "$n"
  done | kubectl apply -f - >/dev/null
}
agent_pods "${nodes[@]:0:${#nodes[@]}-1}"

token_file() { echo "$state/nodes/$1/var/lib/gpufleet/agent/serviceaccount/token"; }
has_nodehealth() { kubectl get nodehealth "$1" >/dev/null 2>&1; }
metric() {  # name{labels}: its value in the agent's /metrics
  curl -sf "$url/metrics" | grep -F "$1 " | awk '{print $2}'
}

"$gpufleet" agent --sim-state-dir "$state" --sim-agent-pods "$ns/$sel" --monitors kmsg-xid \
  --run-for 150s --fsync=false --metrics-address 127.0.0.1:0 >"$work/agent.log" 2>&1 &
agent_pid=$!

# Tokens for every node with a pod, none for the one without.
for _ in $(seq 1 100); do
  n_tokens=$( (ls "$state"/nodes/*/var/lib/gpufleet/agent/serviceaccount/token 2>/dev/null || true) | wc -l)
  (( n_tokens == want - 1 )) && break
  sleep 0.3
done
(( n_tokens == want - 1 )) || fail "want $((want - 1)) token files, have $n_tokens: $(grep -i token "$work/agent.log" | tail -3)"
[[ ! -e "$(token_file "$last")" ]] || fail "$last has no agent pod but got a token"
[[ "$(stat -c %a "$(token_file "$a")")" == 600 ]] || fail "token file mode is $(stat -c %a "$(token_file "$a")"), not 600"

# 1. No RBAC for the ServiceAccount yet: nothing is written, deliveries are rejected.
url=""
for _ in $(seq 1 50); do
  url="$( (grep -o 'url=http://127.0.0.1:[0-9]*' "$work/agent.log" || true) | head -1 | cut -d= -f2)"
  [[ -n "$url" ]] && break
  sleep 0.2
done
[[ -n "$url" ]] || fail "agent logged no metrics URL: $(head -5 "$work/agent.log")"
rejected=0
for _ in $(seq 1 60); do
  rejected=$(metric 'gpufleet_agent_deliveries_total{result="rejected"}' || echo 0)
  (( ${rejected%.*} > 0 )) && break
  sleep 0.5
done
(( ${rejected%.*} > 0 )) || fail "no delivery was rejected without RBAC: $(curl -sf "$url/metrics" | grep deliveries)"
for n in "${nodes[@]}"; do
  ! has_nodehealth "$n" || fail "NodeHealth $n was written without the agent's RBAC: not the pod's identity"
done
grep -q "delivery failed.*node=$a .*forbidden" "$work/agent.log" \
  || fail "agent log does not show node $a's RBAC denial: $(grep "node=$a " "$work/agent.log" | tail -3)"

# 2. RBAC granted: every node with a pod gets its NodeHealth; then the last node's pod appears.
kubectl create clusterrolebinding "$role" --clusterrole="$role" \
  --serviceaccount="$ns:gpufleet-agent" >/dev/null
for _ in $(seq 1 120); do
  missing=0
  for n in "${nodes[@]}"; do
    [[ "$n" == "$last" ]] && continue
    has_nodehealth "$n" || { missing=$((missing + 1)); break; }
  done
  (( missing == 0 )) && break
  sleep 0.5
done
(( missing == 0 )) || fail "not every node with an agent pod got its NodeHealth within 60s"
! has_nodehealth "$last" || fail "$last has no agent pod but its NodeHealth was written"
agent_pods "$last"
for _ in $(seq 1 120); do has_nodehealth "$last" && break; sleep 0.5; done
has_nodehealth "$last" || fail "$last's NodeHealth was not written after its agent pod appeared"
[[ "$(kubectl get nodehealth "$last" -o jsonpath='{.status.lastAppliedRecordId}')" == 1 ]] \
  || fail "$last's boot record was not delivered once from its journal"

# 3. Node b's records delivered with node a's token: the policy denies them and names both.
cp "$(token_file "$a")" "$(token_file "$b")"
"$gpufleet" sim inject --state-dir "$state" --event "{node: $b, type: xid, gpu: 3, code: 79}" >/dev/null
denied=""
for _ in $(seq 1 120); do
  if grep -q "the agent on node '$a' may write only its own node's nodehealths ('$a'), not '$b'" "$work/agent.log"; then
    denied=1
    break
  fi
  sleep 0.5
done
[[ -n "$denied" ]] || fail "node $b's delivery with node $a's token was not denied by the policy: $(grep -i "$b" "$work/agent.log" | tail -3)"
[[ "$(kubectl get nodehealth "$b" -o jsonpath='{.status.lastAppliedRecordId}')" == 1 ]] \
  || fail "NodeHealth $b changed although its delivery was denied"
echo "agent_sim_identity: OK ($want nodes, each writing as its own agent pod)"
