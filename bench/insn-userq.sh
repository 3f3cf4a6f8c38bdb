#!/bin/bash
# Guest instructions per I/O of the userq benchmark's two paths: ng
# passthrough through blk-mq (-k0) and the same commands on an NVMe user
# queue (-k1), run inside a guest that QEMU counts with the insn-profile
# plugin (bench/insn-profile). make bench-insn runs it:
#
#   vm/run -k perf -p bench -n bench-insn \
#       -P build/insn-profile/insn-profile.so,out=results/insn/counts.txt,map=build/kernel-perf/System.map \
#       -- bench/insn-userq.sh [-r SEC] [-s SEC] [-N RUNS] [-o DIR]
#   python3 bench/insn.py results/insn          # on the host
#
# Why instructions: under TCG an I/O's time also holds QEMU's NVMe
# emulation, the same on both paths, which hides part of a saving in the
# guest's software path; the instruction count is what the path costs.
# icount (bench/breakdown.sh's way) cannot be used: it stalls polled NVMe
# I/O (IOPS 0). bench/insn.md has the numbers and how to read them.
#
# Cases: the iobench lines of bench/scenarios/userq.sh, -c2 -s2 and -c32
# -s32, each with -k0 and -k1. Every run is bracketed by two marks (`sync
# -f`, which enters __x64_sys_syncfs, the plugin's mark), and each run is
# done twice, for -r SEC (default 5) and for -s SEC (default 1): the
# difference of the two takes out what a run costs whatever its length
# (iobench's start and exit, the ring and queue setup, the marks' own
# processes), so that what is left is per I/O. -N RUNS (default 4) such
# pairs per case, -k0 and -k1 alternating ABBA as bench/run does.
#
# Output in DIR (default $FASTPATH_RESULTS/insn): kallsyms (the guest's text
# symbols, which insn.py resolves the plugin's addresses with, module
# symbols included), runs.tsv (one line per run: case, variant, run,
# seconds, first and last mark, ios, command), RUN.json and RUN.log
# (iobench), setup.txt. The plugin writes counts.txt from the host: DIR
# must be where its out= points.
set -euo pipefail

REPO=${FASTPATH_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
TESTS_DIR=$REPO/tests
# shellcheck source=tests/common/rc
. "$TESTS_DIR/common/rc"
IOBENCH=$TOOLS/iobench

long=5 short=1 runs=4 out=${FASTPATH_RESULTS:-$REPO/results}/insn
while getopts "r:s:N:o:h" opt; do
	case $opt in
	r) long=$OPTARG ;;
	s) short=$OPTARG ;;
	N) runs=$OPTARG ;;
	o) out=$OPTARG ;;
	*) sed -n '2,32p' "$0"; exit 2 ;;
	esac
done
[ "$long" -gt "$short" ] || { echo "insn-userq: -r $long must be longer than -s $short" >&2; exit 2; }

[ -x "$IOBENCH" ] || { echo "insn-userq: $IOBENCH not built (make tools)" >&2; exit 1; }
_find_nvme_pci || { echo "insn-userq: no NVMe PCI namespace" >&2; exit 1; }
sysfs=/sys/class/nvme/${NVME_CTRL#/dev/}
nuq=$(cat "$sysfs/user_queues" 2>/dev/null) ||
	{ echo "insn-userq: no $sysfs/user_queues: this kernel has no NVMe user queues" >&2; exit 1; }
[ "$nuq" -gt 0 ] || { echo "insn-userq: no user queues: boot with nvme.user_queues=N (vm/run)" >&2; exit 1; }
# Without the plugin the marks count nothing, and the report would find no
# counts; say so now rather than after the runs.
grep -qw nokaslr /proc/cmdline ||
	{ echo "insn-userq: the guest runs with KASLR: start it with vm/run -P (make bench-insn)" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.log "$out/runs.tsv"

# Text symbols only (the plugin counts code), modules included.
awk '$2 ~ /^[tTwW]$/' /proc/kallsyms > "$out/kallsyms"
{
	echo "kernel=$(uname -r)"
	echo "cpus=$(nproc)"
	echo "controller=${NVME_CTRL#/dev/} user_queues=$nuq namespace=$NVME_NG"
	echo "long=$long short=$short runs=$runs"
	echo "cmdline=$(cat /proc/cmdline)"
} > "$out/setup.txt"

marks=0
mark() {
	sync -f /dev/null
	marks=$((marks + 1))
}

# bounded SECONDS LOG ARGS...: iobench ARGS, given up after SECONDS. Under the
# plugin QEMU's NVMe model now and then stops completing commands; iobench
# then spins until the guest's 120 s timeout resets the controller. Give up
# at once instead (exit 3), so that make bench-insn boots again. The
# watchdog is a sleeping process: it adds nothing per I/O.
bounded() {
	local limit=$1 log=$2 pid wpid first rc=0
	shift 2
	"$IOBENCH" "$@" > "$log" 2>&1 &
	pid=$!
	sleep "$limit" &
	wpid=$!
	wait -n -p first "$pid" "$wpid" || rc=$?
	if [ "$first" = "$wpid" ]; then
		echo "insn-userq: iobench stalled: no end after ${limit}s: the NVMe device stopped completing commands" >&2
		dmesg | tail -n 5 >&2
		exit 3
	fi
	kill "$wpid"
	wait "$wpid" 2>/dev/null || true
	return "$rc"
}

# one CASE VARIANT RUN SECONDS ARGS: one bracketed iobench run.
one() {
	local name=$1.$2.$3.r$4 first cmds ios
	first=$((marks + 1))
	cmds=$(cat "$sysfs/user_queue_cmds")
	mark
	# shellcheck disable=SC2086
	bounded $(($4 + 30)) "$out/$name.log" --json "$out/$name.json" -r "$4" $5 || {
		mark
		echo "insn-userq: iobench failed: $5" >&2
		cat "$out/$name.log" >&2
		# The console shows errors only; the cause may be a warning.
		echo "insn-userq: last kernel messages:" >&2
		dmesg | tail -n 15 >&2
		return 1
	}
	mark
	cmds=$(($(cat "$sysfs/user_queue_cmds") - cmds))
	ios=$(sed -n 's/^  "ios": \([0-9]*\),$/\1/p' "$out/$name.json")
	[ -n "$ios" ] || { echo "insn-userq: no ios in $out/$name.json" >&2; return 1; }
	# -k1 is advisory in iobench: a silent fallback would measure -k0 twice.
	case $2 in
	k1) [ "$cmds" -ge "$ios" ] ||
		{ echo "insn-userq: $name: only $cmds of $ios IOs completed on a user queue" >&2; return 1; } ;;
	k0) [ "$cmds" = 0 ] ||
		{ echo "insn-userq: $name: $cmds -k0 IOs completed on a user queue" >&2; return 1; } ;;
	esac
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$first" "$marks" "$ios" \
		"iobench -r$4 $5" >> "$out/runs.tsv"
	printf '  %-10s %s run %s, %ss: %s IOs, %s\n' "$1" "$2" "$3" "$4" "$ios" \
		"$(grep '^Maximum IOPS' "$out/$name.log" || echo 'no IOPS line')"
}

# The ring's exit detaches its user queue from a workqueue; let that
# finish outside the next run's bracket.
settle() {
	local i
	for i in $(seq 50); do
		[ "$(cat "$sysfs/user_queues_attached")" = 0 ] && return 0
		sleep 0.1
	done
	echo "insn-userq: a user queue is still attached 5 s after the last run" >&2
	return 1
}

rfc2="-b512 -d64 -c2 -s2 -p1 -F1 -B1 -O0 -n1 -u1"
rfc32="-b512 -d64 -c32 -s32 -p1 -F1 -B1 -O0 -n1 -u1"
cases=(d64-s2-c2 d64-s32-c32)
declare -A args=([d64-s2-c2]=$rfc2 [d64-s32-c32]=$rfc32)

echo "insn-userq: ${#cases[@]} cases x $runs runs x (${long}s, ${short}s), -k0 and -k1 interleaved ABBA"
# One throw-away second first: the first second after boot runs slower.
# shellcheck disable=SC2086
bounded 30 /dev/null $rfc2 -k0 -r1 "$NVME_NG"
for run in $(seq "$runs"); do
	for c in "${cases[@]}"; do
		if [ $((run % 2)) = 1 ]; then order=(k0 k1); else order=(k1 k0); fi
		for v in "${order[@]}"; do
			for t in "$long" "$short"; do
				settle
				one "$c" "$v" "$run" "$t" "${args[$c]} -$v $NVME_NG"
			done
		done
	done
done
echo "$marks" > "$out/marks"
results=${FASTPATH_RESULTS:-$REPO/results}
case $out in
"$results"/*) host=results/${out#"$results"/} ;;	# the host's view of the share
*) host=$out ;;
esac
echo "insn-userq: $marks marks; run: python3 bench/insn.py $host"
