#!/usr/bin/env bash
# The gpufleet chart (deploy/chart/gpufleet) with the real tools, against kube-local:
#  - `helm lint --strict` with the default values and with every optional part switched;
#  - values.schema.json refuses bad values with a message naming the field;
#  - crds/ is byte-identical to deploy/crds/ and files/ to deploy/admission/;
#  - `helm template --include-crds | kubectl apply --dry-run=server` is accepted;
#  - the rendered objects keep their promises (2 replicas, PDB, non-root, read-only root fs,
#    quarantine tolerations, the documented host paths only, no RBAC wildcard).
# Usage: chart.sh REPO_ROOT   (env: KUBECONFIG; HELM_BIN optional, default REPO_ROOT/build/bin/helm)
set -euo pipefail
repo="$1"
chart="$repo/deploy/chart/gpufleet"
helm="${HELM_BIN:-$repo/build/bin/helm}"
kv=1.32.4
work="$(mktemp -d)"
ns="gpufleet-chart-$$"
fail() { echo "chart: FAIL: $*" >&2; exit 1; }
if ! command -v kubectl >/dev/null 2>&1; then
  kubectl() { "$KUBE_LOCAL_BIN" kubectl "$@"; }
fi
cleanup() {
  kubectl delete crd -l gpufleet.io/test=chart-standin --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
[[ -x "$helm" ]] || fail "helm not found at $helm (tools/helm-lint/build.sh builds it; or set HELM_BIN)"

"$helm" lint --strict "$chart" >"$work/lint" 2>&1 || fail "helm lint --strict: $(cat "$work/lint")"
"$helm" lint --strict "$chart" --set agent.kernelLog=false --set agent.remediation.enabled=false \
  --set serviceMonitor.enabled=true \
  --set controllers.hostpkg.enabled=false >"$work/lint2" 2>&1 || fail "helm lint (options): $(cat "$work/lint2")"

reject() {  # --set-arg expected-message
  if "$helm" template t "$chart" --kube-version "$kv" --set "$1" >"$work/out" 2>&1; then
    fail "values $1 accepted"
  fi
  grep -qF -- "$2" "$work/out" || fail "values $1 rejected without '$2': $(cat "$work/out")"
}
reject controller.replicas=0 "at '/controller/replicas': minimum: got 0, want 1"
reject agent.bogus=1 "at '/agent': additional properties 'bogus' not allowed"
reject controller.leaseDuration=soon "at '/controller/leaseDuration'"
reject image.pullPolicy=Sometimes "at '/image/pullPolicy'"
reject webhook.failurePolicy=Sometimes "at '/webhook/failurePolicy'"
reject agent.maintenance.provider=oci "at '/agent/maintenance/provider'"
# Each cloud-maintenance provider reaches the agent's environment (docs/sentinel.md).
for p in azure aws gcp; do
  "$helm" template t "$chart" --kube-version "$kv" --set agent.maintenance.provider=$p \
    >"$work/maint" 2>&1 || fail "agent.maintenance.provider=$p refused: $(cat "$work/maint")"
  grep -qF "{name: GPUFLEET_MAINTENANCE_PROVIDER, value: \"$p\"}" "$work/maint" \
    || fail "agent.maintenance.provider=$p does not set GPUFLEET_MAINTENANCE_PROVIDER=$p"
done

# The recipe library's reference to this chart must be true: the chart is built into gpufleet
# (embedded from deploy/chart at build time, carried by every bundle), named and versioned as here.
entry="$(awk '/^  gpufleet:/{f=1;next} f&&/^  [a-z]/{f=0} f' "$repo/data/recipes/registry.yaml")"
grep -q 'repository: builtin$' <<<"$entry" || fail "registry.yaml gpufleet entry is not 'repository: builtin' (the chart bundles carry from deploy/chart)"
chart_name="$(sed -n 's/^name: //p' "$chart/Chart.yaml")"
chart_version="$(sed -n 's/^version: //p' "$chart/Chart.yaml")"
grep -q "name: $chart_name\$" <<<"$entry" || fail "registry.yaml names the chart differently from Chart.yaml ($chart_name)"
grep -q "version: $chart_version\$" <<<"$entry" || fail "registry.yaml pins a version other than Chart.yaml's $chart_version"

# One source of truth for CRDs and the policy: the chart's copies must be identical.
src_crds="$(cd "$repo/deploy/crds" && ls *.yaml)"
chart_crds="$(cd "$chart/crds" && ls *.yaml)"
[[ "$src_crds" == "$chart_crds" ]] || fail "chart crds/ has [$chart_crds], deploy/crds has [$src_crds]"
for f in $src_crds; do
  cmp -s "$repo/deploy/crds/$f" "$chart/crds/$f" || fail "$chart/crds/$f differs from deploy/crds/$f (copy it)"
done
cmp -s "$repo/deploy/admission/agent-node-identity.yaml" "$chart/files/agent-node-identity.yaml" \
  || fail "chart files/agent-node-identity.yaml differs from deploy/admission/ (copy it)"

"$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" --include-crds >"$work/all.yaml"
kubectl create namespace "$ns" >/dev/null
kubectl apply --dry-run=server -f "$work/all.yaml" >"$work/dry" 2>&1 || fail "server dry-run: $(cat "$work/dry")"
n=$(grep -c '(server dry run)' "$work/dry")
echo "chart: $n objects accepted by the API server (dry run)"

q() { kubectl apply --dry-run=server -f "$work/all.yaml" -o jsonpath="$1" 2>/dev/null; }
deploys="$(q '{range .items[?(@.kind=="Deployment")]}{.metadata.name}:{.spec.replicas}:{.spec.template.spec.securityContext.runAsNonRoot}:{.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem}:{.spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation}{"\n"}{end}')"
for c in certify hostpkg sentinel budget goodput; do
  grep -qx "gpufleet-$c:2:true:true:false" <<<"$deploys" || fail "Deployment gpufleet-$c is not 2 replicas, non-root, read-only root fs: $deploys"
done
pdbs="$(q '{range .items[?(@.kind=="PodDisruptionBudget")]}{.metadata.name}:{.spec.minAvailable}{"\n"}{end}')"
for c in certify hostpkg sentinel budget goodput; do
  grep -qx "gpufleet-$c:1" <<<"$pdbs" || fail "no PDB minAvailable=1 for gpufleet-$c: $pdbs"
done
args="$(q '{range .items[?(@.kind=="Deployment")]}{.spec.template.spec.containers[0].args}{"\n"}{end}')"
grep -q '"--controllers=sentinel","--leader-elect"' <<<"$args" || fail "controller args lack --controllers=NAME --leader-elect: $args"
# sentinel's client limit fits a storm of 50 quarantines/s (~6 writes each); the others keep
# the default.
grep '"--controllers=sentinel",.*"--kube-qps=300","--kube-burst=600"' <<<"$args" >/dev/null \
  || fail "sentinel's Deployment lacks --kube-qps=300 --kube-burst=600: $args"
if grep '"--controllers=hostpkg",.*--kube-qps' <<<"$args" >/dev/null; then
  fail "hostpkg got a --kube-qps it was not given: $args"
fi
tol="$(q '{range .items[?(@.kind=="DaemonSet")]}{.spec.template.spec.tolerations[*].key}{end}')"
for key in nvidia.com/gpu-error gpufleet.io/quarantine node.kubernetes.io/unschedulable; do
  grep -qw -- "$key" <<<"$tol" || fail "agent DaemonSet does not tolerate $key (it must run on quarantined nodes): $tol"
done
paths="$(q '{range .items[?(@.kind=="DaemonSet")]}{.spec.template.spec.volumes[*].hostPath.path}{end}')"
[[ "$paths" == "/dev/kmsg /sys /var/lib/gpufleet /run/nvidia" ]] || fail "agent host paths are '$paths', not the documented four"
sa="$(q '{range .items[?(@.kind=="DaemonSet")]}{.spec.template.spec.serviceAccountName}{end}')"
[[ "$sa" == gpufleet-agent ]] || fail "agent ServiceAccount is '$sa'; the admission policy matches gpufleet-agent"
# Remediation (on by default) runs host commands through nsenter: host PID namespace, privileged.
grep -q 'hostPID: true' "$work/all.yaml" || fail "agent with remediation on does not share the host PID namespace"
# Without the kernel log and remediation the agent is unprivileged and mounts no /dev/kmsg.
"$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" --set agent.kernelLog=false \
  --set agent.remediation.enabled=false >"$work/nokmsg.yaml"
grep -q 'privileged: true' "$work/nokmsg.yaml" && fail "agent.kernelLog=false, agent.remediation.enabled=false still renders a privileged container"
grep -q 'hostPID' "$work/nokmsg.yaml" && fail "agent.remediation.enabled=false still shares the host PID namespace"
grep -q -- '--remediation=off' "$work/nokmsg.yaml" || fail "agent.remediation.enabled=false does not pass --remediation=off"
grep -q '/dev/kmsg' "$work/nokmsg.yaml" && fail "agent.kernelLog=false still mounts /dev/kmsg"
# certify, sentinel, hostpkg, budget and goodput: one each.
"$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" --set serviceMonitor.enabled=true >"$work/sm.yaml"
[[ "$(grep -c '^kind: ServiceMonitor' "$work/sm.yaml")" == 5 ]] || fail "serviceMonitor.enabled=true should render one ServiceMonitor per controller"
[[ "$(grep -c '^kind: PodMonitor' "$work/sm.yaml")" == 1 ]] || fail "serviceMonitor.enabled=true should render a PodMonitor for the agents"
# Grafana dashboards: one ConfigMap per dashboards/*.json for the sidecar, carrying the file as
# it is; a controller's dashboard only while the controller is enabled.
dashboards() {  # helm --set args...: the dashboard ConfigMaps rendered
  "$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" "$@" |
    awk '/^kind: ConfigMap/{cm=1} /^---/{cm=0} cm && /^  name: gpufleet-.*-dashboard$/{print $2}' | sort | tr '\n' ' '
}
all_dashboards="gpufleet-certify-dashboard gpufleet-controllers-dashboard gpufleet-goodput-dashboard gpufleet-hostpkg-dashboard gpufleet-sentinel-dashboard "
[[ "$(dashboards)" == "$all_dashboards" ]] || fail "dashboard ConfigMaps: [$(dashboards)], want [$all_dashboards]"
[[ "$(dashboards --set controllers.hostpkg.enabled=false)" == "${all_dashboards/gpufleet-hostpkg-dashboard /}" ]] \
  || fail "controllers.hostpkg.enabled=false still renders its dashboard: $(dashboards --set controllers.hostpkg.enabled=false)"
[[ -z "$(dashboards --set dashboards.enabled=false)" ]] || fail "dashboards.enabled=false renders $(dashboards --set dashboards.enabled=false)"
labelled="$(q '{range .items[?(@.metadata.labels.grafana_dashboard=="1")]}{.metadata.name}{" "}{end}')"
[[ "$labelled" == "$all_dashboards" ]] || fail "ConfigMaps labelled grafana_dashboard: \"1\": [$labelled], want [$all_dashboards]"
for d in certify controllers goodput hostpkg sentinel; do
  # The block scalar under data.gpufleet-<d>.json, its 4-space indent removed.
  awk -v key="  gpufleet-$d.json: |-" '$0 == key {f=1; next} f && !/^    /{f=0} f {print substr($0, 5)}' \
    "$work/all.yaml" >"$work/dash-$d.json"
  cmp -s "$work/dash-$d.json" "$chart/dashboards/$d.json" \
    || fail "gpufleet-$d-dashboard's gpufleet-$d.json differs from dashboards/$d.json"
done
"$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" --set dashboards.annotations.grafana_folder=gpufleet \
  | grep -c '^    grafana_folder: gpufleet$' | grep -qx 5 || fail "dashboards.annotations not on the 5 dashboard ConfigMaps"
# The agent serves /metrics on the pod network (not loopback, where nothing could scrape it)
# and is probed there.
agent="$(q '{range .items[?(@.kind=="DaemonSet")]}{.spec.template.spec.containers[0].args}|{.spec.template.spec.containers[0].ports[0].containerPort}|{.spec.template.spec.containers[0].readinessProbe.httpGet.path}{end}')"
grep -q '"--metrics-address=:9464".*|9464|/readyz$' <<<"$agent" || fail "agent metrics not on :9464 with a readiness probe: $agent"
# The admission webhook: one per controller with validators, trusting the CA of the Secret
# the controllers serve from, whose certificate names both Services.
hooks="$(q '{range .items[?(@.kind=="ValidatingWebhookConfiguration")]}{range .webhooks[*]}{.name}={.clientConfig.service.name}:{.clientConfig.caBundle}{"\n"}{end}{end}')"
ca="$(q '{range .items[?(@.kind=="Secret")]}{.data.ca\.crt}{end}')"
[[ -n "$ca" ]] || fail "no webhook Secret with ca.crt rendered"
grep -qx "certify.gpufleet.io=gpufleet-certify-webhook:$ca" <<<"$hooks" || fail "certify's webhook missing or not trusting the Secret's CA: $hooks"
grep -qx "sentinel.gpufleet.io=gpufleet-sentinel-webhook:$ca" <<<"$hooks" || fail "sentinel's webhook missing or not trusting the Secret's CA: $hooks"
grep -qx "hostpkg.gpufleet.io=gpufleet-hostpkg-webhook:$ca" <<<"$hooks" || fail "hostpkg's webhook missing or not trusting the Secret's CA: $hooks"
grep -qx "budget.gpufleet.io=gpufleet-budget-webhook:$ca" <<<"$hooks" || fail "budget's webhook (DisruptionBudget) missing or not trusting the Secret's CA: $hooks"
[[ "$(wc -l <<<"$hooks")" == 4 ]] || fail "expected 4 webhooks (certify, sentinel, hostpkg, budget): $hooks"
if command -v openssl >/dev/null; then
  crt="$(q '{range .items[?(@.kind=="Secret")]}{.data.tls\.crt}{end}')"
  sans="$(base64 -d <<<"$crt" | openssl x509 -noout -ext subjectAltName 2>/dev/null)"
  for svc in certify sentinel hostpkg budget; do
    grep -q "DNS:gpufleet-$svc-webhook.$ns.svc" <<<"$sans" || fail "webhook certificate does not name gpufleet-$svc-webhook.$ns.svc: $sans"
  done
  base64 -d <<<"$crt" | openssl verify -CAfile <(base64 -d <<<"$ca") >/dev/null 2>&1 || fail "webhook certificate not signed by the caBundle's CA"
fi
grep -q '"--controllers=certify","--leader-elect".*"--webhook-addr=:9443","--webhook-cert-dir=/etc/gpufleet/webhook"' <<<"$args" || fail "certify does not serve the webhook: $args"
grep '"--controllers=hostpkg"' <<<"$args" | grep -- '--webhook-addr' >/dev/null || fail "hostpkg does not serve the webhook: $args"
"$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" --set webhook.enabled=false >"$work/nowh.yaml"
grep -qE 'ValidatingWebhookConfiguration|--webhook-addr|gpufleet-webhook-tls' "$work/nowh.yaml" && fail "webhook.enabled=false still renders webhook parts"
"$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" --set controllers.certify.enabled=false \
  --set controllers.hostpkg.enabled=false >"$work/nocert.yaml"
grep -q 'certify.gpufleet.io' "$work/nocert.yaml" && fail "a disabled certify still has a webhook"
grep -q 'hostpkg.gpufleet.io' "$work/nocert.yaml" && fail "a disabled hostpkg still has a webhook"
grep -q 'sentinel.gpufleet.io' "$work/nocert.yaml" || fail "sentinel's webhook went with certify's and hostpkg's"
grep -qE '^\s*-?\s*(verbs|resources|apiGroups): \[?.*"?\*' "$work/all.yaml" && fail "an RBAC rule uses a wildcard"

# --- Webhook certificate modes (docs/install.md, "The admission webhook's certificate").
# default: genCA at each render, kept by `lookup` under helm install/upgrade only; `helm
# template` (Argo CD, Flux) has no cluster to read, so two renders differ: this mode is for
# helm install. certManager and existingSecret must render byte-identically every time.
render() {  # out-file --set-args...
  local out="$1"; shift
  "$helm" template gpufleet "$chart" -n "$ns" --kube-version "$kv" "$@" >"$out" 2>&1 || fail "helm template $*: $(cat "$out")"
}
render "$work/def1.yaml"; render "$work/def2.yaml"
grep -q '^  ca.crt: ' "$work/def1.yaml" || fail "the default webhook mode renders no CA (ca.crt)"
cmp -s "$work/def1.yaml" "$work/def2.yaml" && fail "two default renders are identical: expected a new genCA pair each (no lookup under helm template)"
grep -q 'cert-manager.io' "$work/def1.yaml" && fail "the default webhook mode renders cert-manager objects"
cm=(--set webhook.certManager.enabled=true)
render "$work/cm1.yaml" "${cm[@]}"; render "$work/cm2.yaml" "${cm[@]}"
cmp -s "$work/cm1.yaml" "$work/cm2.yaml" || fail "webhook.certManager.enabled: two renders differ: $(diff "$work/cm1.yaml" "$work/cm2.yaml" | head -20)"
# A stand-in CA (any base64 PEM: the chart only passes it on).
ca_own="$(printf -- '-----BEGIN CERTIFICATE-----\nMIIBstandin\n-----END CERTIFICATE-----\n' | base64 -w0)"
own=(--set webhook.existingSecret=my-webhook-tls --set "webhook.caBundle=$ca_own")
render "$work/own1.yaml" "${own[@]}"; render "$work/own2.yaml" "${own[@]}"
cmp -s "$work/own1.yaml" "$work/own2.yaml" || fail "webhook.existingSecret: two renders differ: $(diff "$work/own1.yaml" "$work/own2.yaml" | head -20)"
for f in cm1 own1; do
  grep -q '^kind: Secret' "$work/$f.yaml" && fail "$f: a Secret is rendered (cert-manager or the user owns it)"
  grep -qE 'BEGIN|^ *tls\.key:' "$work/$f.yaml" && fail "$f: key material rendered"
done
grep -q 'cert-manager.io' "$work/own1.yaml" && fail "webhook.existingSecret renders cert-manager objects"
reject webhook.existingSecret=my-tls "at '/webhook/caBundle': minLength: got 0, want 1"
reject webhook.caBundle=Zm9v "webhook.caBundle is used only with webhook.existingSecret"
if "$helm" template t "$chart" --kube-version "$kv" "${cm[@]}" "${own[@]}" >"$work/out" 2>&1; then
  fail "webhook.certManager.enabled with webhook.existingSecret accepted"
fi
grep -qF "exclude each other" "$work/out" || fail "certManager+existingSecret refused without the reason: $(cat "$work/out")"
reject webhook.caBundle='not base64!' "at '/webhook/caBundle'"

# existingSecret: the API server accepts the render; every Deployment that serves a webhook
# mounts that Secret (goodput and budget serve none) and every webhook trusts the given CA.
kubectl apply --dry-run=server -f "$work/own1.yaml" >"$work/dry" 2>&1 || fail "existingSecret: server dry-run: $(cat "$work/dry")"
qj() { kubectl apply --dry-run=server -f "$1" -o jsonpath="$2" 2>/dev/null; }
mounts="$(qj "$work/own1.yaml" '{range .items[?(@.kind=="Deployment")]}{.spec.template.spec.volumes[?(@.name=="webhook-tls")].secret.secretName}{"\n"}{end}' | grep . | sort -u)"
[[ "$mounts" == my-webhook-tls ]] || fail "existingSecret: Deployments mount '$mounts', not my-webhook-tls"
bundles="$(qj "$work/own1.yaml" '{range .items[?(@.kind=="ValidatingWebhookConfiguration")]}{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}{end}' | sort -u)"
[[ "$bundles" == "$ca_own" ]] || fail "existingSecret: webhooks' caBundle is not webhook.caBundle: $bundles"

# certManager: cert-manager's CRDs are not on kube-local, so the shape is checked here (not
# against cert-manager's own schema): stand-in CRDs (any spec) let the API server take the
# whole render in a dry run and answer jsonpath queries over it.
for k in Certificate:certificates Issuer:issuers; do
  cat <<CRD
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ${k#*:}.cert-manager.io, labels: {gpufleet.io/test: chart-standin}}
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: ${k%%:*}, plural: ${k#*:}, singular: $(tr A-Z a-z <<<"${k%%:*}")}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
CRD
done >"$work/standin-crds.yaml"
if kubectl get crd certificates.cert-manager.io >/dev/null 2>&1; then
  standin=0   # a real cert-manager: its own schema checks the objects too
else
  standin=1
  kubectl apply -f "$work/standin-crds.yaml" >/dev/null
  kubectl wait --for condition=established --timeout=60s crd/certificates.cert-manager.io crd/issuers.cert-manager.io >/dev/null
fi
kubectl apply --dry-run=server -f "$work/cm1.yaml" >"$work/dry" 2>&1 || fail "certManager: server dry-run: $(cat "$work/dry")"
grep -c '^apiVersion: cert-manager.io/' "$work/cm1.yaml" | grep -qx 4 || fail "certManager: expected 4 cert-manager objects"
grep '^apiVersion: cert-manager.io/' "$work/cm1.yaml" | grep -vqx 'apiVersion: cert-manager.io/v1' && fail "certManager: an object not in cert-manager.io/v1"
objs="$(qj "$work/cm1.yaml" '{range .items[?(@.apiVersion=="cert-manager.io/v1")]}{.kind}/{.metadata.name}|{.spec.secretName}|{.spec.isCA}|{.spec.issuerRef.kind}/{.spec.issuerRef.name}|{.spec.ca.secretName}|{.spec.selfSigned}{"\n"}{end}' | sort)"
expected="Certificate/gpufleet-webhook-ca|gpufleet-webhook-ca|true|Issuer/gpufleet-webhook-selfsigned||
Certificate/gpufleet-webhook|gpufleet-webhook-tls||Issuer/gpufleet-webhook-ca||
Issuer/gpufleet-webhook-ca|||/|gpufleet-webhook-ca|
Issuer/gpufleet-webhook-selfsigned|||/||{}"
[[ "$objs" == "$expected" ]] || fail "certManager: the Issuer/Certificate chain is not selfSigned -> CA -> serving:
$objs"
mounts="$(qj "$work/cm1.yaml" '{range .items[?(@.kind=="Deployment")]}{.spec.template.spec.volumes[?(@.name=="webhook-tls")].secret.secretName}{"\n"}{end}' | grep . | sort -u)"
[[ "$mounts" == gpufleet-webhook-tls ]] || fail "certManager: Deployments mount '$mounts', not the serving Certificate's Secret gpufleet-webhook-tls"
dns="$(qj "$work/cm1.yaml" '{range .items[?(@.kind=="Certificate")]}{.spec.dnsNames[*]}{end}')"
for svc in certify sentinel hostpkg budget; do
  grep -qw "gpufleet-$svc-webhook.$ns.svc" <<<"$dns" || fail "certManager: dnsNames lack gpufleet-$svc-webhook.$ns.svc: $dns"
done
vwc="$(qj "$work/cm1.yaml" '{range .items[?(@.kind=="ValidatingWebhookConfiguration")]}{.metadata.annotations.cert-manager\.io/inject-ca-from}|{.webhooks[*].clientConfig.caBundle}|{.webhooks[*].name}{end}')"
[[ "$vwc" == "$ns/gpufleet-webhook||"* && "$vwc" == *certify.gpufleet.io* ]] \
  || fail "certManager: the webhook configuration is not injected from $ns/gpufleet-webhook without a caBundle: $vwc"

if (( standin )); then kubectl delete -f "$work/standin-crds.yaml" --wait=false >/dev/null 2>&1 || true; fi
# Pod metadata and priority classes: rendered where asked, accepted by the schema.
render "$work/meta.yaml" --set controller.podAnnotations.a=b --set controller.podLabels.team=ml \
  --set controller.priorityClassName=system-cluster-critical --set agent.podAnnotations.c=d \
  --set agent.podLabels.team=ml --set agent.priorityClassName=""
meta="$(qj "$work/meta.yaml" '{range .items[?(@.spec.template.metadata)]}{.kind}:{.spec.template.metadata.annotations.a}{.spec.template.metadata.annotations.c}:{.spec.template.metadata.labels.team}:{.spec.template.spec.priorityClassName}{"\n"}{end}' | sort -u)"
[[ "$meta" == "$(printf 'DaemonSet:d:ml:\nDeployment:b:ml:system-cluster-critical')" ]] || fail "podAnnotations/podLabels/priorityClassName not rendered: $meta"
pc="$(q '{range .items[?(@.kind=="DaemonSet")]}{.spec.template.spec.priorityClassName}{end}')"
[[ "$pc" == system-node-critical ]] || fail "the agent's default priority class is '$pc'"
reject controller.podLabels.app\\.kubernetes\\.io/component=x "invalid propertyName 'app.kubernetes.io/component'"
reject agent.priorityClassName=Bad_Name "at '/agent/priorityClassName'"
echo "chart: PASS (lint --strict, schema, CRDs identical, server dry-run, rendered promises, webhook and its certificate modes)"
