#!/usr/bin/env bash
# `make demo`: brings up the local control plane and walks through what gpufleet does on it.
# `scripts/demo.sh down` stops it. State lives in build/demo (kept across runs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
demo_dir=$root/build/demo
kube_local=${KUBE_LOCAL_BIN:-$root/build/bin/kube-local}
gpufleet=$root/build/release/bin/gpufleet
kubeconfig=$demo_dir/kube-local/admin.kubeconfig

stop_background() {  # controllers and agents started by an earlier demo run
  local f
  for f in "$demo_dir"/*.pid; do
    [[ -f $f ]] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

if [[ ${1:-} == down ]]; then
  stop_background
  if [[ -d $demo_dir/sim ]]; then "$gpufleet" sim stop --state-dir "$demo_dir/sim" || true; fi
  "$kube_local" down --data-dir "$demo_dir/kube-local"
  echo "demo: control plane stopped (data kept in $demo_dir/kube-local)"
  exit 0
fi

mkdir -p "$demo_dir"
# kube-local carries a kubectl of the same version for machines without one.
if ! command -v kubectl >/dev/null 2>&1; then kubectl() { "$kube_local" kubectl "$@"; }; fi
# Steps are numbered as they are shown, so a part that is left out leaves no gap.
step_number=0
step() {
  step_number=$((step_number + 1))
  printf '\n\033[1m== %d. %s\033[0m\n' "$step_number" "$*"
}

step "Local control plane (etcd, kube-apiserver, controller-manager, scheduler on 127.0.0.1)"
if [[ -f $kubeconfig ]] && kubectl --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; then
  echo "already running: $kubeconfig"
else
  "$kube_local" up --data-dir "$demo_dir/kube-local" --detach
fi
echo "API server ready: $(kubectl --kubeconfig "$kubeconfig" get --raw /readyz)"
kubectl --kubeconfig "$kubeconfig" version 2>/dev/null | grep '^Server' || true

if "$gpufleet" recipe --help >/dev/null 2>&1; then
  step "A version-pinned recipe for EKS + H100 + Ubuntu, inference on Dynamo"
  "$gpufleet" recipe --service eks --accelerator h100 --os ubuntu --intent inference \
    --platform dynamo -o "$demo_dir/recipe.yaml"
  sed -n '1,25p' "$demo_dir/recipe.yaml"
  echo "... (full recipe: $demo_dir/recipe.yaml)"
  step "Bundles for every deployer"
  for d in helm argocd argocd-helm flux helmfile; do
    rm -rf "$demo_dir/bundle-$d"
    extra=()
    # Argo CD syncs from the Git repository the bundle is pushed to (the app of apps, and
    # argocd-helm for the charts that travel in the bundle, e.g. gpufleet's own).
    [[ $d == argocd* ]] && extra=(--repo-url https://git.example.com/gpu-cluster.git)
    "$gpufleet" bundle -r "$demo_dir/recipe.yaml" --deployer "$d" "${extra[@]}" \
      -o "$demo_dir/bundle-$d" >/dev/null
    echo "$d: $(find "$demo_dir/bundle-$d" -type f | wc -l) files in $demo_dir/bundle-$d"
  done
fi

step "A simulated GPU fleet: kubelets that heartbeat, run pods and emit real GPU signals"
"$gpufleet" sim stop --state-dir "$demo_dir/sim" >/dev/null 2>&1 || true
# The kubelet endpoint (pods/log through the API server) with kube-local's kubelet PKI; a
# control plane from before that PKI existed simply gets no logs.
pki="$demo_dir/kube-local/pki"
kubelet=()
[[ -f $pki/kubelet-serving.crt ]] && kubelet=(--kubelet-listen 127.0.0.1:0
  --kubelet-cert "$pki/kubelet-serving.crt" --kubelet-key "$pki/kubelet-serving.key"
  --kubelet-client-ca "$pki/ca.crt")
# --time-scale 4: simulated workloads (nccl-tests, DCGM, stage pods) and reboots run four times
# faster than on real hosts, so the demo's certify, sentinel and hostpkg parts fit in minutes.
"$gpufleet" sim --fleet examples/fleet-h100.yaml --kubeconfig "$kubeconfig" \
  --state-dir "$demo_dir/sim" --time-scale 4 "${kubelet[@]}" --detach
for _ in $(seq 60); do
  ready=$(kubectl --kubeconfig "$kubeconfig" get nodes --no-headers 2>/dev/null | grep -c ' Ready' || true)
  total=$(kubectl --kubeconfig "$kubeconfig" get nodes --no-headers 2>/dev/null | wc -l)
  ((total > 0 && ready == total)) && break
  sleep 1
done
kubectl --kubeconfig "$kubeconfig" get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count | sed -n '1,8p'
echo "... $ready of $total nodes Ready"

"$gpufleet" sim status --state-dir "$demo_dir/sim" | sed -n '1,15p'
# The node sentinel's part faults (once the controllers and the policy are up).
node=$(kubectl --kubeconfig "$kubeconfig" get nodes -o name | sed -n '1s|.*/||p')

step "gpufleet's controllers and node agents, as the chart runs them"
stop_background
kubectl --kubeconfig "$kubeconfig" apply --server-side -f deploy/crds/ >/dev/null
kubectl --kubeconfig "$kubeconfig" get crds -o name | grep gpufleet.io
# The chart's namespace: hostpkg's stage pods and goodput's ledgers live there.
kubectl --kubeconfig "$kubeconfig" create namespace gpufleet-system >/dev/null 2>&1 || true
# Every registered controller (certify, sentinel, hostpkg, ... and the sample echo) in one
# process per replica; the chart runs one Deployment per controller instead.
demo_controllers=$("$gpufleet" controller --list | awk -F'\t' '/^[a-z]/ {print $1}' | paste -sd, -)
echo "controllers: $demo_controllers"
# The admission webhook, as the chart serves it (docs/deploy.md "Admission webhook"): a CA and a
# serving certificate for 127.0.0.1 made once with openssl, POST /validate over HTTPS on every
# replica, and a ValidatingWebhookConfiguration through which the API server calls replica a.
webhook_dir=$demo_dir/webhook
if [[ ! -s $webhook_dir/tls.crt ]]; then
  mkdir -p "$webhook_dir"
  (
    cd "$webhook_dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=gpufleet-demo-webhook-ca \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout tls.key -out tls.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >tls.ext
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
      -extfile tls.ext -out tls.crt 2>/dev/null
  )
fi
metrics_port=18080
webhook_port=19443
for replica in a b; do
  "$gpufleet" controller --controllers="$demo_controllers" --kubeconfig "$kubeconfig" --leader-elect \
    --lease-namespace default --lease-name gpufleet-demo --identity "demo-$replica" \
    --metrics-addr "127.0.0.1:$metrics_port" --set sentinel.sim-state-dir="$demo_dir/sim" \
    --webhook-addr "127.0.0.1:$webhook_port" --webhook-cert-dir "$webhook_dir" \
    >"$demo_dir/controller-$replica.log" 2>&1 &
  echo $! >"$demo_dir/controller-$replica.pid"
  metrics_port=$((metrics_port + 1))
  webhook_port=$((webhook_port + 1))
done
"$gpufleet" agent --sim-state-dir "$demo_dir/sim" --kubeconfig "$kubeconfig" --fsync=false \
  >"$demo_dir/agent.log" 2>&1 &
echo $! >"$demo_dir/agent.pid"
for _ in $(seq 60); do
  curl -sf http://127.0.0.1:18080/readyz >/dev/null && curl -sf http://127.0.0.1:18081/readyz >/dev/null && break
  sleep 0.5
done
for port in 18080 18081; do
  echo "replica on :$port  /readyz: $(curl -s http://127.0.0.1:$port/readyz)"
done
ca_bundle=$(base64 -w0 <"$webhook_dir/ca.crt")
webhook_entry() {  # name resources [delete-resources]
  cat <<YAML
- name: $1.gpufleet.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  clientConfig: {url: "https://127.0.0.1:19443/validate", caBundle: "$ca_bundle"}
  rules:
  - {apiGroups: [gpufleet.io], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [$2], scope: "*"}
YAML
  [[ -n ${3:-} ]] && echo "  - {apiGroups: [gpufleet.io], apiVersions: [\"*\"], operations: [DELETE], resources: [$3], scope: \"*\"}"
  return 0
}
{
  printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n'
  printf 'metadata: {name: gpufleet-demo}\nwebhooks:\n'
  webhook_entry certify "certifications, workloadruns"
  webhook_entry sentinel sentinelpolicies
  webhook_entry hostpkg "hostpackagesets, deploymentpolicies" deploymentpolicies
} | kubectl --kubeconfig "$kubeconfig" apply -f - >/dev/null
echo "admission webhook: https://127.0.0.1:19443/validate (ValidatingWebhookConfiguration gpufleet-demo)"
for _ in $(seq 40); do  # the API server takes the configuration up within a moment
  refused=$(kubectl --kubeconfig "$kubeconfig" apply --dry-run=server -f - 2>&1 <<'YAML' || true
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
metadata: {name: demo-broken}
spec:
  rules: [{name: xid-fatal, when: "event.check == 'xid' &&", cordon: true}]
YAML
  )
  [[ $refused == *denied* ]] && break
  sleep 0.5
done
echo "a SentinelPolicy whose rule does not compile is refused before it is stored:"
echo "  ${refused:0:240}"
echo "leader: $(kubectl --kubeconfig "$kubeconfig" -n default get lease gpufleet-demo -o jsonpath='{.spec.holderIdentity}')"
echo "shared caches (replica a):"
caches=$(curl -s http://127.0.0.1:18080/debug/caches)  # whole, then cut: head would SIGPIPE curl
head -n 10 <<<"$caches"
for _ in $(seq 40); do
  n=$(kubectl --kubeconfig "$kubeconfig" get nodehealths --no-headers 2>/dev/null | wc -l)
  ((n > 0)) && break
  sleep 0.5
done
echo "node agents: $(grep -c . "$demo_dir/agent.log") log lines; NodeHealth objects written by them: $n"
kubectl --kubeconfig "$kubeconfig" get nodehealths 2>/dev/null | sed -n '1,5p'
echo "logs: $demo_dir/controller-a.log, controller-b.log, agent.log"

# Each subsystem's part of the demo (certify, sentinel, hostpkg) is a file of its own,
# sourced in name order with $gpufleet, $kubeconfig, $demo_dir, $node and step() in scope.
for part in scripts/demo.d/*.sh; do
  [[ -e "$part" ]] || continue
  # shellcheck source=/dev/null
  source "$part"
done

step "Reach the control plane yourself"
echo "  kubectl --kubeconfig $kubeconfig get --raw /readyz"
echo "  kubectl --kubeconfig $kubeconfig get nodes"
echo "Stop it with: make demo-down"
