#!/bin/bash
# Guest instructions per write of the ublk benchmark's `null --memcpy`
# cases: ublkd's default mode (the driver copies the request into the
# server's buffer, the target copies that into its pool: two copies,
# "default") against NEED_GET_DATA (the target hands its pool's address
# over and the driver copies straight into it: one copy, "gd"). QD1 random
# writes, O_DIRECT, as bench/scenarios/ublk.sh measures them with fio, inside
# a guest that QEMU counts with the insn-profile plugin (bench/insn-profile).
# make bench-insn B=ublk runs it:
#
#   vm/run -k perf -p bench -n bench-insn-ublk \
#       -P build/insn-profile/insn-profile.so,out=results/insn-ublk/counts.txt,map=build/kernel-perf/System.map \
#       -- bench/insn-ublk.sh [-r SEC] [-s SEC] [-N RUNS] [-c CASES] [-o DIR]
#   python3 bench/insn.py results/insn-ublk     # on the host
#
# Why instructions: the two modes differ by one memcpy of the request in
# ublkd (user space) and by the NEED_GET_DATA round trip (kernel), and the
# count says which of them the latency ratio pays for. Under QEMU 7.2's TCG
# a `rep movs` runs one step per element, and the plugin counts each step
# as an instruction: a copy by `rep movsb` counts a byte per instruction, one
# by 32-byte vector stores a few instructions per 32 bytes. So the count
# follows what TCG spends, not what a CPU would. The user-space row is
# iobench and ublkd together; iobench does the same in both modes.
# Cases: 4k, 128k, 512k and 1m writes (-b). bench/insn-lib.sh has the method
# and the files left in DIR (default $FASTPATH_RESULTS/insn-ublk).
set -euo pipefail

INSN_NAME=insn-ublk
# shellcheck source=bench/insn-lib.sh
. "$(dirname "$0")/insn-lib.sh"
insn_options "$@"

UBLKD=$TOOLS/ublkd
[ -x "$UBLKD" ] || insn_die "$UBLKD not built (make tools)"
modprobe ublk_drv || insn_die "no ublk_drv module"
# shellcheck source=bench/ublk-server.sh
. "$REPO/bench/ublk-server.sh"
declare -A ID DEV
for v in default gd; do
	DEV[$v]=$(ublk_memcpy_dev "$v") || insn_die "ublkd add ($v mode) failed"
	ID[$v]=${DEV[$v]#/dev/ublkb}
done
trap '"$UBLKD" del -a' EXIT

# Each variant must run in its mode: NEED_GET_DATA once per write for gd,
# never for default (ublkd's get_data counter).
get_data() {
	"$UBLKD" list -n "${ID[$1]}" -v | sed -n 's/.* get_data \([0-9]*\).*/\1/p'
}
insn_before() {
	gd_before=$(get_data "$2")
}
insn_check() {
	insn_path_check "$2" "$3" "$4" $(($(get_data "$2") - gd_before)) \
		"writes with a NEED_GET_DATA round trip"
}

INSN_CPU=1
INSN_CASES=(4k 128k 512k 1m)
# QD1 random writes, interrupt-driven, O_DIRECT: fio's libaio --iodepth=1.
qd1_args="-d1 -s1 -c1 -p0 -w100 -R1 -O1"
declare -A INSN_ARGS=(
	[4k]="-b4096 $qd1_args"
	[128k]="-b131072 $qd1_args"
	[512k]="-b524288 $qd1_args"
	[1m]="-b1048576 $qd1_args"
)
INSN_VARIANTS=(default gd)
declare -A INSN_VARG=([default]="${DEV[default]}" [gd]="${DEV[gd]}")
INSN_SETUP=("title=ublkd null --memcpy QD1 random writes: default mode, two copies (default) vs NEED_GET_DATA, one copy (gd)"
	    "disks=default ${DEV[default]} (ublkd add ${UBLK_MEMCPY_ARGS[*]}), gd ${DEV[gd]} (the same --get-data); servers with GLIBC_TUNABLES=$UBLK_SERVER_TUNABLES; iobench cpu=$INSN_CPU")
insn_main
