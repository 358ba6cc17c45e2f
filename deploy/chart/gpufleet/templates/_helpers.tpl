{{/* Labels every object carries. */}}
{{- define "gpufleet.labels" -}}
app.kubernetes.io/part-of: gpufleet
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpufleet.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
Least-privilege rules per controller: exactly what its reconcilers read and write (see
docs/deploy.md, "RBAC"). tests/integration/deploy/rbac_matrix.sh checks them both ways.
Cluster-wide rules here; leader election Leases are a Role in the release namespace.
*/}}
{{- define "gpufleet.rules.certify" -}}
# Certifications and workload runs are certify's own objects.
- apiGroups: [gpufleet.io]
  resources: [certifications, workloadruns]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [gpufleet.io]
  resources: [certifications/status, workloadruns/status, validationrequests/status]
  verbs: [get, update, patch]
# ValidationRequests come from sentinel; certify answers in their status only.
- apiGroups: [gpufleet.io]
  resources: [validationrequests]
  verbs: [get, list, watch]
# Chooses nodes (never changes them).
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
# Reads workload results: the termination message, else the log.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
# Runs the workloads: one Job per group test (+ a headless Service for multi-node
# rendezvous), deleted once its result is recorded.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, create, delete]
# Where the cluster runs the mpi-operator (certify.launcher auto or mpijob), multi-node MPI
# workloads are MPIJobs instead (no rule is used where the group is not served).
- apiGroups: [kubeflow.org]
  resources: [mpijobs]
  verbs: [get, list, watch, create, delete]
# Progress and per-node results of each run, in ConfigMaps the run owns.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create, update]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- define "gpufleet.rules.sentinel" -}}
# Reads what the agents report; never writes it (the agents own NodeHealth).
- apiGroups: [gpufleet.io]
  resources: [nodehealths, sentinelpolicies]
  verbs: [get, list, watch]
# The breaker's state and the policy's conditions (the spec is the operator's).
- apiGroups: [gpufleet.io]
  resources: [sentinelpolicies/status]
  verbs: [get, update, patch]
# One Remediation per incident; a ValidationRequest gates each return (certify answers it).
- apiGroups: [gpufleet.io]
  resources: [remediations, validationrequests]
  verbs: [get, list, watch, create]
- apiGroups: [gpufleet.io]
  resources: [remediations/status]
  verbs: [get, update, patch]
# The cluster's DisruptionBudget: reboots, resets and new-node validations wait for room.
- apiGroups: [gpufleet.io]
  resources: [disruptionbudgets]
  verbs: [get]
# Quarantine: cordon (shared owners annotation) and taint; the agent's remediation request.
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch, patch]
# Drain: evict (PDB-aware), delete pods past their deadline or stuck Terminating; patch a
# training job's pods to ask it to checkpoint first (annotations, docs/goodput.md).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- define "gpufleet.rules.hostpkg" -}}
- apiGroups: [gpufleet.io]
  resources: [hostpackagesets, deploymentpolicies]
  verbs: [get, list, watch]
# sentinel's open incidents count against the disruption budget
- apiGroups: [gpufleet.io]
  resources: [remediations]
  verbs: [get, list, watch]
# The cluster's DisruptionBudget (read with a GET; its status is the budget controller's).
- apiGroups: [gpufleet.io]
  resources: [disruptionbudgets]
  verbs: [get]
# Its finalizer on a set (uninstall on deletion), and the set's status.
- apiGroups: [gpufleet.io]
  resources: [hostpackagesets]
  verbs: [patch]
- apiGroups: [gpufleet.io]
  resources: [hostpackagesets/status]
  verbs: [get, update, patch]
# A changed host is certified before it takes work again (spec.validation): one
# ValidationRequest per node validating, owned by the set, so the garbage collector deletes
# them with it (hostpkg itself never deletes one: no delete).
- apiGroups: [gpufleet.io]
  resources: [validationrequests]
  verbs: [get, list, watch, create]
# Rollout: cordon, drain, uncordon; per-node records are Node annotations
# (hostpkg.gpufleet.io/record.<set>), written with resourceVersion preconditions.
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch, patch]
# A drifted host shows on its Node: the HostPackageDrifted node condition.
- apiGroups: [""]
  resources: [nodes/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
# DrainBlocked names the PodDisruptionBudget that refused an eviction.
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- define "gpufleet.rules.budget" -}}
# The DisruptionBudget's status is this controller's alone; the spec is the operator's.
- apiGroups: [gpufleet.io]
  resources: [disruptionbudgets]
  verbs: [get, list, watch]
- apiGroups: [gpufleet.io]
  resources: [disruptionbudgets/status]
  verbs: [get, update, patch]
# What "out" reads: Nodes (cordon, readiness, hostpkg records) and sentinel's incidents.
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [gpufleet.io]
  resources: [remediations]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- define "gpufleet.rules.goodput" -}}
# Jobs are read from their pods (all namespaces), interruptions from sentinel's incidents;
# nothing of either is written. Its ledger ConfigMaps: the release namespace only
# (templates/goodput-rbac.yaml).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [gpufleet.io]
  resources: [remediations]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- define "gpufleet.rules.agent" -}}
# Its own node's health (the admission policy refuses every other node's).
- apiGroups: [gpufleet.io]
  resources: [nodehealths, nodehealths/status]
  verbs: [get, create, update, patch]
# Host package steps it is asked to run.
- apiGroups: [gpufleet.io]
  resources: [hostpackagesets]
  verbs: [get, list, watch]
# Its own Node: sentinel's remediation request is an annotation on it. Watched with a field
# selector on the node's name, which still needs list and watch.
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/*
Controllers that serve the validating webhook, with the resources each validates (a YAML
map; only enabled controllers). setup_certify, setup_sentinel, setup_hostpkg and setup_budget register the same kinds.
*/}}
{{- define "gpufleet.webhookControllers" -}}
{{- if .Values.controllers.certify.enabled }}
certify: [certifications, workloadruns]
{{- end }}
{{- if .Values.controllers.sentinel.enabled }}
sentinel: [sentinelpolicies]
{{- end }}
{{- if .Values.controllers.hostpkg.enabled }}
hostpkg: [hostpackagesets, deploymentpolicies]
{{- end }}
{{- if .Values.controllers.budget.enabled }}
budget: [disruptionbudgets]
{{- end }}
{{- end -}}

{{/* The Secret the webhook's serving certificate is in (mounted by the controllers). */}}
{{- define "gpufleet.webhookSecretName" -}}
{{- .Values.webhook.existingSecret | default "gpufleet-webhook-tls" -}}
{{- end -}}
