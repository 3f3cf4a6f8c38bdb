#!/bin/bash
# make bench B=NAME: one boot of the perf kernel with the bench profile
# (null-co backends; a scenario's VM_PROFILE= line may name another), bench/run NAME inside it, bench/report.py on the host.
# RUNS=N runs per variant (5); ICOUNT=SHIFT for QEMU icount mode (vm/run -I).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

scenario=${1:-}
if [ -z "$scenario" ]; then
	# Listing the scenarios is what "make bench" is for; not an error.
	echo "make bench B=NAME runs one of these scenarios:"
	for f in "$REPO"/bench/scenarios/*.sh; do
		printf '  %-12s %s\n' "$(basename "$f" .sh)" "$(sed -n 's/^DESCRIPTION="\(.*\)"/\1/p' "$f")"
	done
	exit 0
fi
[ -f "$REPO/bench/scenarios/$scenario.sh" ] || die "no scenario $scenario in bench/scenarios/"
mkdir -p "$RESULTS/bench"
# Results are named after the scenario, with -icount for icount runs, so
# the two kinds of run sit side by side.
name=$scenario${ICOUNT:+-icount}
# What the numbers come from, taken on the host before the boot: bench/run
# keeps it with the raw runs, report.py puts it in the setup block.
provenance=$(scripts/provenance.sh perf)
# A scenario with host-side preparation (installing a peer tool) has it in
# bench/scenarios/NAME.host, run here, before the boot.
if [ -x "$REPO/bench/scenarios/$scenario.host" ]; then
	"$REPO/bench/scenarios/$scenario.host" || die "bench: $scenario.host failed"
fi
# A scenario that needs other backing stores names its vm/run profile.
profile=$(sed -n 's/^VM_PROFILE=\([a-z-]*\).*/\1/p' "$REPO/bench/scenarios/$scenario.sh")
vm/run -k perf -p "${profile:-bench}" -t "${BENCH_TIMEOUT:-3600}" -n "bench-$name" ${ICOUNT:+-I "$ICOUNT"} -- \
	RUNS="${RUNS:-5}" bench/run "$scenario" "$name"
printf '%s\n' "$provenance" > "$RESULTS/bench/raw/$name/provenance.json"
step "bench: report"
/usr/bin/python3 "$REPO/bench/report.py" "$RESULTS" "$name"
