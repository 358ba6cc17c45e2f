#!/usr/bin/env bash
# A readable range error: an integer flag out of range exits 2 naming the flag, the value and
# the allowed range in plain integers (no 300-digit float). Usage: range_flag_test.sh BIN
set -uo pipefail
bin="$1"
out=$("$bin" recipe --nodes -5 2>&1); rc=$?
[[ $rc == 2 ]] || { echo "FAIL: recipe --nodes -5 exited $rc, want 2: $out" >&2; exit 1; }
for w in -- '--nodes' '-5' '1' '1000000'; do
  [[ $w == -- ]] && continue
  grep -qF -- "$w" <<<"$out" || { echo "FAIL: no '$w' in: $out" >&2; exit 1; }
done
(( ${#out} < 300 )) || { echo "FAIL: error is ${#out} characters: $out" >&2; exit 1; }
grep -qE '[0-9]{20}' <<<"$out" && { echo "FAIL: long number in: $out" >&2; exit 1; }
echo "range_flag_test: PASS"
