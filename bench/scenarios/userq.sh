# shellcheck shell=bash
# NVMe user queues: ng passthrough through blk-mq (baseline, -k0) vs the
# same commands on an interrupt-less queue pair attached to the ring
# (feature, iobench -k1), 512-byte random reads, polled (IOPOLL), the RFC's
# t/io_uring lines, on a null-co backed namespace so only the guest's
# software path differs. The guest boots with nvme.user_queues=2 (vm/run);
# the baseline's polled commands use the driver's poll queue
# (nvme.poll_queues=1).
#  - d64-s2-c2: depth 64, submit and complete batches of 2, where the
#    per-command cost the direct path saves weighs most;
#  - d64-s32-c32: the same with batches of 32, where the syscall and
#    doorbell costs are shared by many commands;
#  - d64-s2-c2-block: the block path (O_DIRECT on /dev/nvmeXnY, polled)
#    as the reference the feature is set against.
# after_run checks the controller's user_queue_cmds: every feature IO must
# have completed on a user queue and no baseline IO may have, since the
# -k1 flag is advisory and a silent fallback would measure nothing.
DESCRIPTION="NVMe ng passthrough vs passthrough on a user queue (-k1), 512 B randread, polled"
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-5}

UQ_SYSFS=		# /sys/class/nvme/nvmeX of the namespace's controller
UQ_CMDS_BEFORE=0	# its user_queue_cmds before the current run

cases() {
	local n rfc2 rfc32 t=-r$RUNTIME

	_find_nvme_pci || { echo "bench userq: no NVMe PCI namespace" >&2; exit 1; }
	UQ_SYSFS=/sys/class/nvme/${NVME_CTRL#/dev/}
	n=$(cat "$UQ_SYSFS/user_queues" 2>/dev/null) ||
		{ echo "bench userq: no $UQ_SYSFS/user_queues: this kernel has no NVMe user queues" >&2; exit 1; }
	[ "$n" -gt 0 ] ||
		{ echo "bench userq: ${NVME_CTRL#/dev/} has no user queues: boot with nvme.user_queues=N (vm/run)" >&2; exit 1; }
	SETUP_NOTE="${NVME_CTRL#/dev/}: $n user queues; one attached per run (-n1)"

	rfc2="-b512 -d64 -c2 -s2 -p1 -F1 -B1"
	rfc32="-b512 -d64 -c32 -s32 -p1 -F1 -B1"
	bench_case d64-s2-c2 "$rfc2 -O0 -n1 -u1 -k0 $t $NVME_NG" \
		"$rfc2 -O0 -n1 -u1 -k1 $t $NVME_NG"
	bench_case d64-s32-c32 "$rfc32 -O0 -n1 -u1 -k0 $t $NVME_NG" \
		"$rfc32 -O0 -n1 -u1 -k1 $t $NVME_NG"
	# Polling the block path needs O_DIRECT (-O1); -O is moot on ng.
	bench_case d64-s2-c2-block "$rfc2 -O1 -n1 -u0 $t $NVME_DEV" \
		"$rfc2 -O0 -n1 -u1 -k1 $t $NVME_NG"
}

# One of the controller's counters.
uq_read() {
	cat "$UQ_SYSFS/$1"
}

before_run() {
	local i

	# The ring's exit detaches its queue from a workqueue, shortly after
	# iobench is gone; a queue still attached then is a leak.
	for i in $(seq 50); do
		[ "$(uq_read user_queues_attached)" = 0 ] && break
		sleep 0.1
	done
	[ "$(uq_read user_queues_attached)" = 0 ] ||
		{ echo "bench userq: a user queue is still attached 5 s after the last run" >&2; return 1; }
	UQ_CMDS_BEFORE=$(uq_read user_queue_cmds)
}

after_run() {
	local variant=$2 json=$3 cmds

	cmds=$(( $(uq_read user_queue_cmds) - UQ_CMDS_BEFORE ))
	bench_path_check "$1" "$variant" "$json" "$cmds" "IOs completed on a user queue"
}
