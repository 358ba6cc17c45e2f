#!/usr/bin/env bash
# Rewrites tests/integration/lane-costs.txt (the seconds the integration lanes are planned by,
# cmake/gpufleet.cmake) from the times CTest measured in a build tree's last runs.
# Usage: scripts/update-lane-costs.sh [BUILD_DIR]   (default build/asan; run `make test` first)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build/asan}"
costs="$build/Testing/Temporary/CTestCostData.txt"
[[ -f "$costs" ]] || { echo "update-lane-costs: $costs not found; run the integration tests in $build first" >&2; exit 1; }
mapfile -t tests < <(ctest --test-dir "$build" -N -L integration | sed -n 's/^ *Test *#[0-9]*: //p' | grep -v '^kube_local_')
(( ${#tests[@]} )) || { echo "update-lane-costs: $build lists no integration tests" >&2; exit 1; }
out="$root/tests/integration/lane-costs.txt"
{
  echo "# Seconds each integration test took in CI (scripts/update-lane-costs.sh writes this file);"
  echo "# cmake/gpufleet.cmake plans the lanes from it, longest first. Format: NAME SECONDS."
  # CTestCostData.txt lines: NAME RUNS AVERAGE_SECONDS (then a --- separator and failures).
  awk -v list="$(printf '%s\n' "${tests[@]}")" '
    BEGIN { n = split(list, t, "\n"); for (i = 1; i <= n; i++) want[t[i]] = 1 }
    /^---/ { exit }
    NF == 3 && ($1 in want) { printf "%s %d\n", $1, $3 + 0.5 }' "$costs" | sort
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "update-lane-costs: $(($(wc -l <"$out") - 2)) tests written to tests/integration/lane-costs.txt"
