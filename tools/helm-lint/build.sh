#!/usr/bin/env bash
# Builds the real Helm CLI (helm.sh/helm/v3, pinned in go.mod as a tool) into
# ${HELM_OUT:-<repo>/build/bin}/helm, for the bundle verification tests (`helm lint`,
# `helm template` on every chart gpufleet generates), and fluxcheck (strict decoding of Flux
# objects into Flux's API types) beside it. Skips a build when its binary is newer than its
# sources.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${HELM_OUT:-$here/../../build/bin}"
mkdir -p "$out"
export GOTOOLCHAIN=local CGO_ENABLED=0
if [[ -x "$out/helm" && "$out/helm" -nt "$here/go.mod" && "$out/helm" -nt "$here/go.sum" ]]; then
  echo "helm is up to date: $out/helm"
else
  (cd "$here" && go build -buildvcs=false -trimpath -ldflags='-s -w' -o "$out/helm" helm.sh/helm/v3/cmd/helm)
  "$out/helm" version --short
fi
f="$here/fluxcheck"
if [[ -x "$out/fluxcheck" && "$out/fluxcheck" -nt "$f/go.mod" && "$out/fluxcheck" -nt "$f/go.sum" &&
      "$out/fluxcheck" -nt "$f/main.go" ]]; then
  echo "fluxcheck is up to date: $out/fluxcheck"
else
  (cd "$f" && go build -buildvcs=false -trimpath -ldflags='-s -w' -o "$out/fluxcheck" .)
fi
# helmfile (optional, heavy: ~375 modules): HELMFILE=1 builds it from its own module
# directory, where its go.mod replace directives apply (as a dependency it does not resolve).
if [[ "${HELMFILE:-0}" == 1 && ! -x "$out/helmfile" ]]; then
  version=v1.8.0
  go mod download "github.com/helmfile/helmfile@$version"
  (cd "$(go env GOMODCACHE)/github.com/helmfile/helmfile@$version" &&
    go build -buildvcs=false -trimpath -ldflags='-s -w' -o "$out/helmfile" .)
fi
