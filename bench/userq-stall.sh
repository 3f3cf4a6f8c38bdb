#!/bin/bash
# Why the user queue's IOPS ratio at -c32 -s32 stays below its instruction
# ratio under TCG: how busy QEMU's threads are while each path runs. The
# guest runs the userq benchmark's -c32 -s32 line, -k0 and -k1 in turn
# (ABBA, RUNS pairs), and names the running phase in a file under results/;
# on the host, bench/qemu-threads.py samples the CPU time of every QEMU
# thread (the vCPUs' "CPU N/TCG", the main loop that runs the NVMe model)
# per phase. A vCPU thread that is busy less than the wall clock while its
# task polls without sleeping was blocked: on QEMU's big lock, which an
# MMIO write (the SQ doorbell) takes and the main loop holds while it
# emulates the commands.
#
#   bench/userq-stall.sh            # on the host: boots the perf kernel
#
# Output in results/userq-stall: stall.md (table), stall.json, runs.txt.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-5}

if [ "${1:-}" = --guest ]; then
	# shellcheck source=tests/common/rc
	. "$REPO/tests/common/rc"
	out=$FASTPATH_RESULTS/userq-stall
	_find_nvme_pci || die "userq-stall: no NVMe PCI namespace"
	line="-b512 -d64 -c32 -s32 -p1 -F1 -B1 -O0 -n1 -u1 -r$RUNTIME"
	for r in $(seq "$RUNS"); do
		order="k0 k1"
		[ $((r % 2)) = 0 ] && order="k1 k0"
		for k in $order; do
			echo "$k" > "$out/phase"
			sleep 0.5
			# $line is a list of options, split on purpose
			# shellcheck disable=SC2086
			"$TOOLS/iobench" $line "-$k" -j "$out/run.json" "$NVME_NG" > /dev/null
			iops=$(sed -n 's/^ *"iops": \([0-9]*\),/\1/p' "$out/run.json")
			echo idle > "$out/phase"
			echo "$r $k $iops" >> "$out/runs.txt"
			sleep 1
		done
	done
	echo end > "$out/phase"
	exit 0
fi

out=$RESULTS/userq-stall
mkdir -p "$out"
rm -f "$out"/*
echo boot > "$out/phase"
python3 "$REPO/bench/qemu-threads.py" "$out" userq-stall &
sampler=$!
rc=0
vm/run -k perf -p bench -t 900 -n userq-stall -- bench/userq-stall.sh --guest || rc=$?
wait "$sampler" || rc=$?
[ "$rc" = 0 ] || die "userq-stall: failed (see results/vm/userq-stall)"
cat "$out/stall.md"
