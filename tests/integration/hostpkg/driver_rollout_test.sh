#!/usr/bin/env bash
# A recipe's host driver pin reaches the nodes through hostpkg's safe path (docs/lifecycle.md):
# `gpufleet diff -r` names every GPU node off the pin; `gpufleet hostpkg driver-set` renders the
# HostPackageSet; the hostpkg controller rolls it (the simulated driver package stages the
# version, the reboot makes it current) and certify validates each node before its uncordon;
# afterwards diff finds no node-driver drift and every node runs the pin.
# Usage: driver_rollout_test.sh SOURCE_DIR (env: KUBECONFIG, KUBE_LOCAL_BIN, GPUFLEET_BIN).
set -euo pipefail
cd "$1"
gpufleet=${GPUFLEET_BIN:?}
kube_local=${KUBE_LOCAL_BIN:?}
kubeconfig=${KUBECONFIG:?}
work=$(mktemp -d)
if ! command -v kubectl >/dev/null 2>&1; then kubectl() { "$kube_local" kubectl "$@"; }; fi
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
set_name=""
fail() {
  echo "FAIL: $*"
  k get hostpackagesets -o wide 2>/dev/null || true
  k get validationrequests 2>/dev/null | head -10 || true
  k get nodes -L nvidia.com/cuda.driver.major,nvidia.com/cuda.driver.minor,nvidia.com/cuda.driver.rev 2>/dev/null || true
  echo "--- controller log (tail):"
  tail -n 30 "$work/controller.log" 2>/dev/null || true
  exit 1
}
cleanup() {
  [[ -n "${ctl:-}" ]] && kill "$ctl" 2>/dev/null && wait "$ctl" 2>/dev/null || true
  if [[ -n $set_name ]]; then
    k patch hostpackageset "$set_name" --type merge -p '{"metadata":{"finalizers":null}}' \
      >/dev/null 2>&1 || true
    k delete hostpackageset "$set_name" --wait=false >/dev/null 2>&1 || true
    k -n gpufleet-system delete pods,configmaps -l "hostpkg.gpufleet.io/set=$set_name" \
      --wait=false >/dev/null 2>&1 || true
    k delete validationrequests -l "hostpkg.gpufleet.io/set=$set_name" --wait=false >/dev/null 2>&1 || true
  fi
  k delete deploymentpolicy driver-pairs --wait=false >/dev/null 2>&1 || true
  k delete certifications -l gpufleet.io/validation-request --wait=false >/dev/null 2>&1 || true
  "$gpufleet" sim stop --state-dir "$work/sim" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

k apply --server-side -f deploy/crds/hostpackageset.yaml -f deploy/crds/deploymentpolicy.yaml \
  -f deploy/crds/remediation.yaml -f deploy/crds/validationrequest.yaml \
  -f deploy/crds/certification.yaml -f deploy/crds/workloadrun.yaml >/dev/null
k wait --for=condition=Established --timeout=60s crd/hostpackagesets.gpufleet.io >/dev/null
# The chart's namespace, where hostpkg runs its stage pods.
k create namespace gpufleet-system --dry-run=client -o yaml | k apply -f - >/dev/null

# An Oracle Linux H100 pool on the old driver; the site's driver package stages the version it
# is given and the reboot makes it the one in use (docs/sim.md "Host package steps").
cat >"$work/fleet.yaml" <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: driver-rollout}
spec:
  seed: 7
  pools:
  - name: h100
    count: 4
    namePattern: "drv-{index:02}"
    gpu: {product: h100, count: 8, driver: "570.148.08", cuda: "12.8"}
    host:
      kernel: 5.15.0-308.179.6.el8uek.x86_64
      os: {id: ol, versionId: "8.10", prettyName: "Oracle Linux Server 8.10"}
YAML
cat >"$work/behaviours.yaml" <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
behaviours:
- name: nvidia-driver-package
  match: {image: "*/nvidia-driver*"}
  startDelay: 0s
  duration: 500ms
  hostStep:
    effects:
      apply: {driver: "{version}"}
      upgrade: {driver: "{version}"}
    rebootDown: 1s
YAML
"$gpufleet" sim --fleet "$work/fleet.yaml" --behaviours "$work/behaviours.yaml" \
  --kubeconfig "$kubeconfig" --state-dir "$work/sim" --time-scale 4 --detach >/dev/null
for _ in $(seq 60); do
  ready=$(k get nodes --no-headers 2>/dev/null | grep -Ec '^drv-[0-9]+ +Ready' || true)
  ((ready >= 4)) && break
  sleep 1
done
((ready >= 4)) || fail "only $ready of 4 nodes Ready"

"$gpufleet" recipe --service oke --accelerator h100 --os oracle-linux --intent training \
  -o "$work/recipe.yaml" >/dev/null
count_driver_drift() {  # FILTER: node-driver rows of `diff -r` (JSON) matching FILTER
  "$gpufleet" diff -r "$work/recipe.yaml" --kubeconfig "$kubeconfig" -o json >"$work/diff.json"
  python3 - "$work/diff.json" "$1" <<'PY'
import json, sys
rows = [d for d in json.load(open(sys.argv[1]))["differences"]
        if d["kind"] == "node-driver" and d["subject"].startswith("drv-")]
print(sum(1 for d in rows if sys.argv[2] in (d["actual"], "*")))
PY
}
before=$(count_driver_drift 570.148.08)
((before == 4)) || fail "diff -r shows $before nodes on 570.148.08 off the pin, want 4: $(cat "$work/diff.json")"

# A recipe whose driver the GPU Operator installs has nothing for hostpkg to roll: exit 2.
"$gpufleet" recipe --service eks --accelerator h100 --os ubuntu --intent training \
  -o "$work/eks.yaml" >/dev/null
set +e
msg=$("$gpufleet" hostpkg driver-set -r "$work/eks.yaml" --image registry.example/host/nvidia-driver 2>&1)
rc=$?
set -e
((rc == 2)) || fail "driver-set of an operator-managed recipe exited $rc, want 2: $msg"
[[ $msg == *"no node pool's host owns the GPU driver"* ]] || fail "driver-set's refusal: $msg"

k apply -f - >/dev/null <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: driver-pairs}
spec:
  default:
    budget: {count: 2}
    strategy:
      fixed: {initialBatch: 2, failureThreshold: 1, safetyLimit: 0}
YAML
"$gpufleet" hostpkg driver-set -r "$work/recipe.yaml" --image registry.example/host/nvidia-driver \
  --validate diagnostics/dcgm-r1 --deployment-policy driver-pairs >"$work/sets.yaml"
pin=$(sed -n 's/^ *version: *"\{0,1\}\([0-9][0-9.]*\)"\{0,1\}$/\1/p' "$work/sets.yaml" | head -n 1)
set_name=$(sed -n 's/^  name: \(gpu-driver-.*\)$/\1/p' "$work/sets.yaml" | head -n 1)
[[ -n $pin && -n $set_name ]] || fail "driver-set printed no set: $(cat "$work/sets.yaml")"
boot_before=$(k get nodes -o jsonpath='{range .items[*]}{.status.nodeInfo.bootID}{"\n"}{end}' | sort)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$gpufleet" controller --controllers=hostpkg,certify --kubeconfig "$kubeconfig" \
  --metrics-addr "127.0.0.1:$port" >"$work/controller.log" 2>&1 &
ctl=$!
k apply -f "$work/sets.yaml" >/dev/null

phase=""
for _ in $(seq 240); do
  phase=$(k get hostpackageset "$set_name" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ $phase == Complete || $phase == Failed ]] && break
  sleep 1
done
[[ $phase == Complete ]] || fail "the driver set ended $phase, want Complete"

after=$(count_driver_drift '*')
((after == 0)) || fail "diff -r still shows $after nodes off the pin: $(cat "$work/diff.json")"
drivers=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.labels.nvidia\.com/cuda\.driver\.major}.{.metadata.labels.nvidia\.com/cuda\.driver\.minor}.{.metadata.labels.nvidia\.com/cuda\.driver\.rev}{"\n"}{end}' | grep '^drv-')
[[ $(grep -c " $pin\$" <<<"$drivers") == 4 ]] || fail "not every node runs $pin: $drivers"
boot_after=$(k get nodes -o jsonpath='{range .items[*]}{.status.nodeInfo.bootID}{"\n"}{end}' | sort)
[[ -z $(comm -12 <(echo "$boot_before") <(echo "$boot_after")) ]] || fail "a node kept its boot ID: it was not rebooted"
passed=$(k get validationrequests -l "hostpkg.gpufleet.io/set=$set_name" \
  -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Passed$' || true)
((passed == 4)) || fail "$passed ValidationRequests passed, want one per node (4)"
cordoned=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.unschedulable}{"\n"}{end}' | grep -c ' true$' || true)
((cordoned == 0)) || fail "$cordoned nodes still cordoned"
echo "ok: driver $pin rolled to 4 nodes by hostpkg, each rebooted and certified; diff -r: $before nodes off the pin before, 0 after"
