# hostpkg: roll the example sysctl package (examples/hostpkg/sysctl) out to the demo fleet and
# show the progress view; every node is certified (a ValidationRequest certify answers) before
# its uncordon. Sourced by scripts/demo.sh (see README.md here).
step "hostpkg: the sysctl package rolled out in batches, each node certified before it returns"
kubectl --kubeconfig "$kubeconfig" create namespace gpufleet-system >/dev/null 2>&1 || true
# The example says `validation: {when: Never}` (a sysctl reload needs no GPU check); the demo
# validates every node, as a driver or kernel set does by default, to show the loop.
hostpkg_set=$(sed 's/^  validation: {when: Never}$/  validation: {when: Always, categories: [diagnostics\/dcgm-r1]}/' \
  examples/hostpkg/sysctl/hostpackageset.yaml)
grep -q 'when: Always' <<<"$hostpkg_set" || { echo "demo: the example set's validation line moved" >&2; false; }
kubectl --kubeconfig "$kubeconfig" apply --server-side -f examples/hostpkg/sysctl/deploymentpolicy.yaml
kubectl --kubeconfig "$kubeconfig" apply --server-side -f - <<<"$hostpkg_set"
echo "the controller cordons a batch, runs the stage pods (apply, config, interrupt,"
echo "post-interrupt) on each node, verifies, asks certify (dcgm-r1) and uncordons; progress:"
for _ in $(seq 8); do
  sleep 4
  kubectl --kubeconfig "$kubeconfig" get hostpackagesets
done
"$gpufleet" hostpkg status gpu-sysctl --kubeconfig "$kubeconfig"
kubectl --kubeconfig "$kubeconfig" -n gpufleet-system get pods -l hostpkg.gpufleet.io/set=gpu-sysctl \
  --no-headers 2>/dev/null | sed -n '1,5p'
echo "certify's verdicts on the nodes done so far (each asked before the node's uncordon):"
kubectl --kubeconfig "$kubeconfig" get validationrequests -l hostpkg.gpufleet.io/set=gpu-sysctl \
  2>/dev/null | sed -n '1,5p'
echo "(the rollout goes on in the background: gpufleet hostpkg status gpu-sysctl --kubeconfig $kubeconfig)"
