#!/bin/bash
# A/B two builds of the virtio_blk module in one boot: the modules are
# swapped before every run, so both see the same host load over time and
# the block path, measured alongside, shows how much the host drifted.
#
#   vm/run -k perf -p bench -n module-ab -- bench/module-ab.sh [-n RUNS] [-r SEC] A.ko B.ko
#
# Build the two modules on the host from the same kernel build, with the
# release suffix of the booted kernel (kernel.sh would call a changed tree
# "-local...", and such a module does not load), e.g. the driver with one
# more hunk against the series' own:
#
#   rel=$(cat build/kernel-perf/release); sfx=${rel#*-fastpath-perf}
#   cp build/kernel-perf/mods/lib/modules/$rel/kernel/drivers/block/virtio_blk.ko results/ab-a.ko
#   git -C build/src/linux apply change.patch
#   make -C build/src/linux O=$PWD/build/kernel-perf CC="ccache gcc" \
#       LOCALVERSION=$sfx drivers/block/virtio_blk.ko
#   strip --strip-debug -o results/ab-b.ko build/kernel-perf/drivers/block/virtio_blk.ko
#   git -C build/src/linux checkout -- drivers/block/virtio_blk.c
#
# Needs the bench profile's null-co disk (the root is 9p, so virtio_blk can
# be unloaded). Prints one line per run and module, then the medians, the
# B/A ratio and in how many runs B was faster, per case. A run's number is
# iobench's mean IOPS over the run (its JSON "iops", as bench/report.py
# uses), and the modules take turns as ABBA pairs (A B, then B A).
set -euo pipefail

REPO=${FASTPATH_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
TESTS_DIR=$REPO/tests
# shellcheck source=tests/common/rc
. "$TESTS_DIR/common/rc"

runs=7 sec=3
while getopts "n:r:h" opt; do
	case $opt in
	n) runs=$OPTARG ;;
	r) sec=$OPTARG ;;
	*) sed -n '2,25p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: bench/module-ab.sh [-n RUNS] [-r SEC] A.ko B.ko" >&2; exit 2; }
mods=("$1" "$2") labels=(A B)
for m in "${mods[@]}"; do
	[ -f "$m" ] || { echo "module-ab: no such module: $m" >&2; exit 1; }
done

unload() {
	modprobe -r virtio_blk 2> /dev/null
}

load() {
	# A closed ring lets go of the char device from a workqueue, later.
	_wait_for 20 unload ||
		{ echo "module-ab: cannot unload virtio_blk (disk in use?)" >&2; exit 1; }
	insmod "$1" poll_queues=1 || { echo "module-ab: insmod $1 failed" >&2; exit 1; }
	# Sets VBLK_DEV and VBLK_CHR, which case_args uses.
	_wait_for 10 _find_vblk_passthru ||
		{ echo "module-ab: no virtio-blk char device appeared with $1" >&2; exit 1; }
}

# Mean IOPS of one iobench run, pinned to CPU 1 (the interrupt's CPU).
iops() {
	local json
	json=$(mktemp)
	taskset -c 1 "$TOOLS/iobench" --json "$json" "$@" > /dev/null ||
		{ echo "module-ab: iobench $* failed" >&2; rm -f "$json"; exit 1; }
	python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["iops"]))' "$json"
	rm -f "$json"
}

qd1="-b4096 -B0 -F1 -R1 -r$sec -d1 -s1 -c1"
d8="-b4096 -d8 -c4 -s4 -F1 -B0 -n1 -R1 -r$sec"
cases=(pt-qd1 pt-qd1-poll pt-d8-poll blk-qd1 blk-d8-poll)
case_args() {
	case $1 in
	pt-qd1) echo "$qd1 -p0 -u1 $VBLK_CHR" ;;
	pt-qd1-poll) echo "$qd1 -p1 -u1 $VBLK_CHR" ;;
	pt-d8-poll) echo "$d8 -p1 -u1 $VBLK_CHR" ;;
	blk-qd1) echo "$qd1 -p0 -O1 $VBLK_DEV" ;;
	blk-d8-poll) echo "$d8 -p1 -O1 $VBLK_DEV" ;;
	esac
}

log=$(mktemp)
for ((run = 1; run <= runs; run++)); do
	order="0 1"
	[ $((run % 2)) = 0 ] && order="1 0"
	for i in $order; do
		load "${mods[i]}"
		line="run=$run mod=${labels[i]}"
		for c in "${cases[@]}"; do
			# shellcheck disable=SC2046 # the arguments are a word list
			line+=" $c=$(iops $(case_args "$c"))"
		done
		echo "$line" | tee -a "$log"
	done
done

python3 - "$log" "${cases[@]}" <<'PY'
import statistics, sys
log, cases = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(log):
    kv = dict(f.split("=") for f in line.split())
    for c in cases:
        runs.setdefault((c, kv["mod"]), []).append(int(kv[c]))
print(f"{'case':12} {'A median':>9} {'B median':>9} {'B/A':>6}  B faster")
for c in cases:
    a, b = runs[(c, "A")], runs[(c, "B")]
    wins = sum(y > x for x, y in zip(a, b))
    print(f"{c:12} {statistics.median(a):9.0f} {statistics.median(b):9.0f} "
          f"{statistics.median(b) / statistics.median(a):6.3f}  {wins}/{len(a)}")
PY
rm -f "$log"
