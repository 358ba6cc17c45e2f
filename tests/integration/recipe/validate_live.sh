#!/usr/bin/env bash
# validate and diff straight against kube-local (through the Kubernetes client, $KUBECONFIG):
# a healthy and a broken Deployment, a DaemonSet that is not fully ready, an Established CRD, a
# missing one and one that is not Established (its kind clashes), a Running pod whose container
# waits in CrashLoopBackOff, a GPU node with GPU feature discovery labels, and Helm release
# records (one at a version the recipe does not pin). Then the broken parts are repaired and
# validate must pass. `snapshot --from-dir` over kubectl dumps must agree with the live one.
# Usage: validate_live.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN). Needs python3.
set -euo pipefail
repo="$1"
gpufleet="$GPUFLEET_BIN"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
id="recipe-it-$$"
work="$(mktemp -d)"
cleanup() {
  # The Helm release records first, and synchronously: a namespace is deleted in the
  # background, and until it is gone its records would look like releases to the next test's
  # detection (recipe_inputs_live saw this test's cert-manager record and failed).
  kubectl delete secrets -n "$id" --field-selector type=helm.sh/release.v1 --ignore-not-found \
    --wait=true >/dev/null 2>&1 || true
  kubectl delete namespace "$id" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete node "$id-gpu" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete crd "widgets.$id.gpufleet.io" "gadgets.$id.gpufleet.io" "clashes.$id.gpufleet.io" \
    --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

kubectl create namespace "$id" >/dev/null

# A GPU node as GPU feature discovery and NFD label it (no kubelet: nothing runs on it).
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $id-gpu
  labels:
    gpufleet.io/recipe-it: $id
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
    nvidia.com/gpu.count: "8"
    nvidia.com/gpu.family: hopper
    nvidia.com/cuda.driver.major: "580"
    nvidia.com/cuda.driver.minor: "95"
    nvidia.com/cuda.driver.rev: "05"
    feature.node.kubernetes.io/system-os_release.ID: ubuntu
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "24.04"
YAML
kubectl patch node "$id-gpu" --subresource=status --type=merge -p '{"status":{
  "capacity":{"nvidia.com/gpu":"8","cpu":"8","memory":"64Gi","pods":"110"},
  "nodeInfo":{"osImage":"Ubuntu 24.04.1 LTS","kernelVersion":"6.8.0-1015-aws",
    "containerRuntimeVersion":"containerd://2.0.4","kubeletVersion":"v1.32.4",
    "kubeProxyVersion":"","machineID":"","systemUUID":"","bootID":"","operatingSystem":"linux","architecture":"amd64"}}}' >/dev/null

# Workloads: replicas 0 is available at once; replicas 1 never becomes available (no kubelet).
kubectl apply -n "$id" -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: healthy}
spec:
  replicas: 0
  selector: {matchLabels: {app: healthy}}
  template:
    metadata: {labels: {app: healthy}}
    spec: {containers: [{name: c, image: registry.invalid/healthy:1}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken}
spec:
  replicas: 1
  selector: {matchLabels: {app: broken}}
  template:
    metadata: {labels: {app: broken}}
    spec:
      nodeSelector: {gpufleet.io/none: "true"}
      containers: [{name: c, image: registry.invalid/broken:1}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {gpufleet.io/recipe-it: $id}
      tolerations: [{operator: Exists}]
      containers: [{name: c, image: registry.invalid/agent:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: crashing}
spec:
  nodeName: $id-gpu
  containers: [{name: server, image: registry.invalid/server:1}]
YAML
kubectl apply -f - >/dev/null <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.$id.gpufleet.io}
spec:
  group: $id.gpufleet.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
YAML
crd() {  # crd PLURAL KIND: a CRD in the test group
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: $1.$id.gpufleet.io}
spec:
  group: $id.gpufleet.io
  scope: Namespaced
  names: {plural: $1, kind: $2}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
YAML
}
# Its kind is the widgets' kind: the API server never accepts its names, so never Established.
crd clashes Widget
# The pod runs, but its container waits in CrashLoopBackOff (as a kubelet would report it).
kubectl patch pod crashing -n "$id" --subresource=status --type=merge -p '{"status":{"phase":"Running",
  "containerStatuses":[{"name":"server","ready":false,"restartCount":7,"image":"registry.invalid/server:1",
  "imageID":"","started":false,"state":{"waiting":{"reason":"CrashLoopBackOff",
  "message":"back-off 5m0s restarting failed container=server"}}}]}}' >/dev/null

# Helm release records (from tests/recipe/testdata), moved into the test namespace.
python3 - "$repo/tests/recipe/testdata/helm-releases.json" "$id" >"$work/releases.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for item in doc["items"]:
    item["metadata"]["namespace"] = sys.argv[2]
print(json.dumps(doc))
PY
kubectl apply -f "$work/releases.json" >/dev/null

# The recipe: cluster and pool constraints, health checks on the objects above, components
# matching the release records (namespaces as the releases name them).
cat >"$work/recipe.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Recipe
metadata: {name: recipe-it, digest: "sha256:0"}
spec:
  components:
    - {name: cert-manager, namespace: cert-manager, values: {crds: {enabled: true, keep: true}},
       chart: {repository: https://charts.jetstack.io, name: cert-manager, version: v1.20.2}}
    - {name: gpu-operator, namespace: gpu-operator, dependencies: [cert-manager],
       values: {driver: {version: 580.126.20}},
       chart: {repository: https://helm.ngc.nvidia.com/nvidia, name: gpu-operator, version: v26.3.2}}
    - {name: kueue, namespace: kueue-system,
       chart: {repository: oci://registry.k8s.io/kueue/charts, name: kueue, version: 0.17.1}}
  constraints:
    - {name: kubernetes-version, fact: kubernetes.version, requirement: ">= 1.32"}
  nodePools:
    - name: gpu
      accelerator: h100
      nodeSelector: {gpufleet.io/recipe-it: $id}
      constraints:
        - {name: gpu-driver, fact: gpu.driver, requirement: ">= 580.95"}
        - {name: gpu-product, fact: gpu.product, requirement: "matches NVIDIA-H100*"}
        - {name: node-kernel, fact: node.kernel, requirement: ">= 6.8"}
  health:
    - {component: gpu-operator, kind: Deployment, namespace: $id, name: healthy}
    - {component: gpu-operator, kind: Deployment, namespace: $id, name: broken}
    - {component: gpu-operator, kind: CustomResourceDefinition, name: widgets.$id.gpufleet.io}
    - {component: gpu-operator, kind: CustomResourceDefinition, name: gadgets.$id.gpufleet.io}
    - {component: gpu-operator, kind: CustomResourceDefinition, name: clashes.$id.gpufleet.io}
    - {component: gpu-operator, kind: DaemonSet, namespace: $id, name: agent}
    - {component: gpu-operator, kind: Pods, namespace: $id}
YAML
# The same recipe pinning another gpu-operator version than the one installed.
sed 's/version: v26.3.2/version: v26.3.1/' "$work/recipe.yaml" >"$work/recipe-wrong-version.yaml"

snapshot() {
  local d="$work/dump"
  rm -rf "$d" && mkdir -p "$d"
  kubectl version -o json >"$d/version.json"
  kubectl get nodes -o json >"$d/nodes.json"
  kubectl get secrets -A --field-selector type=helm.sh/release.v1 -o json >"$d/helm-releases.json"
  kubectl get crd -o json >"$d/crds.json"
  kubectl get deployments -A -o json >"$d/deployments.json"
  kubectl get daemonsets -A -o json >"$d/daemonsets.json"
  kubectl get statefulsets -A -o json >"$d/statefulsets.json"
  kubectl get pods -A -o json >"$d/pods.json"
  "$gpufleet" snapshot --from-dir "$d" -o "$work/snapshot-dumps.yaml"
  "$gpufleet" snapshot -o "$work/snapshot.yaml"
}

# Expect results: CHECK_NAME=passed|failed ...
expect() {
  python3 - "$work/report.json" "$@" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
bad = []
for want in sys.argv[2:]:
    name, state = want.rsplit("=", 1)
    hits = [r for r in results if r["name"] == name]
    if not hits:
        bad.append(f"no result named {name!r}")
    elif any(r["passed"] != (state == "passed") for r in hits):
        bad.append(f"{name}: want {state}, got " + "; ".join(f"{r['passed']} ({r['actual']})" for r in hits))
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# The broken deployment and the DaemonSet must have been seen by their controllers first.
for i in $(seq 60); do
  [[ -n "$(kubectl get deployment broken -n "$id" -o jsonpath='{.status.observedGeneration}')" &&
     "$(kubectl get daemonset agent -n "$id" -o jsonpath='{.status.desiredNumberScheduled}')" == 1 ]] && break
  sleep 0.5
done
# The live snapshot and the one from kubectl dumps of the same objects agree (unless something
# else on the shared cluster changed in between: then retry).
for i in 1 2 3; do
  snapshot
  cmp -s "$work/snapshot.yaml" "$work/snapshot-dumps.yaml" && break
  [[ $i == 3 ]] && fail "live snapshot differs from the kubectl one: $(diff "$work/snapshot-dumps.yaml" "$work/snapshot.yaml")"
done
grep -q "name: $id-gpu" "$work/snapshot.yaml" || fail "live snapshot lacks the GPU node"
set +e
"$gpufleet" validate -r "$work/recipe.yaml" -o json >"$work/report.json"; rc=$?
set -e
[[ $rc == 4 ]] || fail "validate exited $rc, want 4: $(cat "$work/report.json")"
expect "kubernetes-version (kubernetes.version)=passed" "gpu-driver (gpu.driver)=passed" \
  "gpu-product (gpu.product)=passed" "node-kernel (node.kernel)=passed" \
  "Deployment $id/healthy=passed" "Deployment $id/broken=failed" \
  "CustomResourceDefinition widgets.$id.gpufleet.io=passed" \
  "CustomResourceDefinition gadgets.$id.gpufleet.io=failed" \
  "CustomResourceDefinition clashes.$id.gpufleet.io=failed" "DaemonSet $id/agent=failed" \
  "Pods $id=failed" ||
  fail "validate results"
grep -q 'CrashLoopBackOff (phase Running)' "$work/report.json" || fail "CrashLoopBackOff not named"

set +e
"$gpufleet" diff -r "$work/recipe.yaml" --fail-on-drift >"$work/diff.txt"; rc=$?
set -e
[[ $rc == 3 ]] || fail "diff --fail-on-drift exited $rc, want 3"
grep -q '^missing .*kueue-system/kueue' "$work/diff.txt" || fail "missing kueue not reported"
grep -q '^extra .*kube-system/metrics-server' "$work/diff.txt" || fail "extra release not reported"
grep -q '^values .*cert-manager/cert-manager .*crds.keep' "$work/diff.txt" || fail "values drift not reported"
grep -q 'gpu-operator/gpu-operator' "$work/diff.txt" && fail "gpu-operator matches the recipe but was reported"
set +e
"$gpufleet" diff -r "$work/recipe-wrong-version.yaml" --fail-on-drift >"$work/diff.txt"; rc=$?
set -e
[[ $rc == 3 ]] || fail "diff of a wrong release version exited $rc, want 3"
grep -q '^version .*gpu-operator/gpu-operator .*v26.3.1 .*v26.3.2' "$work/diff.txt" ||
  fail "wrong gpu-operator version not reported: $(cat "$work/diff.txt")"

# Unreachable cluster and missing permissions: exit 1 naming the server / the RBAC rule.
sed 's#server: .*#server: https://127.0.0.1:1#' "$KUBECONFIG" >"$work/unreachable.kubeconfig"
set +e
"$gpufleet" validate -r "$work/recipe.yaml" --kubeconfig "$work/unreachable.kubeconfig" 2>"$work/err.txt"; rc=$?
set -e
[[ $rc == 1 ]] || fail "unreachable cluster: exit $rc, want 1"
grep -q 'cannot reach the Kubernetes API server https://127.0.0.1:1' "$work/err.txt" ||
  fail "unreachable cluster: $(cat "$work/err.txt")"
kubectl create serviceaccount nobody -n "$id" >/dev/null
"$KUBE_LOCAL_BIN" kubeconfig --data-dir "$GPUFLEET_KUBE_LOCAL_DIR" --service-account "$id/nobody" \
  -o "$work/nobody.kubeconfig" >/dev/null
set +e
"$gpufleet" diff -r "$work/recipe.yaml" --kubeconfig "$work/nobody.kubeconfig" 2>"$work/err.txt"; rc=$?
set -e
[[ $rc == 1 ]] || fail "forbidden: exit $rc, want 1"
grep -q 'forbidden: cannot list nodes .*apiGroups: \[""\], resources: \["nodes"\], verbs: \["list"\]' \
  "$work/err.txt" || fail "forbidden: $(cat "$work/err.txt")"

# Repair: scale the broken deployment to zero, remove the crashing pod, move the DaemonSet
# off the kubelet-less node, create the missing CRD and give the clashing one its own kind.
kubectl scale deployment broken -n "$id" --replicas=0 >/dev/null
kubectl delete pod crashing -n "$id" --grace-period=0 --force >/dev/null 2>&1
kubectl patch daemonset agent -n "$id" --type=merge \
  -p '{"spec":{"template":{"spec":{"nodeSelector":{"gpufleet.io/none":"true"}}}}}' >/dev/null
crd gadgets Gadget
kubectl delete crd "clashes.$id.gpufleet.io" >/dev/null
crd clashes Clash
kubectl wait --for=condition=Established --timeout=30s \
  "crd/gadgets.$id.gpufleet.io" "crd/clashes.$id.gpufleet.io" >/dev/null
for i in $(seq 60); do
  [[ "$(kubectl get deployment broken -n "$id" -o jsonpath='{.status.observedGeneration}')" == 2 &&
     "$(kubectl get daemonset agent -n "$id" -o jsonpath='{.status.desiredNumberScheduled}')" == 0 ]] && break
  sleep 0.5
done
cp "$work/snapshot.yaml" "$work/before.yaml"
"$gpufleet" snapshot -o "$work/snapshot.yaml"
set +e
"$gpufleet" validate -r "$work/recipe.yaml" -o json >"$work/report.json"; rc=$?
set -e
[[ $rc == 0 ]] || fail "validate of the repaired cluster exited $rc, want 0: $(cat "$work/report.json")"
expect "Deployment $id/broken=passed" "Pods $id=passed" "DaemonSet $id/agent=passed" \
  "CustomResourceDefinition gadgets.$id.gpufleet.io=passed" \
  "CustomResourceDefinition clashes.$id.gpufleet.io=passed" || fail "validate after repair"
"$gpufleet" diff --snapshot "$work/before.yaml" --against "$work/snapshot.yaml" >"$work/sdiff.txt"
echo "validate_live: ok"
