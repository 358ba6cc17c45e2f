#!/usr/bin/env bash
# Build tools/kube-local (local Kubernetes control plane) into
# ${KUBE_LOCAL_OUT:-build/bin}/kube-local. Idempotent: skips the build when the
# binary is newer than every go.mod/go.sum/*.go file of the module. Uses the
# normal Go build cache, so rebuilds after a change are fast. Modules come from
# the Go module proxy (GOPROXY) on first use.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/kube-local"
out_dir="${KUBE_LOCAL_OUT:-build/bin}"
case "$out_dir" in /*) ;; *) out_dir="$root/$out_dir" ;; esac
bin="$out_dir/kube-local"

go_bin="${GO:-}"
if [[ -z "$go_bin" ]]; then
  if command -v go >/dev/null 2>&1; then go_bin="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then go_bin=/usr/local/go/bin/go
  else echo "build-kube-local: Go toolchain not found (set GO=/path/to/go)" >&2; exit 1
  fi
fi

if [[ -x "$bin" && "${KUBE_LOCAL_FORCE:-0}" != 1 ]]; then
  newer="$(find "$src" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$bin" -print -quit)"
  if [[ -z "$newer" ]]; then
    echo "build-kube-local: $bin is up to date"
    exit 0
  fi
fi

# Stamp the Kubernetes version (what upstream's hack/lib/version.sh does), so
# /version and "kube-local kubectl version" report v1.32.x, not v0.0.0-master.
k8s_version="$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes v\([0-9][^ ]*\).*/\1/p' "$src/go.mod" | head -n1)"
k8s_minor="$(echo "$k8s_version" | cut -d. -f2)"
version_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_ldflags+=" -X $pkg.gitVersion=v$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done

mkdir -p "$out_dir"
echo "build-kube-local: building $bin (a cold build takes several minutes)"
start=$(date +%s.%N)
(
  cd "$src"
  GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED="${CGO_ENABLED:-0}" \
    "$go_bin" build -trimpath -ldflags="-s -w $version_ldflags" -o "$bin.tmp" .
)
mv -f "$bin.tmp" "$bin"
# Stamp the binary with the build's start time, so that a source file edited
# while the build ran still counts as newer on the next run.
touch -d "@$start" "$bin"
echo "build-kube-local: built $bin in $(( $(date +%s) - ${start%.*} ))s"
