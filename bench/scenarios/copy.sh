# shellcheck shell=bash
# Copy offload: copy_file_range() offloaded to the device (NVMe Copy in
# QEMU's device model, null_blk's memory copy) against the same copy
# emulated by the kernel (copy_max_bytes 0: reads and writes through bios)
# and against pread + pwrite with O_DIRECT in userspace, for 8 KiB, 128 KiB
# and 1 MiB copies, sequential, one copy at a time. iobench --copy copies
# each block of the device's first half to the same offset in its second.
#  - the NVMe namespace is a 1 GiB file (vm/run -p bench-file), MCL and
#    MSSRL 1 MiB: an offloaded Copy reads and writes that file inside QEMU,
#    so offload is compared with copies that move the same data through
#    the guest; the first half is filled before the runs;
#  - null_blk: memory-backed, 512 MiB, copy limits of 1 MiB per command,
#    the first half filled;
#  - MiB/s is copied bytes per second; CPU is the guest's busy time over
#    all CPUs (/proc/stat) per GiB copied, which counts kblockd's share of
#    an emulated copy too.
DESCRIPTION="copy_file_range offload vs kernel emulation vs pread+pwrite (O_DIRECT)"
VM_PROFILE=bench-file
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-3}
SETUP_NOTE="NVMe namespace backed by a 1 GiB raw file (not null-co), mssrl=mcl=2048 blocks; null_blk memory-backed 512 MiB, copy_max_sectors=2048"

declare -A COPY_DEV

# Fill the first half of a device with random data, once.
copy_bench_fill() {
	local bytes half
	bytes=$(blockdev --getsize64 "$1")
	half=$((bytes / 2))
	echo "bench copy: filling the first $((half >> 20)) MiB of $1"
	dd if=/dev/urandom of="$1" bs=1M count=$((half >> 20)) oflag=direct status=none
}

copy_bench_nullb() {
	local cfs=/sys/kernel/config/nullb/bench-copy
	modprobe null_blk nr_devices=0 || return 1
	[ -d "$cfs" ] || mkdir "$cfs"
	echo 512 > "$cfs/size"
	echo 1 > "$cfs/memory_backed"
	echo 4096 > "$cfs/blocksize"
	echo 2048 > "$cfs/copy_max_sectors"
	echo 2048 > "$cfs/copy_max_range_sectors"
	echo 1 > "$cfs/power"
	_nullb_configfs_dev bench-copy
}

cases() {
	_find_nvme_pci || { echo "bench copy: no NVMe namespace" >&2; exit 1; }
	local nullb dev name bs
	nullb=$(copy_bench_nullb) || { echo "bench copy: null_blk setup failed" >&2; exit 1; }
	COPY_DEV[nvme]=$NVME_DEV
	COPY_DEV[nullb]=$nullb
	for name in nvme nullb; do
		dev=${COPY_DEV[$name]}
		[ "$(cat "/sys/block/${dev#/dev/}/queue/copy_max_hw_bytes")" -gt 0 ] ||
			{ echo "bench copy: $dev has no copy offload" >&2; exit 1; }
		copy_bench_fill "$dev"
		for bs in 8k 128k 1m; do
			local b common
			case $bs in
			*k) b=$((${bs%k} << 10)) ;;
			*m) b=$((${bs%m} << 20)) ;;
			esac
			common="--copy 2 -b$b -R0 -O1 -r$RUNTIME"
			# baseline: the kernel's emulation (before_run sets copy_max_bytes 0)
			bench_case "$name-$bs-vs-emul" "${common/--copy 2/--copy 1} $dev" "$common $dev"
			# baseline: userspace pread + pwrite, O_DIRECT
			bench_case "$name-$bs-vs-rw" "${common/--copy 2/--copy 3} $dev" "$common $dev"
		done
	done
}

# The emulated baseline runs with copy_max_bytes 0; everything else with
# the device's own limit.
before_run() {
	local dev=${COPY_DEV[${1%%-*}]} q
	q=/sys/block/${dev#/dev/}/queue
	if [ "$2" = baseline ] && [ "${1##*-}" = emul ]; then
		echo 0 > "$q/copy_max_bytes"
	else
		cat "$q/copy_max_hw_bytes" > "$q/copy_max_bytes"
	fi
}
