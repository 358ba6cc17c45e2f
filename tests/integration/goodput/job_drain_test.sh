#!/usr/bin/env bash
# Sentinel's job-aware drain on a live cluster (docs/goodput.md "Job-aware disruption"): a
# training job of two pods on two simulated nodes, opted into the checkpoint contract
# (goodput.gpufleet.io/checkpoint: on-request), and a Fatal Xid on one pod's node.
#  A. Both pods are asked to checkpoint with the same request id and no pod is evicted while
#     the job may checkpoint; the test answers (checkpoint-acknowledged on the pod on the
#     healthy node) and the whole gang is evicted at once, on both nodes; status.jobs says
#     Acknowledged.
#  B. The job's replacement pods, a new fault under one of them and an 8 s checkpoint
#     timeout: the controller is killed with SIGKILL while the job may checkpoint and started
#     again; the request id is unchanged and, past the deadline, the gang is disrupted exactly
#     once (DeadlineExceeded), and its replacements are never evicted.
# Evictions are counted per pod uid from a watch of the pods (the Eviction API marks each pod it
# evicts with the condition DisruptionTarget/EvictionByEvictionAPI) and from the controller's
# log ("sentinel: job pod evicted").
# Usage: job_drain_test.sh REPO_ROOT (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN).
set -euo pipefail
repo="$1"
cd "$repo"
test_name=goodput_job_drain
policy=job-drain-test
# shellcheck source=../sentinel/sentinel_env.sh
source "$repo/tests/integration/sentinel/sentinel_env.sh"
jobns=job-drain
watch_pid=""
cleanup_extra() {
  kubectl delete namespace "$jobns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
# The pod watch stops first: the fixture's cleanup waits for every child.
trap '[[ -n $watch_pid ]] && kill "$watch_pid" 2>/dev/null; cleanup' EXIT

apply_sentinel_crds
kubectl create namespace "$jobns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
start_fleet 6 0

start_controller() {
  "$gpufleet" controller --controllers=sentinel --metrics-addr 127.0.0.1:0 \
    --set sentinel.sim-state-dir="$state" --set sentinel.policy="$policy" >>"$work/controller.log" 2>&1 &
  controller_pid=$!
}
"$gpufleet" agent --sim-state-dir "$state" --fsync=false >"$work/agent.log" 2>&1 &
agent_pid=$!
start_controller

apply_policy() {  # CHECKPOINT_TIMEOUT_SECONDS
  kubectl apply -f - >/dev/null <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: $policy}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     taint: "nvidia.com/gpu-error=fatal:NoSchedule", remediate: reboot}
  breaker: {windowSeconds: 600, maxFraction: 0.5}
  drain: {deadlineSeconds: 60, terminatingTimeoutSeconds: 10, checkpointTimeoutSeconds: $1}
  remediation: {defaultAction: reboot, maxAttempts: 2, timeoutSeconds: 60}
  validation: {categories: [diagnostics/dcgm-r1], newNodes: false, deadlineSeconds: 600}
YAML
}
apply_policy 120
until_ok 60 "SentinelPolicy $policy loaded" policy_loaded

# Every version of every pod of the job's namespace:
# name|uid|node|DisruptionTarget reason|checkpoint request id.
kubectl get pods -n "$jobns" --watch -o \
  jsonpath='{.metadata.name}|{.metadata.uid}|{.spec.nodeName}|{.status.conditions[?(@.type=="DisruptionTarget")].reason}|{.metadata.annotations.goodput\.gpufleet\.io/checkpoint-requested}{"\n"}' \
  >"$work/pods.watch" 2>"$work/pods.watch.err" &
watch_pid=$!

make_pod() {  # NAME NODE: one of the job's pods, bound to NODE
  kubectl apply -n "$jobns" -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {goodput.gpufleet.io/job: llama}
  annotations: {goodput.gpufleet.io/checkpoint: on-request, sim.gpufleet.io/duration: forever}
spec:
  nodeName: $2
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  tolerations: [{operator: Exists}]
  containers:
  - name: train
    image: example.com/llama-train:1
    resources:
      limits: {nvidia.com/gpu: "8"}
YAML
}
pod_field() { kubectl get pod -n "$jobns" "$1" -o jsonpath="$2" 2>/dev/null; }
uid_of() { pod_field "$1" '{.metadata.uid}'; }
running() { [[ $(pod_field "$1" '{.status.phase}') == Running ]]; }
requested() { pod_field "$1" '{.metadata.annotations.goodput\.gpufleet\.io/checkpoint-requested}'; }
asked_with() { [[ $(requested "$1") == "$2" ]]; }
gone() {  # NAME UID: no pod NAME with that uid, or it is being deleted
  local now
  now=$(pod_field "$1" '{.metadata.uid}|{.metadata.deletionTimestamp}')
  [[ -z $now || ${now%%|*} != "$2" || -n ${now#*|} ]]
}
evicted_uids() {  # the uids the Eviction API marked, sorted
  awk -F'|' '$4 == "EvictionByEvictionAPI" {print $2}' "$work/pods.watch" | sort -u
}
request_ids() {  # UID...: the request ids the pods carried, over every version seen
  local u
  for u in "$@"; do awk -F'|' -v u="$u" '$2 == u && $5 != "" {print $5}' "$work/pods.watch"; done | sort -u | xargs
}
log_evictions() {  # UID: the controller's evictions of that pod (both runs: one log)
  grep -c "msg=\"sentinel: job pod evicted\".*uid=$1" "$work/controller.log" || true
}
incident_of() {  # NODE: its newest Remediation's name
  kubectl get remediations -l "sentinel.gpufleet.io/node=$1" -o jsonpath='{.items[-1:].metadata.name}'
}
job_record() {  # INCIDENT JSONPATH-IN-THE-RECORD: status.jobs[0]'s field
  kubectl get remediation "$1" -o jsonpath="{.status.jobs[0]$2}"
}
disrupted() { [[ -n $(job_record "$1" .disruptedAt) ]]; }
show() {
  echo "--- pods" >&2; kubectl get pods -n "$jobns" -o wide >&2 || true
  echo "--- pod watch" >&2; cat "$work/pods.watch" "$work/pods.watch.err" >&2 || true
  echo "--- events" >&2; kubectl get events -n default --field-selector involvedObject.kind=Remediation >&2 || true
}
eval "env_$(declare -f fail)"
fail() { show; env_fail "$@"; }
ms() { date -d "$1" +%s%3N; }

# ---- A: asked, held, answered, the gang evicted together ----
a=${all[0]} b=${all[1]}
make_pod llama-0 "$a"
make_pod llama-1 "$b"
until_ok 60 "llama-0 and llama-1 running" bash -c "$(declare -f pod_field running); jobns=$jobns; running llama-0 && running llama-1"
uid0=$(uid_of llama-0) uid1=$(uid_of llama-1)

"$gpufleet" sim inject --state-dir "$state" --event "{node: $a, type: xid, gpu: 3, code: 79}" >/dev/null
has_incident() { [[ -n $(incident_of "$a") ]]; }
until_ok 30 "a Remediation of $a" has_incident
inc1=$(incident_of "$a")
asked_both() { asked_with llama-0 "$inc1" && asked_with llama-1 "$inc1"; }
until_ok 30 "both pods asked to checkpoint with request $inc1" asked_both
[[ $(job_record "$inc1" .requestId) == "$inc1" ]] || fail "status.jobs[0].requestId is not $inc1"
deadline=$(pod_field llama-1 '{.metadata.annotations.goodput\.gpufleet\.io/checkpoint-deadline}')
[[ -n $deadline ]] || fail "llama-1 has no checkpoint-deadline"
held() { [[ $(kubectl get remediation "$inc1" -o jsonpath='{.status.drain.heldForCheckpoint}') == 1 ]]; }
until_ok 15 "status.drain.heldForCheckpoint 1 on $inc1" held
sleep 3  # the job checkpoints: nothing may be evicted meanwhile
[[ -z $(evicted_uids) ]] || fail "pods evicted while the job may checkpoint: $(evicted_uids)"
running llama-0 && running llama-1 || fail "a pod stopped while the job may checkpoint"
[[ $(phase "$a") == Draining ]] || fail "$inc1 is $(phase "$a"), not Draining"
[[ -z $(job_record "$inc1" .disruptedAt) ]] || fail "$inc1 recorded the job disrupted before any answer"

acked_at=$(date +%s%3N)
kubectl annotate pod -n "$jobns" llama-1 "goodput.gpufleet.io/checkpoint-acknowledged=$inc1" >/dev/null
both_gone() { gone llama-0 "$uid0" && gone llama-1 "$uid1"; }
until_ok 20 "both pods evicted after the answer" both_gone
answer_ms=$(($(date +%s%3N) - acked_at))
until_ok 10 "$inc1 records the job disrupted" disrupted "$inc1"
[[ $(job_record "$inc1" .reason) == Acknowledged ]] || fail "reason $(job_record "$inc1" .reason), not Acknowledged"
[[ $(job_record "$inc1" '.pods[*].uid' | tr ' ' '\n' | sort | xargs) == "$(printf '%s\n' "$uid0" "$uid1" | sort | xargs)" ]] ||
  fail "status.jobs[0].pods is not the two pods: $(job_record "$inc1" '.pods[*].uid')"
both_marked() { [[ $(evicted_uids | xargs) == "$(printf '%s\n' "$uid0" "$uid1" | sort | xargs)" ]]; }
until_ok 10 "both pods evicted through the Eviction API" both_marked
echo "A: request $inc1 on both pods, held until the answer; the gang evicted ${answer_ms} ms after it (deadline $deadline)"

# The job comes back on two healthy nodes; the first incident never touches its new pods.
c=${all[2]} d=${all[3]}
make_pod llama-2 "$c"
make_pod llama-3 "$d"
until_ok 60 "llama-2 and llama-3 running" bash -c "$(declare -f pod_field running); jobns=$jobns; running llama-2 && running llama-3"
uid2=$(uid_of llama-2) uid3=$(uid_of llama-3)

# ---- B: kill -9 during the wait; the deadline ends it, once ----
apply_policy 8
until_ok 60 "SentinelPolicy $policy reloaded" policy_loaded
"$gpufleet" sim inject --state-dir "$state" --event "{node: $c, type: xid, gpu: 3, code: 79}" >/dev/null
has_incident2() { [[ -n $(incident_of "$c") ]]; }
until_ok 30 "a Remediation of $c" has_incident2
inc2=$(incident_of "$c")
asked_both2() { asked_with llama-2 "$inc2" && asked_with llama-3 "$inc2"; }
until_ok 15 "both new pods asked to checkpoint with request $inc2" asked_both2
requested_at=$(job_record "$inc2" .requestedAt)
kill -9 "$controller_pid"
wait "$controller_pid" 2>/dev/null || true
killed_ms=$(($(date +%s%3N) - $(ms "$requested_at")))
[[ -z $(job_record "$inc2" .disruptedAt) ]] || fail "$inc2 disrupted the job before the kill"
start_controller
# The restarted controller resumes the wait: it runs before the deadline ends it.
restarted() { (($(grep -c 'msg="controller started" controller=sentinel ' "$work/controller.log") == 2)); }
until_ok 30 "the controller restarted" restarted
started_at=$(grep 'msg="controller started" controller=sentinel ' "$work/controller.log" | tail -n 1 | sed 's/^time=\([^ ]*\) .*/\1/')
restarted_ms=$(($(ms "$started_at") - $(ms "$requested_at")))
until_ok 40 "$inc2 records the job disrupted after the restart" disrupted "$inc2"
[[ $(job_record "$inc2" .reason) == DeadlineExceeded ]] || fail "reason $(job_record "$inc2" .reason), not DeadlineExceeded"
[[ $(job_record "$inc2" .requestId) == "$inc2" ]] || fail "the restart changed the request id: $(job_record "$inc2" .requestId)"
[[ $(job_record "$inc2" .requestedAt) == "$requested_at" ]] || fail "the restart asked again: requestedAt $requested_at → $(job_record "$inc2" .requestedAt)"
[[ $(request_ids "$uid2" "$uid3") == "$inc2" ]] || fail "the pods' request ids over time: $(request_ids "$uid2" "$uid3"), not $inc2 alone"
waited_ms=$(($(ms "$(job_record "$inc2" .disruptedAt)") - $(ms "$requested_at")))
((waited_ms >= 8000)) || fail "disrupted ${waited_ms} ms after the request, before the 8 s deadline"
both_gone2() { gone llama-2 "$uid2" && gone llama-3 "$uid3"; }
until_ok 20 "both pods evicted past the deadline" both_gone2

# The job's next replacements run on healthy nodes: never evicted, never asked.
e=${all[4]} f=${all[5]}
make_pod llama-4 "$e"
make_pod llama-5 "$f"
until_ok 60 "llama-4 and llama-5 running" bash -c "$(declare -f pod_field running); jobns=$jobns; running llama-4 && running llama-5"
uid4=$(uid_of llama-4) uid5=$(uid_of llama-5)
sleep 5  # both incidents look again meanwhile (drain, remediation)
running llama-4 && running llama-5 || fail "a replacement pod was stopped"
[[ -z $(requested llama-4)$(requested llama-5)$(request_ids "$uid4" "$uid5") ]] || fail "a replacement was asked to checkpoint"
[[ $(request_ids "$uid0" "$uid1") == "$inc1" ]] || fail "the first pods' request ids over time: $(request_ids "$uid0" "$uid1"), not $inc1 alone"

want=$(printf '%s\n' "$uid0" "$uid1" "$uid2" "$uid3" | sort | xargs)
[[ $(evicted_uids | xargs) == "$want" ]] || fail "evicted pods (by uid) $(evicted_uids | xargs), not the two gangs' $want"
for u in "$uid0" "$uid1" "$uid2" "$uid3"; do
  n=$(log_evictions "$u")
  ((n >= 1)) || fail "the controller logged no eviction of pod $u"
done
for u in "$uid4" "$uid5"; do
  (($(log_evictions "$u") == 0)) || fail "the replacement pod $u was evicted"
done
disruptions=$(grep -c "msg=\"sentinel: job disrupted\".*incident=$inc2" "$work/controller.log" || true)
((disruptions == 1)) || fail "$inc2 disrupted the job $disruptions times across the restart, not once"
requests=$(grep -c "msg=\"sentinel: checkpoint requested\".*incident=$inc2" "$work/controller.log" || true)
((requests == 1)) || fail "$inc2 asked for a checkpoint $requests times across the restart, not once"
events=$(kubectl get events -n default --field-selector "involvedObject.name=$inc2" -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | sort | xargs)
[[ $events == "CheckpointRequested JobDisrupted" ]] || fail "events of $inc2: '$events', not CheckpointRequested JobDisrupted"
echo "ok: A: one request ($inc1) on both pods, nothing evicted while held, the gang evicted on both nodes ${answer_ms} ms after the answer (Acknowledged); B: request $inc2 unchanged across kill -9 (killed ${killed_ms} ms after the request, running again after ${restarted_ms} ms), the gang disrupted once ${waited_ms} ms after the request (DeadlineExceeded); evicted uids: the 4 pods of the two gangs, none of the 2 replacements"
