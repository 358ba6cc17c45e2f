#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build/fuzz and runs each on its seed corpus: the
# two CEL targets for N seconds (default 30), the seven document-reader targets (fuzz/readers)
# for READER_FUZZ_SECONDS each (default 8) and the four certify parser targets for
# CERTIFY_FUZZ_SECONDS each (default 5). Exits non-zero on any crash, leak, hang or sanitizer
# report. Usage: scripts/fuzz-smoke.sh [SECONDS]
set -euo pipefail
seconds="${1:-30}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build/fuzz"
cc="${CC_FUZZ:-clang-14}"
cxx="${CXX_FUZZ:-clang++-14}"
if [[ ! -f "$build/build.ninja" ]]; then
  # -O1 and line tables (what sanitizer reports need): libFuzzer's usual level, and ~15 % less
  # compile time than RelWithDebInfo's -O2 -g in CI.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DGPUFLEET_FUZZ=ON -DGPUFLEET_SANITIZE=address -DGPUFLEET_WERROR=OFF >/dev/null
fi
reader_fuzzers=(yaml json recipe_docs kube_docs kube_protobuf sim_docs tool_output oci)
ninja -C "$build" -j"${FUZZ_JOBS:-2}" cel_parse_fuzz cel_eval_fuzz \
  $(printf '%s_fuzz ' "${reader_fuzzers[@]}") \
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

# Seed corpora of the reader fuzzers from the real documents of this repository (examples,
# test data, the recipe library), plus the committed seeds in fuzz/readers/corpus. A seed
# for a target that serves several readers starts with the byte that picks the reader.
seeds="$build/seeds"
rm -rf "$seeds"
seed() {  # seed TARGET PICK-BYTE|- FILE...
  local target="$1" pick="$2"
  shift 2
  mkdir -p "$seeds/$target"
  for f in "$@"; do
    local out
    out="$seeds/$target/$(echo "$f" | tr '/' '_')"
    if [[ "$pick" == "-" ]]; then cp "$f" "$out"; else { printf "\\x$pick"; cat "$f"; } >"$out"; fi
  done
}
cd "$root"
yaml_docs=(examples/*.yaml tests/recipe/testdata/snapshot.yaml tests/kube/testdata/kubeconfig-*.yaml
           data/recipes/registry.yaml data/recipes/criteria.yaml)
seed yaml - "${yaml_docs[@]}"
seed json - tests/recipe/testdata/*.json tests/kube/testdata/node-gpu.json
seed recipe_docs 01 tests/recipe/testdata/snapshot.yaml
seed kube_docs 00 tests/kube/testdata/kubeconfig-*.yaml
seed kube_docs 02 tests/kube/testdata/node-gpu.json tests/kube/testdata/pod-gpu.json
seed kube_protobuf 00 tests/kube/testdata/served/node.pb tests/kube/testdata/served/pod.pb \
  tests/kube/testdata/served/status-404.pb
seed kube_protobuf 01 tests/kube/testdata/served/node-list.pb
seed kube_protobuf 02 tests/kube/testdata/served/pod-watch.pb
seed sim_docs 00 examples/fleet-*.yaml
seed sim_docs 01 examples/scenario-*.yaml
cd - >/dev/null

for target in "${reader_fuzzers[@]}"; do
  corpus="$build/corpus-$target"
  mkdir -p "$corpus" "$seeds/$target"
  committed="$root/fuzz/readers/corpus/$target"
  [[ -d "$committed" ]] || committed=""
  echo "== ${target}_fuzz for ${READER_FUZZ_SECONDS:-8}s"
  if ! "$build/fuzz/readers/${target}_fuzz" -max_total_time="${READER_FUZZ_SECONDS:-8}" \
      -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      "$corpus" "$seeds/$target" $committed; then
    echo "${target}_fuzz FAILED (reproducer: crash-*/leak-*/timeout-* in $(pwd))" >&2
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
