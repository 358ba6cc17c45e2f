#!/usr/bin/env bash
# `gpufleet completion bash|zsh`: the script loads, completes commands, nested subcommands and
# the flags of the command at hand; an unknown shell exits 2. Usage: completion_test.sh BIN
set -uo pipefail
bin="$1"
script=$("$bin" completion bash) || { echo "FAIL: completion bash exited $?" >&2; exit 1; }
complete_words() {  # WORD... : what <TAB> after the words offers
  bash -c 'source /dev/stdin; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _gpufleet; echo "${COMPREPLY[*]}"' \
    _ "$@" <<<"$script"
}
fails=0
check() {  # WANT WORD...
  local want="$1"; shift
  local got
  got=$(complete_words "$@")
  [[ " $got " == *" $want "* ]] || { echo "FAIL: gpufleet $* <TAB> offers '$got', want '$want'" >&2; fails=1; }
}
check recipe gpufleet rec
check status gpufleet hostpkg st
check driver-set gpufleet hostpkg dr
check --kubeconfig gpufleet hostpkg status --kube
check --fail-on-drift gpufleet diff -r recipe.yaml --fail
check --controllers gpufleet controller --contr
[[ -z $(complete_words gpufleet recipe --nodez-nothing) ]] || { echo "FAIL: a flag nothing matches offered something" >&2; fails=1; }
zsh=$("$bin" completion zsh)
[[ ${zsh%%$'\n'*} == *bashcompinit* ]] || { echo "FAIL: zsh script does not load bashcompinit" >&2; fails=1; }
out=$("$bin" completion fish 2>&1); rc=$?
[[ $rc == 2 && $out == *"use bash or zsh"* ]] || { echo "FAIL: completion fish: rc $rc: $out" >&2; fails=1; }
exit $fails
