#!/usr/bin/env bash
# The agent's log bundle flags: bad values exit 2 with the flag, the value and the fix, before
# anything connects to a cluster. Usage: log_bundle_flags_test.sh GPUFLEET_BIN
set -uo pipefail
bin="$1"
check() {  # expected-words... -- args...
  local want=() out rc
  while [[ $1 != -- ]]; do want+=("$1"); shift; done
  shift
  out=$("$bin" agent --node n1 "$@" 2>&1); rc=$?
  [[ $rc == 2 ]] || { echo "FAIL: agent $* exited $rc, want 2: $out" >&2; exit 1; }
  for w in "${want[@]}"; do
    grep -qF -- "$w" <<<"$out" || { echo "FAIL: agent $*: no '$w' in: $out" >&2; exit 1; }
  done
}
check '--log-bundle=maybe' 'use on' 'or off' -- --log-bundle maybe
check '--log-bundle-deadline value "0s"' 'in (0, 10m]' -- --log-bundle-deadline 0s
check '--log-bundle-deadline value "1h"' 'e.g. 30s' -- --log-bundle-deadline 1h
check '--log-bundle-gpu-command' 'unclosed' -- --log-bundle-gpu-command "nvidia-smi 'oops"
echo "log_bundle_flags_test: PASS"
