#!/usr/bin/env bash
# The push/pull figure of docs/performance.md: the helm bundle of the eks-h100 inference recipe
# with --vendor-charts, its charts replaced by stand-ins of the same names and versions (a
# Chart.yaml and SIZE_KIB of random bytes each, so gzip gains nothing), served by a loopback
# Helm repository; rendered to a folder, pushed to tools/oci-registry (a fresh one per run, so
# every push uploads every blob) and pulled back; and pushed once more in chunks of CHUNK_KIB
# (--registry-chunk-size) to another fresh registry. Mean wall time of RUNS runs of each.
# Usage: scripts/bench-oci-push.sh GPUFLEET   (env: HELM_BIN, OCI_REGISTRY_BIN, RUNS=5,
# SIZE_KIB=512, CHUNK_KIB=1024)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gpufleet="$1"
helm="${HELM_BIN:-$root/build/bin/helm}"
registry="${OCI_REGISTRY_BIN:-$root/build/bin/oci-registry}"
runs="${RUNS:-5}"
size_kib="${SIZE_KIB:-512}"
chunk_kib="${CHUNK_KIB:-1024}"
work="$(mktemp -d)"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
now() { date +%s.%N; }

"$gpufleet" recipe --service eks --accelerator h100 --os ubuntu --intent inference --platform dynamo \
  -o "$work/upstream.yaml"
# name version of every chart from a repository (not the built-in one).
awk '/^  - chart:/ {c=1; next} c && /name:/ {n=$2} c && /repository:/ {r=$2}
     c && /version:/ {if (r != "builtin") print n, $2; c=0}' "$work/upstream.yaml" | sort -u >"$work/charts.txt"
mkdir -p "$work/repo"
while read -r name version; do
  mkdir -p "$work/src/$name/templates" "$work/src/$name/files"
  printf 'apiVersion: v2\nname: %s\nversion: %s\n' "$name" "$version" >"$work/src/$name/Chart.yaml"
  head -c "$((size_kib * 1024))" /dev/urandom >"$work/src/$name/files/payload.bin"
  "$helm" package "$work/src/$name" -d "$work/repo" >/dev/null
done <"$work/charts.txt"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$helm" repo index "$work/repo" --url "https://127.0.0.1:$port" >/dev/null
# Recipes take https:// repositories only: HTTPS with a certificate of its own.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
(cd "$work/repo" && exec python3 -c '
import http.server, ssl, sys
s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[2], sys.argv[3])
s.socket = c.wrap_socket(s.socket, server_side=True); s.serve_forever()' \
  "$port" "$work/tls.crt" "$work/tls.key" >/dev/null 2>&1) &
pids+=($!)
# Python starts slowly on a loaded machine: wait until the repository answers.
for _ in $(seq 100); do curl -fsS --cacert "$work/tls.crt" -o /dev/null "https://127.0.0.1:$port/index.yaml" 2>/dev/null && break; sleep 0.2; done
# Every repository chart comes from the loopback repository.
sed -E "s#^(      repository: )(https?|oci)://.*#\1https://127.0.0.1:$port#" "$work/upstream.yaml" >"$work/recipe.yaml"
args=(bundle -r "$work/recipe.yaml" --deployer helm --vendor-charts --helm "$helm" --chart-ca-file "$work/tls.crt")

total_dir=0 total_push=0 total_pull=0 total_chunked=0
for i in $(seq "$runs"); do
  t0="$(now)"; "$gpufleet" "${args[@]}" -o "$work/dir$i" >/dev/null; t1="$(now)"
  "$registry" --quiet >"$work/reg$i.addr" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 50); do [[ -s "$work/reg$i.addr" ]] && break; sleep 0.1; done
  addr="$(head -n1 "$work/reg$i.addr")"
  t2="$(now)"; "$gpufleet" "${args[@]}" -o "oci://$addr/bench/bundle:v1" --registry-plain-http >"$work/push$i.txt"; t3="$(now)"
  "$gpufleet" bundle pull "oci://$addr/bench/bundle:v1" "$work/pull$i" --registry-plain-http >/dev/null; t4="$(now)"
  diff -r "$work/dir$i" "$work/pull$i" >/dev/null || { echo "pulled bundle differs" >&2; exit 1; }
  "$registry" --quiet >"$work/chunked$i.addr" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 50); do [[ -s "$work/chunked$i.addr" ]] && break; sleep 0.1; done
  caddr="$(head -n1 "$work/chunked$i.addr")"
  t5="$(now)"
  "$gpufleet" "${args[@]}" -o "oci://$caddr/bench/bundle:v1" --registry-plain-http \
    --registry-chunk-size "$((chunk_kib * 1024))" >"$work/chunked$i.txt"
  t6="$(now)"
  [[ "$(grep -o '@sha256:[0-9a-f]*' "$work/chunked$i.txt")" == "$(grep -o '@sha256:[0-9a-f]*' "$work/push$i.txt")" ]] ||
    { echo "chunked push gave another digest" >&2; exit 1; }
  total_dir="$(echo "$total_dir + $t1 - $t0" | bc)"
  total_push="$(echo "$total_push + $t3 - $t2" | bc)"
  total_pull="$(echo "$total_pull + $t4 - $t3" | bc)"
  total_chunked="$(echo "$total_chunked + $t6 - $t5" | bc)"
done
files="$(find "$work/dir1" -type f | wc -l)"
bytes="$(du -sb "$work/dir1" | cut -f1)"
layer="$(sed -n 's/.*files, \([0-9]*\) bytes.*/\1/p' "$work/push1.txt")"
echo "bundle: $(wc -l <"$work/charts.txt") vendored charts, $files files, $bytes bytes; layer $layer bytes"
printf 'bundle --vendor-charts -o DIR:      %.2f s\n' "$(echo "$total_dir / $runs" | bc -l)"
printf 'bundle --vendor-charts -o oci://:   %.2f s\n' "$(echo "$total_push / $runs" | bc -l)"
printf 'bundle pull:                        %.2f s\n' "$(echo "$total_pull / $runs" | bc -l)"
printf 'bundle -o oci:// in %d KiB chunks: %.2f s\n' "$chunk_kib" "$(echo "$total_chunked / $runs" | bc -l)"
