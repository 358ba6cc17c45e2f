#!/usr/bin/env bash
# The air-gap proof: a bundle made with `gpufleet bundle --vendor-charts` installs in a
# network namespace that has only loopback (`unshare -n`), against a kube-local started inside
# that namespace. The charts come from a loopback OCI registry (tools/oci-registry) that keeps
# running outside. Inside, control steps show that nothing outside is reachable (an outbound
# fetch fails with no route, the registry that served the charts cannot be reached, and the
# same recipe bundled without --vendor-charts fails to install); the vendored
# bundle's deploy.sh (preflight, both levels, the readiness gate) and uninstall.sh then
# succeed, so they made no call that needed the network; `bundle --charts-from --images` there
# lists the same images (operator images included) as outside. Where strace exists, every
# connect() of the deploy is recorded and must target loopback or a Unix socket.
# Usage: airgap_deploy.sh REPO_ROOT   (env: GPUFLEET_BIN; HELM_BIN, KUBE_LOCAL_BIN,
# OCI_REGISTRY_BIN optional)
# Exit 77 (skipped) without helm, kube-local or the registry, or where `unshare -n` is not
# permitted (it needs root or CAP_SYS_ADMIN; CI runs as root).
set -euo pipefail
repo="$1"
bin="$GPUFLEET_BIN"
helm="${HELM_BIN:-$repo/build/bin/helm}"
kube_local="${KUBE_LOCAL_BIN:-$repo/build/bin/kube-local}"
registry="${OCI_REGISTRY_BIN:-$repo/build/bin/oci-registry}"
for tool in "$helm" "$kube_local" "$registry"; do
  [[ -x $tool ]] || { echo "skip: no $tool (make tools builds it)"; exit 77; }
done
command -v ip >/dev/null || { echo "skip: no ip (iproute2) to bring loopback up in the namespace"; exit 77; }
if ! err="$(unshare -n true 2>&1)"; then
  echo "skip: unshare -n is not permitted here ($err); the air-gap proof needs root or CAP_SYS_ADMIN"
  exit 77
fi
work="$(mktemp -d)"
registry_pid=""
cleanup() {
  # kube-local's supervisor runs inside the namespace; down reaches it by its pid file.
  [[ -d $work/kube ]] && "$kube_local" down --data-dir "$work/kube" >/dev/null 2>&1 || true
  [[ -n $registry_pid ]] && kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Two charts in a loopback OCI registry: demo (a Deployment with the image from its values
# and a ConfigMap) and demo-app (a ConfigMap), installed in two levels.
"$registry" --quiet --addr 127.0.0.1:0 >"$work/registry.addr" 2>"$work/registry.log" &
registry_pid=$!
for _ in $(seq 100); do [[ -s $work/registry.addr ]] && break; sleep 0.1; done
addr="$(head -n1 "$work/registry.addr")"
[[ $addr == 127.0.0.1:* ]] || fail "registry did not start: $(cat "$work/registry.log")"
# The charts (testdata/charts): demo renders its image and carries operator-style values
# (driver, toolkit, validator, dcgm, sriov) that no template renders.
charts="$repo/tests/integration/recipe/testdata/charts"
for c in demo demo-app; do
  "$helm" package "$charts/$c" -d "$work/packages" >/dev/null
done
"$helm" push "$work/packages/demo-1.2.3.tgz" "oci://$addr/charts" --plain-http >/dev/null 2>&1 ||
  fail "helm push demo to oci://$addr/charts"
"$helm" push "$work/packages/demo-app-0.4.0.tgz" "oci://$addr/charts" --plain-http >/dev/null 2>&1 ||
  fail "helm push demo-app to oci://$addr/charts"

ns=airgap-demo
cat >"$work/recipe.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Recipe
metadata:
  digest: sha256:$(printf 'airgap-deploy' | sha256sum | cut -d' ' -f1)
  name: airgap-deploy
spec:
  components:
  - chart: {name: demo, repository: oci://$addr/charts, version: 1.2.3}
    dependencies: []
    level: 0
    name: demo
    namespace: $ns
    values: {image: registry.example/demo:2.0.0}
    operatorImages:
      driver: {repository: driver.repository, image: driver.image, version: driver.version, enabled: [driver.enabled], osTag: true}
      toolkit: {repository: toolkit.repository, image: toolkit.image, version: toolkit.version, enabled: [toolkit.enabled]}
      validator: {repository: validator.repository, image: validator.image, version: validator.version, defaultVersion: appVersion}
      dcgm: {repository: dcgm.repository, image: dcgm.image, version: dcgm.version, enabled: [dcgm.enabled]}
      sriov-cni: {reference: sriov.cni, enabled: [sriov.enabled]}
  - chart: {name: demo-app, repository: oci://$addr/charts, version: 0.4.0}
    dependencies: [demo]
    level: 1
    name: demo-app
    namespace: $ns
    values: {greeting: air-gapped}
  deployment:
    levels: [[demo], [demo-app]]
    order: [demo, demo-app]
  health:
  - {component: demo, kind: Deployment, name: demo, namespace: $ns}
  - {component: demo-app, kind: Pods, namespace: $ns}
YAML
# Overrides: a newer driver, the toolkit by digest, DCGM off; the driver is tagged per node OS.
digest="sha256:$(printf toolkit | sha256sum | cut -d' ' -f1)"
overrides=(--set demo:driver.version=580.126.20 --set "demo:toolkit.version=$digest"
  --set demo:dcgm.enabled=false --node-os ubuntu22.04 --node-os ubuntu24.04)
"$bin" bundle -r "$work/recipe.yaml" --deployer helm --vendor-charts --plain-http --helm "$helm" \
  --images "${overrides[@]}" -o "$work/bundle" >"$work/bundle.out" 2>"$work/bundle.err" ||
  fail "bundle --images: $(cat "$work/bundle.err")"
grep -q '2 charts vendored' "$work/bundle.out" || fail "bundle: $(cat "$work/bundle.out")"
(cd "$work/bundle" && sha256sum -c --quiet checksums.txt) || fail "bundle checksums"
# images.txt: the rendered image and the operator images with the overrides applied (the
# driver once per OS, the toolkit by digest, no DCGM, no SR-IOV CNI, the validator at the
# chart's appVersion, which a note says).
cat >"$work/images.expected" <<TXT
# Notes (lines starting with # are not images; grep -v '^#' images.txt):
# demo operatorImages.validator: validator.version is unset; the operator uses the chart's appVersion, v9.8.7
registry.example/demo:2.0.0
registry.example/operands/container-toolkit@$digest
registry.example/operands/driver:580.126.20-ubuntu22.04
registry.example/operands/driver:580.126.20-ubuntu24.04
registry.example/operands/validator:v9.8.7
TXT
diff -u "$work/images.expected" "$work/bundle/images.txt" || fail "images.txt differs (above)"
grep -q "note: demo operatorImages.validator" "$work/bundle.err" || fail "no note: $(cat "$work/bundle.err")"
# The component left out lists nothing of it (from the vendored archives, no pull).
"$bin" bundle -r "$work/recipe.yaml" --deployer helm --charts-from "$work/bundle" --helm "$helm" \
  --images --set demo:enabled=false -o "$work/off" >/dev/null
[[ ! -s $work/off/images.txt ]] || fail "demo:enabled=false still lists: $(cat "$work/off/images.txt")"
# The same recipe bundled without --vendor-charts: its install reaches for the registry.
"$bin" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/online" >/dev/null
# Outside the namespace the registry serves the chart (the control below fails for a reason).
mkdir "$work/outside"
"$helm" pull "oci://$addr/charts/demo" --version 1.2.3 --plain-http -d "$work/outside" >/dev/null 2>&1 ||
  fail "helm pull from the registry outside the namespace"

# Tools the bundle's scripts call, by name: helm, kubectl (kube-local's), gpufleet.
mkdir -p "$work/bin"
ln -s "$helm" "$work/bin/helm"
ln -s "$bin" "$work/bin/gpufleet"
printf '#!/usr/bin/env bash\nexec %q kubectl "$@"\n' "$kube_local" >"$work/bin/kubectl"
chmod +x "$work/bin/kubectl"
tracer=()
if command -v strace >/dev/null; then
  tracer=(strace -f -qq -e trace=connect -o "$work/connect.log")
  strace --seccomp-bpf -f -e trace=connect true >/dev/null 2>&1 && tracer=(strace --seccomp-bpf "${tracer[@]:1}")
fi

# Everything below runs inside the namespace. Helm's caches and config live in the work dir,
# so nothing from this machine's helm setup (repositories, registry logins) is used.
cat >"$work/inside.sh" <<'SH'
set -euo pipefail
fail() { echo "FAIL (inside): $*" >&2; exit 1; }
ip link set lo up
ip -4 route show >"$WORK/routes.txt"
grep -q default "$WORK/routes.txt" && fail "a default route exists: $(cat "$WORK/routes.txt")"
# Control: an outbound fetch fails loudly (no route), and so does the registry that served
# the charts (it runs outside; 127.0.0.1 here is this namespace's own loopback).
set +e
timeout 10 bash -c 'exec 3<>/dev/tcp/192.0.2.1/80' 2>"$WORK/control-outbound.txt"
tcp_rc=$?
set -e
[[ $tcp_rc != 0 ]] && grep -q "Network is unreachable" "$WORK/control-outbound.txt" ||
  fail "connect to an outside address: $(cat "$WORK/control-outbound.txt")"
if helm pull "oci://$ADDR/charts/demo" --version 1.2.3 --plain-http -d "$WORK/inside-pull" >"$WORK/control-registry.txt" 2>&1; then
  fail "the chart registry was reachable inside the namespace"
fi
grep -qi "connection refused" "$WORK/control-registry.txt" || fail "registry control: $(cat "$WORK/control-registry.txt")"

kubeconfig="$("$KUBE_LOCAL" up --data-dir "$WORK/kube" --detach --ready-timeout 120s)"
export KUBECONFIG="$kubeconfig"
export GPUFLEET_RETRIES=1 GPUFLEET_HELM_TIMEOUT=2m GPUFLEET_GATE_INTERVAL=1 GPUFLEET_GATE_TIMEOUT=60
# LeakSanitizer (sanitized builds) cannot run under ptrace; the leak check is not this test's.
[[ -n $TRACER ]] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# Control: the bundle without vendored charts cannot install here; it names the registry.
if GPUFLEET_SKIP_PREFLIGHT=1 "$WORK/online/deploy.sh" >"$WORK/control-online.txt" 2>&1; then
  fail "a bundle without vendored charts installed inside the namespace"
fi
grep -q "$ADDR.*connection refused" "$WORK/control-online.txt" || fail "online bundle: $(cat "$WORK/control-online.txt")"
# TRACER: the strace command line or empty (words; the work dir has no spaces).
$TRACER "$WORK/bundle/deploy.sh" >"$WORK/deploy.txt" 2>&1 || fail "deploy.sh: $(cat "$WORK/deploy.txt")"
helm status demo -n "$NS" >"$WORK/status-demo.txt" 2>&1
helm status demo-app -n "$NS" >"$WORK/status-app.txt" 2>&1
kubectl get deployment demo -n "$NS" -o 'jsonpath={.spec.template.spec.containers[0].image}' >"$WORK/image.txt"
kubectl get configmap demo-app -n "$NS" -o 'jsonpath={.data.greeting}' >"$WORK/greeting.txt"
"$WORK/bundle/uninstall.sh" >"$WORK/uninstall.txt" 2>&1 || fail "uninstall.sh: $(cat "$WORK/uninstall.txt")"
# The mirroring list from the vendored archives alone: the same images.txt as outside.
gpufleet bundle -r "$WORK/recipe.yaml" --deployer helm --charts-from "$WORK/bundle" --images \
  $OVERRIDES -o "$WORK/again" >"$WORK/again.txt" 2>&1 || fail "bundle --images inside: $(cat "$WORK/again.txt")"
helm list -n "$NS" -q >"$WORK/after-uninstall.txt"
"$KUBE_LOCAL" down --data-dir "$WORK/kube" >/dev/null
SH
export WORK="$work" ADDR="$addr" NS="$ns" KUBE_LOCAL="$kube_local" OVERRIDES="${overrides[*]}"
export PATH="$work/bin:$PATH" HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" \
  HELM_DATA_HOME="$work/helm/data" DOCKER_CONFIG="$work/docker"
export TRACER="${tracer[*]:-}"
unshare -n bash "$work/inside.sh" || fail "the air-gapped install failed (see above)"

# What the namespace left behind: the control failed, the install succeeded, then went away.
echo "control, outbound: $(cat "$work/control-outbound.txt")"
echo "control, chart registry: $(grep -io 'dial tcp[^"]*' "$work/control-registry.txt" | head -n1)"
echo "control, bundle without --vendor-charts: $(grep -m1 'Error:' "$work/control-online.txt")"
grep -q 'gpufleet preflight: ok' "$work/deploy.txt" || fail "preflight did not run: $(cat "$work/deploy.txt")"
grep -q 'gpufleet: level 0 healthy' "$work/deploy.txt" || fail "no readiness gate for level 0: $(cat "$work/deploy.txt")"
grep -q 'gpufleet: level 1 healthy' "$work/deploy.txt" || fail "no readiness gate for level 1: $(cat "$work/deploy.txt")"
grep -q 'gpufleet: recipe airgap-deploy installed' "$work/deploy.txt" || fail "deploy output: $(cat "$work/deploy.txt")"
grep -q 'STATUS: deployed' "$work/status-demo.txt" || fail "demo: $(cat "$work/status-demo.txt")"
grep -q 'STATUS: deployed' "$work/status-app.txt" || fail "demo-app: $(cat "$work/status-app.txt")"
[[ $(cat "$work/image.txt") == registry.example/demo:2.0.0 ]] || fail "demo image: $(cat "$work/image.txt")"
[[ $(cat "$work/greeting.txt") == air-gapped ]] || fail "demo-app greeting: $(cat "$work/greeting.txt")"
[[ ! -s $work/after-uninstall.txt ]] || fail "releases left after uninstall.sh: $(cat "$work/after-uninstall.txt")"
cmp "$work/bundle/images.txt" "$work/again/images.txt" ||
  fail "images.txt made inside differs: $(diff "$work/bundle/images.txt" "$work/again/images.txt")"
echo "images.txt inside the namespace, from the vendored archives: $(grep -vc '^#' "$work/again/images.txt") images, same as outside"
if [[ -s $work/connect.log ]]; then
  # connect(fd, {sa_family=AF_INET, sin_port=htons(P), sin_addr=inet_addr("A")}, ...) per call.
  inet="$(grep -c 'sa_family=AF_INET' "$work/connect.log" || true)"
  outbound="$(grep 'sa_family=AF_INET' "$work/connect.log" |
    grep -v -e 'inet_addr("127\.' -e 'inet_pton(AF_INET6, "::1"' -e 'inet_pton(AF_INET6, "::ffff:127\.' || true)"
  [[ -z $outbound ]] || fail "the deploy tried to connect outside loopback: $(head -n3 <<<"$outbound")"
  (( inet > 0 )) || fail "strace saw no connect() at all: $(head -n3 "$work/connect.log")"
  echo "strace: $inet connect() calls by the deploy, all to loopback"
else
  echo "note: no strace; the proof rests on the namespace having no route"
fi
echo "PASS: air-gapped deploy (2 vendored charts, 2 levels, readiness gates, uninstall) and images.txt"
