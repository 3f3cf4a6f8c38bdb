#!/bin/bash
# The demo tour, run inside the guest by make demo: each of the series'
# four systems doing its job on real data, each checked.
#
#  1. virtio-blk passthrough: random data written through /dev/vdXc0
#     (interrupt and polled), read back through /dev/vdX with O_DIRECT and
#     compared; a smoke run of the block path against the passthrough.
#  2. copy offload: 64 MiB copied on the NVMe namespace by the device (NVMe
#     Copy), then by the kernel (copy_max_bytes 0): time, bytes the guest
#     moved (disk stat), copy_stat, and both destinations equal the source;
#     then an O_DSYNC copy on dm-log-writes, the FLUSH seen in the log.
#  3. copy offload over NVMe-oF/TCP: that namespace exported by an nvmet
#     tcp target, connected from a host in another network namespace over
#     a veth pair (as bench/scenarios/copy-fabrics.sh sets them up); 64 MiB
#     copied on the host's namespace with COPY_FILE_OFFLOAD_ONLY: the bytes
#     that crossed the link (both directions) below 1/16 of those copied,
#     the host's copy offloaded and the target's device offloading every
#     Copy command (copy_stat), the destination read through the fabric
#     equal to the source.
#  4. ublkd: a loop device in each data mode (default, NEED_GET_DATA,
#     USER_COPY) with ext4: files, checksums after a remount, fsck; the
#     NEED_GET_DATA round trips the server counted.
#  5. NVMe user queues: a batch written on an attached queue read back
#     through the block device, a verified iobench -k1 run (written and read
#     on the queue), user_queue_cmds counting exactly those commands; a
#     smoke run of -k1 against -k0.
#
# Devices are found by serial, the fabrics namespace by its subsystem NQN
# (tests/common/rc), never by name order. Every step removes what it made,
# also when it fails. Ends with a summary table, one row per check; exits
# non-zero if any failed.
set -uo pipefail
TESTS_DIR=$FASTPATH_REPO/tests
# shellcheck disable=SC1091 # the tests' helpers, linted on their own
. "$TESTS_DIR/common/rc"
IOBENCH=$TOOLS/iobench
UBLKD=$TOOLS/ublkd
SCRATCH=/run/tour
MNT=$SCRATCH/mnt
MiB=$((1 << 20))
SUMMARY=()
failures=0
ERR=""

section() { printf '\n=== %s\n' "$*"; }
# row STEP CHECK RESULT: one line of the summary table
row() { SUMMARY+=("$1"$'\t'"$2"$'\t'"$3"); }
# fail STEP CHECK WHY: a FAILED row, said on stderr at once too
fail() {
	echo "tour: FAILED: $1: $3" >&2
	failures=$((failures + 1))
	row "$1" "$2" "FAILED: $3"
}
# err WHY: why the current check failed (for its fail row); returns 1
err() {
	ERR=$*
	echo "tour: $*" >&2
	return 1
}
# Seconds since $1 (an EPOCHREALTIME), one decimal.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# stat_sectors DEV: "read write" sectors completed on DEV (its sysfs stat)
stat_sectors() {
	local s
	read -r -a s < "/sys/block/${1#/dev/}/stat"
	echo "${s[2]} ${s[6]}"
}
# mib BYTES [DECIMALS]: BYTES in MiB, one decimal unless told
mib() { awk -v b="$1" -v d="${2:-1}" 'BEGIN { printf "%.*f", d, b / 1048576 }'; }

# What the steps leave behind, undone on any exit.
COPY_Q="" FAB_TGT="" FAB_NET="" UBLK_IDS=()
cleanup() {
	local id
	if [ -n "$COPY_Q" ]; then
		cat "$COPY_Q/copy_max_hw_bytes" > "$COPY_Q/copy_max_bytes"
		copy_trace off
	fi
	declare -F fab_teardown > /dev/null && fab_teardown
	mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
	for id in "${UBLK_IDS[@]}"; do
		[ -e "/sys/class/ublk-char/ublkc$id" ] && ublk_del "$id"
	done
	UBLK_IDS=()
	rm -rf "$SCRATCH"
}
trap cleanup EXIT
mkdir -p "$MNT"

section "Kernel and devices"
uname -r
patches=$(git -C "$FASTPATH_REPO/build/src/linux" log --oneline base..HEAD 2>/dev/null | wc -l)
echo "series: $patches patch(es) on $(git -C "$FASTPATH_REPO/build/src/linux" log -1 --format=%s base 2>/dev/null)"
lsblk -d -e 7 -o NAME,SIZE,LOG-SEC,SERIAL,MODEL
row "kernel" "$(uname -r)" "$patches patches"

# ---------------------------------------------------------------------------
# 1. virtio-blk passthrough

# vblk_data: 16 MiB of random data at 64 MiB, the first half written through
# the char device with interrupts (plain), the second polled and vectored,
# then the whole range read through the block device (O_DIRECT) and
# compared. Sets VBLK_WR (write sectors the block layer counted meanwhile).
vblk_data() {
	local off=$((64 * MiB)) len=$((16 * MiB)) pat=$SCRATCH/vblk.pat back=$SCRATCH/vblk.back
	local before after
	# the pattern sits at the same offset in the file (vblk-pt put's rule)
	dd if=/dev/urandom of="$pat" bs=1M seek=64 count=16 status=none ||
		{ err "no random pattern"; return; }
	before=$(stat_sectors "$VBLK_DEV")
	"$TOOLS/vblk-pt" put "$VBLK_CHR" "$pat" --offset "$off" --len $((len / 2)) --mode plain ||
		{ err "vblk-pt put --mode plain failed"; return; }
	"$TOOLS/vblk-pt" put "$VBLK_CHR" "$pat" --offset $((off + len / 2)) --len $((len / 2)) \
		--mode polled-vec || { err "vblk-pt put --mode polled-vec failed"; return; }
	after=$(stat_sectors "$VBLK_DEV")
	VBLK_WR=$((${after#* } - ${before#* }))
	dd if="$VBLK_DEV" of="$back" bs=1M skip=64 count=16 iflag=direct status=none ||
		{ err "O_DIRECT read of $VBLK_DEV failed"; return; }
	cmp -i "$off:0" -n "$len" "$pat" "$back" ||
		err "what $VBLK_DEV reads back differs from what $VBLK_CHR wrote"
}

# One iobench run: its lines go to the console; sets IOPS to its mean IOPS
# (0 when it failed).
measure() {
	local json=$SCRATCH/iobench.json
	echo "# iobench $*"
	IOPS=0
	"$IOBENCH" --json "$json" "$@" || return 1
	IOPS=$(/usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["iops"]))' "$json")
}

# ab STEP CHECK A B A_ARGS B_ARGS: iobench with A_ARGS (named A) and B_ARGS
# (named B), two 3 s runs a side, interleaved; a summary row with the mean
# IOPS of each and B/A.
ab() {
	local step=$1 check=$2 an=$3 bn=$4 i a=() b=() ma mb
	for i in 1 2; do
		# shellcheck disable=SC2086 # an argument list
		measure $5
		a+=("$IOPS")
		# shellcheck disable=SC2086
		measure $6
		b+=("$IOPS")
	done
	ma=$(( (a[0] + a[1]) / 2 )) mb=$(( (b[0] + b[1]) / 2 ))
	if [ "$ma" -gt 0 ] && [ "$mb" -gt 0 ]; then
		row "$step" "$check" "$an $ma, $bn $mb IOPS: $(awk -v a="$mb" -v b="$ma" 'BEGIN{printf "%.2fx", a/b}')"
	else
		fail "$step" "$check" "an iobench run failed"
	fi
}

section "1. virtio-blk passthrough: written through /dev/vdXc0, read through /dev/vdX"
step="virtio-blk passthrough"
if ! _find_vblk_passthru; then
	fail "$step" "disk serial fastpath-vda and its char device" "no /dev/vdXc0 (serial fastpath-vda)"
else
	q=/sys/block/${VBLK_DEV#/dev/}
	hwqs=("$q/mq"/*)
	echo "$VBLK_DEV (serial $(cat "$q/serial")): ${#hwqs[@]} hw queues, io_poll $(cat "$q/queue/io_poll"); $(ls -l "$VBLK_CHR")"
	t0=$EPOCHREALTIME
	check="16 MiB random: 8 via ${VBLK_CHR#/dev/} irq, 8 polled+vectored; read via ${VBLK_DEV#/dev/} O_DIRECT, cmp"
	if vblk_data; then
		echo "identical ($(since "$t0") s); the block layer counted $VBLK_WR write sectors for them"
		row "$step" "$check" "identical; $VBLK_WR write sectors seen by the bio path"
	else
		fail "$step" "$check" "$ERR"
	fi
	echo "Smoke run: block path vs passthrough (iobench, 4 KiB randread, 2 x 3 s a side interleaved; numbers: make bench B=vblk)"
	for cfg in "-d1 -s1 -c1" "-d8 -s4 -c4"; do
		ab "$step" "smoke: 4 KiB randread $cfg, ${VBLK_DEV#/dev/} vs ${VBLK_CHR#/dev/}" block passthru \
			"-b4096 $cfg -p0 -B0 -F1 -O1 -r3 $VBLK_DEV" "-b4096 $cfg -p0 -B0 -F1 -u1 -r3 $VBLK_CHR"
	done
fi

# ---------------------------------------------------------------------------
# 2. copy offload

# The nvme_setup_cmd trace event, for NVMe Copy commands (opcode 0x19) only.
COPY_TRACE=/sys/kernel/tracing/events/nvme/nvme_setup_cmd
copy_trace() {
	[ -d "$COPY_TRACE" ] || return 0
	if [ "$1" = on ]; then
		echo 'opcode == 0x19' > "$COPY_TRACE/filter"
		echo 1 > "$COPY_TRACE/enable"
	else
		echo 0 > "$COPY_TRACE/enable"
		echo 0 > "$COPY_TRACE/filter"
	fi
}

# copy_one NAME DST [blkcopy flags]: copies COPY_LEN bytes from COPY_SRC to
# DST on COPY_DEV; prints its time, the bytes the guest read and wrote for
# it (the disk's stat), the copy_stat change and the NVMe Copy commands
# traced, and checks the destination's sha256 against the source's. Sets
# COPY_SECS, COPY_RD, COPY_WR (bytes), COPY_DELTA and COPY_CMDS.
copy_one() {
	local name=$1 dst=$2 t0 b a sb sa sum
	shift 2
	b=$(stat_sectors "$COPY_DEV")
	sb=$(_copy_stat "$COPY_DEV")
	echo > /sys/kernel/tracing/trace
	t0=$EPOCHREALTIME
	"$TOOLS/blkcopy" --progress --src "$COPY_DEV:$COPY_SRC" --dst "$COPY_DEV:$dst" \
		--len "$COPY_LEN" "$@" || { err "$name: blkcopy $* failed"; return; }
	COPY_SECS=$(since "$t0")
	a=$(stat_sectors "$COPY_DEV")
	sa=$(_copy_stat "$COPY_DEV")
	COPY_CMDS=$(grep -c "disk=${COPY_DEV#/dev/},.*nvme_cmd_copy" /sys/kernel/tracing/trace)
	COPY_RD=$(( (${a% *} - ${b% *}) * 512 ))
	COPY_WR=$(( (${a#* } - ${b#* }) * 512 ))
	COPY_DELTA=$(_copy_delta "$sb" "$sa")
	echo "$name: $COPY_SECS s; the guest read $(mib "$COPY_RD") MiB and wrote $(mib "$COPY_WR") MiB;" \
		"NVMe Copy commands: $COPY_CMDS; copy_stat: $COPY_DELTA"
	sum=$(_copy_sum "$COPY_DEV" "$dst" "$COPY_LEN")
	[ "$sum" = "$COPY_SUM" ] ||
		err "$name: destination sha256 ${sum:0:16}..., source ${COPY_SUM:0:16}..."
}

# copy_expect NAME DELTA READ WRITTEN CMDS: copy_one's counts are these
copy_expect() {
	local name=$1
	[ "$COPY_DELTA" = "$2" ] || { err "$name: copy_stat changed by $COPY_DELTA, want $2"; return; }
	[ "$COPY_RD $COPY_WR" = "$3 $4" ] ||
		{ err "$name: the guest read $COPY_RD and wrote $COPY_WR bytes, want $3 and $4"; return; }
	[ "$COPY_CMDS" = "$5" ] || err "$name: $COPY_CMDS NVMe Copy commands traced, want $5"
}

# copy_run: the copy step on COPY_DEV
copy_run() {
	local check max cmds
	max=$(cat "$COPY_Q/copy_max_bytes")
	cmds=$(( (COPY_LEN + max - 1) / max ))
	# Random source; the destinations get other random data first, so
	# that only a copy makes them equal.
	if ! _copy_fill "$COPY_DEV" "$COPY_SRC" "$COPY_LEN" ||
		! _copy_fill "$COPY_DEV" $((512 * MiB)) "$COPY_LEN" ||
		! _copy_fill "$COPY_DEV" $((768 * MiB)) "$COPY_LEN"; then
		fail "$step" "random data at 256, 512, 768 MiB" "dd to $COPY_DEV failed"
		return
	fi
	COPY_SUM=$(_copy_sum "$COPY_DEV" "$COPY_SRC" "$COPY_LEN")
	echo "source: 64 MiB of random data at 256 MiB, sha256 ${COPY_SUM:0:16}..."
	copy_trace on

	check="blkcopy --no-fallback 64 MiB 256M->512M: dst sha256, guest I/O, copy_stat, Copy cmds"
	if copy_one offloaded $((512 * MiB)) --no-fallback &&
		copy_expect offloaded "offloaded=0 split=1 emulated=0 failed=0" 0 "$COPY_LEN" "$cmds"; then
		row "$step" "$check" "dst == src; $COPY_SECS s; 0 B read by the guest (the device's 64 MiB write is accounted); split +1; $COPY_CMDS Copy cmds"
	else
		fail "$step" "$check" "$ERR"
	fi

	check="copy_max_bytes=0, blkcopy 64 MiB 256M->768M: dst sha256, guest I/O, copy_stat"
	echo 0 > "$COPY_Q/copy_max_bytes"
	if copy_one emulated $((768 * MiB)) &&
		copy_expect emulated "offloaded=0 split=0 emulated=1 failed=0" "$COPY_LEN" "$COPY_LEN" 0; then
		row "$step" "$check" "dst == src; $COPY_SECS s; 64 MiB read + 64 MiB written by the guest; emulated +1"
	else
		fail "$step" "$check" "$ERR"
	fi
	copy_trace off
	cat "$COPY_Q/copy_max_hw_bytes" > "$COPY_Q/copy_max_bytes"
	echo "copy_max_bytes restored to $(cat "$COPY_Q/copy_max_bytes")"
}

section "2. copy offload: 64 MiB on the NVMe namespace, offloaded (NVMe Copy) and emulated"
step="copy offload"
# shellcheck disable=SC1091
. "$TESTS_DIR/copy/rc"
if ! _find_nvme_pci; then
	fail "$step" "NVMe serial fastpath0 nsid 1" "no such namespace"
elif [ "$(_copy_q "$NVME_DEV" copy_max_hw_bytes 2>/dev/null || echo 0)" = 0 ]; then
	fail "$step" "copy limits of $NVME_DEV" "copy_max_hw_bytes is 0 or missing (no copy offload)"
elif [ ! -d "$COPY_TRACE" ]; then
	fail "$step" "NVMe Copy commands" "no nvme_setup_cmd trace event (tracefs)"
else
	COPY_DEV=$NVME_DEV COPY_Q=/sys/block/${NVME_DEV#/dev/}/queue
	COPY_SRC=$((256 * MiB)) COPY_LEN=$((64 * MiB))
	limits=$(nvme id-ns "$NVME_DEV" -o json | /usr/bin/python3 -c '
import json, sys
ns = json.load(sys.stdin)
print("mssrl=%d mcl=%d msrc=%d" % (ns["mssrl"], ns["mcl"], ns["msrc"]))')
	echo "$NVME_DEV (serial fastpath0, nsid 1): Simple Copy $limits;" \
		"copy_max_hw_bytes $(_copy_q "$NVME_DEV" copy_max_hw_bytes)," \
		"copy_max_src_ranges $(_copy_q "$NVME_DEV" copy_max_src_ranges)"
	copy_run
	COPY_Q=""
fi

# durable_run: the durability check of the copy step (issue 46): a 4 MiB
# copy_file_range() through an O_DSYNC fd and one through a plain fd on
# dm-log-writes over a null_blk with a volatile write cache, each followed
# by a mark; the log read back (tests/common/logwrites.py) must show a
# FLUSH after the O_DSYNC copy's last write and before its mark, the whole
# copy durable at the mark, and nothing of the plain copy.
durable_run() {
	local check="O_DSYNC copy_file_range 4 MiB on dm-log-writes: FLUSH in the log before the call returned"
	local data log dm name=$COPY_NULLB_PREFIX-tour entries got_d got_c got_p
	if ! data=$(_copy_nullb tourdata 32 512 cache_size=32 fua=1) ||
		! log=$(_copy_nullb tourlog 64 512) ||
		! modprobe dm_log_writes ||
		! dm=$(_copy_logwrites tour "$data" "$log"); then
		fail "$step" "$check" "null_blk or dm-log-writes setup failed"
		copy_cleanup
		return
	fi
	_copy_fill "$dm" 0 $((4 * MiB))
	sync "$dm"
	echo "$((8 * MiB)) $((4 * MiB)) $(_copy_sum "$dm" 0 $((4 * MiB)))" > "$SCRATCH/dsync.expect"
	echo "O_DSYNC|$dm 0 $dm $((8 * MiB)) $((4 * MiB)) 0 rd" | _copy_batch
	dmsetup message "$name" 0 mark O_DSYNC
	echo "plain|$dm 0 $dm $((16 * MiB)) $((4 * MiB)) 0 rw" | _copy_batch
	dmsetup message "$name" 0 mark plain
	dmsetup remove --retry "$name"
	entries=$SCRATCH/log-entries
	/usr/bin/python3 -S "$TESTS_DIR/common/logwrites.py" entries "$log" > "$entries" 2> /dev/null ||
		{ fail "$step" "$check" "the log cannot be read"; copy_cleanup; return; }
	got_d=$(_after_last_write "$entries" $((8 * MiB / 512)) 8192 O_DSYNC 2> /dev/null)
	got_p=$(_after_last_write "$entries" $((16 * MiB / 512)) 8192 plain 2> /dev/null)
	# and the whole copy, rebuilt as the weakest power cut at the mark
	# leaves it, is the source
	got_c=$(/usr/bin/python3 -S "$TESTS_DIR/common/logwrites.py" check "$log" \
		--mark O_DSYNC --expect "$SCRATCH/dsync.expect" 2>&1)
	echo "log: O_DSYNC copy: $got_d ($got_c); plain copy: $got_p"
	if [ "$got_d" = "a FLUSH follows the copy's last write, before the mark" ] &&
		[ "$got_c" = "$((8 * MiB))+$((4 * MiB)): durable at mark O_DSYNC" ] &&
		[ "$got_p" = "no write of the copy before the mark" ]; then
		row "$step" "$check" "FLUSH after the copy's last write, before its mark; the plain copy: none"
	else
		fail "$step" "$check" "O_DSYNC: $got_d; $got_c; plain: $got_p"
	fi
	copy_cleanup
}
durable_run

# ---------------------------------------------------------------------------
# 3. copy offload over NVMe-oF/TCP

# fab_teardown: the host disconnected, the target's configfs entries and
# the nvmet and nvme-tcp modules gone (_nvmet_teardown says what would not
# go), then the veth pair and netns fp-host; whatever the step made.
fab_teardown() {
	local ok=0
	if [ -n "$FAB_TGT" ]; then
		if [ -d "$NVMET_CFS/subsystems/$NVMET_NQN" ]; then
			_nvmet_teardown || ok=1
		fi
		FAB_TGT=""
	fi
	if [ -n "$FAB_NET" ]; then
		_nvmet_veth_del || ok=1
		FAB_NET=""
	fi
	return $ok
}

# fab_copy HOST TGT: FAB_LEN bytes from FAB_SRC to FAB_DST on HOST, the
# host's namespace of TGT, with copy_file_range(COPY_FILE_OFFLOAD_ONLY);
# prints its time, the bytes through fp-tgt each way and the copy_stat
# changes of HOST and TGT, then checks all of them and the destination's
# sha256 (read through the fabric, O_DIRECT). Sets FAB_RESULT.
fab_copy() {
	local host=$1 tgt=$2 max cmds hb tb wb wa rx tx wire t0 secs hd td want_h want_t sum bad=() b
	max=$(_copy_q "$host" copy_max_bytes)
	cmds=$(( (FAB_LEN + max - 1) / max ))
	# one Copy command: offloaded; several: offloaded_split
	want_h="offloaded=1 split=0 emulated=0 failed=0"
	[ "$cmds" -gt 1 ] && want_h="offloaded=0 split=1 emulated=0 failed=0"
	# the target's device gets each Copy command as a copy of its own,
	# within its limits (the target advertises them)
	want_t="offloaded=$cmds split=0 emulated=0 failed=0"
	hb=$(_copy_stat "$host") tb=$(_copy_stat "$tgt") wb=$(_nvmet_veth_bytes)
	t0=$EPOCHREALTIME
	"$TOOLS/blkcopy" --progress --no-fallback --src "$host:$FAB_SRC" --dst "$host:$FAB_DST" \
		--len "$FAB_LEN" || { err "blkcopy --no-fallback on $host failed"; return; }
	secs=$(since "$t0")
	wa=$(_nvmet_veth_bytes)
	hd=$(_copy_delta "$hb" "$(_copy_stat "$host")")
	td=$(_copy_delta "$tb" "$(_copy_stat "$tgt")")
	rx=$((${wa% *} - ${wb% *})) tx=$((${wa#* } - ${wb#* }))
	wire=$((rx + tx))
	echo "copy: $secs s; across the link: $rx B host->target, $tx B target->host" \
		"($(mib "$wire" 2) MiB for $((FAB_LEN / MiB)) MiB copied)"
	echo "copy_stat: host ${host#/dev/} $hd; target's ${tgt#/dev/} $td"
	# (read after the counters: this read crosses the link)
	sum=$(_copy_sum "$host" "$FAB_DST" "$FAB_LEN")
	# (a Copy command, its descriptor and completion take a few hundred
	# bytes with their TCP segments: nothing at all means no counting)
	[ "$wire" -gt 0 ] || bad+=("no bytes counted through fp-tgt")
	[ $((wire * 16)) -lt "$FAB_LEN" ] ||
		bad+=("$(mib "$wire" 2) MiB crossed the link, not below 1/16 of the $((FAB_LEN / MiB)) MiB copied")
	[ "$hd" = "$want_h" ] || bad+=("host copy_stat $hd, want $want_h")
	[ "$td" = "$want_t" ] || bad+=("target's device copy_stat $td, want $want_t")
	[ "$sum" = "$FAB_SUM" ] ||
		bad+=("destination sha256 ${sum:0:16}... through the fabric, source ${FAB_SUM:0:16}...")
	if [ ${#bad[@]} -gt 0 ]; then
		ERR=${bad[0]}
		for b in "${bad[@]:1}"; do ERR+="; $b"; done
		err "$ERR"
		return
	fi
	FAB_RESULT="$((FAB_LEN / MiB)) MiB copied in $secs s, $(mib "$wire" 2) MiB crossed the link (1/$((FAB_LEN / wire))), data equal; offloaded by the host ($cmds Copy cmds) and by the target's device (+$cmds)"
}

# fab_run TGT: the fabrics step on the target's device TGT (see the
# section); sets FAB_RESULT, or ERR and returns 1.
fab_run() {
	local tgt=$1 host
	# Random source; the destination gets other random data first, so that
	# only a copy makes it equal.
	if ! _copy_fill "$tgt" "$FAB_SRC" "$FAB_LEN" || ! _copy_fill "$tgt" "$FAB_DST" "$FAB_LEN"; then
		err "dd of random data to $tgt failed"
		return
	fi
	FAB_SUM=$(_copy_sum "$tgt" "$FAB_SRC" "$FAB_LEN")
	FAB_NET=1
	_nvmet_veth || { err "the veth pair fp-tgt/fp-host or netns fp-host could not be made"; return; }
	FAB_TGT=1
	_nvmet_setup tcp "$tgt" ||
		{ err "nvmet tcp target on $NVMET_TRADDR:$NVMET_TRSVCID for $tgt: setup failed"; return; }
	echo "target: nvmet exports $tgt (bdev backend) as nsid 1 of $NVMET_NQN on tcp $NVMET_TRADDR:$NVMET_TRSVCID (fp-tgt)"
	if ! host=$(_nvmet_connect tcp); then
		cat "$FULL"
		err "nvme connect -t tcp -a $NVMET_TRADDR from netns $NVMET_HOST_NETNS failed, or no namespace came"
		return
	fi
	echo "host: nvme connect -t tcp from netns $NVMET_HOST_NETNS (192.0.2.2): $host," \
		"copy_max_hw_bytes $(_copy_q "$host" copy_max_hw_bytes)," \
		"copy_max_src_ranges $(_copy_q "$host" copy_max_src_ranges)"
	echo "source: $((FAB_LEN / MiB)) MiB of random data at $((FAB_SRC / MiB)) MiB, sha256 ${FAB_SUM:0:16}..."
	fab_copy "$host" "$tgt"
}

section "3. copy offload over NVMe-oF/TCP: the host sends Copy commands, the data stays on the target"
step="copy offload, NVMe/TCP"
# shellcheck disable=SC1091
. "$TESTS_DIR/nvmet/rc"
NVMET_TRADDR=192.0.2.1 NVMET_HOST_NETNS=fp-host
FULL=$SCRATCH/nvmet.log		# nvme connect's and disconnect's output
FAB_SRC=$((1024 * MiB)) FAB_DST=$((1280 * MiB)) FAB_LEN=$((64 * MiB))
check="blkcopy --no-fallback 64 MiB on the host's namespace: link bytes, copy_stat host+target, dst sha256"
if ! _find_nvme_pci; then
	fail "$step" "NVMe serial fastpath0 nsid 1" "no such namespace"
elif [ "$(_copy_q "$NVME_DEV" copy_max_hw_bytes 2>/dev/null || echo 0)" = 0 ]; then
	fail "$step" "copy limits of $NVME_DEV" "copy_max_hw_bytes is 0 or missing (no copy offload)"
else
	ERR="" FAB_RESULT=""
	fab_run "$NVME_DEV"
	ok=$?
	if ! fab_teardown; then
		ok=1 ERR="${ERR:+$ERR; }teardown: host, target or veth pair not removed"
	fi
	if [ "$ok" = 0 ]; then
		echo "disconnected, target and veth pair removed"
		row "$step" "$check" "$FAB_RESULT"
	else
		fail "$step" "$check" "$ERR"
	fi
fi

# ---------------------------------------------------------------------------
# 4. ublkd

# ublk_del ID: ublkd del, bounded (STOP_DEV waits for I/O in flight, where
# timeout(1) cannot end it): kill the daemon if it does not let go.
ublk_del() {
	local id=$1 pid n
	"$UBLKD" del -n "$id" &
	pid=$!
	for n in $(seq 150); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "tour: ublkd del -n $id still running after 30 s; killing its daemon" >&2
		n=$("$UBLKD" list -n "$id" | sed -n 's/.*daemon pid \([0-9]*\).*/\1/p')
		[ -n "$n" ] && kill -9 "$n"
	fi
	wait "$pid"
}

# ublk_counter LIST_OUTPUT NAME: a counter of "ublkd list -v"
ublk_counter() {
	local re="counters:.* $2 ([0-9]+)"
	[[ $1 =~ $re ]] && echo "${BASH_REMATCH[1]}"
}

# ublk_mode MODE FLAG: a loop device in data mode MODE (ublkd flag FLAG),
# ext4 on it, files, their checksums after a remount, fsck; sets UBLK_INFO
# to the daemon's counters. The device is deleted by the caller.
ublk_mode() {
	local mode=$1 flag=$2 dev list id w g f i
	# shellcheck disable=SC2086 # the flag is one word or none
	dev=$("$UBLKD" add -t loop -f "$SCRATCH/ublk-$mode.img" --size 128M -q 2 -d 64 $flag) ||
		{ err "ublkd add -t loop $flag failed"; return; }
	id=${dev#/dev/ublkb}
	UBLK_IDS+=("$id")
	_wait_for 10 test -b "$dev" || { err "$dev did not appear"; return; }
	list=$("$UBLKD" list -n "$id" -v)
	echo "$list" | sed -n '1,3p'
	# the device's flags name its mode (the default mode has neither)
	case $mode in
	default)
		[[ $list == *" NEED_GET_DATA "* || $list == *" USER_COPY "* ]] &&
			{ err "$dev has a data mode flag"; return; } ;;
	*) [[ $list == *" $mode "* ]] || { err "$dev lacks flag $mode"; return; } ;;
	esac
	mkfs.ext4 -q -F "$dev" || { err "mkfs.ext4 $dev failed"; return; }
	mount "$dev" "$MNT" || { err "mount $dev failed"; return; }
	for i in 1 2 3; do
		head -c $((i * 4 * MiB + 4321)) /dev/urandom > "$MNT/f$i" || { err "writing f$i failed"; return; }
	done
	(cd "$MNT" && sha256sum f1 f2 f3) > "$SCRATCH/sums"
	umount "$MNT" || { err "umount $dev failed"; return; }
	echo 3 > /proc/sys/vm/drop_caches
	mount "$dev" "$MNT" || { err "remount $dev failed"; return; }
	(cd "$MNT" && sha256sum -c --quiet "$SCRATCH/sums") ||
		{ err "file checksums differ after remount"; return; }
	umount "$MNT" || { err "umount $dev failed"; return; }
	f=$(fsck.ext4 -fn "$dev" 2>&1) || { echo "$f"; err "fsck.ext4 -fn $dev found errors"; return; }
	list=$("$UBLKD" list -n "$id" -v)
	echo "$list" | grep counters
	w=$(ublk_counter "$list" write) g=$(ublk_counter "$list" get_data)
	if [ -z "$w" ] || [ -z "$g" ]; then
		err "no counters in ublkd list -v"
		return
	fi
	UBLK_INFO="$(ublk_counter "$list" read) reads, $w writes, get_data $g"
	# every WRITE's fetch completes with NEED_GET_DATA in that mode, and
	# none does in the others
	if [ "$mode" = NEED_GET_DATA ]; then
		if [ "$g" = 0 ] || [ "$g" != "$w" ]; then
			err "NEED_GET_DATA: $g get_data round trips for $w writes, want one each"
		fi
	else
		[ "$g" = 0 ] || err "$mode: $g get_data round trips, want 0"
	fi
}

section "4. ublkd: a loop device with ext4 in each data mode"
step="ublkd loop"
if [ ! -x "$UBLKD" ]; then
	fail "$step" "ublkd" "$UBLKD is not built"
elif ! modprobe ublk_drv || ! _wait_for 5 test -c /dev/ublk-control; then
	fail "$step" "ublk_drv" "modprobe ublk_drv failed or no /dev/ublk-control"
else
	"$UBLKD" features | grep -E 'features|NEED_GET_DATA|USER_COPY'
	for m in default:'' NEED_GET_DATA:--get-data USER_COPY:--user-copy; do
		mode=${m%%:*} flag=${m#*:}
		echo "--- $mode${flag:+ ($flag)}"
		t0=$EPOCHREALTIME UBLK_INFO=""
		check="$mode: mkfs.ext4, 3 files (24 MiB) sha256 after remount, fsck -n"
		ublk_mode "$mode" "$flag"
		ok=$?
		mountpoint -q "$MNT" && umount "$MNT"
		for id in "${UBLK_IDS[@]}"; do
			if ! ublk_del "$id"; then
				ok=1 ERR="ublkd del -n $id failed"
			elif [ -e "/sys/class/ublk-char/ublkc$id" ] || [ -e "/dev/ublkb$id" ]; then
				ok=1 ERR="ublkb$id still there after ublkd del"
			fi
		done
		UBLK_IDS=()
		rm -f "$SCRATCH/ublk-$mode.img"
		if [ "$ok" = 0 ]; then
			echo "$mode: ok ($(since "$t0") s), device removed"
			row "$step" "$check" "ok, removed; $UBLK_INFO"
		else
			fail "$step" "$check" "$ERR"
		fi
	done
	_unload_module ublk_drv
fi

# ---------------------------------------------------------------------------
# 5. NVMe user queues

# uq_num NAME: a counter of the controller's sysfs directory
uq_num() { cat "$UQ_SYS/$1"; }
uq_idle() { [ "$(uq_num user_queues_attached)" = 0 ]; }

section "5. NVMe user queues: verified I/O on a queue attached to an io_uring ring"
step="NVMe user queues"
if ! _find_nvme_pci; then
	fail "$step" "NVMe serial fastpath0 nsid 1" "no such namespace"
elif UQ_SYS=/sys/class/nvme/${NVME_CTRL#/dev/} && [ "$(uq_num user_queues 2>/dev/null || echo 0)" -le 0 ]; then
	fail "$step" "user queues of ${NVME_CTRL#/dev/}" "none (boot with nvme.user_queues=N)"
else
	echo "${NVME_CTRL#/dev/}: $(uq_num user_queues) user queues, $(uq_num user_queues_attached) attached, user_queue_cmds $(uq_num user_queue_cmds)"

	# uq_run CHECK WANT SEEN CMD...: CMD succeeds and user_queue_cmds
	# grows by exactly WANT (every command went on the queue)
	uq_run() {
		local check=$1 want=$2 seen=$3 before delta
		shift 3
		before=$(uq_num user_queue_cmds)
		if ! "$@"; then
			fail "$step" "$check" "${1##*/} ${*:2:2} failed"
			return
		fi
		delta=$(($(uq_num user_queue_cmds) - before))
		if [ "$delta" = "$want" ]; then
			row "$step" "$check" "$seen; user_queue_cmds +$delta (all $want on the queue)"
		else
			fail "$step" "$check" "user_queue_cmds +$delta, want $want"
		fi
	}
	uq_run "userq-check batch: 32 x 4 KiB writes in one submission, read via ${NVME_DEV#/dev/}" \
		32 "data equal" "$TOOLS/userq-check" -c batch "$NVME_NG" "$NVME_DEV"
	_wait_for 10 uq_idle || echo "tour: queues still attached" >&2
	uq_run "iobench -k1 -v: 2048 x 4 KiB written, read back, compared" 4096 "verify OK" \
		"$IOBENCH" -k1 -u1 -p1 -B1 -F1 -b4096 -d16 -s8 -c8 -v -L2048 "$NVME_NG"

	echo "Smoke run: -k0 (ng via blk-mq) vs -k1 (user queue), 512 B randread, polled, 2 x 3 s a side interleaved; numbers: make bench B=userq"
	_wait_for 10 uq_idle || echo "tour: queues still attached" >&2
	rfc="-b512 -d64 -c2 -s2 -p1 -F1 -B1 -u1 -r3"
	ab "$step" "smoke: 512 B randread polled -d64 -s2 -c2, ${NVME_NG#/dev/}" -k0 -k1 \
		"$rfc -k0 $NVME_NG" "$rfc -k1 $NVME_NG"
	_wait_for 10 uq_idle || fail "$step" "queues given back when the rings closed" "$(uq_num user_queues_attached) still attached 10 s later"
fi

section "Summary"
printf '%s\n' "${SUMMARY[@]}" | awk -F'\t' '
{ for (i = 1; i <= 3; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } }
END {
	if (w[1] < 4) w[1] = 4; if (w[2] < 7) w[2] = 7; if (w[3] < 6) w[3] = 6
	printf "| %-*s | %-*s | %-*s |\n", w[1], "step", w[2], "checked", w[3], "result"
	printf "|%s|%s|%s|\n", dash(w[1] + 2), dash(w[2] + 2), dash(w[3] + 2)
	for (r = 1; r <= NR; r++)
		printf "| %-*s | %-*s | %-*s |\n", w[1], c[r, 1], w[2], c[r, 2], w[3], c[r, 3]
}
function dash(n,   s) { s = ""; while (n-- > 0) s = s "-"; return s }'
echo "(Smoke-run ratios come from 2 short runs under TCG: they move with host load and are not results. For numbers: make bench B=vblk, make bench B=copy, make bench B=copy-fabrics, make bench B=userq, make bench B=ublk.)"
echo "$failures check(s) failed"
[ "$failures" = 0 ]
