#!/bin/bash
# Guest instructions per I/O of the vblk benchmark's two paths: 4 KiB random
# reads with O_DIRECT on the virtio-blk disk (/dev/vdX, "blk") and the same
# reads as io_uring passthrough on its char device (/dev/vdXc0, "pt"), run
# inside a guest that QEMU counts with the insn-profile plugin
# (bench/insn-profile). make bench-insn B=vblk runs it:
#
#   vm/run -k perf -p bench -n bench-insn-vblk \
#       -P build/insn-profile/insn-profile.so,out=results/insn-vblk/counts.txt,map=build/kernel-perf/System.map \
#       -- bench/insn-vblk.sh [-r SEC] [-s SEC] [-N RUNS] [-c CASES] [-o DIR]
#   python3 bench/insn.py results/insn-vblk     # on the host
#
# Why instructions: under TCG a QD1 read's time is mostly QEMU's emulation
# of the virtqueue kick and the interrupt, the same on both paths, and
# under icount the submitter's sleeps pass in the host's real time
# (bench/breakdown.md); the instruction count is what the guest's path
# costs. Cases, pinned to CPU 1 where the disk's interrupt lands as in
# bench/scenarios/vblk.sh: qd1 (interrupts), qd1-poll (both polled on the
# poll queue) and d8-s4-c4-direct (batches of 4 at depth 8). Each case runs
# long (-r SEC, default 5) and short (-s SEC, default 1), -N RUNS (default
# 4) pairs, blk and pt ABBA; bench/insn-lib.sh has the method and the files
# left in DIR (default $FASTPATH_RESULTS/insn-vblk).
set -euo pipefail

INSN_NAME=insn-vblk
# shellcheck source=bench/insn-lib.sh
. "$(dirname "$0")/insn-lib.sh"
insn_options "$@"

_find_vblk_passthru || insn_die "no virtio-blk char device /dev/vdXc0 (a kernel without the virtio-blk passthrough topic?)"
[ "$(cat "/sys/block/${VBLK_DEV#/dev/}/queue/io_poll")" = 1 ] ||
	insn_die "$VBLK_DEV has no poll queue (vm/run gives the disk one)"

INSN_CPU=1
INSN_CASES=(qd1 qd1-poll d8-s4-c4-direct)
declare -A INSN_ARGS=(
	[qd1]="-b4096 -d1 -s1 -c1 -p0 -B0 -F1 -R1 -n1"
	[qd1-poll]="-b4096 -d1 -s1 -c1 -p1 -B0 -F1 -R1 -n1"
	[d8-s4-c4-direct]="-b4096 -d8 -s4 -c4 -p0 -B0 -F1 -R1 -n1"
)
INSN_VARIANTS=(blk pt)
declare -A INSN_VARG=([blk]="-O1 $VBLK_DEV" [pt]="-u1 $VBLK_CHR")
hctxs=("/sys/block/${VBLK_DEV#/dev/}/mq"/*)
INSN_SETUP=("title=virtio-blk block path, O_DIRECT (blk) vs /dev/vdXc0 passthrough (pt)"
	    "disk=$VBLK_DEV char=$VBLK_CHR cpu=$INSN_CPU"
	    "queues=${#hctxs[@]} scheduler=$(cat "/sys/block/${VBLK_DEV#/dev/}/queue/scheduler")")
insn_main
