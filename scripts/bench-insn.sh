#!/bin/bash
# make bench-insn: guest instructions per I/O of the userq benchmark's two
# paths. Builds the insn-profile QEMU plugin, boots the perf kernel with
# the bench profile and the plugin loaded (vm/run -P), runs
# bench/insn-userq.sh inside, then bench/insn.py on the host.
# ARGS="..." passes options to bench/insn-userq.sh (-r SEC -s SEC -N RUNS);
# TRIES=N boots at most (5) when the NVMe device stalls.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

plugin=$BUILD/insn-profile/insn-profile.so
map=$BUILD/kernel-perf/System.map
out=$RESULTS/insn
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
	vm/run -k perf -p bench -t "${BENCH_TIMEOUT:-3600}" -n bench-insn \
		-P "$plugin,out=$out/counts.txt,map=$map" -- bench/insn-userq.sh ${ARGS:-} || rc=$?
	[ "$rc" = 0 ] && break
	grep -q -e 'IO error' -e 'iobench stalled' "$RESULTS/vm/bench-insn/console.log" ||
		die "bench-insn: the guest failed (exit $rc), see $RESULTS/vm/bench-insn/console.log"
	[ "$try" -lt "$tries" ] || die "bench-insn: the NVMe device stalled in all $tries boots"
	step "bench-insn: the NVMe device stalled; boot again ($((try + 1))/$tries)"
done
cp "$RESULTS/vm/bench-insn/qemu.cmdline" "$out/qemu.cmdline"
step "bench-insn: report"
/usr/bin/python3 "$REPO/bench/insn.py" "$out"
