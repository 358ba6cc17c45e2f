#!/usr/bin/env bash
# One spelling of the metrics flag: every command that serves /metrics takes --metrics-addr,
# and the agent still accepts the deprecated --metrics-address. Usage: metrics_flag_test.sh BIN
set -uo pipefail
bin="$1"
for cmd in agent controller; do
  out=$("$bin" "$cmd" --help 2>&1) || { echo "FAIL: $cmd --help exited non-zero: $out" >&2; exit 1; }
  grep -qE -- '--metrics-addr\b' <<<"$out" || { echo "FAIL: $cmd --help has no --metrics-addr" >&2; exit 1; }
done
# The old spelling parses (a bad value after it is rejected by the agent's own checks, not
# by "unknown option"): --help after it exits 0.
out=$("$bin" agent --metrics-address 127.0.0.1:0 --help 2>&1) ||
  { echo "FAIL: agent --metrics-address no longer accepted: $out" >&2; exit 1; }
echo "metrics_flag_test: PASS"
