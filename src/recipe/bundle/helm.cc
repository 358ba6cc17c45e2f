// The helm deployer: per-component folders with values and an install script, a deploy
// script that installs level by level (one level's components in parallel, --wait, retries
// with exponential backoff) and an uninstall script that removes them in reverse order.
#include "core/yaml.h"
#include "recipe/builtin_charts.h"
#include "recipe/bundle/render.h"

namespace gpufleet::recipe::detail {

namespace {

std::string install_script(const Recipe& r, const Component& c) {
  std::string s = "#!/usr/bin/env bash\n" + generated_by(r);
  s += "# Installs " + c.name + " (chart " + c.chart.name + " " + c.chart.version +
       ") into namespace " + c.namespace_ + ".\n";
  s += "set -euo pipefail\ncd \"$(dirname \"$0\")\"\n";
  if (c.chart.is_builtin()) {
    bool has_crds = false;
    for (const auto& [path, _] : builtin_chart(c.chart.name, c.chart.version))
      has_crds = has_crds || path.rfind("crds/", 0) == 0;
    if (has_crds) {
      // Helm installs a chart's crds/ on first install only and never upgrades them; applying
      // them first (server-side, taking over the fields) keeps an upgrade's CRDs current.
      s += "# CRD-safe upgrade: Helm never upgrades crds/, so apply them first.\n";
      s += "kubectl apply --server-side --force-conflicts --field-manager=gpufleet-bundle "
           "${GPUFLEET_KUBECTL_DRY_RUN:+--dry-run=server} -f " +
           shell_quote("../../" + builtin_chart_dir(c.chart.name) + "/crds/") + "\n";
    }
  }
  s += "helm upgrade --install " + shell_quote(c.name) + " ";
  if (c.chart.in_bundle()) {
    // The wrapper chart of a manifest component, or a vendored archive, carried by the bundle.
    s += shell_quote("../../" + local_chart_dir(c)) + " \\\n";
  } else if (c.chart.is_oci()) {
    s += shell_quote(c.chart.repository + "/" + c.chart.name) + " \\\n";
  } else {
    s += shell_quote(c.chart.name) + " \\\n  --repo " + shell_quote(c.chart.repository) + " \\\n";
  }
  if (!c.chart.in_bundle()) s += "  --version " + shell_quote(c.chart.version) + " \\\n";
  s += "  --namespace " + shell_quote(c.namespace_) + " --create-namespace \\\n";
  s += "  --values values.yaml \\\n";
  s += "  --wait --timeout \"${GPUFLEET_HELM_TIMEOUT:-15m}\" \"$@\"\n";
  return s;
}

std::string levels_calls(const Recipe& r, bool reverse, std::string_view fn) {
  std::string s;
  std::size_t n = r.levels.size();
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t lvl = reverse ? n - 1 - i : i;
    s += std::string(fn) + " " + std::to_string(lvl);
    for (const std::string& name : r.levels[lvl]) s += " " + name;
    s += "\n";
  }
  return s;
}

std::string deploy_script(const Recipe& r) {
  std::string s = "#!/usr/bin/env bash\n" + generated_by(r);
  s += R"gen(# Installs every component level by level: the components of one level in parallel,
# each with `helm upgrade --install --wait` retried with exponential backoff; a level starts
# only when the previous one is complete.
#   GPUFLEET_RETRIES          attempts per component (default 4)
#   GPUFLEET_BACKOFF_SECONDS  first wait between attempts, doubled each time (default 10)
#   GPUFLEET_HELM_TIMEOUT     helm --timeout per attempt (default 15m)
#   GPUFLEET_SKIP_PREFLIGHT   1: do not run preflight.sh first
#   GPUFLEET_BIN              gpufleet binary for the readiness gate between levels (default:
#                             gpufleet on PATH; none: the gate is skipped, helm --wait only)
#   GPUFLEET_GATE_TIMEOUT     seconds a level may take to pass its health checks (default 600)
#   GPUFLEET_GATE_INTERVAL    seconds between health checks (default 5)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
attempts="${GPUFLEET_RETRIES:-4}"
if [[ ${GPUFLEET_SKIP_PREFLIGHT:-0} != 1 ]]; then
  "$here/preflight.sh"
fi

install_with_retries() {
  local name="$1" attempt=1 delay="${GPUFLEET_BACKOFF_SECONDS:-10}"
  until "$here/components/$name/install.sh"; do
    if (( attempt >= attempts )); then
      echo "gpufleet: $name failed after $attempt attempts" >&2
      return 1
    fi
    echo "gpufleet: $name failed (attempt $attempt of $attempts); retrying in ${delay}s" >&2
    sleep "$delay"
    attempt=$((attempt + 1))
    delay=$((delay * 2))
  done
  echo "gpufleet: $name installed"
}

level() {
  local number="$1" name pid failed=0
  shift
  echo "gpufleet: level $number: $*"
  local pids=()
  for name in "$@"; do
    install_with_retries "$name" &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  if (( failed )); then
    echo "gpufleet: level $number failed; later levels were not started" >&2
    exit 1
  fi
  gate "$number" "$@"
}

# Readiness gate: the recipe's own health checks of the level's components (CRDs Established,
# Deployments available, DaemonSets ready, no pod crash-looping), not only helm --wait.
gate() {
  local number="$1" deadline names out
  shift
  local bin="${GPUFLEET_BIN:-$(command -v gpufleet || true)}"
  [[ -n $bin ]] || return 0
  names="$(IFS=,; echo "$*")"
  deadline=$((SECONDS + ${GPUFLEET_GATE_TIMEOUT:-600}))
  until out="$("$bin" validate -r "$here/recipe.yaml" --components "$names" 2>&1)"; do
    if (( SECONDS >= deadline )); then
      echo "$out" >&2
      echo "gpufleet: level $number is not healthy after ${GPUFLEET_GATE_TIMEOUT:-600}s; later levels were not started" >&2
      exit 1
    fi
    sleep "${GPUFLEET_GATE_INTERVAL:-5}"
  done
  echo "gpufleet: level $number healthy"
}

)gen";
  s += levels_calls(r, false, "level");
  s += "echo \"gpufleet: recipe " + r.name + " installed\"\n";
  return s;
}

// Checks the cluster for what would make an install hang or fight someone else, and lists
// every problem before the first install: namespaces stuck Terminating, admission webhooks
// whose Service is missing (every create in their scope fails), APIServices that are not
// Available (discovery and namespace deletion stall), and components already installed by
// someone else (a Helm release of the same name in another namespace, or a CRD the component
// owns that another Helm release manages).
std::string preflight_script(const Recipe& r) {
  std::string s = "#!/usr/bin/env bash\n" + generated_by(r);
  s += R"gen(# Preflight: lists every problem, exits 1 when there is one (deploy.sh runs it first;
# GPUFLEET_SKIP_PREFLIGHT=1 skips it there). Needs kubectl and helm.
set -euo pipefail
problems=()
problem() { problems+=("$*"); }

# COMPONENT NAMESPACE
components=(
)gen";
  for (const Component& c : r.components)
    s += "  " + shell_quote(c.name + " " + c.namespace_) + "\n";
  s += ")\n# COMPONENT CRD (the CRDs its health checks name)\ncrds=(\n";
  for (const HealthCheck& h : r.health) {
    if (h.kind == "CustomResourceDefinition")
      s += "  " + shell_quote(h.component + " " + h.name) + "\n";
  }
  s += R"gen()

terminating="$(kubectl get namespaces -o jsonpath='{range .items[?(@.status.phase=="Terminating")]}{.metadata.name}{"\n"}{end}')"
for entry in "${components[@]}"; do
  read -r name ns <<<"$entry"
  if grep -qx "$ns" <<<"$terminating"; then
    problem "namespace $ns (for $name) is stuck Terminating: find what holds it with kubectl get namespace $ns -o yaml (status.conditions) and clear the finalizers"
  fi
done

# Webhooks whose Service does not exist reject (failurePolicy Fail) or slow every request
# they match.
for kind in validatingwebhookconfigurations mutatingwebhookconfigurations; do
  while read -r config hook ns svc; do
    [[ -n ${svc:-} ]] || continue
    if ! kubectl get service -n "$ns" "$svc" >/dev/null 2>&1; then
      problem "$kind/$config webhook $hook calls Service $ns/$svc, which does not exist: delete the webhook configuration or restore the Service"
    fi
  done < <(kubectl get "$kind" -o go-template='{{range .items}}{{$c := .metadata.name}}{{range .webhooks}}{{if .clientConfig.service}}{{$c}} {{.name}} {{.clientConfig.service.namespace}} {{.clientConfig.service.name}}{{"\n"}}{{end}}{{end}}{{end}}')
done

while read -r name available; do
  [[ -n ${name:-} ]] || continue
  if [[ $available != True ]]; then
    problem "apiservice/$name is not Available ($available): its backend is down; fix it or delete the APIService (namespace deletion and discovery stall on it)"
  fi
done < <(kubectl get apiservices -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Available")].status}{"\n"}{end}')

releases="$(helm list --all-namespaces --all --no-headers 2>/dev/null | awk '{print $1, $2}')"
for entry in "${components[@]}"; do
  read -r name ns <<<"$entry"
  while read -r rel relns; do
    [[ -n ${rel:-} && $rel == "$name" && $relns != "$ns" ]] || continue
    problem "$name is already installed as Helm release $rel in namespace $relns (this recipe installs it into $ns): uninstall it there, or leave it out with gpufleet bundle --set $name:enabled=false"
  done <<<"$releases"
done
for entry in "${crds[@]}"; do
  read -r name crd <<<"$entry"
  owner="$(kubectl get crd "$crd" -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}' 2>/dev/null || true)"
  if [[ -n $owner && $owner != "$name" ]]; then
    problem "CRD $crd (of $name) is managed by Helm release $owner: $name is installed by someone else; leave it out with gpufleet bundle --set $name:enabled=false"
  fi
done

if (( ${#problems[@]} )); then
  echo "gpufleet preflight: ${#problems[@]} problem(s); nothing was installed:" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "gpufleet preflight: ok"
)gen";
  return s;
}

std::string uninstall_script(const Recipe& r) {
  std::string s = "#!/usr/bin/env bash\n" + generated_by(r);
  s +=
      R"gen(# Uninstalls every component in reverse deployment order: the components of one level in
# parallel, after every component that depends on them is gone.
set -euo pipefail

uninstall() {
  helm uninstall "$1" --namespace "$2" --wait --ignore-not-found \
    --timeout "${GPUFLEET_HELM_TIMEOUT:-15m}"
}

level() {
  local number="$1" pid failed=0
  shift
  echo "gpufleet: removing level $number"
  local pids=()
  while (( $# )); do
    uninstall "$1" "$2" &
    pids+=("$!")
    shift 2
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  if (( failed )); then
    echo "gpufleet: level $number could not be removed; earlier levels were kept" >&2
    exit 1
  fi
}

)gen";
  std::map<std::string, const Component*> by_name;
  for (const Component& c : r.components) by_name[c.name] = &c;
  for (std::size_t i = r.levels.size(); i-- > 0;) {
    s += "level " + std::to_string(i);
    for (const std::string& name : r.levels[i])
      s += " " + name + " " + by_name.at(name)->namespace_;
    s += "\n";
  }
  s += "echo \"gpufleet: recipe " + r.name + " removed\"\n";
  return s;
}

std::string readme(const Recipe& r) {
  std::string s = "# " + r.name + " (helm)\n\n" + generated_by(r, "<!--");
  s.pop_back();
  s += " -->\n\n";
  s += "Install: `./deploy.sh` (needs helm 3 and a kubeconfig for the target cluster).\n"
       "Remove: `./uninstall.sh`. Verify the files first: `sha256sum -c checksums.txt`.\n\n"
       "| level | component | chart | version | namespace |\n|---|---|---|---|---|\n";
  for (const Component& c : r.components) {
    std::string chart = c.chart.is_local() ? local_chart_dir(c) + " (" + c.manifests->kind + " " +
                                                 c.manifests->path + ")"
                                           : c.chart.repository + "/" + c.chart.name;
    if (c.chart.is_vendored()) chart += " (in this bundle: " + c.chart.vendored + ")";
    s += "| " + std::to_string(c.level) + " | " + c.name + " | " + chart + " | " + c.chart.version +
         " | " + c.namespace_ + " |\n";
  }
  return s;
}

}  // namespace

void render_helm(const Recipe& r, const BundleOptions&, Bundle& out) {
  for (const Component& c : r.components) {
    std::string dir = "components/" + c.name + "/";
    out[dir + "values.yaml"] = {generated_by(r) + core::to_yaml(c.values), false};
    out[dir + "install.sh"] = {install_script(r, c), true};
  }
  add_local_charts(r, out);
  out["deploy.sh"] = {deploy_script(r), true};
  out["preflight.sh"] = {preflight_script(r), true};
  out["uninstall.sh"] = {uninstall_script(r), true};
  out["README.md"] = {readme(r), false};
}

}  // namespace gpufleet::recipe::detail
