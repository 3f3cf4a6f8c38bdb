# shellcheck shell=bash
# What the guest scripts of make bench-insn share (bench/insn-userq.sh,
# bench/insn-vblk.sh): options, the marks the insn-profile plugin snapshots
# at, one bracketed iobench run, and the ABBA loop over the cases. The
# caller sets INSN_NAME (its name in messages) and, before insn_main,
# INSN_CASES (case names), INSN_ARGS (case -> iobench arguments without the
# variant's), INSN_VARIANTS (baseline first, then the feature), INSN_VARG
# (variant -> its iobench arguments, device included) and INSN_SETUP (lines
# for setup.txt); it may define insn_check CASE VARIANT NAME IOS (called
# after each run; non-zero fails it), insn_before (before each run) and
# insn_settle (between runs). INSN_CPU, when set, pins iobench to that CPU.
# An insn_check that reads a kernel counter of the feature's path hands it
# to insn_path_check.
#
# Every run is bracketed by two marks (`sync -f`, which enters
# __x64_sys_syncfs, the plugin's mark), and is done twice, for -r SEC
# (default 5) and for -s SEC (default 1): the difference of the two takes out
# what a run costs whatever its length (iobench's start and exit, the ring
# setup, the marks' own processes), so that what is left is per I/O. -N RUNS
# (default 4) such pairs per case, the two variants alternating ABBA as
# bench/run does. -c CASE[,CASE...] runs only those cases (a quick look at
# one case while a change is in progress; a report quotes every case).
#
# Output in DIR (-o, default $FASTPATH_RESULTS/$INSN_NAME): kallsyms (the
# guest's text symbols, which bench/insn.py resolves the plugin's addresses
# with, module symbols included), runs.tsv (one line per run: case, variant,
# run, seconds, first and last mark, ios, command), RUN.json and RUN.log
# (iobench), setup.txt. The plugin writes counts.txt from the host: DIR must
# be where its out= points.

REPO=${FASTPATH_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
TESTS_DIR=$REPO/tests
# shellcheck source=tests/common/rc
. "$TESTS_DIR/common/rc"
IOBENCH=$TOOLS/iobench

insn_long=5 insn_short=1 insn_runs=4 insn_out='' insn_only=''
insn_marks=0

insn_die() {
	echo "$INSN_NAME: $*" >&2
	exit 1
}

# insn_options "$@": -r -s -N -o -c; -h prints the caller's header.
insn_options() {
	local opt
	while getopts "r:s:N:o:c:h" opt; do
		case $opt in
		c) insn_only=$OPTARG ;;
		r) insn_long=$OPTARG ;;
		s) insn_short=$OPTARG ;;
		N) insn_runs=$OPTARG ;;
		o) insn_out=$OPTARG ;;
		*) sed -n '2,/^set -/p' "$0" | sed '$d'; exit 2 ;;
		esac
	done
	[ "$insn_long" -gt "$insn_short" ] ||
		{ echo "$INSN_NAME: -r $insn_long must be longer than -s $insn_short" >&2; exit 2; }
	[ -x "$IOBENCH" ] || insn_die "$IOBENCH not built (make tools)"
	# Without the plugin the marks count nothing, and the report would
	# find no counts; say so now rather than after the runs.
	grep -qw nokaslr /proc/cmdline ||
		insn_die "the guest runs with KASLR: start it with vm/run -P (make bench-insn)"
}

mark() {
	sync -f /dev/null
	insn_marks=$((insn_marks + 1))
}

# bounded SECONDS LOG ARGS...: iobench ARGS, given up after SECONDS. Under
# the plugin QEMU's NVMe model now and then stops completing commands;
# iobench then spins until the guest's 120 s timeout resets the controller.
# Give up at once instead (exit 3), so that make bench-insn boots again.
# The watchdog is a sleeping process: it adds nothing per I/O.
bounded() {
	local limit=$1 log=$2 pid wpid first rc=0
	shift 2
	${INSN_CPU:+taskset -c "$INSN_CPU"} "$IOBENCH" "$@" > "$log" 2>&1 &
	pid=$!
	sleep "$limit" &
	wpid=$!
	wait -n -p first "$pid" "$wpid" || rc=$?
	if [ "$first" = "$wpid" ]; then
		echo "$INSN_NAME: iobench stalled: no end after ${limit}s: the device stopped completing commands" >&2
		dmesg | tail -n 5 >&2
		exit 3
	fi
	kill "$wpid"
	wait "$wpid" 2>/dev/null || true
	return "$rc"
}

# insn_one CASE VARIANT RUN SECONDS ARGS: one bracketed iobench run.
insn_one() {
	local name=$1.$2.$3.r$4 first ios
	first=$((insn_marks + 1))
	if declare -F insn_before > /dev/null; then insn_before "$1" "$2"; fi
	mark
	# shellcheck disable=SC2086
	bounded $(($4 + 30)) "$insn_out/$name.log" --json "$insn_out/$name.json" -r "$4" $5 || {
		mark
		echo "$INSN_NAME: iobench failed: $5" >&2
		cat "$insn_out/$name.log" >&2
		# The console shows errors only; the cause may be a warning.
		echo "$INSN_NAME: last kernel messages:" >&2
		dmesg | tail -n 15 >&2
		return 1
	}
	mark
	ios=$(sed -n 's/^  "ios": \([0-9]*\),$/\1/p' "$insn_out/$name.json")
	[ -n "$ios" ] || insn_die "no ios in $insn_out/$name.json"
	if declare -F insn_check > /dev/null; then insn_check "$1" "$2" "$name" "$ios" || return 1; fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$first" "$insn_marks" "$ios" \
		"iobench -r$4 $5" >> "$insn_out/runs.tsv"
	printf '  %-16s %s run %s, %ss: %s IOs, %s\n' "$1" "$2" "$3" "$4" "$ios" \
		"$(grep '^Maximum IOPS' "$insn_out/$name.log" || echo 'no IOPS line')"
}

# insn_main: the cases, ABBA, every run long and short; then the marks file.
insn_main() {
	local run c v t order results host a=${INSN_VARIANTS[0]} b=${INSN_VARIANTS[1]}
	insn_out=${insn_out:-${FASTPATH_RESULTS:-$REPO/results}/$INSN_NAME}
	if [ -n "$insn_only" ]; then
		for c in ${insn_only//,/ }; do
			[ -n "${INSN_ARGS[$c]:-}" ] ||
				insn_die "-c: no case '$c' (cases: ${INSN_CASES[*]})"
		done
		read -r -a INSN_CASES <<< "${insn_only//,/ }"
	fi
	mkdir -p "$insn_out"
	rm -f "$insn_out"/*.json "$insn_out"/*.log "$insn_out/runs.tsv"
	# Text symbols only (the plugin counts code), modules included.
	awk '$2 ~ /^[tTwW]$/' /proc/kallsyms > "$insn_out/kallsyms"
	{
		echo "kernel=$(uname -r)"
		echo "cpus=$(nproc)"
		printf '%s\n' "${INSN_SETUP[@]}"
		echo "variants=$a $b"
		echo "long=$insn_long short=$insn_short runs=$insn_runs"
		echo "cmdline=$(cat /proc/cmdline)"
	} > "$insn_out/setup.txt"

	echo "$INSN_NAME: ${#INSN_CASES[@]} cases x $insn_runs runs x (${insn_long}s, ${insn_short}s), $a and $b interleaved ABBA"
	# One throw-away second first: the first second after boot runs slower.
	# INSN_VARG comes from the caller, as INSN_ARGS does.
	# shellcheck disable=SC2086,SC2153
	bounded 30 /dev/null ${INSN_ARGS[${INSN_CASES[0]}]} -r1 ${INSN_VARG[$a]}
	for run in $(seq "$insn_runs"); do
		for c in "${INSN_CASES[@]}"; do
			if [ $((run % 2)) = 1 ]; then order=("$a" "$b"); else order=("$b" "$a"); fi
			for v in "${order[@]}"; do
				for t in "$insn_long" "$insn_short"; do
					if declare -F insn_settle > /dev/null; then insn_settle; fi
					insn_one "$c" "$v" "$run" "$t" "${INSN_ARGS[$c]} ${INSN_VARG[$v]}"
				done
			done
		done
	done
	echo "$insn_marks" > "$insn_out/marks"
	results=${FASTPATH_RESULTS:-$REPO/results}
	case $insn_out in
	"$results"/*) host=results/${insn_out#"$results"/} ;;	# the host's view of the share
	*) host=$insn_out ;;
	esac
	echo "$INSN_NAME: $insn_marks marks; run: python3 bench/insn.py $host"
}

# insn_path_check VARIANT NAME IOS COUNT WHAT: for insn_check, what
# bench_path_check (bench/run) is for make bench: COUNT, how many I/Os a
# kernel counter saw take the feature's path (WHAT names them), must cover
# every one of the feature variant's IOS and be 0 for the baseline's, or a
# silent fallback would measure one path twice.
insn_path_check() {
	if [ "$1" = "${INSN_VARIANTS[1]}" ] && [ "$4" -lt "$3" ]; then
		echo "$INSN_NAME: $2: only $4 of $3 $5" >&2
		return 1
	fi
	if [ "$1" = "${INSN_VARIANTS[0]}" ] && [ "$4" != 0 ]; then
		echo "$INSN_NAME: $2: $4 $1 $5" >&2
		return 1
	fi
}
