#!/usr/bin/env bash
# `gpufleet pkg-step` through the binary: the example sysctl package's apply in a minimal
# chrooted host root, the JSON result and exit codes, the skip on re-run, a failing check,
# a bad request. Needs root (chroot).
set -euo pipefail
gpufleet=$1
pkg=$2
if [ "$(id -u)" != 0 ]; then echo "skipped: needs root for chroot"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
for b in /bin/sh /bin/cat /bin/mkdir /bin/mv /bin/rm; do
  for f in "$b" $(ldd "$b" | awk '/=>/ {print $3} /^\t\// {print $1}'); do
    mkdir -p "$root$(dirname "$f")"
    cp -L "$f" "$root$f"
  done
done
mkdir -p "$tmp/cfg"
echo "vm.max_map_count = 1048576" > "$tmp/cfg/90-gpu.conf"
run() {
  "$gpufleet" pkg-step --package sysctl --version 1.0.0 --host-root "$root" --package-dir "$pkg" \
    --config-dir "$tmp/cfg" --config-hash h1 --change g1 --result "$tmp/result.json" "$@"
}
fail() { echo "FAIL: $*"; exit 1; }

run --stage apply > "$tmp/out.json" || fail "apply exited $?"
grep -q '"status":"succeeded"' "$tmp/result.json" || fail "apply result: $(cat "$tmp/result.json")"
cmp -s "$tmp/cfg/90-gpu.conf" "$root/etc/sysctl.d/60-sysctl-90-gpu.conf" || fail "file not installed in the host root"
grep -q '"event":"succeeded"' "$root/var/lib/gpufleet/hostpkg/history.jsonl" || fail "no history"

run --stage apply > /dev/null || fail "re-run exited $?"
grep -q '"status":"skipped"' "$tmp/result.json" || fail "re-run not skipped: $(cat "$tmp/result.json")"

# No /proc/sys in this root: the post-interrupt check must fail, with exit code 1.
rc=0
run --stage post-interrupt > /dev/null || rc=$?
[ "$rc" = 1 ] || fail "post-interrupt exit $rc, want 1"
grep -q '"status":"check-failed"' "$tmp/result.json" || fail "post-interrupt result: $(cat "$tmp/result.json")"
grep -q 'vm.max_map_count is <missing>, want 1048576' "$tmp/result.json" || fail "check output missing"

# Verify mode: the apply check passes (never skipped); with the post-interrupt check it fails
# the same way, naming that check.
run --verify apply,config > /dev/null || fail "verify exited $?"
grep -q '"status":"succeeded"' "$tmp/result.json" || fail "verify result: $(cat "$tmp/result.json")"
grep -q '"stage":"verify"' "$tmp/result.json" || fail "verify stage: $(cat "$tmp/result.json")"
rc=0
run --verify apply,post-interrupt > /dev/null || rc=$?
[ "$rc" = 1 ] || fail "verify with post-interrupt exit $rc, want 1"
grep -q 'the post-interrupt check of sysctl 1.0.0 failed' "$tmp/result.json" || fail "verify failure: $(cat "$tmp/result.json")"
rc=0
run --verify interrupt 2> "$tmp/err" > /dev/null || rc=$?
[ "$rc" = 2 ] || fail "verify interrupt exit $rc, want 2"

rc=0
"$gpufleet" pkg-step --package sysctl --version 1.0.0 --stage nonsense 2> "$tmp/err" || rc=$?
[ "$rc" = 2 ] || fail "bad stage exit $rc, want 2"
grep -q "use apply, upgrade" "$tmp/err" || fail "bad stage message: $(cat "$tmp/err")"
echo "pkg-step CLI: ok"
