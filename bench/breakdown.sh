#!/bin/bash
# Per-phase cost breakdown of one 4 KiB read: virtio-blk block path (/dev/vdX,
# O_DIRECT) vs io_uring passthrough (/dev/vdXc0), run inside the guest.
#
#   vm/run -k perf -p bench -I 0 -n h4-breakdown -- bench/breakdown.sh [-r SEC] [-c CPU] [-P] [-D] [-U] [-o DIR]
#   python3 bench/breakdown.py results/breakdown      # on the host (or guest)
#
# Meant for icount mode (vm/run -I 0): guest time then follows executed
# instructions (1 instruction = 1 ns), so a time difference is an
# instruction count, except while a vCPU sleeps (HLT), which passes in real
# time; the power:cpu_idle events let breakdown.py take that out.
#
# Cases: block and passthrough at QD1 with interrupts, pinned to CPU -c
# (default 1, the CPU the virtio-blk interrupt is routed to) and, unless -U,
# the same unpinned as make bench B=vblk runs them; -P adds the polled pair.
# For every case:
#  1. an untraced run (-r SEC, default 3): IOPS, hence ns (instructions) per
#     IO, and /proc/stat idle and interrupt counts, the reference totals;
#  2. a traced run: the function tracer on the entries of a handful of
#     functions along both paths (set_ftrace_filter, only those present in
#     available_filter_functions), the io_uring events (io-wq punts, task_work
#     adds and runs), power:cpu_idle and sched_switch, with the x86-tsc trace
#     clock (under icount the guest TSC is the virtual clock in ns) and a
#     non-overwriting buffer, so the trace holds the first IOs of the run.
#     Two trace_marker lines 0.2 s apart carry CLOCK_MONOTONIC so
#     breakdown.py can check the TSC scale (TSC units per ns).
# -D traces more functions (request allocation, mapping, dispatch) to split
# the submit phase further; it costs more tracing overhead per IO.
#
# Output in DIR (default $FASTPATH_RESULTS/breakdown, i.e. results/breakdown
# on the host): CASE.trace, CASE.json (iobench), CASE.stat (idle jiffies and
# interrupt counts around the untraced run), setup.txt, functions.txt.
set -euo pipefail

REPO=${FASTPATH_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
TESTS_DIR=$REPO/tests
# shellcheck source=tests/common/rc
. "$TESTS_DIR/common/rc"
IOBENCH=$TOOLS/iobench
T=/sys/kernel/tracing

runtime=3 cpu=1 polled=0 detail=0 unpinned=1 out=${FASTPATH_RESULTS:-$REPO/results}/breakdown
while getopts "r:c:PDUo:h" opt; do
	case $opt in
	r) runtime=$OPTARG ;;
	c) cpu=$OPTARG ;;
	P) polled=1 ;;
	D) detail=1 ;;
	U) unpinned=0 ;;
	o) out=$OPTARG ;;
	*) sed -n '2,29p' "$0"; exit 2 ;;
	esac
done

[ -x "$IOBENCH" ] || { echo "breakdown: $IOBENCH not built (make tools)" >&2; exit 1; }
[ -w "$T/set_ftrace_filter" ] || { echo "breakdown: no function tracer in $T" >&2; exit 1; }
_find_vblk_passthru || { echo "breakdown: no virtio-blk char device" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.trace "$out"/*.json "$out"/*.stat

# Phase markers of both paths; breakdown.py knows their roles.
funcs=(
	__x64_sys_io_uring_enter io_submit_sqes
	io_read blkdev_read_iter blkdev_direct_IO bio_iov_iter_get_pages
	submit_bio_noacct blk_mq_submit_bio
	io_uring_cmd virtblk_uring_cmd_io blk_mq_alloc_request
	blk_rq_map_user_iov blk_execute_rq_nowait
	virtio_queue_rq virtio_queue_rqs vp_notify
	vring_interrupt virtblk_done
	blk_mq_end_request blk_mq_end_request_batch
	blkdev_bio_end_io_async io_complete_rw virtblk_uring_cmd_end_io
	__io_req_task_work_add tctx_task_work
	io_req_rw_complete io_uring_cmd_work blk_rq_unmap_user io_uring_cmd_done
	__io_submit_flush_completions io_cqring_wait
	io_uring_cmd_iopoll blk_rq_poll blk_hctx_poll io_do_iopoll
	io_wq_submit_work io_queue_iowq
)
if [ "$detail" = 1 ]; then
	funcs+=(
		blk_queue_enter __blk_mq_alloc_requests bio_map_user_iov
		blk_mq_insert_request blk_mq_run_hw_queue
		blk_mq_sched_dispatch_requests blk_mq_dispatch_rq_list
		blk_mq_try_issue_directly blk_mq_flush_plug_list
		blk_mq_complete_request virtblk_complete_batch
		blk_rq_map_user_io iov_iter_extract_pages
	)
fi

tw() { echo "$2" > "$T/$1"; }
sed 's/ .*//' "$T/available_filter_functions" | sort -u > "$out/available.txt"
present=()
for f in "${funcs[@]}"; do
	if grep -qx "$f" "$out/available.txt"; then
		present+=("$f")
	else
		echo "breakdown: $f not traceable (inlined or absent), skipped" >&2
	fi
done
rm -f "$out/available.txt"
printf '%s\n' "${present[@]}" > "$out/functions.txt"

{
	echo "kernel=$(uname -r)"
	echo "cpus=$(nproc)"
	echo "pinned_cpu=$cpu"
	echo "runtime=$runtime"
	echo "detail=$detail"
	echo "dev=$VBLK_DEV chr=$VBLK_CHR"
	echo "tsc=$(dmesg | grep -m1 -o 'tsc: Refined TSC clocksource calibration: .*\|tsc: Detected .*' || true)"
	echo "scheduler=$(cat "/sys/block/${VBLK_DEV##*/}/queue/scheduler")"
	grep -E 'virtio[0-9]+-(req|requests)' /proc/interrupts | sed 's/^/irq=/'
} > "$out/setup.txt"

trace_reset() {
	tw tracing_on 0
	tw current_tracer nop
	: > "$T/set_ftrace_filter"
	tw events/enable 0
	: > "$T/trace"
}

trace_setup() {
	trace_reset
	tw trace_clock x86-tsc
	tw buffer_size_kb 12288
	tw options/overwrite 0
	printf '%s\n' "${present[@]}" > "$T/set_ftrace_filter"
	tw current_tracer function
	local e
	for e in io_uring/io_uring_submit_req io_uring/io_uring_queue_async_work \
		io_uring/io_uring_task_add io_uring/io_uring_task_work_run \
		io_uring/io_uring_complete io_uring/io_uring_req_failed \
		power/cpu_idle sched/sched_switch; do
		[ -e "$T/events/$e/enable" ] && tw "events/$e/enable" 1
	done
}

# /proc/stat idle of the pinned CPU, or of all CPUs (cpu=all)
cpu_idle_jiffies() {
	local c=cpu$cpu
	[ "$cpu" = all ] && c=cpu
	awk -v c="$c" '$1 == c { print $5 }' /proc/stat
}
pin() { [ "$cpu" = all ] || printf 'taskset\n-c\n%s\n' "$cpu"; }
vblk_irqs() { grep -E 'virtio[0-9]+-req' /proc/interrupts | awk '{ s = ""; for (i = 2; i <= 3; i++) s = s " " $i; print $NF s }' | tr '\n' ';'; }

# run_case NAME ARGS...: one untraced run for the totals, with /proc/stat
# idle and the virtio-blk interrupt counts around it, then one traced run.
run_case() {
	local name=$1 i0 i1 r0 r1
	shift
	echo "breakdown: $name: untraced ${runtime}s: iobench $*"
	i0=$(cpu_idle_jiffies) r0=$(vblk_irqs)
	# shellcheck disable=SC2046
	$(pin) "$IOBENCH" --json "$out/$name.json" -r "$runtime" "$@" > "$out/$name.log" 2>&1
	i1=$(cpu_idle_jiffies) r1=$(vblk_irqs)
	{
		echo "idle_jiffies=$((i1 - i0))"
		echo "clk_tck=$(getconf CLK_TCK)"
		echo "irqs_before=$r0"
		echo "irqs_after=$r1"
		echo "cpu=$cpu"
		echo "cmd=$(pin | tr '\n' ' ')iobench $*"
	} > "$out/$name.stat"
	grep '^Maximum IOPS' "$out/$name.log" || true

	echo "breakdown: $name: traced 1s"
	trace_setup
	tw tracing_on 1
	# TSC vs CLOCK_MONOTONIC over 0.2 s, before the buffer can fill
	echo "breakdown-clock start mono_ns=$(date +%s%N)" > "$T/trace_marker"
	sleep 0.2
	echo "breakdown-clock end mono_ns=$(date +%s%N)" > "$T/trace_marker"
	# shellcheck disable=SC2046
	$(pin) "$IOBENCH" -r 1 "$@" > "$out/$name.traced.log" 2>&1
	tw tracing_on 0
	echo "buffer_full_dropped=$(awk '/overrun/ { s += $2 } END { print s + 0 }' "$T"/per_cpu/cpu*/stats)" >> "$out/$name.stat"
	cat "$T/trace" > "$out/$name.trace"
	trace_reset
}

# --defer-taskrun 0: completions run as task_work (tctx_task_work), the
# path breakdown.py's phase markers follow; iobench's default
# DEFER_TASKRUN would run them inside io_uring_enter() instead.
qd1="-b4096 -d1 -s1 -c1 -B0 -F1 -R1 --defer-taskrun 0"
# One throw-away second first: the first second after boot runs at half speed.
# shellcheck disable=SC2086
"$IOBENCH" $qd1 -p0 -O1 -r1 "$VBLK_DEV" > /dev/null 2>&1
# shellcheck disable=SC2086
{
	run_case block-qd1 $qd1 -p0 -O1 "$VBLK_DEV"
	run_case pt-qd1 $qd1 -p0 -u1 "$VBLK_CHR"
	if [ "$unpinned" = 1 ]; then
		cpu=all run_case block-qd1-unpinned $qd1 -p0 -O1 "$VBLK_DEV"
		cpu=all run_case pt-qd1-unpinned $qd1 -p0 -u1 "$VBLK_CHR"
	fi
	if [ "$polled" = 1 ]; then
		run_case block-qd1-poll $qd1 -p1 -O1 "$VBLK_DEV"
		run_case pt-qd1-poll $qd1 -p1 -u1 "$VBLK_CHR"
	fi
}
tw trace_clock local
results=${FASTPATH_RESULTS:-$REPO/results}
case $out in
"$results"/*) host=results/${out#"$results"/} ;;	# the host's view of the share
*) host=$out ;;
esac
echo "breakdown: traces in $out; run: python3 bench/breakdown.py $host"
