#!/bin/bash
# make test: boot the debug kernel with the test devices and run tests/run
# inside it. The guest streams one blktests-style line per test; this script
# then writes the summary from results/tests/debug/, counting every planned
# test the guest never finished (it crashed or hung) as failed.
#
#   scripts/test.sh [group | group/NNN]...
#
# QUICK=1 runs only the quick tests (tests/run -q); TIMEOUT=SECONDS sets how
# long the timed tests run (tests/run -t); TRACE=1 traces each test's shell
# (tests/run -X; scripts/trace-gaps.py then says where the time went).
# make test passes all three through.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=${FLAVOR:-debug}
out=$RESULTS/tests/$flavor
rm -rf "$out"
mkdir -p "$out"

# What these results were produced from (results/tests/<flavor>/provenance.json).
scripts/provenance.sh "$flavor" > "$out/provenance.json"
step "test: $(sed -n 's/.*"kernel_release": "\(.*\)",/\1/p' "$out/provenance.json"), project $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)"

args=()
[ "${QUICK:-0}" = 1 ] && args+=(-q)
[ -n "${TIMEOUT:-}" ] && args+=(-t "$TIMEOUT")
[ "${TRACE:-0}" = 1 ] && args+=(-X)
rc=0
# FASTPATH_VM_NAME names the guest (results/vm/NAME), for runs beside others.
vmname=${FASTPATH_VM_NAME:-test-$flavor}
# TEST_TIMEOUT: the whole guest's backstop, in seconds. Hung tests are each
# killed at their own DEADLINE by the runner; this only catches a guest that
# stops as a whole. 80 minutes, not 60: CI's run of the full suite on a
# slow host took 3639 s (2026-11-29), about two minutes of it before the
# guest booted, so the guest came within 100 s of a 60-minute backstop,
# which would have failed every test not yet reported. 80 still ends
# inside CI's 90 minutes with a warm ccache.
guest_timeout=${TEST_TIMEOUT:-4800}
vm/run -k "$flavor" -p test -t "$guest_timeout" -n "$vmname" -- \
	tests/run "${args[@]}" "$@" || rc=$?

[ -f "$out/plan.txt" ] || die "the guest never started the runner (exit $rc); see results/vm/$vmname/console.log"
touch "$out/results.txt"
stopped="died"
[ -f "$RESULTS/vm/$vmname/stopped" ] && stopped=$(cat "$RESULTS/vm/$vmname/stopped")
case $stopped in "timed out"*) stopped+=" (TEST_TIMEOUT=$guest_timeout)" ;; esac
while read -r t; do
	grep -q "^$t " "$out/results.txt" && continue
	printf '%-60s [failed]\n    the guest %s before it finished (see results/vm/%s/console.log)\n' "$t" "$stopped" "$vmname"
	echo "$t failed" >> "$out/results.txt"
done < "$out/plan.txt"

# Where the minutes went: the ten slowest tests, each group's total, and
# what the guest spent outside the tests (boot, kmemleak scans, runner).
if [ -s "$out/times.txt" ]; then
	echo "slowest tests (seconds):"
	sort -k2,2nr "$out/times.txt" | head -n 10 | awk '{ printf "  %-14s %5d\n", $1, $2 }'
	printf 'groups (seconds):'
	awk '{ split($1, g, "/"); t[g[1]] += $2 } END { for (k in t) print k, t[k] }' \
		"$out/times.txt" | sort -k2,2nr | awk '{ printf " %s %d", $1, $2 }'
	echo
	echo "tests took $(awk '{ s += $2 } END { print s }' "$out/times.txt") s of this run's $SECONDS s" \
		"(the rest: build check, boot, kmemleak scans between tests)"
fi
passed=$(grep -c ' passed$' "$out/results.txt" || true)
failed=$(grep -c ' failed$' "$out/results.txt" || true)
skipped=$(grep -c ' skipped$' "$out/results.txt" || true)
echo "artefacts: ${out#"$REPO"/}/"
# The failures once more, by name, right above the summary line: CI logs are
# often read from their tail only.
if [ "$failed" != 0 ]; then
	[ -s "$out/failures.txt" ] && { echo "failures:"; sed 's/^/  /' "$out/failures.txt"; }
	echo "failed: $(sed -n 's/ failed$//p' "$out/results.txt" | tr '\n' ' ')"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$rc" = 0 ]
