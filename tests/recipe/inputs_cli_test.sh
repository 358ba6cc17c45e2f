#!/usr/bin/env bash
# End-to-end checks of the recipe inputs through the binary: criteria detected from a snapshot
# (tests/recipe/testdata/snapshot-mixed.yaml: GKE, an H100 and a B200 node pool,
# kube-prometheus-stack installed by someone else), external components left out of bundles,
# a criteria file, a config file that drives recipe, bundle and validate (flags win),
# `recipe query`, validate phases and CTRF output.
# Usage: inputs_cli_test.sh path/to/gpufleet
set -euo pipefail
bin="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Bad input exits 2 with words that name the problem: expect_bad_input WORDS -- gpufleet args...
expect_bad_input() {
  local want="$1"; shift
  set +e
  out="$("$bin" "$@" 2>&1)"; rc=$?
  set -e
  [[ $rc == 2 ]] || fail "gpufleet $* exited $rc, want 2: $out"
  [[ $out == *"$want"* ]] || fail "gpufleet $*: '$want' not in: $out"
}
snapshot="$(dirname "$0")/testdata/snapshot.yaml"
"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  -o "$work/recipe.yaml"
"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent training --platform kubeflow \
  -o "$work/train.yaml"

mixed="$(dirname "$0")/testdata/snapshot-mixed.yaml"
"$bin" recipe --snapshot "$mixed" --intent training --platform kubeflow -o "$work/det.yaml" 2>"$work/notes.txt"
grep -q 'detected pool a3-highgpu: h100' "$work/notes.txt" || fail "pool note: $(cat "$work/notes.txt")"
q() { "$bin" recipe query -r "$work/det.yaml" --selector "$1"; }
[[ "$(q metadata.name)" == gke-mixed-ubuntu-training-kubeflow ]] || fail "detected name $(q metadata.name)"
[[ "$(q nodePools.a4-highgpu.nodeSelector.cloud.google.com/gke-nodepool)" == A4_HighGPU ]] || fail "pool selector"
[[ "$(q components.kube-prometheus-stack.external)" == true ]] || fail "external not marked"
"$bin" bundle -r "$work/det.yaml" --deployer helm -o "$work/det-helm" >/dev/null
[[ -d "$work/det-helm/components/cert-manager" ]] || fail "bundle lacks cert-manager"
[[ ! -e "$work/det-helm/components/kube-prometheus-stack" ]] || fail "bundle installs an external component"
grep -q 'kube-prometheus-stack' "$work/det-helm/deploy.sh" && fail "deploy.sh names an external component"
# Flags win over the snapshot; a problem the flags settle is no error.
"$bin" recipe --snapshot "$mixed" --service eks --accelerator h100 -o "$work/flags.yaml" 2>/dev/null
"$bin" recipe query -r "$work/flags.yaml" --selector criteria.service | grep -x eks >/dev/null || fail "--service did not win"
"$bin" recipe query -r "$work/flags.yaml" --selector nodePools.default.accelerator | grep -x h100 >/dev/null || fail "--accelerator did not replace pools"
expect_bad_input "--snapshot $mixed describes node pools with different GPUs" \
  recipe --snapshot "$mixed" --nodes 4
expect_bad_input "components.gpu-operator.values has no 'drivr'" \
  recipe query -r "$work/det.yaml" --selector components.gpu-operator.values.drivr
"$bin" recipe query --service eks --accelerator h100 --selector components.gpu-operator.chart.version |
  grep -q '^v' || fail "query from flags"
cat >"$work/criteria.yaml" <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: Criteria
spec: {service: eks, accelerator: h100, os: ubuntu, intent: inference, platform: dynamo}
YAML
"$bin" recipe --criteria "$work/criteria.yaml" -o "$work/from-file.yaml"
cmp -s "$work/from-file.yaml" "$work/recipe.yaml" || fail "criteria file differs from the same flags"
"$bin" recipe --criteria "$work/criteria.yaml" --intent training -o "$work/file-flag.yaml"
grep -q 'name: eks-h100-ubuntu-training-dynamo' "$work/file-flag.yaml" || fail "flag did not win over the file"
printf 'apiVersion: gpufleet.io/v1alpha1\nkind: Criteria\nspec:\n  servce: eks\n' >"$work/bad-criteria.yaml"
expect_bad_input "bad-criteria.yaml:4:3: spec.servce: is not a known field (did you mean \"service\"" \
  recipe --criteria "$work/bad-criteria.yaml"
printf 'apiVersion: gpufleet.io/v1alpha1\nkind: Criteria\nspec:\n  os: windows\n' >"$work/bad-os.yaml"
expect_bad_input "bad-os.yaml:4:3: spec.os: 'windows' is not a known os" recipe --criteria "$work/bad-os.yaml"
printf 'apiVersion: gpufleet.io/v1alpha1\nkind: Criteria\nspec:\n  pools: [{name: a, accelerator: h1000}]\n' >"$work/bad-pool.yaml"
expect_bad_input "bad-pool.yaml: pool a: accelerator 'h1000' is not a known accelerator" \
  recipe --criteria "$work/bad-pool.yaml"
mkdir -p "$work/cfg"
cp "$snapshot" "$work/cfg/snap.yaml"
cat >"$work/cfg/gpufleet.yaml" <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: RecipeConfig
spec:
  criteria: {service: eks, accelerator: h100, os: ubuntu, intent: training, platform: kubeflow}
  recipe: out/recipe.yaml
  snapshot: snap.yaml
  bundle: {deployer: helmfile, output: out/bundle}
  validate: {phases: [readiness], output: ctrf}
YAML
mkdir -p "$work/cfg/out"
"$bin" recipe --config "$work/cfg/gpufleet.yaml" 2>/dev/null
cmp -s "$work/cfg/out/recipe.yaml" "$work/train.yaml" || fail "config recipe differs from the same flags"
"$bin" bundle --config "$work/cfg/gpufleet.yaml" >/dev/null
[[ -f "$work/cfg/out/bundle/helmfile.yaml" ]] || fail "config did not drive bundle"
set +e
"$bin" validate --config "$work/cfg/gpufleet.yaml" >"$work/cfg/ctrf.json"; rc=$?
set -e
[[ $rc == 4 || $rc == 0 ]] || fail "validate --config exited $rc"
grep -q '"reportFormat": "CTRF"' "$work/cfg/ctrf.json" || fail "config output ctrf"
grep -q '"suite": \[' "$work/cfg/ctrf.json" || fail "ctrf suites"
"$bin" validate --config "$work/cfg/gpufleet.yaml" -o table >"$work/cfg/table.txt" || true
grep -q '^RESULT' "$work/cfg/table.txt" || fail "-o did not win over the config"
expect_bad_input "bundle needs -r RECIPE, --deployer and -o DIR" bundle -r "$work/train.yaml"
expect_bad_input "--phase: speed not in" validate -r "$work/train.yaml" --snapshot "$snapshot" --phase speed
expect_bad_input "certify Certification" validate -r "$work/train.yaml" --snapshot "$snapshot" --phase performance
echo "inputs_cli_test: ok"
