#!/usr/bin/env bash
# `validate --phase performance` end to end: kube-local, a simulated H100 fleet (gpufleet sim),
# the certify controller (gpufleet controller --controllers=certify) and the recipe's NCCL
# bus-bandwidth floors. A healthy pool passes with one result per node (table); run again
# after one node's network is degraded, the finished Certification is replaced (same name),
# a short deadline reports it unfinished, and the next run waits for that same Certification
# and names the degraded node, ThresholdViolated, in JSON and CTRF. Bad flags exit 2.
# Usage: performance_live.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN). Needs python3.
set -euo pipefail
repo="$1"
gpufleet="$GPUFLEET_BIN"
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
id="recipe-perf-$$"
work="$(mktemp -d)"
controller_pid=""
cleanup() {
  [[ -n $controller_pid ]] && kill "$controller_pid" 2>/dev/null && wait "$controller_pid" 2>/dev/null
  "$gpufleet" sim stop --state-dir "$work/sim" >/dev/null 2>&1 || true
  kubectl delete namespace "$id" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- controller log (tail)" >&2
  tail -n 30 "$work/controller.log" >&2 || true
  exit 1
}

# The certify controller watches all three of its resources.
for crd in certification workloadrun validationrequest; do
  kubectl apply --server-side --force-conflicts -f "$repo/deploy/crds/$crd.yaml" >/dev/null
done
kubectl wait --for=condition=Established --timeout=30s crd/certifications.gpufleet.io \
  crd/workloadruns.gpufleet.io crd/validationrequests.gpufleet.io >/dev/null
kubectl create namespace "$id" >/dev/null

cat >"$work/fleet.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Fleet
metadata: {name: $id}
spec:
  seed: 5
  pools:
  - name: gpu
    count: 4
    namePattern: "$id-{index}"
    gpu: {product: h100, count: 8}
    labels: {gpufleet.io/perf-test: $id}
YAML
# 40 simulated seconds per second: a 20 s nccl-tests run takes half a second.
"$gpufleet" sim --fleet "$work/fleet.yaml" --state-dir "$work/sim" --time-scale 40 --detach >/dev/null
start_controller() {
  "$gpufleet" controller --controllers=certify --namespace "$id" \
    --set "certify.namespace=$id" --metrics-addr "" >>"$work/controller.log" 2>&1 &
  controller_pid=$!
}
start_controller

# The pool selects this test's nodes only.
cat >"$work/criteria.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Criteria
spec:
  service: kind
  os: ubuntu
  intent: training
  pools:
    - {name: perf, accelerator: h100, nodes: 4, nodeSelector: {gpufleet.io/perf-test: $id}}
YAML
"$gpufleet" recipe --criteria "$work/criteria.yaml" -o "$work/recipe.yaml"
floors="$("$gpufleet" recipe query -r "$work/recipe.yaml" --selector nodePools.perf.performance)"
[[ $floors == *"nccl-all-reduce"* && $floors == *"node: 400"* ]] || fail "floors: $floors"

validate() {  # validate ARGS... ; sets rc
  set +e
  "$gpufleet" validate -r "$work/recipe.yaml" --phase performance --performance-namespace "$id" "$@" \
    >"$work/out" 2>"$work/err"
  rc=$?
  set -e
}

rm -f "$work/err"
# 1. Healthy: every node passes, one row each.
validate --performance-timeout 5m
[[ $rc == 0 ]] || fail "healthy run exited $rc: $(cat "$work/out" "$work/err")"
grep -q "created Certification $id/validate-perf-" "$work/err" || fail "no creation note: $(cat "$work/err")"
for i in 0 1 2 3; do
  grep -Eq "^ok +performance +NCCL bus bandwidth +$id-$i \(pool perf\) .* passed" "$work/out" ||
    fail "node $id-$i not reported passed: $(cat "$work/out")"
done
grep -Eq "^ok +performance +Certification $id/validate-perf-[0-9a-f]{8} +pool perf +Passed +Passed: 4 passed, 0 failed" \
  "$work/out" || fail "Certification row: $(cat "$work/out")"
name="$(kubectl get certifications -n "$id" -o jsonpath='{.items[*].metadata.name}')"
[[ $name == validate-perf-* && $name != *" "* ]] || fail "Certifications: $name"

# 2. One node's network at half bandwidth: 184 GB/s across nodes, under the 310 floor.
"$gpufleet" sim inject --state-dir "$work/sim" --event "{node: $id-2, type: networkDegraded, factor: 0.5}" >/dev/null
# With the controller down (SIGKILL) the new run cannot finish within the deadline: every
# node fails, the report asks whether certify runs, and the Certification is left in place.
kill -9 "$controller_pid"; wait "$controller_pid" 2>/dev/null || true; controller_pid=""
validate --performance-timeout 1s -o json
[[ $rc == 4 ]] || fail "short deadline exited $rc: $(cat "$work/out" "$work/err")"
grep -q "replacing Certification $id/$name (finished Passed)" "$work/err" || fail "no replace note: $(cat "$work/err")"
python3 - "$work/out" <<'PY' || fail "unfinished report: $(cat "$work/out")"
import json, sys
res = [r for r in json.load(open(sys.argv[1]))["results"] if r["phase"] == "performance"]
cert = [r for r in res if r["name"].startswith("Certification ")][0]
assert not cert["passed"] and "not finished within 1s" in cert["actual"], cert
assert "run validate again to wait for it" in cert["actual"], cert
assert "is the certify controller running?" in cert["actual"], cert
nodes = [r for r in res if r["name"] == "NCCL bus bandwidth"]
assert len(nodes) == 4 and not any(r["passed"] for r in nodes), nodes
PY
uid1="$(kubectl get certification -n "$id" "$name" -o jsonpath='{.metadata.uid}')"
# Run again: it waits for that same Certification (the controller back), which names the
# degraded node.
"$gpufleet" validate -r "$work/recipe.yaml" --phase performance --performance-namespace "$id" \
  --performance-timeout 5m -o ctrf >"$work/out" 2>"$work/err" &
validate_pid=$!
for _ in $(seq 120); do grep -q "waiting for it" "$work/err" 2>/dev/null && break; sleep 0.5; done
start_controller
set +e; wait "$validate_pid"; rc=$?; set -e
[[ $rc == 4 ]] || fail "degraded run exited $rc: $(cat "$work/out" "$work/err")"
grep -q "Certification $id/$name is already running; waiting for it" "$work/err" ||
  fail "did not reuse the running Certification: $(cat "$work/err")"
uid2="$(kubectl get certification -n "$id" "$name" -o jsonpath='{.metadata.uid}')"
[[ $uid1 == "$uid2" ]] || fail "the Certification was recreated ($uid1 -> $uid2)"
python3 - "$work/out" "$id" <<'PY' || fail "CTRF report: $(cat "$work/out")"
import json, sys
doc = json.load(open(sys.argv[1]))
tests = [t for t in doc["results"]["tests"] if t["suite"][0] == "performance"]
failed = {t["name"] for t in tests if t["status"] == "failed"}
bad = "NCCL bus bandwidth [%s-2 (pool perf)]" % sys.argv[2]
assert bad in failed, failed
assert len([t for t in tests if t["status"] == "passed"]) == 3, tests
msg = [t for t in tests if t["name"] == bad][0]["message"]
assert "ThresholdViolated" in msg and "busBandwidthGBps" in msg, msg
PY

# Bad flags: exit 2 naming the fix.
validate --performance-timeout soon
[[ $rc == 2 && $(cat "$work/err") == *"--performance-timeout 'soon' is not a duration"* ]] ||
  fail "bad timeout: $rc $(cat "$work/err")"
set +e
out="$("$gpufleet" validate -r "$work/recipe.yaml" --phase readiness --performance-timeout 5m 2>&1)"; rc=$?
set -e
[[ $rc == 2 && $out == *"applies to --phase performance only"* ]] || fail "flag without phase: $rc $out"
echo "performance_live: ok"
