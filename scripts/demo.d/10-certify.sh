# certify's part of `make demo` (sourced by scripts/demo.sh; see README.md here): certify the
# demo fleet's H100 pool with an all-reduce bandwidth threshold and find the node whose GPU
# fell off the bus in step 5 ($node).
step "7. certify: run NCCL all-reduce on every H100 node and judge it (a Certification)"
kubectl --kubeconfig "$kubeconfig" delete certification demo-h100 --ignore-not-found >/dev/null
kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: Certification
metadata: {name: demo-h100, namespace: default}
spec:
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
echo "the node degraded in step 5 ($node):"
"$gpufleet" certify report demo-h100 -n default --kubeconfig "$kubeconfig" | grep -E "^NODE|^$node " || true
"$gpufleet" certify report demo-h100 -n default --kubeconfig "$kubeconfig" -o junit >"$demo_dir/certify-junit.xml"
echo "JUnit XML for CI: $demo_dir/certify-junit.xml"
