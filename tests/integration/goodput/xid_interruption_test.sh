#!/usr/bin/env bash
# Goodput measured on a live cluster: a 2-pod indexed Job (8 GPUs a pod, labelled
# goodput.gpufleet.io/job=llama, reporting checkpoints) runs on the simulated fleet under the
# sentinel and goodput controllers. A Fatal Xid on one pod's node: sentinel cordons and drains
# it (the job-aware drain evicts both pods, the job has no checkpoint contract), the Job
# recreates them off the node, and `gpufleet goodput -o json` shows one GpuXid interruption
# with lost time. Then the controller is killed with SIGKILL and started
# again: the interruption is counted once and the lost time is unchanged.
# Usage: xid_interruption_test.sh REPO_ROOT (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN).
set -euo pipefail
repo="$1"
cd "$repo"
test_name=goodput_xid_interruption
policy=goodput-test
# shellcheck source=../sentinel/sentinel_env.sh
source "$repo/tests/integration/sentinel/sentinel_env.sh"
jobns=goodput-train
ledgerns=gpufleet-system
cleanup_extra() {
  kubectl delete namespace "$jobns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete configmaps -n "$ledgerns" -l goodput.gpufleet.io/job-namespace="$jobns" --ignore-not-found >/dev/null 2>&1 || true
}

apply_sentinel_crds
for ns in "$jobns" "$ledgerns"; do
  kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
done
start_fleet 4 0

start_controller() {
  "$gpufleet" controller --controllers=sentinel,goodput --metrics-addr 127.0.0.1:0 \
    --set sentinel.sim-state-dir="$state" --set sentinel.policy="$policy" \
    --set goodput.namespace="$ledgerns" >>"$work/controller.log" 2>&1 &
  controller_pid=$!
}
"$gpufleet" agent --sim-state-dir "$state" --fsync=false >"$work/agent.log" 2>&1 &
agent_pid=$!
start_controller

kubectl apply -f - >/dev/null <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: $policy}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     taint: "nvidia.com/gpu-error=fatal:NoSchedule", remediate: reboot}
  breaker: {windowSeconds: 600, maxFraction: 0.5}
  drain: {deadlineSeconds: 20, terminatingTimeoutSeconds: 10}
  remediation: {defaultAction: reboot, maxAttempts: 2, timeoutSeconds: 60}
  validation: {categories: [diagnostics/dcgm-r1], newNodes: false, deadlineSeconds: 600}
YAML
until_ok 60 "SentinelPolicy $policy loaded" policy_loaded

kubectl apply -n "$jobns" -f - >/dev/null <<'YAML'
apiVersion: batch/v1
kind: Job
metadata: {name: llama}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  backoffLimit: 6
  template:
    metadata:
      labels: {goodput.gpufleet.io/job: llama}
      annotations:
        goodput.gpufleet.io/last-checkpoint: none
        sim.gpufleet.io/duration: forever
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 5
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      containers:
      - name: train
        image: example.com/llama-train:1
        resources:
          limits: {nvidia.com/gpu: "8"}
YAML

goodput_json() { "$gpufleet" goodput -o json --namespace "$ledgerns" >"$work/goodput.json" 2>"$work/goodput.err"; }
job_field() {  # jq expression over the llama job of the last goodput document
  jq -r "[.jobs[] | select(.namespace == \"$jobns\" and .name == \"llama\")][0] | $1" "$work/goodput.json"
}
running_pods() {
  kubectl get pods -n "$jobns" -l goodput.gpufleet.io/job=llama --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{"|"}{.spec.nodeName}{"\n"}{end}' |
    grep -c '^|' || true
}
two_running() { (($(running_pods) == 2)); }
ledger_state_is() { goodput_json && [[ $(job_field .state) == "$1" ]]; }
show() {
  echo "--- goodput" >&2; cat "$work/goodput.json" "$work/goodput.err" >&2 || true
  kubectl get pods -n "$jobns" -o wide >&2 || true
  kubectl get configmaps -n "$ledgerns" -l goodput.gpufleet.io/job-namespace -o yaml >&2 || true
}
# Every failure shows the goodput document, the pods and the ledgers first.
eval "env_$(declare -f fail)"
fail() { show; env_fail "$@"; }
until_ok 90 "the Job's 2 pods running" two_running
until_ok 30 "the ledger shows the job Running" ledger_state_is Running
sleep 3  # productive time before the fault

node=$(kubectl get pods -n "$jobns" -l goodput.gpufleet.io/job=llama \
  -o jsonpath='{.items[?(@.metadata.annotations.batch\.kubernetes\.io/job-completion-index=="0")].spec.nodeName}')
[[ -n $node ]] || fail "no node for pod index 0"
"$gpufleet" sim inject --state-dir "$state" --event "{node: $node, type: xid, gpu: 3, code: 79}" >/dev/null
has_incident() { (($(incidents "$node") >= 1)); }
until_ok 30 "a Remediation of $node" has_incident
off_node() {
  two_running && ! kubectl get pods -n "$jobns" -l goodput.gpufleet.io/job=llama \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -qx "$node"
}
until_ok 120 "the evicted pod recreated on another node" off_node
resumed() { goodput_json && [[ $(job_field .state) == Running && $(job_field .interruptions) == 1 ]]; }
until_ok 60 "the ledger shows one interruption and the job running again" resumed

check() {  # the job's numbers: one GpuXid interruption, lost > 0, ETTR < 1 (sets lost, ettr)
  local cause n
  cause=$(job_field .lastCause)
  lost=$(job_field .lostSeconds)
  ettr=$(job_field .ettr)
  n=$(job_field .interruptions)
  [[ $cause == GpuXid ]] || { fail "last cause $cause, not GpuXid"; }
  [[ $n == 1 ]] || { fail "$n interruptions, not 1"; }
  ((lost > 0)) || { fail "lost seconds $lost, not > 0"; }
  jq -e "[.jobs[] | select(.name == \"llama\")][0].ettr < 1" "$work/goodput.json" >/dev/null ||
    { fail "ETTR $ettr, not < 1"; }
}
check
lost1=$lost ettr1=$ettr
settled1=$(job_field '.lostSecondsByCause.GpuXid')
echo "measured: lost ${lost1}s (GpuXid ${settled1}s), ETTR $ettr1"

# kill -9 and start again: nothing lost, nothing counted twice.
kill -9 "$controller_pid"
wait "$controller_pid" 2>/dev/null || true
cm=$(kubectl get configmaps -n "$ledgerns" -l goodput.gpufleet.io/job-namespace="$jobns" -o name)
rv_before=$(kubectl get -n "$ledgerns" "$cm" -o jsonpath='{.metadata.resourceVersion}')
start_controller
metrics_url() {
  grep -o 'msg="serving metrics and health" url=http://127.0.0.1:[0-9]*' "$work/controller.log" | tail -n 1 | sed 's/.*url=//'
}
restarted_interruptions() {
  local url
  url=$(metrics_url)
  [[ -n $url ]] && curl -s -m 5 "$url/metrics" | grep -q '^gpufleet_goodput_interruptions{cause="GpuXid"} 1$'
}
until_ok 60 "the restarted controller reports the interruption" restarted_interruptions
sleep 2
goodput_json
check
lost2=$lost ettr2=$ettr
settled2=$(job_field '.lostSecondsByCause.GpuXid')
[[ $settled2 == "$settled1" ]] || { fail "GpuXid lost ${settled1}s before the restart, ${settled2}s after"; }
rv_after=$(kubectl get -n "$ledgerns" "$cm" -o jsonpath='{.metadata.resourceVersion}')
echo "ok: one GpuXid interruption, lost ${lost1}s (GpuXid ${settled1}s) and ETTR $ettr1; after kill -9 and restart lost ${lost2}s, ETTR $ettr2, still 1 interruption (ledger ConfigMap rv $rv_before → $rv_after)"
