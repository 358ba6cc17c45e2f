#!/usr/bin/env bash
# Builds the loopback OCI registry of the bundle push/pull tests into
# ${OCI_REGISTRY_OUT:-<repo>/build/bin}/oci-registry. Skips the build when the binary is newer
# than the module's files; modules come from the Go module proxy on first use.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OCI_REGISTRY_OUT:-$here/../../build/bin}"
bin="$out/oci-registry"
if [[ -x "$bin" && -z "$(find "$here" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$bin" -print -quit)" ]]; then
  echo "oci-registry is up to date: $bin"
  exit 0
fi
mkdir -p "$out"
(cd "$here" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
  go build -buildvcs=false -trimpath -ldflags='-s -w' -o "$bin" .)
echo "built $bin"
