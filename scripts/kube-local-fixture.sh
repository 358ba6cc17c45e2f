#!/usr/bin/env bash
# CTest fixture for a local control plane:
#   kube-local-fixture.sh start DIR   wipe DIR, start kube-local detached, wait until
#                                     the apiserver is ready and controllers work
#   kube-local-fixture.sh stop DIR    stop it
# Tests then use DIR/admin.kubeconfig. Binary: $KUBE_LOCAL_BIN (default build/bin/kube-local).
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
action="$1"; dir="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${KUBE_LOCAL_BIN:-build/bin/kube-local}"
if [[ "$bin" != /* && ! -x "$bin" && -x "$root/$bin" ]]; then bin="$root/$bin"; fi
[[ -x "$bin" ]] || { echo "kube-local-fixture: $bin not found; run scripts/build-kube-local.sh" >&2; exit 1; }

case "$action" in
  start)
    [[ -n "$dir" && "$dir" != / ]] || { echo "kube-local-fixture: refusing DIR '$dir'" >&2; exit 2; }
    "$bin" down --data-dir "$dir" >/dev/null 2>&1 || true
    rm -rf -- "$dir"
    mkdir -p -- "$dir"
    start=$(date +%s)
    # A first start of the apiserver costs ~20 s of CPU; two lanes starting at once on a
    # loaded 2-core machine took over a minute (kube-local's default wait is 60 s). The waits
    # return as soon as the control plane is ready.
    "$bin" up --data-dir "$dir" --detach --ready-timeout 240s >/dev/null
    kc="$dir/admin.kubeconfig"
    # kubectl from PATH, else the one built into kube-local.
    kubectl=(kubectl)
    if ! command -v kubectl >/dev/null 2>&1 || ! kubectl version --client >/dev/null 2>&1; then
      kubectl=("$bin" kubectl)
    fi
    # Controllers work once the serviceaccount controller made default/default.
    deadline=$(( $(date +%s) + 180 ))
    until "${kubectl[@]}" --kubeconfig "$kc" -n default get serviceaccount default >/dev/null 2>&1; do
      if (( $(date +%s) > deadline )); then
        echo "kube-local-fixture: default ServiceAccount not created within 180s; controller-manager log:" >&2
        tail -n 30 "$dir/logs/controller-manager.log" >&2 || true
        exit 1
      fi
      sleep 0.3
    done
    ready="$("${kubectl[@]}" --kubeconfig "$kc" get --raw /readyz)"
    [[ "$ready" == ok ]] || { echo "kube-local-fixture: /readyz says: $ready" >&2; exit 1; }
    echo "kube-local-fixture: control plane ready in $(( $(date +%s) - start ))s; KUBECONFIG=$kc"
    ;;
  stop)
    "$bin" down --data-dir "$dir"
    ;;
  *) usage ;;
esac
