# Part of `make demo` (sourced by scripts/demo.sh; see README.md here): with the controllers and
# the policy up, a GPU of $node falls off the bus (Xid 79 in the simulator), and sentinel takes
# the node through the whole loop: cordon → drain → reboot (really, in the simulator, through
# its control inbox) → validation (a ValidationRequest that certify answers) → released, the
# node back in service.
step "sentinel: a GPU falls off the bus; quarantine, drain, reboot, validate, release"
kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: default}
spec:
  rules:
  - {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
     taint: "nvidia.com/gpu-error=fatal:NoSchedule", remediate: reboot}
  - {name: ib-port-down, when: "event.check == 'ib-port' && event.state == 'Fatal'", cordon: true}
  breaker: {windowSeconds: 600, maxFraction: 0.25}
  drain: {deadlineSeconds: 20, terminatingTimeoutSeconds: 10}
  remediation: {defaultAction: reboot, maxAttempts: 2, timeoutSeconds: 60}
  validation: {categories: [diagnostics/dcgm-r1], newNodes: false, deadlineSeconds: 600}
YAML
# dcgm-r1 (the quick diagnostic, ~30 s on a real host and in the simulator) keeps the demo short;
# a production policy would ask for dcgm-r2 or r3 after a reboot.
echo "SentinelPolicy default: Fatal Xid → cordon + taint + reboot, then certify's dcgm-r1 before release; breaker at 25 % of the GPU nodes"
# The fault goes in once the policy is loaded, so fault → cordon measures sentinel, not start-up.
for _ in $(seq 60); do
  gen=$(kubectl --kubeconfig "$kubeconfig" get sentinelpolicy default -o jsonpath='{.metadata.generation}/{.status.observedGeneration}')
  [[ ${gen%/*} == "${gen#*/}" ]] && break
  sleep 0.5
done
echo "policy loaded (generation ${gen%/*}); $(kubectl --kubeconfig "$kubeconfig" get sentinelpolicy default -o jsonpath='{.status.gpuNodes}') GPU nodes governed"
# A training job runs on the fleet: 2 pods of 8 GPUs, one gang (goodput.gpufleet.io/job), which
# says when it last checkpointed (docs/goodput.md "The checkpoint contract"). The fault hits
# the node of its first pod, so goodput has an interruption to account for.
kubectl --kubeconfig "$kubeconfig" create namespace train >/dev/null 2>&1 || true
checkpoint=$(date -u -d '-20 seconds' +%Y-%m-%dT%H:%M:%SZ)
kubectl --kubeconfig "$kubeconfig" -n train apply -f - >/dev/null <<YAML
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
        goodput.gpufleet.io/last-checkpoint: "$checkpoint"
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
train_pods() {  # Running pods of the job, "index node" per line
  kubectl --kubeconfig "$kubeconfig" -n train get pods -l goodput.gpufleet.io/job=llama \
    --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.annotations.batch\.kubernetes\.io/job-completion-index} {.spec.nodeName}{"\n"}{end}'
}
for _ in $(seq 120); do
  (($(train_pods | grep -c .) >= 2)) && break
  sleep 0.5
done
train_node=$(train_pods | awk '$1 == 0 {print $2}')
if [[ -n $train_node ]]; then
  node=$train_node
  echo "training job train/llama running: $(train_pods | awk '{printf "%spod %s on %s", sep, $1, $2; sep=", "}'); last checkpoint $checkpoint"
  sleep 3  # some productive time before the fault
else
  echo "training job train/llama not running yet; the fault goes to $node"
fi
"$gpufleet" sim inject --state-dir "$demo_dir/sim" --event "{node: $node, type: xid, gpu: 3, code: 79}" >/dev/null
echo "injected Xid 79 on GPU 3 of $node; its kernel log ($demo_dir/sim/nodes/$node/dev/kmsg) reads:"
for _ in $(seq 20); do
  grep -q 'Xid' "$demo_dir/sim/nodes/$node/dev/kmsg" 2>/dev/null && break
  sleep 0.2
done
grep 'Xid' "$demo_dir/sim/nodes/$node/dev/kmsg" | tail -n 2
sentinel_phase() {
  kubectl --kubeconfig "$kubeconfig" get remediations -l "sentinel.gpufleet.io/node=$node" \
    -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' 2>/dev/null | tail -n 1
}
sentinel_seen=""
sentinel_wait() {  # phase... : wait (bounded) until the incident reaches one of them
  local deadline=$((SECONDS + ${sentinel_timeout:-30})) p
  while ((SECONDS < deadline)); do
    p=$(sentinel_phase)
    if [[ -n $p && " $sentinel_seen " != *" $p "* ]]; then
      sentinel_seen="$sentinel_seen $p"
      printf '  %-12s %s\n' "$p" "$(date +%T)"
    fi
    for want in "$@"; do [[ $p == "$want" ]] && return 0; done
    sleep 0.3
  done
  return 1
}
echo "incident of $node:"
sentinel_timeout=40 sentinel_wait Draining Remediating Validating Released Failed || true
kubectl --kubeconfig "$kubeconfig" get node "$node" \
  -o jsonpath='  node: unschedulable={.spec.unschedulable} cordon-owners={.metadata.annotations.gpufleet\.io/cordon-owners} taints={.spec.taints[*].key}{"\n"}'
sentinel_timeout=60 sentinel_wait Validating Released Failed || true
echo "  reboot: boot id now $(kubectl --kubeconfig "$kubeconfig" get node "$node" -o jsonpath='{.status.nodeInfo.bootID}')"
loop_closed=false
if sentinel_timeout=90 sentinel_wait Released Failed && [[ $(sentinel_phase) == Released ]]; then
  loop_closed=true
else
  echo "  not released yet: the node stays out of scheduling until certify passes it"
  kubectl --kubeconfig "$kubeconfig" get validationrequests -l "sentinel.gpufleet.io/node=$node" 2>/dev/null || true
fi
rem() {  # jsonpath of the node's latest incident
  kubectl --kubeconfig "$kubeconfig" get remediations -l "sentinel.gpufleet.io/node=$node" \
    -o jsonpath="{.items[-1:].$1}"
}
count() {  # a count of the incident's record; 0 when not written
  local v
  v=$(rem "$1")
  echo "${v:-0}"
}
echo "the incident's record (each step written before it was taken):"
echo "  quarantined $(rem status.quarantinedAt) (fault → cordon $(rem status.cordonLatencyMs) ms)"
echo "  drain       $(rem status.drainStartedAt): evicted $(count status.drain.evicted), deleted $(count status.drain.deleted), forced $(count status.drain.forced)"
if [[ -n $(rem 'status.jobs[*].name') ]]; then  # the job-aware drain: a gang goes as one unit
  echo "  jobs        $(rem 'status.jobs[*].namespace')/$(rem 'status.jobs[*].name') disrupted as one unit ($(rem 'status.jobs[*].reason')): $(rem 'status.jobs[*].pods[*].name')"
fi
echo "  $(rem status.action.type)      requested $(rem status.action.requestedAt), attempt $(rem status.action.attempt) → $(rem status.action.result)"
vr=$(rem status.validationRequest)
echo "  validation  ValidationRequest $vr: $(kubectl --kubeconfig "$kubeconfig" get validationrequest "$vr" -o jsonpath='{.status.phase} ({.status.message})' 2>/dev/null)"
echo "  phase       $(rem status.phase): $(rem status.message)"
unschedulable=$(kubectl --kubeconfig "$kubeconfig" get node "$node" -o jsonpath='{.spec.unschedulable}')
echo "  node now:   unschedulable=${unschedulable:-false} taints=[$(kubectl --kubeconfig "$kubeconfig" get node "$node" -o jsonpath='{.spec.taints[*].key}')]"
if $loop_closed; then
  echo "the loop is closed: $node was quarantined, drained, rebooted, certified by certify and returned to service"
fi
"$gpufleet" sentinel status --kubeconfig "$kubeconfig" | sed -n '1,20p'
# What the fault cost the training job: goodput's ledger (its evicted pods came back on other
# nodes; the work since the last checkpoint is redone).
for _ in $(seq 60); do
  [[ $(kubectl --kubeconfig "$kubeconfig" -n train get pods -l goodput.gpufleet.io/job=llama \
    --field-selector=status.phase=Running -o name | grep -c .) -ge 2 ]] && break
  sleep 0.5
done
sleep 2
echo "goodput of the training job (gpufleet goodput):"
"$gpufleet" goodput --kubeconfig "$kubeconfig" | sed 's/^/  /'
