#!/usr/bin/env bash
# Installs the exact Debian packages gpufleet builds and tests with. Idempotent: it only
# calls apt-get when a package is missing. The README explains why each one is here.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config   # toolchain
  mold                                                   # linker: ~3x faster links of the sanitizer trees
  clang libclang-rt-14-dev libfuzzer-14-dev              # fuzzers and sanitizer runtimes
  clang-format-14                                        # the format check (scripts/check-format.sh)
  libsimdjson-dev                                        # JSON parsing (core)
  libyaml-dev                                            # YAML parsing and emitting (core)
  libre2-dev                                             # CEL matches()
  libcurl4-openssl-dev                                   # HTTP/1.1 + HTTP/2 client (kube, recipe OCI client)
  libprotobuf-dev protobuf-compiler                      # Kubernetes protobuf lists/watches (kube)
  libssl-dev                                             # hashing, TLS material (kube, recipe)
  zlib1g-dev                                             # gunzip Helm release records (recipe), gzip run state (certify)
  libarchive-dev                                         # tar+gzip of bundles pushed to OCI registries (recipe)
  libmicrohttpd-dev                                      # /metrics, /healthz server (core)
  libgnutls28-dev                                        # client-certificate checks on that server's TLS (core)
  libcli11-dev                                           # command-line parsing (cli)
  libabsl-dev                                            # time zones (core time)
  libgtest-dev libgmock-dev                              # unit and integration tests
  libbenchmark-dev                                       # make bench
  openssh-client                                         # ssh-keygen: bundle --sign-key, its tests
  iproute2 strace                                        # the air-gap test: loopback up in unshare -n, connect() audit
  graphviz                                               # docs diagrams only (scripts/render-diagrams.sh, docs_diagrams test)
  gnuplot-nox                                            # bench plots only (scripts/bench-goodput.sh: docs/plots/*.svg)
  jq                                                     # integration test scripts read JSON views (goodput_xid_interruption)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep '^install ok installed$' >/dev/null || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
