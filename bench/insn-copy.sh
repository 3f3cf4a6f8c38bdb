#!/bin/bash
# Guest instructions per copy of the copy benchmark's null_blk cases:
# copy_file_range(2) offloaded to null_blk's memory copy ("offload", iobench
# --copy 2) against pread + pwrite with O_DIRECT in userspace ("rw", iobench
# --copy 3), sequential, one copy at a time, as bench/scenarios/copy.sh runs
# them, inside a guest that QEMU counts with the insn-profile plugin
# (bench/insn-profile). make bench-insn B=copy runs it:
#
#   vm/run -k perf -p bench -n bench-insn-copy \
#       -P build/insn-profile/insn-profile.so,out=results/insn-copy/counts.txt,map=build/kernel-perf/System.map \
#       -- bench/insn-copy.sh [-r SEC] [-s SEC] [-N RUNS] [-c CASES] [-o DIR]
#   python3 bench/insn.py results/insn-copy     # on the host
#
# Why instructions: null_blk completes in the submitter's context and
# copies with memcpy, so a copy's cost is all guest code: the instruction
# count says where the offloaded copy spends more than the read and write it
# replaces. Cases: 8k, 128k and 1m copies (-b). Each case runs long (-r SEC,
# default 5) and short (-s SEC, default 1), -N RUNS (default 4) pairs, rw
# and offload ABBA; bench/insn-lib.sh has the method and the files left in
# DIR (default $FASTPATH_RESULTS/insn-copy).
set -euo pipefail

INSN_NAME=insn-copy
# shellcheck source=bench/insn-lib.sh
. "$(dirname "$0")/insn-lib.sh"
insn_options "$@"

cfs=/sys/kernel/config/nullb/insn-copy
modprobe null_blk nr_devices=0 || insn_die "no null_blk module"
[ -d "$cfs" ] || mkdir "$cfs"
[ -e "$cfs/copy_max_sectors" ] ||
	insn_die "null_blk has no copy_max_sectors (a kernel without the copy-offload topic?)"
# The scenario's null_blk: memory-backed, 4 KiB blocks, 1 MiB copy limits;
# 64 MiB, so that filling its first half takes no time.
echo 64 > "$cfs/size"
echo 1 > "$cfs/memory_backed"
echo 4096 > "$cfs/blocksize"
echo 2048 > "$cfs/copy_max_sectors"
echo 2048 > "$cfs/copy_max_range_sectors"
echo 1 > "$cfs/power"
dev=$(_nullb_configfs_dev insn-copy) || insn_die "null_blk device did not appear"
dd if=/dev/urandom of="$dev" bs=1M count=32 oflag=direct status=none

INSN_CPU=1
INSN_CASES=(8k 128k 1m)
declare -A INSN_ARGS=(
	[8k]="-b8192 -R0 -O1"
	[128k]="-b131072 -R0 -O1"
	[1m]="-b1048576 -R0 -O1"
)
INSN_VARIANTS=(rw offload)
declare -A INSN_VARG=([rw]="--copy 3 $dev" [offload]="--copy 2 $dev")
INSN_SETUP=("title=copy of null_blk blocks: pread + pwrite, O_DIRECT (rw) vs copy_file_range offloaded (offload)"
	    "disk=$dev size=64MiB bs=4096 copy_max_sectors=2048 cpu=$INSN_CPU")
insn_main
