#!/usr/bin/env bash
# The helm bundle's preflight against kube-local: a component namespace stuck Terminating, a
# webhook whose Service is missing, an APIService that is not Available, a component already
# installed as a Helm release in another namespace and a component CRD managed by another
# Helm release must all be listed, and deploy.sh must stop before its first install. Once
# repaired, preflight passes. Helm is a fake that logs installs and lists releases (installs
# of the real charts need the network).
# Usage: preflight_live.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN)
set -euo pipefail
gpufleet="$GPUFLEET_BIN"  # (deploy.sh reads GPUFLEET_BIN too; overridden below)
id="pf$$"
ns=cert-manager  # a namespace the recipe installs into
work="$(mktemp -d)"
cleanup() {
  kubectl delete apiservice "v1.$id.gpufleet.io" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete validatingwebhookconfiguration "$id" --ignore-not-found >/dev/null 2>&1 || true
  kubectl patch configmap -n "$ns" "$id-held" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  kubectl delete crd "widgets.$id.gpufleet.io" --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
kubectl get namespace "$ns" >/dev/null 2>&1 && { echo "skip: namespace $ns exists already"; exit 77; }

# cert-manager's health checks name a CRD that someone else's Helm release manages.
mkdir -p "$work/data/overlays"
cat >"$work/data/overlays/preflight.yaml" <<YAML
apiVersion: gpufleet.io/v1alpha1
kind: Overlay
components:
  cert-manager:
    health: [{kind: CustomResourceDefinition, name: widgets.$id.gpufleet.io}]
YAML
"$gpufleet" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  --data "$work/data" -o "$work/recipe.yaml"
"$gpufleet" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bundle" >/dev/null
mkdir -p "$work/bin"
cat >"$work/bin/helm" <<'SH'
#!/usr/bin/env bash
if [[ $1 == list ]]; then echo "${FAKE_RELEASES:-}"; exit 0; fi
echo "$*" >>"$FAKE_HELM_LOG"
SH
chmod +x "$work/bin/helm"
# Nothing really installs here, so the readiness gate (tested by recipe_deploy_script_test) passes at once.
export PATH="$work/bin:$PATH" FAKE_HELM_LOG="$work/helm.log" GPUFLEET_BACKOFF_SECONDS=0 GPUFLEET_RETRIES=1 GPUFLEET_BIN=true
: >"$FAKE_HELM_LOG"

kubectl create namespace "$ns" >/dev/null
kubectl create configmap -n "$ns" "$id-held" >/dev/null
kubectl patch configmap -n "$ns" "$id-held" --type=merge -p '{"metadata":{"finalizers":["gpufleet.io/preflight-test"]}}' >/dev/null
kubectl delete namespace "$ns" --wait=false >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: $id}
webhooks:
  - name: check.$id.gpufleet.io
    clientConfig: {service: {namespace: default, name: missing-$id}}
    rules: [{apiGroups: ["$id.gpufleet.io"], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: [v1]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.$id.gpufleet.io}
spec:
  group: $id.gpufleet.io
  version: v1
  service: {namespace: default, name: missing-$id}
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.$id.gpufleet.io
  annotations: {meta.helm.sh/release-name: someone-else, meta.helm.sh/release-namespace: other}
spec:
  group: $id.gpufleet.io
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1alpha1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
YAML
# The aggregator marks the APIService unavailable within a few seconds.
for _ in $(seq 60); do
  [[ "$(kubectl get apiservice "v1.$id.gpufleet.io" -o jsonpath='{.status.conditions[?(@.type=="Available")].status}')" == False ]] && break
  sleep 0.5
done
export FAKE_RELEASES="gpu-operator other-team"
set +e
(cd "$work/bundle" && ./deploy.sh) >"$work/out.txt" 2>&1; rc=$?
set -e
out="$(cat "$work/out.txt")"
[[ $rc != 0 ]] || fail "deploy.sh went on despite preflight problems: $out"
[[ ! -s $FAKE_HELM_LOG ]] || fail "helm ran before preflight passed: $(cat "$FAKE_HELM_LOG")"
for want in "5 problem(s); nothing was installed" \
  "namespace $ns (for cert-manager) is stuck Terminating" \
  "validatingwebhookconfigurations/$id webhook check.$id.gpufleet.io calls Service default/missing-$id, which does not exist" \
  "apiservice/v1.$id.gpufleet.io is not Available (False)" \
  "gpu-operator is already installed as Helm release gpu-operator in namespace other-team" \
  "CRD widgets.$id.gpufleet.io (of cert-manager) is managed by Helm release someone-else"; do
  [[ $out == *"$want"* ]] || fail "preflight did not report '$want': $out"
done

# Repaired: preflight passes and deploy.sh installs.
cleanup_cluster() {
  kubectl delete apiservice "v1.$id.gpufleet.io" >/dev/null
  kubectl delete validatingwebhookconfiguration "$id" >/dev/null
  kubectl delete crd "widgets.$id.gpufleet.io" >/dev/null
  kubectl patch configmap -n "$ns" "$id-held" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
  kubectl wait --for=delete "namespace/$ns" --timeout=60s >/dev/null
}
cleanup_cluster
export FAKE_RELEASES="gpu-operator gpu-operator"
(cd "$work/bundle" && ./preflight.sh) >"$work/ok.txt" 2>&1 || fail "preflight after repair: $(cat "$work/ok.txt")"
(cd "$work/bundle" && ./deploy.sh) >"$work/deploy.txt" 2>&1 || fail "deploy after repair: $(cat "$work/deploy.txt")"
grep -q 'upgrade --install' "$FAKE_HELM_LOG" || fail "deploy.sh installed nothing"
echo "preflight_live: ok"
