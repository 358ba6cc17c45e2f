# hostpkg: roll the example sysctl package (examples/hostpkg/sysctl) out to the demo fleet and
# show the progress view. Sourced by scripts/demo.sh (see README.md here).
step "hostpkg: the sysctl package rolled out in batches"
kubectl --kubeconfig "$kubeconfig" create namespace gpufleet-system >/dev/null 2>&1 || true
kubectl --kubeconfig "$kubeconfig" apply --server-side \
  -f examples/hostpkg/sysctl/deploymentpolicy.yaml -f examples/hostpkg/sysctl/hostpackageset.yaml
echo "the controller cordons a batch, runs the stage pods (apply, config, interrupt,"
echo "post-interrupt) on each node, verifies and uncordons; progress as it goes:"
for _ in $(seq 8); do
  sleep 4
  kubectl --kubeconfig "$kubeconfig" get hostpackagesets
done
"$gpufleet" hostpkg status gpu-sysctl --kubeconfig "$kubeconfig"
kubectl --kubeconfig "$kubeconfig" -n gpufleet-system get pods -l hostpkg.gpufleet.io/set=gpu-sysctl \
  --no-headers 2>/dev/null | sed -n '1,5p'
echo "(the rollout goes on in the background: gpufleet hostpkg status gpu-sysctl --kubeconfig $kubeconfig)"
