#!/usr/bin/env bash
# RBAC matrix of the chart: its ServiceAccounts, ClusterRoles and Roles are applied to
# kube-local (nothing else of the chart), then every ServiceAccount is impersonated with
# a SubjectAccessReview (what `kubectl auth can-i --as` asks) for what it needs (must be allowed) and for what it must not do
# (must be denied), e.g. the certify controller cannot patch Nodes and no controller may
# write NodeHealth (only agents, and only their own node's: see the admission policy).
# Usage: rbac_matrix.sh REPO_ROOT   (env: KUBECONFIG; HELM_BIN optional)
set -euo pipefail
repo="$1"
chart="$repo/deploy/chart/gpufleet"
helm="${HELM_BIN:-$repo/build/bin/helm}"
ns="gpufleet-rbac-$$"
work="$(mktemp -d)"
fail() { echo "rbac_matrix: FAIL: $*" >&2; exit 1; }
if ! command -v kubectl >/dev/null 2>&1; then
  kubectl() { "$KUBE_LOCAL_BIN" kubectl "$@"; }
fi
cleanup() {
  [[ -s "$work/rbac.yaml" ]] && kubectl delete -f "$work/rbac.yaml" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  [[ -s "$work/users.yaml" ]] && kubectl delete -f "$work/users.yaml" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
[[ -x "$helm" ]] || fail "helm not found at $helm (tools/helm-lint/build.sh builds it; or set HELM_BIN)"

kubectl create namespace "$ns" >/dev/null
"$helm" template gpufleet "$chart" -n "$ns" --kube-version 1.32.4 --show-only templates/rbac.yaml --show-only templates/hostpkg-rbac.yaml --show-only templates/goodput-rbac.yaml >"$work/rbac.yaml"
kubectl apply -f "$work/rbac.yaml" >/dev/null

# SubjectAccessReviews as the admin, for the ServiceAccount with its groups: exact, and they
# need no discovery (kinds of subsystems not installed yet are still checked by name). All
# are collected first and sent in one kubectl call.
wants=()
labels=()
: >"$work/sars.yaml"
expect() {  # yes|no sa verb resource[.group][/subresource] [namespace] [name]
  local want="$1" sa="$2" verb="$3" spec="$4" rns="${5:-}" name="${6:-}"
  local rg="${spec%%/*}" sub="" res group
  [[ "$spec" == */* ]] && sub="${spec#*/}"
  res="${rg%%.*}"; group=""; [[ "$rg" == *.* ]] && group="${rg#*.}"
  cat >>"$work/sars.yaml" <<SAR
---
apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: system:serviceaccount:$ns:$sa
  groups: [system:serviceaccounts, "system:serviceaccounts:$ns", system:authenticated]
  resourceAttributes: {verb: "$verb", group: "$group", resource: "$res", subresource: "$sub", namespace: "$rns", name: "$name"}
SAR
  wants+=("$want")
  labels+=("$sa: may $verb $spec${rns:+ in $rns}${name:+ named $name}")
}

# certify: runs and judges workloads; records results; never changes nodes.
for v in get list watch; do expect yes gpufleet-certify "$v" nodes; expect yes gpufleet-certify "$v" validationrequests.gpufleet.io; done
expect yes gpufleet-certify create certifications.gpufleet.io
expect yes gpufleet-certify patch validationrequests.gpufleet.io/status
expect yes gpufleet-certify create events.events.k8s.io
expect no gpufleet-certify patch nodes
expect no gpufleet-certify update nodes
expect no gpufleet-certify create pods/eviction
expect no gpufleet-certify delete pods
expect no gpufleet-certify create validationrequests.gpufleet.io
expect no gpufleet-certify update nodehealths.gpufleet.io
expect no gpufleet-certify get secrets "$ns"
expect yes gpufleet-certify create jobs.batch "$ns"
expect yes gpufleet-certify delete jobs.batch "$ns"
expect yes gpufleet-certify create services "$ns"
expect yes gpufleet-certify create mpijobs.kubeflow.org "$ns"
expect yes gpufleet-certify delete mpijobs.kubeflow.org "$ns"
expect no gpufleet-certify update mpijobs.kubeflow.org "$ns"
expect yes gpufleet-certify update configmaps "$ns"
expect yes gpufleet-certify get pods/log "$ns"
expect yes gpufleet-certify patch certifications.gpufleet.io/status "$ns"
expect yes gpufleet-certify patch workloadruns.gpufleet.io/status "$ns"
expect no gpufleet-certify patch nodes/status
expect no gpufleet-certify delete nodes
expect no gpufleet-certify update validationrequests.gpufleet.io
expect no gpufleet-certify create pods "$ns"
expect no gpufleet-certify create daemonsets.apps "$ns"

# sentinel: quarantines (cordon/taint), drains, asks for validation; reads NodeHealth only.
expect yes gpufleet-sentinel patch nodes
expect yes gpufleet-sentinel create pods/eviction
expect yes gpufleet-sentinel delete pods
expect yes gpufleet-sentinel patch pods
expect no gpufleet-sentinel update pods
expect no gpufleet-sentinel patch pods/status
expect yes gpufleet-sentinel watch nodehealths.gpufleet.io
expect yes gpufleet-sentinel create remediations.gpufleet.io
expect yes gpufleet-sentinel patch remediations.gpufleet.io/status
expect yes gpufleet-sentinel create validationrequests.gpufleet.io
expect no gpufleet-sentinel update nodehealths.gpufleet.io
expect no gpufleet-sentinel patch nodehealths.gpufleet.io/status
expect no gpufleet-sentinel delete nodes
expect no gpufleet-sentinel patch nodes/status
expect no gpufleet-sentinel create certifications.gpufleet.io
expect no gpufleet-sentinel create pods
expect no gpufleet-sentinel get secrets "$ns"
expect yes gpufleet-sentinel watch sentinelpolicies.gpufleet.io
expect yes gpufleet-sentinel update sentinelpolicies.gpufleet.io/status
expect yes gpufleet-sentinel update remediations.gpufleet.io/status
expect yes gpufleet-sentinel watch validationrequests.gpufleet.io
expect no gpufleet-sentinel patch sentinelpolicies.gpufleet.io
expect no gpufleet-sentinel update validationrequests.gpufleet.io/status
expect no gpufleet-sentinel delete remediations.gpufleet.io

# hostpkg: rolls host changes out (cordon, drain, uncordon); reads its sets, writes their status.
expect yes gpufleet-hostpkg patch nodes
expect yes gpufleet-hostpkg patch nodes/status
expect no gpufleet-hostpkg update nodes/status
expect yes gpufleet-hostpkg create pods/eviction
expect yes gpufleet-hostpkg list hostpackagesets.gpufleet.io
expect yes gpufleet-hostpkg patch hostpackagesets.gpufleet.io/status
expect yes gpufleet-hostpkg create validationrequests.gpufleet.io
# spec.validation: one ValidationRequest per node validating, created and watched; deleted
# with its set by the garbage collector (owner reference), so no delete below; certify's
# verdict (the status) is never hostpkg's to write.
for v in get list watch; do expect yes gpufleet-hostpkg "$v" validationrequests.gpufleet.io; done
expect no gpufleet-hostpkg patch validationrequests.gpufleet.io/status
expect yes gpufleet-hostpkg watch remediations.gpufleet.io
expect no gpufleet-hostpkg patch remediations.gpufleet.io
expect no gpufleet-hostpkg create hostpackagesets.gpufleet.io
expect no gpufleet-hostpkg delete pods
expect no gpufleet-hostpkg patch nodehealths.gpufleet.io
expect no gpufleet-hostpkg delete validationrequests.gpufleet.io
expect no gpufleet-hostpkg get secrets "$ns"
# Finalizer, PDB names for DrainBlocked; stage pods and their config files in the release
# namespace only.
expect yes gpufleet-hostpkg patch hostpackagesets.gpufleet.io
expect yes gpufleet-hostpkg list poddisruptionbudgets.policy
expect yes gpufleet-hostpkg create pods "$ns"
expect yes gpufleet-hostpkg delete pods "$ns"
expect yes gpufleet-hostpkg deletecollection pods "$ns"
expect no gpufleet-hostpkg deletecollection pods default
expect yes gpufleet-hostpkg create configmaps "$ns"
expect no gpufleet-hostpkg create pods kube-system
expect no gpufleet-hostpkg delete pods default
expect no gpufleet-hostpkg delete nodes
expect no gpufleet-hostpkg patch deploymentpolicies.gpufleet.io

# The DisruptionBudget: hostpkg and sentinel read it; only the budget controller writes its
# status; nobody but the operator writes its spec.
expect yes gpufleet-hostpkg get disruptionbudgets.gpufleet.io "" default
expect yes gpufleet-sentinel get disruptionbudgets.gpufleet.io "" default
expect no gpufleet-hostpkg update disruptionbudgets.gpufleet.io/status
expect no gpufleet-sentinel patch disruptionbudgets.gpufleet.io/status
expect no gpufleet-sentinel update disruptionbudgets.gpufleet.io
expect no gpufleet-certify get disruptionbudgets.gpufleet.io
# budget: reads what "out" is made of, writes the DisruptionBudget's status and nothing else.
for v in get list watch; do
  expect yes gpufleet-budget "$v" disruptionbudgets.gpufleet.io
  expect yes gpufleet-budget "$v" nodes
  expect yes gpufleet-budget "$v" remediations.gpufleet.io
done
expect yes gpufleet-budget patch disruptionbudgets.gpufleet.io/status
expect yes gpufleet-budget update disruptionbudgets.gpufleet.io/status
expect yes gpufleet-budget create events.events.k8s.io
expect no gpufleet-budget update disruptionbudgets.gpufleet.io
expect no gpufleet-budget create disruptionbudgets.gpufleet.io
expect no gpufleet-budget delete disruptionbudgets.gpufleet.io
expect no gpufleet-budget patch nodes
expect no gpufleet-budget patch remediations.gpufleet.io/status
expect no gpufleet-budget get secrets "$ns"

# goodput: reads pods and incidents everywhere, writes its ledger ConfigMaps in its namespace only.
for v in get list watch; do
  expect yes gpufleet-goodput "$v" pods
  expect yes gpufleet-goodput "$v" remediations.gpufleet.io
  expect yes gpufleet-goodput "$v" configmaps "$ns"
done
for v in create update patch delete; do expect yes gpufleet-goodput "$v" configmaps "$ns"; done
expect yes gpufleet-goodput create events.events.k8s.io
expect no gpufleet-goodput create configmaps default
expect no gpufleet-goodput delete configmaps kube-system
expect no gpufleet-goodput list configmaps
expect no gpufleet-goodput delete pods
expect no gpufleet-goodput create pods/eviction
expect no gpufleet-goodput patch nodes
expect no gpufleet-goodput patch remediations.gpufleet.io
expect no gpufleet-goodput get secrets "$ns"

# Leader election: each controller its own Lease, in the release namespace only.
for c in certify sentinel hostpkg budget goodput; do
  expect yes "gpufleet-$c" create leases.coordination.k8s.io "$ns"
  expect yes "gpufleet-$c" get leases.coordination.k8s.io "$ns" "gpufleet-$c"
  expect yes "gpufleet-$c" update leases.coordination.k8s.io "$ns" "gpufleet-$c"
  expect no "gpufleet-$c" update leases.coordination.k8s.io kube-system kube-controller-manager
  expect no "gpufleet-$c" delete leases.coordination.k8s.io "$ns" "gpufleet-$c"
done
expect no gpufleet-certify update leases.coordination.k8s.io "$ns" gpufleet-sentinel
# The DisruptionBudget's claims Lease: hostpkg and sentinel read and write it (never delete
# it); the others do not touch it.
for c in sentinel hostpkg; do
  expect yes "gpufleet-$c" get leases.coordination.k8s.io "$ns" gpufleet-disruption-claims
  expect yes "gpufleet-$c" update leases.coordination.k8s.io "$ns" gpufleet-disruption-claims
  expect no "gpufleet-$c" delete leases.coordination.k8s.io "$ns" gpufleet-disruption-claims
  expect no "gpufleet-$c" update leases.coordination.k8s.io kube-system gpufleet-disruption-claims
done
expect no gpufleet-sentinel update leases.coordination.k8s.io "$ns" gpufleet-hostpkg
for c in certify budget; do
  expect no "gpufleet-$c" update leases.coordination.k8s.io "$ns" gpufleet-disruption-claims
done

# agent: its NodeHealth (which node: admission), its node (watched, with a field selector on
# its name, for sentinel's remediation requests: RBAC cannot scope a list to one name, so
# list/watch is granted and the agent asks for its own node only), host package sets; it never
# writes a Node.
expect yes gpufleet-agent create nodehealths.gpufleet.io
expect yes gpufleet-agent patch nodehealths.gpufleet.io/status
expect yes gpufleet-agent get nodes
expect yes gpufleet-agent list nodes
expect yes gpufleet-agent watch nodes
expect yes gpufleet-agent watch hostpackagesets.gpufleet.io
expect no gpufleet-agent patch nodes
expect no gpufleet-agent update nodes
expect no gpufleet-agent delete nodehealths.gpufleet.io
expect no gpufleet-agent list pods
expect no gpufleet-agent create pods/eviction
expect no gpufleet-agent get secrets "$ns"
expect no gpufleet-agent update leases.coordination.k8s.io "$ns"

mapfile -t got < <(kubectl create -f "$work/sars.yaml" -o jsonpath='{.status.allowed}{"\n"}')
[[ ${#got[@]} -eq ${#wants[@]} ]] || fail "asked ${#wants[@]} access reviews, got ${#got[@]} answers"
bad=0
for i in "${!wants[@]}"; do
  answer=no; [[ "${got[$i]}" == true ]] && answer=yes
  if [[ "$answer" != "${wants[$i]}" ]]; then
    echo "rbac_matrix: ${labels[$i]} is '$answer', want '${wants[$i]}'" >&2
    bad=1
  fi
done
(( bad == 0 )) || fail "the chart's RBAC differs from the matrix (above)"

# Kubernetes' user-facing roles, through the chart's aggregated ClusterRoles: a user bound to
# `view` (cluster-wide: most gpufleet.io kinds are cluster-scoped) reads SentinelPolicies but
# cannot create them; one bound to `edit` in a namespace creates Certifications there, but no
# status and no cluster-scoped kind (a RoleBinding grants namespaced kinds only).
cat >"$work/users.yaml" <<USERS
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: $ns-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: $ns-viewer}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: editor, namespace: $ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: $ns-editor}]
USERS
kubectl apply -f "$work/users.yaml" >/dev/null
# The aggregation controller (kube-controller-manager) copies the rules in asynchronously.
for _ in $(seq 60); do
  kubectl get clusterrole edit -o jsonpath='{.rules[*].apiGroups}' | grep -q gpufleet.io \
    && kubectl get clusterrole view -o jsonpath='{.rules[*].apiGroups}' | grep -q gpufleet.io && break
  sleep 0.5
done
# SubjectAccessReviews again (`kubectl auth can-i --as USER` without the CRDs installed asks
# for the wrong thing: the matrix installs RBAC only).
uwants=(); ulabels=()
: >"$work/user-sars.yaml"
can() {  # yes|no viewer|editor verb resource.group[/subresource] [namespace]
  local spec="$4" sub="" rg res group
  rg="${spec%%/*}"; [[ "$spec" == */* ]] && sub="${spec#*/}"
  res="${rg%%.*}"; group="${rg#*.}"
  cat >>"$work/user-sars.yaml" <<SAR
---
apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: $ns-$2
  groups: [system:authenticated]
  resourceAttributes: {verb: "$3", group: "$group", resource: "$res", subresource: "$sub", namespace: "${5:-}"}
SAR
  uwants+=("$1")
  local role=view; [[ "$2" == editor ]] && role=edit
  ulabels+=("user $2 (bound to $role): may $3 $4${5:+ in $5}")
}
can yes viewer list sentinelpolicies.gpufleet.io
can yes viewer get certifications.gpufleet.io "$ns"
can yes viewer watch nodehealths.gpufleet.io
can no viewer create sentinelpolicies.gpufleet.io
can no viewer delete certifications.gpufleet.io "$ns"
can yes editor create certifications.gpufleet.io "$ns"
can yes editor delete workloadruns.gpufleet.io "$ns"
can yes editor list certifications.gpufleet.io "$ns"
can no editor update certifications.gpufleet.io/status "$ns"
can no editor create certifications.gpufleet.io default
can no editor create sentinelpolicies.gpufleet.io
mapfile -t got < <(kubectl create -f "$work/user-sars.yaml" -o jsonpath='{.status.allowed}{"\n"}')
[[ ${#got[@]} -eq ${#uwants[@]} ]] || fail "asked ${#uwants[@]} user access reviews, got ${#got[@]} answers"
for i in "${!uwants[@]}"; do
  answer=no; [[ "${got[$i]}" == true ]] && answer=yes
  if [[ "$answer" != "${uwants[$i]}" ]]; then
    echo "rbac_matrix: ${ulabels[$i]} is '$answer', want '${uwants[$i]}'" >&2
    bad=1
  fi
done
users=${#uwants[@]}
(( bad == 0 )) || fail "Kubernetes' view/edit roles do not cover gpufleet.io as the chart promises (above)"
echo "rbac_matrix: PASS (${#wants[@]} access checks over 5 ServiceAccounts, $users for users bound to view/edit)"
