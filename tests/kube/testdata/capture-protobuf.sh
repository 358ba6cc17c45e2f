#!/usr/bin/env bash
# Captures the protobuf fixtures of tests/kube/compact_protobuf_test.cc from a real API server:
# node-gpu.json and pod-gpu.json are created in a fresh kube-local (etcd + apiserver), then
# each object, its list and a watch from resourceVersion 0 are fetched twice with curl, once as
# JSON and once as protobuf. The test decodes both forms and requires the same compact tapes.
#   tests/kube/testdata/capture-protobuf.sh [KUBE_LOCAL_BIN]
set -euo pipefail
cd "$(dirname "$0")"
kube_local="${1:-${KUBE_LOCAL_BIN:-../../../build/bin/kube-local}}"
dir="$(mktemp -d /tmp/capture-protobuf.XXXXXX)"
trap '"$kube_local" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$kube_local" up --data-dir "$dir" --detach --components etcd,apiserver >/dev/null
kc="$dir/admin.kubeconfig"
field() { sed -n "s/^ *$1: //p" "$kc" | head -1; }
field certificate-authority-data | base64 -d >"$dir/ca.crt"
field client-certificate-data | base64 -d >"$dir/client.crt"
field client-key-data | base64 -d >"$dir/client.key"
server="$(field server)"
get() {  # get ACCEPT PATH OUT
  curl -sSf --cacert "$dir/ca.crt" --cert "$dir/client.crt" --key "$dir/client.key" \
    -H "Accept: $1" "$server$2" -o "$3"
}
kubectl() { "$kube_local" kubectl --kubeconfig "$kc" "$@"; }

# The objects as a client would create them: server-set metadata dropped, status put after.
python3 - node-gpu.json pod-gpu.json "$dir" <<'PY'
import json, sys
for name in sys.argv[1:3]:
    obj = json.load(open(name))
    for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generateName"):
        obj["metadata"].pop(k, None)
    json.dump(obj, open(sys.argv[3] + "/" + name, "w"))
PY
kubectl create -f "$dir/node-gpu.json" >/dev/null
kubectl replace --subresource=status -f "$dir/node-gpu.json" >/dev/null
kubectl create namespace "$(python3 -c 'import json; print(json.load(open("pod-gpu.json"))["metadata"]["namespace"])')" >/dev/null 2>&1 || true
# No controller-manager here: the service account the admission plugin wants is made by hand.
kubectl create serviceaccount default -n "$(python3 -c 'import json; print(json.load(open("pod-gpu.json"))["metadata"]["namespace"])')" >/dev/null
kubectl create -f "$dir/pod-gpu.json" >/dev/null
kubectl replace --subresource=status -f "$dir/pod-gpu.json" >/dev/null

node="$(python3 -c 'import json; print(json.load(open("node-gpu.json"))["metadata"]["name"])')"
pod_ns="$(python3 -c 'import json; print(json.load(open("pod-gpu.json"))["metadata"]["namespace"])')"
pod="$(python3 -c 'import json; print(json.load(open("pod-gpu.json"))["metadata"]["name"])')"
pb="application/vnd.kubernetes.protobuf"
for form in json:application/json pb:$pb; do
  ext="${form%%:*}"
  accept="${form#*:}"
  get "$accept" "/api/v1/nodes/$node" "served/node.$ext"
  get "$accept" "/api/v1/namespaces/$pod_ns/pods/$pod" "served/pod.$ext"
  get "$accept" "/api/v1/nodes" "served/node-list.$ext"
  get "$accept" "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1" "served/pod-watch.$ext"
  # An error answer: its Status comes in the form asked for.
  curl -sS --cacert "$dir/ca.crt" --cert "$dir/client.crt" --key "$dir/client.key" \
    -H "Accept: $accept" "$server/api/v1/nodes/no-such-node" -o "served/status-404.$ext"
done
echo "captured into $(pwd)/served"
