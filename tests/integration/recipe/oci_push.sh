#!/usr/bin/env bash
# `gpufleet bundle -o oci://...` and `gpufleet bundle pull` against a real OCI registry on
# loopback (tools/oci-registry: go-containerregistry's registry): the same bundle pushed twice
# (and to another registry) has the same digest; the layer is a clean reproducible tar+gzip;
# a pull by tag and by digest gives the bundle byte for byte and `gpufleet verify` accepts it;
# HTTPS with --registry-ca-file (the wrong CA or none: a clear error), Bearer token auth from a
# docker config.json (none or wrong: a clear error), Basic auth and credential helpers
# (credHelpers, credsStore; missing and failing helpers), identity tokens (POST to the realm),
# chunked uploads to a registry that refuses large requests, a registry that is down, a missing
# tag, a wrong digest, bad references. Needs no network beyond loopback and no Kubernetes.
# Usage: oci_push.sh REPO_ROOT   (env: GPUFLEET_BIN; OCI_REGISTRY_BIN optional)
# Exit 77 (skipped) when the registry is not built (tools/oci-registry/build.sh).
set -euo pipefail
repo="$1"
bin="$GPUFLEET_BIN"
registry="${OCI_REGISTRY_BIN:-$repo/build/bin/oci-registry}"
[[ -x "$registry" ]] || { echo "skip: no $registry (run tools/oci-registry/build.sh)"; exit 77; }
command -v openssl >/dev/null || { echo "skip: no openssl"; exit 77; }
command -v ssh-keygen >/dev/null || { echo "skip: no ssh-keygen"; exit 77; }
work="$(mktemp -d)"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# start NAME ARGS...: runs the registry, sets $addr to the address it printed.
start() {
  local name="$1"; shift
  "$registry" --quiet --addr 127.0.0.1:0 "$@" >"$work/$name.addr" 2>"$work/$name.log" &
  pids+=($!)
  eval "${name}_pid=$!"
  for _ in $(seq 100); do
    [[ -s "$work/$name.addr" ]] && break
    sleep 0.1
  done
  addr="$(head -n1 "$work/$name.addr")"
  [[ $addr == 127.0.0.1:* ]] || fail "registry $name did not start: $(cat "$work/$name.log")"
}
# expect_fail RC WORDS gpufleet-args...
expect_fail() {
  local want_rc="$1" want="$2"; shift 2
  set +e
  out="$("$bin" "$@" 2>&1)"; rc=$?
  set -e
  [[ $rc == "$want_rc" ]] || fail "gpufleet $* exited $rc, want $want_rc: $out"
  [[ $out == *"$want"* ]] || fail "gpufleet $*: '$want' not in: $out"
}
pushed_digest() { sed -n 's/^Pushed oci:\/\/[^@]*@\(sha256:[0-9a-f]*\) .*/\1/p' "$1"; }

"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  -o "$work/recipe.yaml"
ssh-keygen -q -t ed25519 -N '' -C signer -f "$work/key"
ssh-keygen -q -t ed25519 -N '' -C other -f "$work/other"
bundle=(bundle -r "$work/recipe.yaml" --deployer helm --set gpu-operator:operator.replicas=2 --sign-key "$work/key")

# Plain HTTP: push twice (a second apart, from another folder), same digest.
start plain
plain="$addr"
"$bin" "${bundle[@]}" -o "oci://$plain/gpufleet/bundle:v1" --registry-plain-http >"$work/push1.txt"
sleep 1
(cd "$work" && "$bin" "${bundle[@]}" -o "oci://$plain/gpufleet/bundle:v1" --registry-plain-http >"$work/push2.txt")
d1="$(pushed_digest "$work/push1.txt")"
d2="$(pushed_digest "$work/push2.txt")"
[[ $d1 == sha256:* && ${#d1} == 71 ]] || fail "no digest in: $(cat "$work/push1.txt")"
[[ $d1 == "$d2" ]] || fail "two pushes of the same bundle: $d1 then $d2"
grep -q "signed; fetch with: gpufleet bundle pull oci://$plain/gpufleet/bundle@$d1" "$work/push1.txt" ||
  fail "push output: $(cat "$work/push1.txt")"

# The stored artifact: our manifest byte for byte under its digest, and a clean layer.
curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  "http://$plain/v2/gpufleet/bundle/manifests/v1" >"$work/manifest.json"
[[ "sha256:$(sha256sum <"$work/manifest.json" | cut -d' ' -f1)" == "$d1" ]] || fail "manifest digest"
grep -q '"artifactType":"application/vnd.gpufleet.bundle.v1"' "$work/manifest.json" || fail "artifactType: $(cat "$work/manifest.json")"
grep -q '"mediaType":"application/vnd.oci.empty.v1+json"' "$work/manifest.json" || fail "config: $(cat "$work/manifest.json")"
grep -q '"io.gpufleet.bundle.deployer":"helm"' "$work/manifest.json" || fail "annotations: $(cat "$work/manifest.json")"
layer="$(grep -o '"digest":"sha256:[0-9a-f]*","mediaType":"application/vnd.gpufleet.bundle.layer.v1.tar+gzip"' "$work/manifest.json" | cut -d'"' -f4)"
[[ -n $layer ]] || fail "no bundle layer in $(cat "$work/manifest.json")"
curl -fsS "http://$plain/v2/gpufleet/bundle/blobs/$layer" >"$work/layer.tgz"
gzip -t "$work/layer.tgz" 2>"$work/gzip.err" && [[ ! -s "$work/gzip.err" ]] || fail "layer is not clean gzip: $(cat "$work/gzip.err")"
tar -tvzf "$work/layer.tgz" --numeric-owner >"$work/listing.txt"
bad="$(grep -v ' 0/0 ' "$work/listing.txt" | head -n3 || true)"
[[ -z $bad ]] || fail "entries not owned by 0/0: $bad"
bad="$(grep -v ' 1970-01-01 00:00 ' "$work/listing.txt" | head -n3 || true)"
[[ -z $bad ]] || fail "entries with an mtime: $bad"
tar -tzf "$work/layer.tgz" >"$work/names.txt"
LC_ALL=C sort -c "$work/names.txt" || fail "entries not sorted"
grep -qx 'checksums.txt.sig' "$work/names.txt" || fail "signature not in the layer"

# Pull by tag and by digest: the bundle byte for byte, verified offline.
"$bin" "${bundle[@]}" -o "$work/local" >/dev/null
"$bin" bundle pull "oci://$plain/gpufleet/bundle:v1" "$work/by-tag" --registry-plain-http >"$work/pull.txt"
grep -q "pulled oci://$plain/gpufleet/bundle@$d1 into $work/by-tag: " "$work/pull.txt" || fail "pull output: $(cat "$work/pull.txt")"
diff -r "$work/local" "$work/by-tag" || fail "pulled bundle differs from a local one"
[[ -x "$work/by-tag/deploy.sh" && ! -x "$work/by-tag/recipe.yaml" ]] || fail "modes not kept"
mkdir "$work/empty"
"$bin" bundle pull "oci://$plain/gpufleet/bundle@$d1" "$work/empty" --registry-plain-http >/dev/null
"$bin" verify "$work/empty" --key "$work/key.pub" | grep '^verified' >/dev/null || fail "verify of the pulled bundle"
expect_fail 4 "signed by a different key" verify "$work/empty" --key "$work/other.pub"
expect_fail 2 "is not an empty directory" bundle pull "oci://$plain/gpufleet/bundle:v1" "$work/empty" --registry-plain-http
expect_fail 1 "oci://$plain/gpufleet/bundle:v9 does not exist" bundle pull "oci://$plain/gpufleet/bundle:v9" "$work/v9" --registry-plain-http
wrong="sha256:$(printf '%064d' 0)"
expect_fail 1 "registry $plain:" bundle pull "oci://$plain/gpufleet/bundle@$wrong" "$work/wrong" --registry-plain-http
[[ -e "$work/v9" || -e "$work/wrong" ]] && fail "a failed pull left a directory"
# A different bundle, a different digest.
"$bin" bundle -r "$work/recipe.yaml" --deployer helmfile -o "oci://$plain/gpufleet/bundle:helmfile" --registry-plain-http >"$work/push3.txt"
[[ "$(pushed_digest "$work/push3.txt")" != "$d1" ]] || fail "helmfile bundle has the helm bundle's digest"

# Bad references: exit 2 before any work.
expect_fail 2 "-o \"oci://$plain/gpufleet/Bundle:v1\": repository component \"Bundle\" must be lower-case" \
  "${bundle[@]}" -o "oci://$plain/gpufleet/Bundle:v1"
expect_fail 2 "a push names a tag, not a digest" "${bundle[@]}" -o "oci://$plain/gpufleet/bundle@$d1"
expect_fail 2 "no tag" bundle pull "oci://$plain/gpufleet/bundle" "$work/x"

# HTTPS with its own CA: untrusted without --registry-ca-file, and with the wrong CA.
mkcert() {  # NAME: self-signed certificate for 127.0.0.1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$1" \
    -addext 'subjectAltName=IP:127.0.0.1,DNS:localhost' -keyout "$work/$1.key" -out "$work/$1.crt" 2>/dev/null
}
mkcert tls
mkcert wrong
start tls --tls-cert "$work/tls.crt" --tls-key "$work/tls.key"
tls="$addr"
expect_fail 1 "registry $tls: HEAD blob" "${bundle[@]}" -o "oci://$tls/gpufleet/bundle:v1"
[[ $out == *"TLS certificate is not trusted"*"--registry-ca-file"* ]] || fail "no CA: $out"
expect_fail 1 "TLS certificate is not trusted" "${bundle[@]}" -o "oci://$tls/gpufleet/bundle:v1" --registry-ca-file "$work/wrong.crt"
"$bin" "${bundle[@]}" -o "oci://$tls/gpufleet/bundle:v1" --registry-ca-file "$work/tls.crt" >"$work/push-tls.txt"
[[ "$(pushed_digest "$work/push-tls.txt")" == "$d1" ]] || fail "the same bundle on another registry: $(cat "$work/push-tls.txt")"
"$bin" bundle pull "oci://$tls/gpufleet/bundle:v1" "$work/tls-pull" --registry-ca-file "$work/tls.crt" >/dev/null
"$bin" verify "$work/tls-pull" --key "$work/key.pub" >/dev/null || fail "verify after the HTTPS pull"
expect_fail 1 "TLS handshake failed" "${bundle[@]}" -o "oci://$plain/gpufleet/bundle:v1"
[[ $out == *"--registry-plain-http"* ]] || fail "HTTPS to a plain registry: $out"

# Bearer token auth with credentials from a docker config.json.
start auth --auth robot:s3cret
auth="$addr"
export DOCKER_CONFIG="$work/docker"
mkdir -p "$DOCKER_CONFIG"
expect_fail 1 "HTTP 401" "${bundle[@]}" -o "oci://$auth/gpufleet/bundle:v1" --registry-plain-http
[[ $out == *"no credentials for $auth"* ]] || fail "no credentials: $out"
printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$auth" "$(printf 'robot:wrong' | base64)" >"$work/wrong.json"
expect_fail 1 "were refused" "${bundle[@]}" -o "oci://$auth/gpufleet/bundle:v1" --registry-plain-http --registry-config "$work/wrong.json"
echo '{"auths": {"'"$auth"'": {"auth": "not base64!"}}}' >"$DOCKER_CONFIG/config.json"
expect_fail 2 "docker config (give --registry-config FILE to use another): $DOCKER_CONFIG/config.json: auths.$auth.auth: expected base64" \
  "${bundle[@]}" -o "oci://$auth/gpufleet/bundle:v1" --registry-plain-http
printf '{"auths": {"http://%s": {"auth": "%s"}}}\n' "$auth" "$(printf 'robot:s3cret' | base64)" >"$DOCKER_CONFIG/config.json"
"$bin" "${bundle[@]}" -o "oci://$auth/gpufleet/bundle:v1" --registry-plain-http >"$work/push-auth.txt"
[[ "$(pushed_digest "$work/push-auth.txt")" == "$d1" ]] || fail "authenticated push: $(cat "$work/push-auth.txt")"
"$bin" bundle pull "oci://$auth/gpufleet/bundle:v1" "$work/auth-pull" --registry-plain-http >/dev/null
diff -r "$work/local" "$work/auth-pull" || fail "authenticated pull differs"
unset DOCKER_CONFIG

# Credential helpers (the docker-credential-helpers protocol: the registry on stdin, JSON out)
# against a registry that asks for Basic credentials on every request.
export PATH="$repo/tests/integration/recipe/testdata:$PATH" GPUFLEET_TEST_CREDENTIALS="$work/helper-creds"
: >"$GPUFLEET_TEST_CREDENTIALS.log"
start basic --auth robot:s3cret --auth-mode basic
basic="$addr"
echo '{}' >"$work/none.json"
expect_fail 1 "registry $basic: HEAD blob" "${bundle[@]}" -o "oci://$basic/gpufleet/bundle:v1" \
  --registry-plain-http --registry-config "$work/none.json"
[[ $out == *"HTTP 401"*"no credentials for $basic in the docker config $work/none.json; add them with \`docker login $basic\`"* ]] ||
  fail "basic registry without credentials: $out"
# credHelpers wins over credsStore (whose helper does not even exist) for its registry.
echo "$basic robot s3cret" >"$GPUFLEET_TEST_CREDENTIALS"
printf '{"credHelpers": {"%s": "gpufleet-test"}, "credsStore": "gpufleet-missing"}\n' "$basic" >"$work/helpers.json"
"$bin" "${bundle[@]}" -o "oci://$basic/gpufleet/bundle:v1" --registry-plain-http \
  --registry-config "$work/helpers.json" >"$work/push-helper.txt"
[[ "$(pushed_digest "$work/push-helper.txt")" == "$d1" ]] || fail "push with credHelpers: $(cat "$work/push-helper.txt")"
grep -qx "get $basic" "$GPUFLEET_TEST_CREDENTIALS.log" || fail "the helper was not asked for $basic: $(cat "$GPUFLEET_TEST_CREDENTIALS.log")"
"$bin" bundle pull "oci://$basic/gpufleet/bundle:v1" "$work/helper-pull" --registry-plain-http \
  --registry-config "$work/helpers.json" >/dev/null
diff -r "$work/local" "$work/helper-pull" || fail "pull with credHelpers differs"
# credsStore for every registry, here the token registry: its credentials go to the realm.
echo "$auth robot s3cret" >"$GPUFLEET_TEST_CREDENTIALS"
echo '{"credsStore": "gpufleet-test", "auths": {}}' >"$work/store.json"
"$bin" "${bundle[@]}" -o "oci://$auth/gpufleet/bundle:v1" --registry-plain-http \
  --registry-config "$work/store.json" >"$work/push-store.txt"
[[ "$(pushed_digest "$work/push-store.txt")" == "$d1" ]] || fail "push with credsStore: $(cat "$work/push-store.txt")"
# A helper with nothing for the registry falls back to auths; with nothing there, a 401.
: >"$GPUFLEET_TEST_CREDENTIALS"
expect_fail 1 "no credentials for $auth" "${bundle[@]}" -o "oci://$auth/gpufleet/bundle:v1" \
  --registry-plain-http --registry-config "$work/store.json"
printf '{"credsStore": "gpufleet-test", "auths": {"%s": {"auth": "%s"}}}\n' "$auth" "$(printf 'robot:s3cret' | base64)" >"$work/store-auths.json"
"$bin" "${bundle[@]}" -o "oci://$auth/gpufleet/bundle:v1" --registry-plain-http \
  --registry-config "$work/store-auths.json" >/dev/null || fail "helper without credentials, then auths"
# A failing helper and a missing one: the registry, the helper, the entry and the fix.
echo "$basic robot !fail" >"$GPUFLEET_TEST_CREDENTIALS"
expect_fail 1 "registry $basic: credential helper docker-credential-gpufleet-test (credHelpers[\"$basic\"] in $work/helpers.json) failed (exit status 1)" \
  "${bundle[@]}" -o "oci://$basic/gpufleet/bundle:v1" --registry-plain-http --registry-config "$work/helpers.json"
[[ $out == *"keychain locked; error getting credentials: the keychain is locked"*"docker login $basic"* ]] || fail "failing helper: $out"
echo '{"credsStore": "gpufleet-missing"}' >"$work/missing.json"
expect_fail 1 "registry $basic: credential helper docker-credential-gpufleet-missing (credsStore in $work/missing.json) cannot be run" \
  bundle pull "oci://$basic/gpufleet/bundle:v1" "$work/missing-pull" --registry-plain-http --registry-config "$work/missing.json"
[[ $out == *"install docker-credential-gpufleet-missing on PATH"* ]] || fail "missing helper: $out"
echo '{"credHelpers": {"'"$basic"'": 7}}' >"$work/bad-helper.json"
expect_fail 2 "--registry-config: $work/bad-helper.json: credHelpers.$basic: expected a string" \
  "${bundle[@]}" -o "oci://$basic/gpufleet/bundle:v1" --registry-plain-http --registry-config "$work/bad-helper.json"

# Identity tokens (docker's "identitytoken", or a helper's "<token>" user): traded at the
# realm by a POST with grant_type=refresh_token.
start idt --auth robot:s3cret --refresh-token rt-123
idt="$addr"
printf '{"auths": {"%s": {"identitytoken": "rt-123"}}}\n' "$idt" >"$work/idt.json"
"$bin" "${bundle[@]}" -o "oci://$idt/gpufleet/bundle:v1" --registry-plain-http \
  --registry-config "$work/idt.json" >"$work/push-idt.txt"
[[ "$(pushed_digest "$work/push-idt.txt")" == "$d1" ]] || fail "push with an identity token: $(cat "$work/push-idt.txt")"
printf '{"auths": {"%s": {"identitytoken": "rt-expired"}}}\n' "$idt" >"$work/idt-wrong.json"
expect_fail 1 "HTTP 401" "${bundle[@]}" -o "oci://$idt/gpufleet/bundle:v1" --registry-plain-http --registry-config "$work/idt-wrong.json"
[[ $out == *"invalid refresh token"*"the credentials for $idt from auths[\"$idt\"] in $work/idt-wrong.json were refused"* ]] ||
  fail "wrong identity token: $out"
printf '%s <token> rt-123\n%s <token> rt-123\n' "$idt" "$basic" >"$GPUFLEET_TEST_CREDENTIALS"
"$bin" bundle pull "oci://$idt/gpufleet/bundle:v1" "$work/idt-pull" --registry-plain-http \
  --registry-config "$work/store.json" >/dev/null || fail "pull with a helper's identity token"
diff -r "$work/local" "$work/idt-pull" || fail "pull with an identity token differs"
expect_fail 1 "holds only an identity token" bundle pull "oci://$basic/gpufleet/bundle:v1" "$work/idt-basic" \
  --registry-plain-http --registry-config "$work/store.json"
unset GPUFLEET_TEST_CREDENTIALS

# Chunked upload: a registry that refuses request bodies over 64 KiB gets a larger layer only
# in chunks (PATCH with Content-Range, then PUT with the digest); the pull gives it back whole.
head -c 300000 /dev/urandom | base64 >"$work/big.txt"
big=(bundle -r "$work/recipe.yaml" --deployer helm --set-file "gpu-operator:notes=$work/big.txt")
"$registry" --addr 127.0.0.1:0 --max-request-bytes 65536 >"$work/small.addr" 2>"$work/small.log" &
pids+=($!)
for _ in $(seq 100); do [[ -s "$work/small.addr" ]] && break; sleep 0.1; done
small="$(head -n1 "$work/small.addr")"
[[ $small == 127.0.0.1:* ]] || fail "registry small did not start: $(cat "$work/small.log")"
expect_fail 1 "HTTP 413 SIZE_INVALID: request body of" "${big[@]}" -o "oci://$small/gpufleet/big:v1" --registry-plain-http
expect_fail 2 "--registry-chunk-size" "${big[@]}" -o "oci://$small/gpufleet/big:v1" --registry-plain-http --registry-chunk-size 10
"$bin" "${big[@]}" -o "oci://$small/gpufleet/big:v1" --registry-plain-http --registry-chunk-size 65536 >"$work/push-big.txt"
"$bin" "${big[@]}" -o "$work/big-local" >/dev/null
"$bin" bundle pull "oci://$small/gpufleet/big:v1" "$work/big-pull" --registry-plain-http >/dev/null
diff -r "$work/big-local" "$work/big-pull" || fail "chunked bundle differs after the pull"
patches="$(grep -c 'PATCH /v2/gpufleet/big/blobs/uploads/' "$work/small.log" || true)"
(( patches >= 5 )) || fail "expected the layer in 5 or more chunks, saw $patches PATCH requests: $(grep -v ' GET ' "$work/small.log" | tail -n5)"
layer_size="$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$small/v2/gpufleet/big/manifests/v1" |
  grep -o 'bundle.layer.v1.tar+gzip","size":[0-9]*' | grep -o '[0-9]*$')"
(( layer_size > 65536 )) || fail "the layer ($layer_size bytes) is not over the chunk size"
echo "chunked: a layer of $layer_size bytes in $patches chunks"
# A registry whose Range after a chunk does not cover it: the push stops naming the chunk.
start short --short-range
expect_fail 1 "upload blob sha256:" "${big[@]}" -o "oci://$addr/gpufleet/big:v1" --registry-plain-http --registry-chunk-size 65536
[[ $out == *"bytes 0-65535 of $layer_size (PATCH): it holds \"0-65534\" after the chunk, not 0-65535"* ]] ||
  fail "short Range: $out"

# The registry goes down: the error names it.
kill "$plain_pid"
wait "$plain_pid" 2>/dev/null || true
expect_fail 1 "registry $plain: HEAD blob" "${bundle[@]}" -o "oci://$plain/gpufleet/bundle:v1" --registry-plain-http
[[ $out == *"cannot reach $plain"*"check that the registry runs"* ]] || fail "registry down: $out"
expect_fail 1 "cannot reach $plain" bundle pull "oci://$plain/gpufleet/bundle:v1" "$work/down" --registry-plain-http
echo "PASS: oci push/pull ($d1)"
