#!/usr/bin/env bash
# `gpufleet bundle` overrides and signing through the binary: --set/--set-json/--set-file/-f,
# enabled=false, the record and digest, bad overrides; --sign-key with ssh-keygen and
# `gpufleet verify` on a good, a wrong-key, a changed, an added, a re-summed and an unsigned
# bundle; bad --charts-from and --node-os. Usage: bundle_cli_test.sh path/to/gpufleet
set -euo pipefail
bin="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Bad input exits 2 with words that name the problem: expect_bad_input WORDS gpufleet-args...
expect_bad_input() {
  local want="$1"; shift
  set +e
  out="$("$bin" "$@" 2>&1)"; rc=$?
  set -e
  [[ $rc == 2 ]] || fail "gpufleet $* exited $rc, want 2: $out"
  [[ $out == *"$want"* ]] || fail "gpufleet $*: '$want' not in: $out"
}
"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  -o "$work/recipe.yaml"

# Value overrides: --set (list index), --set-json, --set-file, -f, enabled=false.
printf 'line one\nline two\n' >"$work/note.txt"
cat >"$work/over.yaml" <<'YAML'
gpu-operator:
  values:
    driver: {version: 580.105.08}
kube-prometheus-stack:
  enabled: false
YAML
"$bin" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/over" -f "$work/over.yaml" \
  --set 'gpu-operator:toolkit.env[0].name=CONTAINERD_SOCKET' --set gpu-operator:operator.replicas=2 \
  --set-json 'cert-manager:podLabels={"team":"gpu"}' --set-file "gpufleet:notes=$work/note.txt" >"$work/out.txt"
grep -q 'with 6 overrides' "$work/out.txt" || fail "override count: $(cat "$work/out.txt")"
v="$work/over/components/gpu-operator/values.yaml"
grep -q 'version: 580.105.08' "$v" && grep -q 'name: CONTAINERD_SOCKET' "$v" && grep -q 'replicas: 2$' "$v" ||
  fail "overrides not in gpu-operator values: $(cat "$v")"
grep -q 'team: gpu' "$work/over/components/cert-manager/values.yaml" || fail "--set-json"
grep -q 'line two' "$work/over/components/gpufleet/values.yaml" || fail "--set-file"
[[ -e "$work/over/components/kube-prometheus-stack" ]] && fail "disabled component still installed"
grep -q 'kube-prometheus-stack' "$work/over/deploy.sh" && fail "deploy.sh installs a disabled component"
# prometheus-adapter depends on it: still installed, the dependency treated as external.
grep -q 'prometheus-adapter' "$work/over/deploy.sh" || fail "dependent of a disabled component dropped"
grep -q 'kind: BundleOverrides' "$work/over/overrides.yaml" || fail "overrides not recorded"
cmp -s "$work/over/recipe.yaml" "$work/recipe.yaml" || fail "overridden bundle must carry the recipe as given"
digest="$(awk '/^digest:/ {print $2}' "$work/over/overrides.yaml")"
[[ -n $digest ]] && grep -q "$digest" "$work/over/deploy.sh" || fail "combined digest not in deploy.sh"
(cd "$work/over" && sha256sum --quiet -c checksums.txt) || fail "overridden bundle checksums"
expect_bad_input "--set 'gpu-operator.driver=1': expected COMPONENT:PATH=VALUE" \
  bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bad1" --set gpu-operator.driver=1
expect_bad_input "--set 'nope:a=1': component 'nope' is not in recipe" \
  bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bad2" --set nope:a=1
[[ -e "$work/bad1" || -e "$work/bad2" ]] && fail "a bad override wrote a bundle"

# --images companions: --charts-from reads a vendored bundle (the online one carries none),
# --node-os is checked before helm runs and needs --images.
expect_bad_input "--charts-from \"$work/over\": no vendor/provenance.yaml; give the directory of a bundle written with --vendor-charts" \
  bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bad3" --charts-from "$work/over"
expect_bad_input "--vendor-charts excludes --charts-from" \
  bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bad4" --charts-from "$work/over" --vendor-charts
expect_bad_input "--node-os \"Ubuntu 22.04\": not a node OS tag; give the os_release ID and VERSION_ID joined" \
  bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bad5" --images --helm /nonexistent/helm \
  --node-os 'Ubuntu 22.04'
expect_bad_input "--node-os requires --images" \
  bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bad6" --node-os ubuntu22.04
[[ -e "$work/bad3" || -e "$work/bad5" ]] && fail "a bad --charts-from or --node-os wrote a bundle"

# Signing and offline verification (SSH Ed25519, ssh-keygen -Y sign).
if command -v ssh-keygen >/dev/null; then
  ssh-keygen -q -t ed25519 -N '' -C signer -f "$work/key"
  ssh-keygen -q -t ed25519 -N '' -C other -f "$work/other"
  "$bin" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/signed" --sign-key "$work/key" >/dev/null
  [[ -f "$work/signed/checksums.txt.sig" ]] || fail "no signature written"
  "$bin" verify "$work/signed" --key "$work/key.pub" | grep 'verified' >/dev/null || fail "verify of a good bundle"
  # ssh-keygen agrees with gpufleet's own verification.
  echo "bundle $(cat "$work/key.pub")" >"$work/allowed"
  ssh-keygen -q -Y verify -f "$work/allowed" -I bundle -n gpufleet-bundle -s "$work/signed/checksums.txt.sig" \
    <"$work/signed/checksums.txt" >/dev/null || fail "ssh-keygen rejects the signature"
  expect_verify_fails() {  # WORDS DIR KEY
    set +e
    out="$("$bin" verify "$2" --key "$3" 2>&1)"; rc=$?
    set -e
    [[ $rc == 4 && $out == *"$1"* ]] || fail "verify $2 with $3: want exit 4 and '$1', got $rc: $out"
  }
  expect_verify_fails "checksums.txt.sig: signed by a different key" "$work/signed" "$work/other.pub"
  cp -r "$work/signed" "$work/tampered"
  echo 'echo pwned' >>"$work/tampered/components/gpu-operator/install.sh"
  expect_verify_fails "components/gpu-operator/install.sh: changed" "$work/tampered" "$work/key.pub"
  cp -r "$work/signed" "$work/added"
  echo x >"$work/added/components/extra.sh"
  expect_verify_fails "components/extra.sh: not listed in checksums.txt" "$work/added" "$work/key.pub"
  cp -r "$work/signed" "$work/resummed"
  echo 'echo pwned' >>"$work/resummed/deploy.sh"
  (cd "$work/resummed" && sed -i "s|^.*  deploy.sh\$|$(sha256sum deploy.sh | cut -c1-64)  deploy.sh|" checksums.txt)
  expect_verify_fails "checksums.txt: the signature does not match" "$work/resummed" "$work/key.pub"
  expect_verify_fails "checksums.txt.sig: missing" "$work/over" "$work/key.pub"
  expect_bad_input "not an SSH Ed25519 public key" verify "$work/signed" --key "$work/recipe.yaml"
else
  echo "skip signing checks: no ssh-keygen (Debian package openssh-client)"
fi

# The readiness gate deploy.sh runs between levels: only the named components' health checks.
snapshot="$(dirname "$0")/testdata/snapshot.yaml"
"$bin" validate -r "$work/recipe.yaml" --snapshot "$snapshot" --components cert-manager -o json \
  >"$work/gate.json" || true
grep -q '"subject": "cert-manager"' "$work/gate.json" || fail "gate: no cert-manager check: $(cat "$work/gate.json")"
grep -q '"category": "constraint"' "$work/gate.json" && fail "gate evaluated constraints"
grep -o '"subject": "[a-z-]*"' "$work/gate.json" | grep -v 'cert-manager' >/dev/null && fail "gate checked other components"
"$bin" validate -r "$work/recipe.yaml" --snapshot "$snapshot" --level 0 -o json >"$work/level0.json" || true
grep -q '"subject": "node-feature-discovery"' "$work/level0.json" || fail "--level 0 misses node-feature-discovery"
grep -q '"subject": "gpu-operator"' "$work/level0.json" && fail "--level 0 checked a level-1 component"
expect_bad_input "--level 99: recipe eks-h100-ubuntu-inference-dynamo has levels 0 to" \
  validate -r "$work/recipe.yaml" --snapshot "$snapshot" --level 99
expect_bad_input "--components: 'nope' is not a component" \
  validate -r "$work/recipe.yaml" --snapshot "$snapshot" --components nope
echo "bundle_cli_test: ok"
