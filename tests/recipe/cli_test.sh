#!/usr/bin/env bash
# End-to-end checks of `gpufleet recipe` and `gpufleet bundle` through the binary:
# exit codes, error messages, --data overrides, byte-identical bundles, checksums, scripts.
# Usage: cli_test.sh path/to/gpufleet
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

# A recipe for the issue's example.
"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  -o "$work/recipe.yaml"
grep -q '^kind: Recipe$' "$work/recipe.yaml" || fail "no Recipe document"
grep -q 'name: eks-h100-ubuntu-inference-dynamo' "$work/recipe.yaml" || fail "recipe name"

# Bad input exits 2 and lists the valid values.
set +e
out="$("$bin" recipe --service eks --accelerator v100 2>&1)"; rc=$?
set -e
[[ $rc == 2 ]] || fail "invalid accelerator exited $rc, want 2"
[[ $out == *"valid values are a100, b200, gb200, h100, h200, l40s, rtx-pro-6000"* ]] || fail "valid values not listed: $out"
set +e
"$bin" bundle -r "$work/recipe.yaml" --deployer kustomize -o "$work/x" 2>/dev/null; rc=$?
set -e
[[ $rc == 2 ]] || fail "bad deployer exited $rc, want 2"
"$bin" recipe --help | grep -- '--accelerator' >/dev/null || fail "recipe --help"
# grep without -q reads the whole help: with -q it may exit first and, under pipefail, the
# writer's SIGPIPE fails the line.
"$bin" bundle --help | grep -- '--deployer' >/dev/null || fail "bundle --help"
"$bin" bundle pull --help | grep -- '--registry-ca-file' >/dev/null || fail "bundle pull --help"

# --data adds an overlay and overrides a library file without rebuilding.
mkdir -p "$work/data/overlays"
cat >"$work/data/overlays/site.yaml" <<'YAML'
apiVersion: gpufleet.io/v1alpha1
kind: Overlay
criteria: {service: eks, intent: inference}
components:
  gatekeeper: {enabled: true}
  cert-manager:
    values:
      replicaCount: 2
YAML
"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  --data "$work/data" -o "$work/site.yaml"
grep -q 'name: gatekeeper' "$work/site.yaml" || fail "--data overlay not applied"
grep -q 'replicaCount: 2' "$work/site.yaml" || fail "--data values not merged"
grep -q 'path: overlays/site.yaml' "$work/site.yaml" || fail "--data overlay not listed"
cmp -s "$work/recipe.yaml" "$work/site.yaml" && fail "--data changed nothing"

# A floating version in a --data file is an error naming the file.
mkdir -p "$work/bad/overlays"
printf 'apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n  gpu-operator: {chart: {version: latest}}\n' \
  >"$work/bad/overlays/float.yaml"
set +e
out="$("$bin" recipe --data "$work/bad" 2>&1)"; rc=$?
set -e
[[ $rc == 2 && $out == *"float.yaml"*"latest"* ]] || fail "floating version accepted: $rc $out"

# Heterogeneous pools.
"$bin" recipe --service oke --os ubuntu --intent training --platform kubeflow \
  --pool train=gb200:18 --pool serve=h100:4 -o "$work/mixed.yaml"
grep -q 'name: oke-mixed-ubuntu-training-kubeflow' "$work/mixed.yaml" || fail "mixed recipe"

# Every deployer: byte-identical across runs, checksums hold, scripts parse.
for d in helm argocd argocd-helm flux helmfile; do
  extra=()
  [[ $d == argocd* || $d == flux ]] && extra=(--repo-url https://git.example.com/gpu.git)
  "$bin" bundle -r "$work/recipe.yaml" --deployer "$d" -o "$work/$d.1" "${extra[@]}" >/dev/null
  "$bin" bundle -r "$work/recipe.yaml" --deployer "$d" -o "$work/$d.2" "${extra[@]}" >/dev/null
  diff -r "$work/$d.1" "$work/$d.2" >/dev/null || fail "$d bundle differs between runs"
  (cd "$work/$d.1" && sha256sum --quiet -c checksums.txt) || fail "$d checksums"
  cmp -s "$work/$d.1/recipe.yaml" "$work/recipe.yaml" || fail "$d bundle does not carry the recipe"
  while IFS= read -r script; do
    bash -n "$script" || fail "$script does not parse"
  done < <(find "$work/$d.1" -name '*.sh')
done
[[ -x "$work/helm.1/deploy.sh" ]] || fail "deploy.sh not executable"
# gpufleet's own chart travels in every bundle, identical to deploy/chart/gpufleet.
repo_root="$(cd "$(dirname "$0")/../.." && pwd)"
for d in helm argocd argocd-helm flux helmfile; do
  diff -r "$repo_root/deploy/chart/gpufleet" "$work/$d.1/local-charts/gpufleet" >/dev/null ||
    fail "$d bundle: local-charts/gpufleet differs from deploy/chart/gpufleet"
done
grep -q "'../../local-charts/gpufleet'" "$work/helm.1/components/gpufleet/install.sh" ||
  fail "helm bundle does not install gpufleet from the bundle"
grep -rq --exclude-dir=local-charts 'ghcr.io/gpufleet/charts' "$work"/*.1 && fail "a bundle still points at the unpublished chart"


# A non-empty output directory is refused.
set +e
"$bin" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/helm.1" 2>/dev/null; rc=$?
set -e
[[ $rc == 2 ]] || fail "non-empty output directory accepted ($rc)"
# validate and diff against a snapshot file (tests/recipe/testdata/snapshot.yaml).
snapshot="$(dirname "$0")/testdata/snapshot.yaml"
"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent training --platform kubeflow \
  -o "$work/train.yaml"
set +e
"$bin" validate -r "$work/train.yaml" --snapshot "$snapshot" >"$work/validate.txt"; rc=$?
set -e
[[ $rc == 4 ]] || fail "validate with failures exited $rc, want 4"
grep -q 'CrashLoopBackOff (phase Running)' "$work/validate.txt" || fail "CrashLoopBackOff not reported"
"$bin" validate -r "$work/train.yaml" --snapshot "$snapshot" -o json >"$work/validate.json" || true
grep -q '"passed": false' "$work/validate.json" || fail "validate json"
# A misspelled key is bad input that names the key, its line:column and the near miss.
sed 's/^  components:$/  componets:/' "$work/train.yaml" >"$work/typo.yaml"
line="$(grep -n '^  componets:$' "$work/typo.yaml" | cut -d: -f1)"
[[ -n $line ]] || fail "typo fixture"
expect_bad_input "typo.yaml:$line:3: spec.componets: is not a known field (did you mean \"components\"?" \
  validate -r "$work/typo.yaml" --snapshot "$snapshot"
sed 's/^  podProblems:/  podProblem:/' "$snapshot" >"$work/snap-typo.yaml"
line="$(grep -n '^  podProblem:' "$work/snap-typo.yaml" | cut -d: -f1)"
[[ -n $line ]] || fail "snapshot typo fixture"
expect_bad_input "snap-typo.yaml:$line:3: spec.podProblem: is not a known field (did you mean \"podProblems\"?" \
  validate -r "$work/train.yaml" --snapshot "$work/snap-typo.yaml"
# Flag rules are CLI11's own validators: bad flags exit 2 naming the flag, before any work.
expect_bad_input "--output: yaml not in {table,json,ctrf}" validate -r "$work/train.yaml" --snapshot "$snapshot" -o yaml
expect_bad_input "--snapshot excludes --kubeconfig" \
  validate -r "$work/train.yaml" --snapshot "$snapshot" --kubeconfig "$snapshot"
expect_bad_input "File does not exist: $work/missing.yaml" validate -r "$work/missing.yaml"
expect_bad_input "Exactly 1 option from [-r,--recipe,--against] is required and 2 were given" \
  diff -r "$work/train.yaml" --against "$snapshot" --snapshot "$snapshot"
expect_bad_input "Exactly 1 option from [-r,--recipe,--against] is required" diff --snapshot "$snapshot"
expect_bad_input "--from-dir excludes --context" snapshot --from-dir "$work" --context other
expect_bad_input "Directory does not exist" snapshot --from-dir "$work/none"
set +e
"$bin" diff -r "$work/train.yaml" --snapshot "$snapshot" --fail-on-drift >"$work/diff.txt"; rc=$?
set -e
[[ $rc == 3 ]] || fail "diff --fail-on-drift exited $rc, want 3"
grep -q 'extra .*kube-system/metrics-server' "$work/diff.txt" || fail "extra release not reported"
"$bin" diff -r "$work/train.yaml" --snapshot "$snapshot" >/dev/null || fail "diff without --fail-on-drift"
"$bin" diff --snapshot "$snapshot" --against "$snapshot" --fail-on-drift | grep 'no drift' >/dev/null ||
  fail "snapshot against itself"
# Without --snapshot they read the live cluster: an unreachable one exits 1 naming the
# server, an unusable kubeconfig exits 2 naming the file or context.
cat >"$work/nowhere.kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
current-context: nowhere
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: test-token}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: u}}]
YAML
set +e
"$bin" validate -r "$work/train.yaml" --kubeconfig "$work/nowhere.kubeconfig" 2>"$work/err.txt"; rc=$?
set -e
[[ $rc == 1 ]] || fail "validate of an unreachable cluster exited $rc, want 1"
grep -q 'cannot reach the Kubernetes API server https://127.0.0.1:1' "$work/err.txt" ||
  fail "unreachable cluster not named: $(cat "$work/err.txt")"
set +e
"$bin" diff -r "$work/train.yaml" --kubeconfig "$work/nowhere.kubeconfig" --context other 2>"$work/err.txt"; rc=$?
set -e
[[ $rc == 2 ]] || fail "diff with an unknown context exited $rc, want 2"
grep -q 'context "other" not found' "$work/err.txt" || fail "unknown context: $(cat "$work/err.txt")"
set +e
"$bin" snapshot --kubeconfig "$work/nowhere.kubeconfig" --from-dir "$work" 2>/dev/null; rc=$?
set -e
[[ $rc == 2 ]] || fail "snapshot --from-dir with --kubeconfig exited $rc, want 2"
echo "cli_test: ok"
