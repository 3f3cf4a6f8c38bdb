# shellcheck shell=bash
# NVMe block path (O_DIRECT on /dev/nvmeXnY) vs NVMe passthrough through
# the generic char device (/dev/ngXnY, IORING_OP_URING_CMD), 4 KiB random
# reads on a null-co backed namespace, so only the guest's software path
# differs between the two.
DESCRIPTION="NVMe block path vs ng passthrough, 4 KiB randread"
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-5}

cases() {
	_find_nvme_pci || { echo "bench passthru: no NVMe namespace" >&2; exit 1; }
	local common="-b4096 -p0 -B0 -F1 -R1 -t1 -r$RUNTIME"
	bench_case qd1 "$common -d1 -s1 -c1 $NVME_DEV" \
		"$common -d1 -s1 -c1 -u1 $NVME_NG"
	bench_case qd8-s4-c4 "$common -d8 -s4 -c4 $NVME_DEV" \
		"$common -d8 -s4 -c4 -u1 $NVME_NG"
}
