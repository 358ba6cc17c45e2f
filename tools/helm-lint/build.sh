#!/usr/bin/env bash
# Builds the real Helm CLI (helm.sh/helm/v3, pinned in go.mod as a tool) into
# ${HELM_OUT:-<repo>/build/bin}/helm, for the bundle verification tests (`helm lint`,
# `helm template` on every chart gpufleet generates). Skips the build when the binary is
# newer than go.mod and go.sum.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${HELM_OUT:-$here/../../build/bin}"
mkdir -p "$out"
if [[ -x "$out/helm" && "$out/helm" -nt "$here/go.mod" && "$out/helm" -nt "$here/go.sum" ]]; then
  echo "helm is up to date: $out/helm"
  exit 0
fi
cd "$here"
GOTOOLCHAIN=local CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags='-s -w' \
  -o "$out/helm" helm.sh/helm/v3/cmd/helm
"$out/helm" version --short
