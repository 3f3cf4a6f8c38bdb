#!/bin/bash
# The demo tour, run inside the guest by make demo: what kernel this is,
# which devices the VM has and what they offer, and a first measurement
# (NVMe block path vs ng passthrough, same boot, interleaved). Ends with a
# summary table; exits non-zero if any step fails.
set -uo pipefail
TESTS_DIR=$FASTPATH_REPO/tests
. "$TESTS_DIR/common/rc"
IOBENCH=$TOOLS/iobench
SUMMARY=()
failures=0

section() { printf '\n=== %s\n' "$*"; }
row() { SUMMARY+=("$(printf '| %-34s | %-46s |' "$1" "$2")"); }
fail() { echo "tour: $*" >&2; failures=$((failures + 1)); row "$1" "FAILED"; }

section "Kernel"
uname -a
patches=$(git -C "$FASTPATH_REPO/build/src/linux" log --oneline base..HEAD 2>/dev/null | wc -l)
echo "series: $patches patch(es) on $(git -C "$FASTPATH_REPO/build/src/linux" log -1 --format=%s base 2>/dev/null)"
row "kernel" "$(uname -r), $patches patches"

section "Block devices"
lsblk -d -o NAME,SIZE,TYPE,MODEL,LOG-SEC

section "NVMe (QEMU, PCIe) and its Copy limits"
if _find_nvme_pci; then
	nvme list 2>/dev/null
	ls -l "$NVME_DEV" "$NVME_NG"
	limits=$(nvme id-ns "$NVME_DEV" -o json | /usr/bin/python3 -c '
import json, sys
ns = json.load(sys.stdin)
print("mssrl=%d mcl=%d msrc=%d" % (ns["mssrl"], ns["mcl"], ns["msrc"]))')
	echo "Simple Copy limits: $limits"
	row "NVMe $NVME_DEV + $NVME_NG" "copy $limits"
else
	fail "NVMe" "no NVMe PCIe namespace"
fi

section "virtio-blk"
if _find_virtio_blk; then
	hwqs=("/sys/block/${VBLK_DEV#/dev/}/mq"/*)
	echo "$VBLK_DEV: $(cat "/sys/block/${VBLK_DEV#/dev/}/queue/nr_requests") requests/queue," \
		"${#hwqs[@]} hw queues," \
		"discard max $(cat "/sys/block/${VBLK_DEV#/dev/}/queue/discard_max_bytes") bytes"
	row "virtio-blk $VBLK_DEV" "${#hwqs[@]} hw queues (1 poll)"
else
	fail "virtio-blk" "no disk"
fi

section "null_blk (configfs, memory backed)"
if modprobe null_blk nr_devices=0; then
	mkdir /sys/kernel/config/nullb/tour
	echo 64 > /sys/kernel/config/nullb/tour/size
	echo 1 > /sys/kernel/config/nullb/tour/memory_backed
	echo 1 > /sys/kernel/config/nullb/tour/power
	echo "features: $(cat /sys/kernel/config/nullb/features)"
	lsblk -d -o NAME,SIZE "$(_nullb_configfs_dev tour)"
	row "null_blk" "memory backed, configfs"
	echo 0 > /sys/kernel/config/nullb/tour/power
	rmdir /sys/kernel/config/nullb/tour
	modprobe -r null_blk
else
	fail "null_blk" "modprobe failed"
fi

section "NVMe over Fabrics (nvmet, loop transport)"
FULL=/dev/null
. "$TESTS_DIR/nvmet/rc"
truncate -s 64M /run/tour-nvmet.img
if _nvmet_setup loop /run/tour-nvmet.img && dev=$(_nvmet_connect loop); then
	nvme list-subsys 2>/dev/null | head -5
	row "nvmet loop" "connected as $dev"
else
	fail "nvmet loop" "setup or connect failed"
fi
_nvmet_teardown || true

section "ublk"
if modprobe ublk_drv && [ -c /dev/ublk-control ]; then
	ls -l /dev/ublk-control
	row "ublk" "/dev/ublk-control ready"
	modprobe -r ublk_drv
else
	fail "ublk" "no control device"
fi

# One iobench run: its lines go to the console; sets IOPS to its mean IOPS
# (0 when it failed).
measure() {
	local json=/run/tour.json
	echo "# iobench $*"
	IOPS=0
	"$IOBENCH" --json "$json" "$@" || return 1
	IOPS=$(/usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["iops"]))' "$json")
}

# ab LABEL A B A_ARGS B_ARGS: iobench with A_ARGS (named A) and B_ARGS
# (named B), two 3 s runs a side, interleaved; a summary row with the mean
# IOPS of each and B/A.
ab() {
	local label=$1 an=$2 bn=$3 i a=() b=() ma mb
	for i in 1 2; do
		# shellcheck disable=SC2086 # an argument list
		measure $4
		a+=("$IOPS")
		# shellcheck disable=SC2086
		measure $5
		b+=("$IOPS")
	done
	ma=$(( (a[0] + a[1]) / 2 )) mb=$(( (b[0] + b[1]) / 2 ))
	if [ "$ma" -gt 0 ] && [ "$mb" -gt 0 ]; then
		row "$label" "$an $ma, $bn $mb IOPS: $(awk -v a="$mb" -v b="$ma" 'BEGIN{printf "%.2fx", a/b}')"
	else
		fail "$label" "no result"
	fi
}

# compare LABEL BLOCKDEV CHARDEV: block path vs passthrough, 4 KiB random
# reads, at QD1 and at depth 8.
compare() {
	local label=$1 bdev=$2 cdev=$3 cfg
	for cfg in "-d1 -s1 -c1" "-d8 -s4 -c4"; do
		ab "$label $cfg" block passthru "-b4096 $cfg -p0 -B0 -F1 -O1 -r3 $bdev" \
			"-b4096 $cfg -p0 -B0 -F1 -u1 -r3 $cdev"
	done
}

# A smoke run, not a measurement: two 3 s runs a side under whatever load
# the host has. The numbers to quote come from make bench (5+ runs, ABBA,
# medians, provenance).
section "Smoke run: block path vs passthrough (iobench, 4 KiB randread, 2 x 3 s interleaved; numbers: make bench)"
if [ ! -x "$IOBENCH" ]; then
	fail "iobench" "not built"
else
	if _find_nvme_pci; then
		compare "NVMe ng" "$NVME_DEV" "$NVME_NG"
	else
		fail "NVMe ng" "no NVMe namespace"
	fi
	if _find_vblk_passthru; then
		ls -l "$VBLK_CHR"
		compare "virtio-blk ${VBLK_CHR#/dev/}" "$VBLK_DEV" "$VBLK_CHR"
	else
		fail "virtio-blk passthrough" "no /dev/vdXc0 char device"
	fi
fi

# ng passthrough through blk-mq vs the same commands on a user queue
# attached to the ring (iobench -k1): the RFC's polled 512 B line.
section "Smoke run: NVMe user queue (iobench -k1 vs -k0, 512 B randread, polled, 2 x 3 s interleaved)"
uq_sys=/sys/class/nvme/${NVME_CTRL#/dev/}
if [ ! -x "$IOBENCH" ] || ! _find_nvme_pci; then
	fail "NVMe user queue" "no iobench or no NVMe namespace"
elif [ "$(cat "$uq_sys/user_queues" 2>/dev/null || echo 0)" -gt 0 ]; then
	echo "$uq_sys: $(cat "$uq_sys/user_queues") user queues, $(cat "$uq_sys/user_queues_attached") attached"
	rfc="-b512 -d64 -c2 -s2 -p1 -F1 -B1 -u1 -r3"
	ab "NVMe user queue -d64 -s2 -c2" -k0 -k1 "$rfc -k0 $NVME_NG" "$rfc -k1 $NVME_NG"
else
	fail "NVMe user queue" "$uq_sys has no user queues (nvme.user_queues=N)"
fi

section "Summary"
printf '| %-34s | %-46s |\n' "what" "state"
printf '|%s|%s|\n' "$(printf -- '-%.0s' $(seq 36))" "$(printf -- '-%.0s' $(seq 48))"
printf '%s\n' "${SUMMARY[@]}"
echo "(Smoke-run ratios from 2 short runs under TCG: they move with host load and are not results. For numbers: make bench B=passthru, make bench B=vblk, make bench B=userq.)"
[ "$failures" = 0 ]
