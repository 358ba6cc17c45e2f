# Thin wrapper over scripts and CMake presets; see README.md.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
# CTest runs the integration lanes (one kube-local each, cmake/gpufleet.cmake) side by side and
# unit tests in one more slot: the lanes spend much of their time waiting on the API server.
CTEST_JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))
# ccache keys on paths relative to the checkout, so a fresh clone in another folder (as CI
# makes) reuses what an earlier build of the same sources compiled.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
CMAKE_FLAGS ?=

.PHONY: all deps kube-local tools helmfile build release asan tsan test test-builds unit integration demo demo-down bench fuzz-smoke format clean

all: build

deps:
	@scripts/install-deps.sh

kube-local: deps
	@scripts/build-kube-local.sh

# Test tools built from Go modules: the local control plane, helm and fluxcheck for the bundle
# checks, and the loopback OCI registry of the bundle push tests (each is rebuilt only when its
# sources or pins change). helmfile, whose one check is `helmfile list` in recipe_bundle_verify,
# costs as much CPU to build as kube-local (~375 modules, ~400 s), so CI leaves it out: `make tools
# HELMFILE=1` (or `make helmfile`) builds it and that check then runs.
HELMFILE ?= 0
tools: kube-local
	@HELMFILE=$(HELMFILE) tools/helm-lint/build.sh
	@tools/oci-registry/build.sh

helmfile: deps
	@HELMFILE=1 tools/helm-lint/build.sh

# Release build of the binary users run (all the demo needs); `make release` builds every
# target of the release tree, `make bench` the benchmarks.
RELEASE_CONFIGURE = cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
build: deps
	@$(RELEASE_CONFIGURE)
	@ninja -C build/release -j $(JOBS) gpufleet

release: deps
	@$(RELEASE_CONFIGURE)
	@ninja -C build/release -j $(JOBS)

# ASan+UBSan build: unit and integration tests. Built with clang, which compiles the same
# sanitized code in ~45 % less CPU time than GCC (README, "How long CI takes"); the TSan tree
# stays on GCC, so both compilers' warnings fail CI.
TEST_CC ?= clang-14
TEST_CXX ?= clang++-14
asan: deps
	@cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUFLEET_SANITIZE=address \
	  -DCMAKE_C_COMPILER=$(TEST_CC) -DCMAKE_CXX_COMPILER=$(TEST_CXX) $(CMAKE_FLAGS) >/dev/null
	@ninja -C build/asan -j $(JOBS)

# ThreadSanitizer build of the concurrent code's tests only.
tsan: deps
	@cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUFLEET_SANITIZE=thread $(CMAKE_FLAGS) >/dev/null
	@ninja -C build/tsan -j $(JOBS) tsan_tests

# Everything: a short fuzz run, the TSan tests, then every unit and integration test under
# ASan+UBSan, so the last line printed is CTest's summary of the full run. The Go tools build
# beside the C++ trees (two make jobs; each phase's output is printed whole when it ends): on a
# fresh machine the Go phase waits on module downloads and single-threaded links, which the C++
# compiles fill.
test: deps
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-builds
	@ctest --test-dir build/tsan -L tsan --output-on-failure -j $(JOBS)
	@ctest --test-dir build/asan --output-on-failure -j $(CTEST_JOBS)

test-builds: tools tsan asan fuzz-smoke

# libFuzzer targets (clang) for a few seconds each; long runs: scripts/fuzz-smoke.sh 600
FUZZ_SECONDS ?= 20
fuzz-smoke: deps
	@scripts/fuzz-smoke.sh $(FUZZ_SECONDS)

unit: asan
	@ctest --test-dir build/asan -L unit --output-on-failure -j $(JOBS)

integration: tools asan
	@ctest --test-dir build/asan -L integration --output-on-failure -j $(CTEST_JOBS)

demo: kube-local build
	@scripts/demo.sh

demo-down:
	@scripts/demo.sh down

bench: build kube-local
	@ninja -C build/release -j $(JOBS) benchmarks kube_cache_bench
	@scripts/bench.sh

format:
	@clang-format-14 -i $$(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h' 'fuzz/*.cc' 'fuzz/*.h')

clean:
	rm -rf build
