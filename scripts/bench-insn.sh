#!/bin/bash
# make bench-insn [B=userq|vblk|copy|ublk]: guest instructions per I/O of a
# benchmark's two paths. Builds the insn-profile QEMU plugin, boots the perf
# kernel with the bench profile and the plugin loaded (vm/run -P), runs
# bench/insn-B.sh inside, then bench/insn.py on the host: results/insn
# (userq) or results/insn-B.
# ARGS="..." passes options to the guest script (-r SEC -s SEC -N RUNS -c CASES);
# TRIES=N boots at most (5) when the device stalls.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

scenario=${1:-userq}
case $scenario in
userq) out=$RESULTS/insn name=bench-insn ;;
copy) out=$RESULTS/insn-copy name=bench-insn-copy ;;
vblk) out=$RESULTS/insn-vblk name=bench-insn-vblk ;;
ublk) out=$RESULTS/insn-ublk name=bench-insn-ublk ;;
*) die "bench-insn: no instruction profile for B=$scenario (userq, vblk, copy, ublk)" ;;
esac
plugin=$BUILD/insn-profile/insn-profile.so
map=$BUILD/kernel-perf/System.map
[ -f "$plugin" ] || die "no $plugin; run: make -C bench/insn-profile"
[ -f "$map" ] || die "no $map; run: scripts/kernel.sh build perf"
# QEMU's -plugin splits its argument at commas.
case $plugin$out$map in *,*) die "bench-insn: a path contains a comma: $plugin $out $map" ;; esac
mkdir -p "$out"
# Under the plugin, QEMU's NVMe model now and then stops completing
# commands (both the poll queue's and a user queue's) until the guest's
# 120 s timeout resets the controller, and iobench fails with EINTR; see
# bench/insn.md. That boot is lost, not the method: try another.
tries=${TRIES:-5}
for try in $(seq "$tries"); do
	rm -f "$out/counts.txt"
	rc=0
	# ARGS is a list of options, split on purpose.
	# shellcheck disable=SC2086
	vm/run -k perf -p bench -t "${BENCH_TIMEOUT:-3600}" -n "$name" \
		-P "$plugin,out=$out/counts.txt,map=$map" -- "bench/insn-$scenario.sh" ${ARGS:-} || rc=$?
	[ "$rc" = 0 ] && break
	grep -q -e 'IO error' -e 'iobench stalled' "$RESULTS/vm/$name/console.log" ||
		die "bench-insn: the guest failed (exit $rc), see $RESULTS/vm/$name/console.log"
	[ "$try" -lt "$tries" ] || die "bench-insn: the device stalled in all $tries boots"
	step "bench-insn: the device stalled; boot again ($((try + 1))/$tries)"
done
cp "$RESULTS/vm/$name/qemu.cmdline" "$out/qemu.cmdline"
step "bench-insn: report"
/usr/bin/python3 "$REPO/bench/insn.py" "$out"
