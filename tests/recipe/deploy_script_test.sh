#!/usr/bin/env bash
# The helm bundle's scripts, run against a fake `helm` that logs its calls: deploy.sh installs
# every component after its dependencies (one level in parallel), retries a failed install,
# stops before the next level when a component keeps failing; uninstall.sh removes every
# component before its dependencies.
# Usage: deploy_script_test.sh path/to/gpufleet
set -euo pipefail
bin="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  -o "$work/recipe.yaml"
"$bin" bundle -r "$work/recipe.yaml" --deployer helm -o "$work/bundle" >/dev/null

# helm upgrade --install NAME ... | helm uninstall NAME ...
mkdir -p "$work/bin"
cat >"$work/bin/helm" <<'SH'
#!/usr/bin/env bash
verb="$1"; name="$2"; [[ $verb == upgrade ]] && name="$3"
echo "start $verb $name" >>"$FAKE_HELM_LOG"
sleep 0.05
# With a barrier, an install waits (up to 20 s) until a second one has started, so that "level 0
# runs in parallel" does not depend on how fast a loaded machine starts the second process.
if [[ -n ${FAKE_HELM_BARRIER:-} ]]; then
  for _ in $(seq 200); do
    (( $(grep -c '^start ' "$FAKE_HELM_LOG") >= 2 )) && break
    sleep 0.1
  done
fi
if [[ $verb == upgrade && " $FAKE_HELM_FAIL_ALWAYS " == *" $name "* ]]; then
  echo "fail $verb $name" >>"$FAKE_HELM_LOG"; exit 1
fi
if [[ $verb == upgrade && " $FAKE_HELM_FAIL_ONCE " == *" $name "* && ! -e "$FAKE_HELM_LOG.$name" ]]; then
  touch "$FAKE_HELM_LOG.$name"; echo "fail $verb $name" >>"$FAKE_HELM_LOG"; exit 1
fi
echo "done $verb $name" >>"$FAKE_HELM_LOG"
SH
chmod +x "$work/bin/helm"
# install.sh of a chart with CRDs applies them first; a fake kubectl logs that.
printf '#!/usr/bin/env bash\necho "kubectl $*" >>"$FAKE_HELM_LOG"\n' >"$work/bin/kubectl"
chmod +x "$work/bin/kubectl"
# preflight.sh needs a cluster; recipe_preflight_live runs it against kube-local.
# The readiness gate passes at once here (GPUFLEET_BIN=true); part 4 tests it.
export PATH="$work/bin:$PATH" GPUFLEET_BACKOFF_SECONDS=0 GPUFLEET_SKIP_PREFLIGHT=1 GPUFLEET_BIN=true

# Component -> dependencies, from the recipe.
deps() { awk -v c="$1" '
  /^  - chart:/ { inlist=0; name="" }
  /^    dependencies:/ { inlist=1; next }
  inlist && /^    - / { d[++n]=$2; next }
  /^    [a-z]/ { inlist=0 }
  /^    name:/ { name=$2; if (name==c) for (i=1;i<=n;i++) print d[i]; n=0 }
' "$work/recipe.yaml"; }
components=$(awk '/^    order:/ {on=1; next} on && /^    - / {print $2; next} {on=0}' "$work/recipe.yaml")
[[ $(wc -w <<<"$components") -ge 10 ]] || fail "could not read the deployment order"
line_of() { grep -n -- "$1" "$FAKE_HELM_LOG" | head -1 | cut -d: -f1; }

# 1. Success with one transient failure: every install starts after its deps are done.
export FAKE_HELM_LOG="$work/deploy.log" FAKE_HELM_FAIL_ONCE="gpu-operator" FAKE_HELM_FAIL_ALWAYS=""
FAKE_HELM_BARRIER=1 "$work/bundle/deploy.sh" >"$work/deploy.out" 2>&1 || fail "deploy.sh failed: $(cat "$work/deploy.out")"
[[ $(grep -c "start upgrade gpu-operator$" "$FAKE_HELM_LOG") == 2 ]] || fail "gpu-operator was not retried once"
for c in $components; do
  [[ $(grep -c "^done upgrade $c$" "$FAKE_HELM_LOG") == 1 ]] || fail "$c not installed exactly once"
  start=$(line_of "^start upgrade $c$")
  for d in $(deps "$c"); do
    done_at=$(line_of "^done upgrade $d$")
    (( done_at < start )) || fail "$c started before its dependency $d was installed"
  done
done
[[ -n "$(deps dynamo-platform)" ]] || fail "dependency parsing found nothing"
# CRD-safe upgrade: gpufleet's CRDs are applied before its helm upgrade.
crds_at=$(line_of "^kubectl apply --server-side --force-conflicts .*local-charts/gpufleet/crds/")
[[ -n $crds_at ]] && (( crds_at < $(line_of "^start upgrade gpufleet$") )) || fail "gpufleet CRDs not applied before its upgrade"
# Components of level 0 run in parallel: a second one starts before the first is done.
first_done=$(line_of "^done upgrade")
(( first_done > 2 )) || fail "level 0 did not start its components in parallel"

# 2. A component that keeps failing: retried GPUFLEET_RETRIES times; no later level starts.
export FAKE_HELM_LOG="$work/fail.log" FAKE_HELM_FAIL_ONCE="" FAKE_HELM_FAIL_ALWAYS="kube-prometheus-stack"
if GPUFLEET_RETRIES=3 "$work/bundle/deploy.sh" >"$work/fail.out" 2>&1; then fail "deploy.sh succeeded"; fi
[[ $(grep -c "start upgrade kube-prometheus-stack$" "$FAKE_HELM_LOG") == 3 ]] || fail "not retried 3 times"
grep -q "start upgrade dynamo-platform$" "$FAKE_HELM_LOG" && fail "a later level started after a failure"
grep -q "later levels were not started" "$work/fail.out" || fail "no failure message"

# 3. Uninstall: every component is removed before its dependencies.
export FAKE_HELM_LOG="$work/uninstall.log"
"$work/bundle/uninstall.sh" >/dev/null
for c in $components; do
  removed=$(line_of "^done uninstall $c$")
  [[ -n $removed ]] || fail "$c not uninstalled"
  for d in $(deps "$c"); do
    (( removed < $(line_of "^start uninstall $d$") )) || fail "$d removed before its dependent $c"
  done
done

# 4. Readiness gate: after a level, `gpufleet validate --components <that level>` must pass
# before the next level starts; a level that never gets healthy stops the deploy.
cat >"$work/bin/fake-gpufleet" <<'SH'
#!/usr/bin/env bash
[[ $1 == validate && $4 == --components ]] || { echo "unexpected: $*" >&2; exit 2; }
echo "gate $5" >>"$FAKE_HELM_LOG"
if [[ $5 == *gpu-operator* && ! -e "$FAKE_HELM_LOG.gated" ]]; then
  touch "$FAKE_HELM_LOG.gated"; exit 4
fi
[[ $5 == *gpu-operator* && -n ${FAKE_NEVER_HEALTHY:-} ]] && exit 4
exit 0
SH
chmod +x "$work/bin/fake-gpufleet"
export FAKE_HELM_LOG="$work/gate.log" FAKE_HELM_FAIL_ONCE="" FAKE_HELM_FAIL_ALWAYS=""
GPUFLEET_BIN="$work/bin/fake-gpufleet" GPUFLEET_GATE_INTERVAL=0 "$work/bundle/deploy.sh" >"$work/gate.out" 2>&1 ||
  fail "deploy.sh with a gate failed: $(cat "$work/gate.out")"
[[ $(grep -c '^gate .*gpu-operator' "$FAKE_HELM_LOG") == 2 ]] || fail "the gate did not retry an unhealthy level"
gate_at=$(grep -n '^gate .*gpu-operator' "$FAKE_HELM_LOG" | tail -1 | cut -d: -f1)
(( $(line_of "^done upgrade gpu-operator$") < gate_at )) || fail "gate ran before its level was installed"
(( gate_at < $(line_of "^start upgrade dynamo-platform$") )) || fail "a later level started before the gate passed"
grep -q "level 1 healthy" "$work/gate.out" || fail "no gate message"
export FAKE_HELM_LOG="$work/never.log" FAKE_NEVER_HEALTHY=1
touch "$FAKE_HELM_LOG.gated"
if GPUFLEET_BIN="$work/bin/fake-gpufleet" GPUFLEET_GATE_TIMEOUT=0 "$work/bundle/deploy.sh" >"$work/never.out" 2>&1; then
  fail "deploy.sh went on past an unhealthy level"
fi
grep -q "start upgrade dynamo-platform$" "$FAKE_HELM_LOG" && fail "a later level started past an unhealthy one"
grep -q "is not healthy after 0s" "$work/never.out" || fail "no unhealthy-level message: $(cat "$work/never.out")"
echo "deploy_script_test: ok"

