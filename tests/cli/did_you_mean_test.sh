#!/usr/bin/env bash
# A mistyped flag or command exits 2 and names the nearest known one; a word far from every
# candidate gets no guess. Usage: did_you_mean_test.sh BIN
set -uo pipefail
bin="$1"
fails=0
expect() {  # WANT ARGS...: exit 2 and WANT in stderr ("" = no "did you mean" at all)
  local want="$1"; shift
  local out rc
  out=$("$bin" "$@" 2>&1 >/dev/null); rc=$?
  if [[ $rc != 2 ]]; then echo "FAIL: gpufleet $* exited $rc, want 2: $out" >&2; fails=1; fi
  if [[ -n $want && $out != *"$want"* ]]; then
    echo "FAIL: gpufleet $*: no '$want' in: $out" >&2; fails=1
  fi
  if [[ -z $want && $out == *"did you mean"* ]]; then
    echo "FAIL: gpufleet $*: a guess for a word far from every candidate: $out" >&2; fails=1
  fi
}
expect "unknown flag --nodez; did you mean --nodes?" recipe --nodez 5
expect "unknown flag --kubeconfg; did you mean --kubeconfig?" certify report x --kubeconfg f
expect "" sim --fleet-file x  # too far from --fleet to be a typo
expect "unknown command statsu; did you mean status?" hostpkg statsu
expect "unknown command recpie; did you mean recipe?" recpie
expect "" recipe --zzzzzzzz 1
exit $fails
