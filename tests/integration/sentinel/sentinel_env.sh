# Sourced by sentinel_sim.sh and sentinel_faults.sh: what a sentinel run on the simulator
# needs around it. The caller sets `repo`, `test_name` (messages), `policy` (the
# SentinelPolicy it applies) and optionally `fail_context` (printed with a failure) and a
# `cleanup_extra` function; it starts its controller and agent into `controller_pid` and
# `agent_pid`, which the cleanup stops.
# Env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN.
gpufleet="$GPUFLEET_BIN"
work="$(mktemp -d)"
state="$work/sim"
controller_pid=""
agent_pid=""
fail() {
  echo "$test_name: FAIL${fail_context:+ ($fail_context)}: $*" >&2
  echo "--- controller log (tail)" >&2; tail -n 40 "$work/controller.log" >&2 || true
  # The controller's caches and transport (a stalled request shows as oldest_request_ms).
  local url
  url=$(grep -o 'msg="serving metrics and health" url=http://127.0.0.1:[0-9]*' "$work/controller.log" 2>/dev/null | tail -n 1 | sed 's/.*url=//') || true
  if [[ -n $url ]]; then echo "--- controller $url/debug/caches" >&2; curl -s -m 5 "$url/debug/caches" >&2 || true; fi
  kubectl get sentinelpolicy "$policy" -o yaml >&2 || true
  if [[ -f $work/agent.log ]]; then echo "--- agent log (tail)" >&2; tail -n 40 "$work/agent.log" >&2; fi
  kubectl get remediations -o yaml >&2 || true
  exit 1
}
if ! command -v kubectl >/dev/null 2>&1; then
  kubectl() { "$KUBE_LOCAL_BIN" kubectl "$@"; }
fi
cleanup() {
  for p in $controller_pid $agent_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$gpufleet" sim stop --state-dir "$state" >/dev/null 2>&1 || true
  if declare -F cleanup_extra >/dev/null; then cleanup_extra; fi
  kubectl delete sentinelpolicy "$policy" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete remediations,validationrequests -l sentinel.gpufleet.io/node --ignore-not-found --wait=false >/dev/null 2>&1 || true
  for n in $(ls "$state/nodes" 2>/dev/null); do
    kubectl delete nodehealth "$n" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# until_ok SECONDS DESCRIPTION COMMAND...: COMMAND succeeds within SECONDS, else fail.
until_ok() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what: not within ${limit}s"
    sleep 0.3
  done
}

apply_sentinel_crds() {
  local f
  for f in nodehealth sentinelpolicy remediation validationrequest; do
    kubectl apply --server-side --force-conflicts --field-manager="$test_name" -f "$repo/deploy/crds/$f.yaml" >/dev/null
  done
  kubectl wait --for=condition=Established --timeout=30s crd/nodehealths.gpufleet.io \
    crd/sentinelpolicies.gpufleet.io crd/remediations.gpufleet.io crd/validationrequests.gpufleet.io >/dev/null
}

# start_fleet H100_NODES [H200_NODES]: the example fleet shrunk (its H200 pool left as it is
# when H200_NODES is not given), started detached; waits until every node has its boot id.
# Sets `all` to the node names.
start_fleet() {
  local h100=$1 h200=${2:-} total n
  local edits=(-e "s/^    count: 32\$/    count: $h100/")
  [[ -n $h200 ]] && edits+=(-e "s/^    count: 8\$/    count: $h200/")
  sed "${edits[@]}" "$repo/examples/fleet-h100.yaml" >"$work/fleet.yaml"
  grep -q "^    count: $h100\$" "$work/fleet.yaml" || fail "could not shrink the example fleet"
  total=$(awk '/^    count: /{s += $2} END{print s}' "$work/fleet.yaml")
  "$gpufleet" sim --fleet "$work/fleet.yaml" --state-dir "$state" --detach >/dev/null \
    || fail "simulator did not start: $(tail -5 "$state/sim.log")"
  node_dirs() { (($(ls "$state/nodes" | wc -l) == total)); }
  until_ok 30 "$total simulated nodes" node_dirs
  mapfile -t all < <(ls "$state/nodes")
  for n in "${all[@]}"; do
    until_ok 30 "$n boot id" test -s "$state/nodes/$n/proc/sys/kernel/random/boot_id"
  done
}

phase() {  # the newest incident's phase on node $1
  kubectl get remediations -l "sentinel.gpufleet.io/node=$1" \
    -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | tail -n 1
}
phase_in() {  # node phase...
  local p n=$1; shift
  p=$(phase "$n")
  for want in "$@"; do [[ $p == "$want" ]] && return 0; done
  return 1
}
policy_loaded() {  # the controller looked at SentinelPolicy $policy at its current generation
  local gen
  gen=$(kubectl get sentinelpolicy "$policy" -o jsonpath='{.metadata.generation}/{.status.observedGeneration}')
  [[ ${gen%/*} == "${gen#*/}" ]]
}
incidents() { kubectl get remediations -l "sentinel.gpufleet.io/node=$1" --no-headers 2>/dev/null | wc -l; }
annotation() { kubectl get node "$1" -o jsonpath="{.metadata.annotations.${2//./\\.}}"; }
pass_validation() {  # play certify: the node's ValidationRequest passes
  local n=$1 vr
  vr=$(kubectl get remediations -l "sentinel.gpufleet.io/node=$n" -o jsonpath='{.items[-1:].status.validationRequest}')
  [[ -n $vr ]] || fail "$n: no ValidationRequest recorded"
  kubectl patch validationrequest "$vr" --subresource=status --type=merge \
    -p "{\"status\":{\"phase\":\"Passed\",\"nodeCount\":1,\"results\":[{\"node\":\"$n\",\"verdict\":\"Passed\"}]}}" >/dev/null
}
