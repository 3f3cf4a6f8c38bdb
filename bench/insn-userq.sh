#!/bin/bash
# Guest instructions per I/O of the userq benchmark's two paths: ng
# passthrough through blk-mq (-k0) and the same commands on an NVMe user
# queue (-k1), run inside a guest that QEMU counts with the insn-profile
# plugin (bench/insn-profile). make bench-insn runs it:
#
#   vm/run -k perf -p bench -n bench-insn \
#       -P build/insn-profile/insn-profile.so,out=results/insn/counts.txt,map=build/kernel-perf/System.map \
#       -- bench/insn-userq.sh [-r SEC] [-s SEC] [-N RUNS] [-c CASES] [-o DIR]
#   python3 bench/insn.py results/insn          # on the host
#
# Why instructions: under TCG an I/O's time also holds QEMU's NVMe
# emulation, the same on both paths, which hides part of a saving in the
# guest's software path; the instruction count is what the path costs.
# icount (bench/breakdown.sh's way) cannot be used: it stalls polled NVMe
# I/O (IOPS 0). bench/insn.md has the numbers and how to read them.
#
# Cases: the iobench lines of bench/scenarios/userq.sh, -c2 -s2 and -c32
# -s32, each with -k0 and -k1, every run long (-r SEC, default 5) and short
# (-s SEC, default 1), -N RUNS (default 4) pairs, ABBA; bench/insn-lib.sh
# has the method and the files left in DIR (default $FASTPATH_RESULTS/insn).
set -euo pipefail

INSN_NAME=insn-userq
# shellcheck source=bench/insn-lib.sh
. "$(dirname "$0")/insn-lib.sh"
insn_options "$@"
insn_out=${insn_out:-${FASTPATH_RESULTS:-$REPO/results}/insn}

_find_nvme_pci || insn_die "no NVMe PCI namespace"
sysfs=/sys/class/nvme/${NVME_CTRL#/dev/}
nuq=$(cat "$sysfs/user_queues" 2>/dev/null) ||
	insn_die "no $sysfs/user_queues: this kernel has no NVMe user queues"
[ "$nuq" -gt 0 ] || insn_die "no user queues: boot with nvme.user_queues=N (vm/run)"

insn_before() {
	cmds=$(cat "$sysfs/user_queue_cmds")
}

# -k1 is advisory in iobench: a silent fallback would measure -k0 twice.
insn_check() {
	insn_path_check "$2" "$3" "$4" $(($(cat "$sysfs/user_queue_cmds") - cmds)) \
		"IOs completed on a user queue"
}

# The ring's exit detaches its user queue from a workqueue; let that
# finish outside the next run's bracket.
insn_settle() {
	local _
	for _ in $(seq 50); do
		[ "$(cat "$sysfs/user_queues_attached")" = 0 ] && return 0
		sleep 0.1
	done
	insn_die "a user queue is still attached 5 s after the last run"
}

INSN_CASES=(d64-s2-c2 d64-s32-c32)
declare -A INSN_ARGS=(
	[d64-s2-c2]="-b512 -d64 -c2 -s2 -p1 -F1 -B1 -O0 -n1 -u1"
	[d64-s32-c32]="-b512 -d64 -c32 -s32 -p1 -F1 -B1 -O0 -n1 -u1"
)
INSN_VARIANTS=(k0 k1)
declare -A INSN_VARG=([k0]="-k0 $NVME_NG" [k1]="-k1 $NVME_NG")
INSN_SETUP=("title=ng passthrough (-k0) vs NVMe user queue (-k1)"
	    "controller=${NVME_CTRL#/dev/} user_queues=$nuq namespace=$NVME_NG")
insn_main
