#!/usr/bin/env bash
# Builds the CEL libFuzzer targets with clang in build/fuzz and runs each for N seconds
# (default 30) on the seed corpus, then the certify parser targets for CERTIFY_FUZZ_SECONDS
# each (default 5, four targets). Exits non-zero on any crash, leak, hang or sanitizer
# report. Usage: scripts/fuzz-smoke.sh [SECONDS]
set -euo pipefail
seconds="${1:-30}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build/fuzz"
cc="${CC_FUZZ:-clang-14}"
cxx="${CXX_FUZZ:-clang++-14}"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DGPUFLEET_FUZZ=ON -DGPUFLEET_SANITIZE=address -DGPUFLEET_WERROR=OFF >/dev/null
fi
ninja -C "$build" -j"${FUZZ_JOBS:-2}" cel_parse_fuzz cel_eval_fuzz \
  certify_nccl_fuzz certify_dcgm_fuzz certify_training_fuzz certify_result_fuzz
status=0
for target in parse eval; do
  corpus="$build/corpus-$target"
  mkdir -p "$corpus"
  echo "== cel_${target}_fuzz for ${seconds}s"
  if ! "$build/fuzz/cel/cel_${target}_fuzz" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
      "$corpus" "$root/fuzz/cel/corpus/$target"; then
    echo "cel_${target}_fuzz FAILED (reproducer: crash-*/leak-*/timeout-* in $(pwd))" >&2
    status=1
  fi
done
certify_seconds="${CERTIFY_FUZZ_SECONDS:-5}"
for target in nccl dcgm training result; do
  corpus="$build/corpus-certify-$target"
  mkdir -p "$corpus"
  echo "== certify_${target}_fuzz for ${certify_seconds}s"
  if ! "$build/fuzz/certify/certify_${target}_fuzz" -max_total_time="$certify_seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      "$corpus" "$root/fuzz/certify/corpus/$target"; then
    echo "certify_${target}_fuzz FAILED (reproducer: crash-*/leak-*/timeout-* in $(pwd))" >&2
    status=1
  fi
done
exit "$status"
