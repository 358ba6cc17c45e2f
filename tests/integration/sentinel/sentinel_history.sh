#!/usr/bin/env bash
# Issue 29 point 5, one fault = one NodeHealth history entry, through the binaries on the
# simulator (`gpufleet agent --sim-state-dir --monitors kmsg-xid` writing NodeHealth on
# kube-local): escalation rules count status.history, so a fault must be one entry there.
#
#   GPU 3 falls off the bus: Xid 79 injected three times (a burst); the simulator prints each
#         Xid 79 line and, once, the driver's recovery-action line (Xid 154 "GPU recovery action
#         changed from 0x0 (None) to 0x2 (Node Reboot Required)").
#   GPU 1 a double-bit ECC error, three of them: three Xid 48 lines, Xid 63 (row remap
#         pending), Xid 154 "… to 0x1 (GPU Reset Required)"; then Xid 95 (uncontained memory
#         error), another critical Xid of the same error on the already-Fatal GPU.
# Each is one Fatal entry in the history (its message names the recovery action). Then GPU 1 is
# reset (the driver's "… to 0x0 (None)": Healthy) and gets another double-bit error: that is a
# new fault, a second Fatal entry. Each phase ends with a marker Xid 13 on another GPU (a
# Warning): records are folded in order, so once the marker is in the history everything
# before it is too.
# Usage: sentinel_history.sh REPO_ROOT   (env: KUBECONFIG, GPUFLEET_BIN, KUBE_LOCAL_BIN)
set -euo pipefail
repo="$1"
test_name=sentinel_history
policy=sentinel-history  # none is applied: no controller runs, only the agent
# shellcheck source=sentinel_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/sentinel_env.sh"

apply_sentinel_crds
start_fleet 1 1  # one H100 node and one H200 node
node=${all[0]}
"$gpufleet" agent --sim-state-dir "$state" --monitors kmsg-xid --fsync=false --run-for 120s --metrics-addr "" \
  >"$work/agent.log" 2>&1 &
agent_pid=$!

inject() { "$gpufleet" sim inject --state-dir "$state" --event "{node: $node, $1}" >/dev/null; }
# "entity state reason" per history entry, oldest first
history() {
  kubectl get nodehealth "$node" \
    -o jsonpath='{range .status.history[*]}{.entity}{" "}{.state}{" "}{.reason}{"\n"}{end}' 2>/dev/null
}
has_entry() { history | grep -q -- "$1"; }
entity_of() { history | awk -v r="$1" '$3 == r {print $1; exit}'; }
entries_of() { history | awk -v e="$1" '$1 == e {print $2 " " $3}' | paste -sd, -; }
message_of() {
  kubectl get nodehealth "$node" \
    -o jsonpath="{.status.checks[?(@.name=='xid')].entities[?(@.id=='$1')].message}"
}
no_inject_errors() {
  ! grep -l '^# error' "$state"/control/done/* >/dev/null 2>&1 ||
    fail "the simulator refused an injection: $(grep -h '^# error' "$state"/control/done/*)"
}

inject "type: xid, gpu: 3, code: 79"
inject "type: xid, gpu: 3, code: 79"
inject "type: xid, gpu: 3, code: 79"
inject "type: ecc, gpu: 1, kind: doubleBit, count: 3"
inject "type: xid, gpu: 1, code: 95"
inject "type: xid, gpu: 7, code: 13"  # the marker
until_ok 40 "$node: the marker Xid 13 in NodeHealth's history" has_entry ' Warning Xid13$'
no_inject_errors
grep -q 'Node Reboot Required' "$state/nodes/$node/dev/kmsg" ||
  fail "the simulator printed no Xid 154 recovery-action line for the Xid 79"
grep -q 'GPU Reset Required' "$state/nodes/$node/dev/kmsg" ||
  fail "the simulator printed no Xid 154 recovery-action line for the Xid 48"
echo "sentinel_history: history after the bursts:"
history | sed 's/^/  /'
gpu3=$(entity_of Xid79)
gpu1=$(entity_of Xid48)
[[ -n $gpu3 && -n $gpu1 ]] || fail "no Xid79 / Xid48 entry in the history: $(history | tr '\n' ';')"
got=$(entries_of "$gpu3")
[[ $got == "Fatal Xid79" ]] ||
  fail "GPU 3 ($gpu3): history entries '$got', want one: 'Fatal Xid79' (Xid 79 burst + Xid 154 is one fault)"
got=$(entries_of "$gpu1")
[[ $got == "Fatal Xid48" ]] ||
  fail "GPU 1 ($gpu1): history entries '$got', want one: 'Fatal Xid48' (Xid 48 burst, 63, 154, 95 is one fault)"
msg=$(message_of "$gpu3")
[[ $msg == *"Node Reboot Required"* ]] || fail "GPU 3: the message does not name the recovery action: '$msg'"

# A successful reset ends GPU 1's fault; the next double-bit error is a new one.
inject "type: gpuReset, gpu: 1"
inject "type: ecc, gpu: 1, kind: doubleBit, count: 2"
inject "type: xid, gpu: 6, code: 13"  # the marker
marker2() { [[ $(history | grep -c ' Warning Xid13$') -ge 2 ]]; }
until_ok 40 "$node: the second marker Xid 13 in NodeHealth's history" marker2
no_inject_errors
got=$(entries_of "$gpu1")
[[ $got == "Fatal Xid48,Healthy GpuResetSucceeded,Fatal Xid48" ]] ||
  fail "GPU 1 ($gpu1): history entries '$got', want 'Fatal Xid48,Healthy GpuResetSucceeded,Fatal Xid48'"
got=$(entries_of "$gpu3")
[[ $got == "Fatal Xid79" ]] || fail "GPU 3 ($gpu3): history entries '$got' after the reset of GPU 1"
echo "sentinel_history: PASS ($node: Xid 79 burst + recovery action = 1 entry; Xid 48/63/154/95 = 1 entry; reset + Xid 48 = a second fault)"
