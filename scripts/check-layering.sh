#!/usr/bin/env bash
# Checks the module layering of docs/architecture.md: every `#include "<module>/..."` under
# src/ must name the module itself or one it may depend on. Prints each violation as
# file:line and exits 1 when there is one. Run by CTest (`layering`) and by hand:
#   scripts/check-layering.sh [REPO_ROOT]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"

# What each module may include besides itself. A folder inside a module (src/cel/stdlib,
# src/recipe/bundle) belongs to the module unless it is listed here (kube/api, sim/kubelet, goodput/model).
declare -A allowed=(
  [core]=""
  [cel]="core"
  [kube/api]="core cel"
  [kube]="core cel kube/api"
  [api]="core cel kube/api"
  [controller]="core cel kube/api kube api"
  [agent]="core cel kube/api kube api"
  [recipe]="core cel kube/api kube api"
  [certify]="core cel kube/api kube api controller agent"
  [sentinel]="core cel kube/api kube api controller agent"
  [hostpkg]="core cel kube/api kube api controller agent"
  [goodput]="core cel kube/api kube api controller"
  [goodput/model]="core cel kube/api kube api controller agent sentinel goodput sim"
  [sim]="core cel kube/api"
  [sim/kubelet]="core cel kube/api kube api controller agent sim"
  [cli]="core cel kube/api kube api controller agent recipe certify sentinel hostpkg goodput sim sim/kubelet"
)

# The module of a path below src/ ("kube/api/x.h" -> kube/api, "cel/stdlib/x.cc" -> cel).
module_of() {
  local first="${1%%/*}" rest="${1#*/}"
  local second="${rest%%/*}"
  if [[ $rest == */* && -v "allowed[$first/$second]" ]]; then
    echo "$first/$second"
  else
    echo "$first"
  fi
}

violations=0
while IFS= read -r file; do
  rel="${file#"$root"/src/}"
  self="$(module_of "$rel")"
  if [[ ! -v "allowed[$self]" ]]; then
    echo "$file: module '$self' is not in scripts/check-layering.sh; add it with its allowed dependencies" >&2
    violations=$((violations + 1))
    continue
  fi
  while IFS=: read -r line target; do
    target_module="$(module_of "$target")"
    [[ -v "allowed[$target_module]" ]] || continue  # not a gpufleet module header
    [[ $target_module == "$self" ]] && continue
    if [[ " ${allowed[$self]} " != *" $target_module "* ]]; then
      echo "$file:$line: $self includes $target ($target_module); $self may include only: ${allowed[$self]:-nothing else} (docs/architecture.md)" >&2
      violations=$((violations + 1))
    fi
  done < <(grep -n -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$file" |
             sed -E 's/^([0-9]+):.*"([^"]*)"$/\1:\2/')
done < <(find "$root/src" -type f \( -name '*.h' -o -name '*.cc' \) | sort)

if ((violations > 0)); then
  echo "check-layering: $violations include(s) against the layering" >&2
  exit 1
fi
echo "check-layering: ok"
