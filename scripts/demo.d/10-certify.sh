# certify's part of `make demo` (sourced by scripts/demo.sh; see README.md here): one node's
# NVLinks are degraded in the simulator (nothing a health check sees: only a collective finds
# it), then a Certification runs NCCL all-reduce on every H100 node and names that node.
step "certify: run NCCL all-reduce on every H100 node and judge it (a Certification)"
slow_node=$(kubectl --kubeconfig "$kubeconfig" get nodes -o name | sed -n '6s|.*/||p')
"$gpufleet" sim inject --state-dir "$demo_dir/sim" \
  --event "{node: $slow_node, type: nvlinkDegraded, factor: 0.5}" >/dev/null
echo "degraded the NVLinks of $slow_node to half their bandwidth (no Xid, no health signal)"
kubectl --kubeconfig "$kubeconfig" delete certification demo-h100 --ignore-not-found >/dev/null
kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: Certification
metadata: {name: demo-h100, namespace: default}
spec:
  maxDuration: 10m
  targets:
    nodeSelector: {matchLabels: {gpufleet.io/pool: h100}}
    tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  categories:
    - name: communication/nccl-all-reduce
      scale: perNode
      iterations: 1
      thresholds: {busBandwidthGBps: "value >= 400.0"}
YAML
for _ in $(seq 100); do
  phase=$(kubectl --kubeconfig "$kubeconfig" get certification demo-h100 -o jsonpath='{.status.phase}' 2>/dev/null)
  [[ $phase == Passed || $phase == Failed ]] && break
  sleep 0.5
done
kubectl --kubeconfig "$kubeconfig" get certification demo-h100 -o wide
"$gpufleet" certify report demo-h100 -n default --kubeconfig "$kubeconfig" | sed -n '1,6p'
echo "..."
echo "the node degraded above ($slow_node):"
"$gpufleet" certify report demo-h100 -n default --kubeconfig "$kubeconfig" | grep -E "^NODE|^$slow_node " || true
"$gpufleet" certify report demo-h100 -n default --kubeconfig "$kubeconfig" -o junit >"$demo_dir/certify-junit.xml"
echo "JUnit XML for CI: $demo_dir/certify-junit.xml"
"$gpufleet" sim inject --state-dir "$demo_dir/sim" --event "{node: $slow_node, type: clear}" >/dev/null
echo "($slow_node repaired in the simulator for the parts after this one)"
