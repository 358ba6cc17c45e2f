#!/usr/bin/env bash
# `recipe --from-cluster` and `validate --phase` on kube-local with a simulated GPU fleet
# (gpufleet sim): two node pools with different GPUs become two recipe pools selected by
# their pool label; Helm releases someone else installed (another namespace) become external
# components; the live detection equals the one from a recorded snapshot; the deployment phase
# reads a ClusterPolicy's status.state, the conformance phase finds a pod that mounts
# /dev/nvidia0 through a hostPath; -o ctrf is a CTRF report. (The performance phase:
# performance_live.sh.)
# Usage: inputs_live.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN). Needs python3.
set -euo pipefail
repo="$1"
gpufleet="$GPUFLEET_BIN"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
id="recipe-in-$$"
work="$(mktemp -d)"
cleanup() {
  "$gpufleet" sim stop --state-dir "$work/sim" >/dev/null 2>&1 || true
  # The Helm release records first, and synchronously: a namespace is deleted in the
  # background, and until it is gone its records would look like releases to the next test's
  # detection (recipe_inputs_live saw this test's cert-manager record and failed).
  kubectl delete secrets -n "$id" --field-selector type=helm.sh/release.v1 --ignore-not-found \
    --wait=true >/dev/null 2>&1 || true
  kubectl delete namespace "$id" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete crd clusterpolicies.nvidia.com --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Detection reads the whole cluster: another test's GPU nodes would change what it finds.
others="$(kubectl get nodes -l nvidia.com/gpu.present -o name | wc -l)"
[[ $others == 0 ]] || fail "kube-local already has $others GPU nodes; this test needs a cluster without"

cat >"$work/fleet.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: $id}
spec:
  seed: 7
  pools:
  - name: train
    count: 2
    namePattern: "$id-train-{index}"
    gpu: {product: h100, count: 8, driver: "580.95.05", cuda: "13.0"}
    host: {kernel: 6.8.0-1015-nvidia, os: {id: ubuntu, versionId: "24.04", prettyName: "Ubuntu 24.04.1 LTS"}}
    labels: {node.kubernetes.io/instance-type: hgx-h100-8}
  - name: serve
    count: 1
    namePattern: "$id-serve-{index}"
    gpu: {product: b200, count: 8, driver: "580.95.05", cuda: "13.0"}
    host: {kernel: 6.8.0-1015-nvidia, os: {id: ubuntu, versionId: "24.04", prettyName: "Ubuntu 24.04.1 LTS"}}
YAML
"$gpufleet" sim --fleet "$work/fleet.yaml" --state-dir "$work/sim" --detach >/dev/null

kubectl create namespace "$id" >/dev/null
# Helm release records of cert-manager and gpu-operator installed by someone else: in this
# namespace, not where the recipe installs them.
# The release record names its namespace too (base64 of base64 of gzip'd JSON, as Helm keeps it).
python3 - "$repo/tests/recipe/testdata/helm-releases.json" "$id" >"$work/releases.json" <<'PY'
import base64, gzip, json, sys
doc = json.load(open(sys.argv[1]))
for item in doc["items"]:
    item["metadata"]["namespace"] = sys.argv[2]
    raw = base64.b64decode(base64.b64decode(item["data"]["release"]))
    rel = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    rel["namespace"] = sys.argv[2]
    packed = base64.b64encode(gzip.compress(json.dumps(rel).encode()))
    item["data"]["release"] = base64.b64encode(packed).decode()
print(json.dumps(doc))
PY
kubectl apply -f "$work/releases.json" >/dev/null

"$gpufleet" snapshot -o "$work/snapshot.yaml"
grep -q "providerID: gpufleet-sim://$id/$id-train-0" "$work/snapshot.yaml" || fail "provider ID not recorded"
grep -q "instanceType: hgx-h100-8" "$work/snapshot.yaml" || fail "instance type not recorded"

"$gpufleet" recipe --from-cluster --intent training --platform kubeflow -o "$work/live.yaml" 2>"$work/notes.txt"
"$gpufleet" recipe --snapshot "$work/snapshot.yaml" --intent training --platform kubeflow \
  -o "$work/file.yaml" 2>/dev/null
cmp -s "$work/live.yaml" "$work/file.yaml" || fail "live detection differs from the snapshot's: $(diff "$work/file.yaml" "$work/live.yaml")"
grep -q "detected service kind: self-managed: provider ID of $id-serve-0 (gpufleet-sim://" "$work/notes.txt" ||
  fail "service note: $(cat "$work/notes.txt")"
q() { "$gpufleet" recipe query -r "$work/live.yaml" --selector "$1"; }
[[ "$(q metadata.name)" == kind-mixed-ubuntu-training-kubeflow ]] || fail "name: $(q metadata.name)"
[[ "$(q nodePools.train.accelerator)" == h100 ]] || fail "train pool"
[[ "$(q nodePools.train.nodeCount)" == 2 ]] || fail "train pool count"
[[ "$(q nodePools.serve.accelerator)" == b200 ]] || fail "serve pool"
[[ "$(q nodePools.serve.nodeSelector.gpufleet.io/pool)" == serve ]] || fail "serve selector"
[[ "$(q components.cert-manager.external)" == true ]] || fail "cert-manager not external"
[[ "$(q components.gpu-operator.externalReason)" == *"Helm release $id/gpu-operator"* ]] ||
  fail "gpu-operator reason: $(q components.gpu-operator.externalReason)"
# The pools select the simulated nodes: readiness finds them.
set +e
"$gpufleet" validate -r "$work/live.yaml" --phase readiness -o json >"$work/ready.json"; rc=$?
set -e
[[ $rc == 0 || $rc == 4 ]] || fail "validate readiness exited $rc"
python3 - "$work/ready.json" <<'PY' || fail "readiness results"
import json, sys
res = json.load(open(sys.argv[1]))["results"]
assert res and all(r["phase"] == "readiness" for r in res), res
assert not [r for r in res if r["name"].startswith("pool ") and not r["passed"]], "a pool matched no node"
assert any("(pool serve)" in r["subject"] for r in res), "serve pool nodes not checked"
PY

# Deployment: the GPU Operator's ClusterPolicy (a recipe without external components).
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterpolicies.nvidia.com}
spec:
  group: nvidia.com
  scope: Cluster
  names: {plural: clusterpolicies, singular: clusterpolicy, kind: ClusterPolicy, listKind: ClusterPolicyList}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
YAML
kubectl wait --for=condition=Established --timeout=30s crd/clusterpolicies.nvidia.com >/dev/null
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec: {}
YAML
kubectl patch clusterpolicy cluster-policy --subresource=status --type=merge \
  -p '{"status":{"state":"notReady"}}' >/dev/null
"$gpufleet" recipe --service kind --accelerator h100 --os ubuntu -o "$work/plain.yaml"
deployment_state() {
  set +e
  "$gpufleet" validate -r "$work/plain.yaml" --phase deployment -o json >"$work/deploy.json"
  set -e
  python3 - "$work/deploy.json" <<'PY'
import json, sys
res = [r for r in json.load(open(sys.argv[1]))["results"] if r["name"] == "ClusterPolicy ready"]
print(res[0]["actual"] if res else "none")
PY
}
[[ "$(deployment_state)" == notReady ]] || fail "ClusterPolicy state: $(deployment_state)"
kubectl patch clusterpolicy cluster-policy --subresource=status --type=merge \
  -p '{"status":{"state":"ready"}}' >/dev/null
[[ "$(deployment_state)" == ready ]] || fail "ClusterPolicy after ready: $(deployment_state)"

# Conformance: a pod on a simulated node mounting a GPU device file from the host.
kubectl apply -n "$id" -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: sneaky}
spec:
  nodeName: $id-train-0
  tolerations: [{operator: Exists}]
  containers: [{name: c, image: registry.invalid/trainer:1}]
  volumes: [{name: gpu, hostPath: {path: /dev/nvidia0}}]
YAML
set +e
"$gpufleet" validate -r "$work/plain.yaml" --phase conformance -o ctrf >"$work/ctrf.json"; rc=$?
set -e
[[ $rc == 4 ]] || fail "conformance exited $rc, want 4"
python3 - "$work/ctrf.json" "$id" <<'PY' || fail "CTRF report"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["reportFormat"] == "CTRF", doc
r = doc["results"]
assert r["tool"]["name"] == "gpufleet"
s = r["summary"]
assert s["tests"] == len(r["tests"]) == s["passed"] + s["failed"] + s["skipped"], s
hp = [t for t in r["tests"] if t["name"].startswith("no hostPath GPU device access")]
assert hp and hp[0]["status"] == "failed", hp
assert sys.argv[2] + "/sneaky (volume gpu: /dev/nvidia0)" in hp[0]["message"], hp[0]["message"]
assert all(t["suite"][0] == "conformance" for t in r["tests"])
PY
echo "inputs_live: ok"
