#!/usr/bin/env bash
# The goodput benchmark (docs/goodput.md "The goodput benchmark", figures in
# docs/performance.md): every built configuration on the same simulated faults.
#   scripts/bench-goodput.sh [BUILD_DIR] [goodput_fleet flags: --scenario F --seed N --days N
#                                         --rate-multiplier X]
# BUILD_DIR (default build/release) gets goodput_fleet built (ninja -C BUILD_DIR goodput_fleet);
# the scenario is bench/goodput/llama3-1024.yaml unless --scenario names another. Prints the
# table; writes goodput.json, the plots' TSV and, with gnuplot, goodput-ettr.svg and
# goodput-lost.svg to GOODPUT_BENCH_OUT (default BUILD_DIR/goodput-bench; docs/plots holds the
# committed ones: GOODPUT_BENCH_OUT=docs/plots scripts/bench-goodput.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
shift || true
ninja -C "$build" goodput_fleet >/dev/null
out="${GOODPUT_BENCH_OUT:-$build/goodput-bench}"
mkdir -p "$out"
echo "machine: $(nproc) cores, $(uname -m); build: $build"
"$build/bench/goodput_fleet" --scenario "$root/bench/goodput/llama3-1024.yaml" \
  --json "$out/goodput.json" --tsv-dir "$out" "$@"
if command -v gnuplot >/dev/null; then
  gnuplot -e "dir='$out'" "$root/scripts/plots/goodput.gp"
  echo "plots: $out/goodput-ettr.svg $out/goodput-lost.svg"
else
  echo "gnuplot not found: no plots (scripts/install-deps.sh installs gnuplot-nox)" >&2
fi
