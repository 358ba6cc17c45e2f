# Part of `make demo` (sourced by scripts/demo.sh; see README.md here): sentinel takes the node
# with the injected Xid 79 through the whole loop — cordon → drain → reboot (really, in the
# simulator, through its control inbox) → validation (a ValidationRequest certify answers) →
# released. When nobody answers the ValidationRequest in time the part shows the Validating
# phase and moves on.
step "7. sentinel: quarantine, drain, reboot, validate, release"
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
  validation: {categories: [diagnostics/dcgm-r2], newNodes: false, deadlineSeconds: 600}
YAML
echo "SentinelPolicy default: Fatal Xid → cordon + taint + reboot; breaker at 25 % of the GPU nodes"
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
if ! sentinel_timeout=45 sentinel_wait Released Failed; then
  echo "  the ValidationRequest is not answered yet (no certify in this build, or still running):"
  kubectl --kubeconfig "$kubeconfig" get validationrequests -l "sentinel.gpufleet.io/node=$node" 2>/dev/null || true
  echo "  the node stays out of scheduling until certify passes it; moving on"
fi
echo "the incident's record (each step written before it was taken):"
kubectl --kubeconfig "$kubeconfig" get remediations -l "sentinel.gpufleet.io/node=$node" -o jsonpath='{range .items[-1:]}  quarantined {.status.quarantinedAt} (fault → cordon {.status.cordonLatencyMs} ms)
  drain       {.status.drainStartedAt} evicted={.status.drain.evicted} deleted={.status.drain.deleted} forced={.status.drain.forced}
  {.status.action.type}      requested {.status.action.requestedAt} attempt {.status.action.attempt} → {.status.action.result}
  validation  ValidationRequest {.status.validationRequest}
  phase       {.status.phase}: {.status.message}{"\n"}{end}'
"$gpufleet" sentinel status --kubeconfig "$kubeconfig" | sed -n '1,20p'
