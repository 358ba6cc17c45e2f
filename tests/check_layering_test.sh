#!/usr/bin/env bash
# scripts/check-layering.sh accepts the repository and rejects a tree that breaks the layering.
# Usage: check_layering_test.sh REPO_ROOT
set -euo pipefail
root="$1"
script="$root/scripts/check-layering.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$script" "$root" || fail "the repository breaks the layering (see above)"

# A tree with one include that goes up (core -> recipe) and one sideways (recipe -> sim).
mkdir -p "$work/src/core" "$work/src/recipe" "$work/src/kube/api" "$work/src/cel/stdlib"
printf '#include "core/value.h"\n#include "recipe/recipe.h"\n' >"$work/src/core/a.cc"
printf '#include "kube/api/ids.h"\n#include "sim/fault.h"\n' >"$work/src/recipe/b.cc"
printf '#include "kube/client.h"\n' >"$work/src/kube/api/c.cc"    # the api part is curl-free
printf '#include "cel/cel.h"\n#include "core/time.h"\n' >"$work/src/cel/stdlib/d.cc"  # fine
set +e
out="$(bash "$script" "$work" 2>&1)"; rc=$?
set -e
[[ $rc == 1 ]] || fail "a broken tree passed (exit $rc): $out"
[[ $out == *"src/core/a.cc:2: core includes recipe/recipe.h"* ]] || fail "upward include not named: $out"
[[ $out == *"src/recipe/b.cc:2: recipe includes sim/fault.h"* ]] || fail "sideways include not named: $out"
[[ $out == *"src/kube/api/c.cc:1: kube/api includes kube/client.h"* ]] || fail "kube/api -> kube not named: $out"
[[ $out != *"d.cc"* ]] || fail "a module folder's own include was flagged: $out"
[[ $out == *"3 include(s) against the layering"* ]] || fail "count: $out"
echo "check_layering_test: ok"
