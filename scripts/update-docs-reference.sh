#!/usr/bin/env bash
# Regenerates docs/reference/crds.md (every field of deploy/crds/*.yaml) and
# docs/reference/cli.md (the --help of every gpufleet command) with tests/docs/docs_reference.cc.
# The CTest `docs_reference` fails when the committed files differ from what this writes.
#   scripts/update-docs-reference.sh [BUILD_DIR]     (default build/asan, configured as `make asan`)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/asan}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
if [[ ! -f $build/build.ninja ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUFLEET_SANITIZE=address \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
fi
ninja -C "$build" docs_reference gpufleet
"$build/tests/docs/docs_reference" --write docs/reference --crds deploy/crds \
  --gpufleet "$build/bin/gpufleet"
