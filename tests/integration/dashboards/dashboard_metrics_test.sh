#!/usr/bin/env bash
# Every metric the chart's Grafana dashboards read is exported: the controller with every
# registered controller enabled (`gpufleet controller --list`) and the node agent run on
# kube-local and the simulated fleet, their /metrics are scraped, and dashboard_metrics_check
# names each dashboard, panel and metric that neither page has a family for. Families are
# known by their # HELP / # TYPE lines, which core::metrics prints for a registered family
# before it has a series, so nothing has to happen on the fleet first.
# Usage: dashboard_metrics_test.sh REPO_ROOT CHECK_BIN (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN).
set -euo pipefail
repo="$1"
check="$2"
cd "$repo"
test_name=dashboard_metrics
policy=dashboard-metrics
# shellcheck source=../sentinel/sentinel_env.sh
source "$repo/tests/integration/sentinel/sentinel_env.sh"
dashboards="$repo/deploy/chart/gpufleet/dashboards"
ledgerns=gpufleet-system

crds=()
for f in "$repo"/deploy/crds/*.yaml; do
  kubectl apply --server-side --force-conflicts --field-manager="$test_name" -f "$f" >/dev/null
  crds+=("crd/$(sed -n 's/^  name: \(.*\.gpufleet\.io\)$/\1/p' "$f" | head -n 1)")
done
kubectl wait --for=condition=Established --timeout=30s "${crds[@]}" >/dev/null
kubectl create namespace "$ledgerns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
start_fleet 2 0

mapfile -t names < <("$gpufleet" controller --list | sed -n 's/^\([a-z][a-z0-9-]*\)[[:space:]].*/\1/p')
((${#names[@]} >= 5)) || fail "gpufleet controller --list named ${#names[@]} controllers: $("$gpufleet" controller --list)"
controllers=$(IFS=,; echo "${names[*]}")
"$gpufleet" agent --sim-state-dir "$state" --fsync=false --metrics-addr 127.0.0.1:0 \
  >"$work/agent.log" 2>&1 &
agent_pid=$!
"$gpufleet" controller --controllers="$controllers" --metrics-addr 127.0.0.1:0 \
  --set sentinel.sim-state-dir="$state" --set sentinel.policy="$policy" \
  --set goodput.namespace="$ledgerns" >"$work/controller.log" 2>&1 &
controller_pid=$!

# serving_url LOG: the URL a process logged it serves /metrics on.
serving_url() {
  grep -o 'serving metrics and health" url=http://127.0.0.1:[0-9]*' "$1" | tail -n 1 | sed 's/.*url=//'
}
ready() {  # LOG: the process serves and is ready (caches synced, controllers set up)
  local url
  url=$(serving_url "$1")
  [[ -n $url ]] && curl -sf -m 5 "$url/readyz" >/dev/null
}
until_ok 90 "the controller ($controllers) ready" ready "$work/controller.log"
until_ok 60 "the node agents ready" ready "$work/agent.log"
curl -sf -m 10 "$(serving_url "$work/controller.log")/metrics" >"$work/controller.prom" || fail "scraping the controller"
curl -sf -m 10 "$(serving_url "$work/agent.log")/metrics" >"$work/agent.prom" || fail "scraping the agent"

if ! "$check" "$dashboards" "$work/controller.prom" "$work/agent.prom" >"$work/check.txt" 2>&1; then
  cat "$work/check.txt" >&2
  echo "--- families scraped (controller: --controllers=$controllers; agent)" >&2
  grep -h '^# TYPE' "$work/controller.prom" "$work/agent.prom" | awk '{print $3}' | sort -u | tr '\n' ' ' >&2
  echo >&2
  fail "a dashboard reads metrics that no process exports"
fi
cat "$work/check.txt"
