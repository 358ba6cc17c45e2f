#!/usr/bin/env bash
# The goodput benchmark at a smoke size: it runs, prints both configurations' figures, writes
# the same JSON twice for one seed, and refuses a bad flag with exit 2 naming it.
#   bench_smoke_test.sh GOODPUT_FLEET SCENARIO
set -euo pipefail
bin="$1" scenario="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$bin" --scenario "$scenario" --json "$dir/a.json" --tsv-dir "$dir" >"$dir/table.txt"
"$bin" --scenario "$scenario" --json "$dir/b.json" >/dev/null
grep -q '^ETTR .*%.*%' "$dir/table.txt" || { echo "no ETTR row:"; cat "$dir/table.txt"; exit 1; }
grep -q 'no-gpufleet' "$dir/table.txt" && grep -q 'gpufleet-node-level' "$dir/table.txt" ||
  { echo "a configuration is missing:"; cat "$dir/table.txt"; exit 1; }
cmp "$dir/a.json" "$dir/b.json" || { echo "the same seed gave different JSON"; exit 1; }
n="$(grep -c '"name"' "$dir/a.json")"
[[ $n == 2 ]] || { echo "expected 2 configurations in the JSON, found $n"; exit 1; }
[[ $(wc -l <"$dir/goodput-ettr.tsv") == 3 ]] || { echo "goodput-ettr.tsv:"; cat "$dir/goodput-ettr.tsv"; exit 1; }
"$bin" --scenario "$scenario" --seed 8 --json "$dir/c.json" >/dev/null
! cmp -s "$dir/a.json" "$dir/c.json" || { echo "another seed gave the same JSON"; exit 1; }
set +e
err="$("$bin" --days zero 2>&1)"
rc=$?
set -e
[[ $rc == 2 && $err == *"--days \"zero\" is not a whole number"* ]] ||
  { echo "bad flag: rc $rc, '$err'"; exit 1; }
echo "goodput bench smoke: ok"
