# shellcheck shell=bash
# Copy offload over NVMe-oF/TCP, the posted series' fabrics measurement: a
# host copies inside a namespace of an nvmet target across a 1 Gbit/s link,
# either with copy_file_range() (the host sends Copy commands, the target
# copies on its own device) or with pread + pwrite with O_DIRECT (every
# byte crosses the link twice). Then the same without shaping.
#  - target and host are one guest in two network namespaces: the target
#    (nvmet-tcp) in the guest's own, on fp-tgt 192.0.2.1/24; the host
#    (nvme-tcp, connected from `ip netns fp-host`) on fp-host 192.0.2.2/24;
#    the two ends of one veth pair (_nvmet_veth, tests/nvmet/rc). The
#    guest has no other network device, and the addresses are from the
#    documentation range (RFC 5737);
#  - "1gbit-*" cases shape both directions of the pair with tbf at LINK
#    (1gbit; LINK=10gbit etc.), "none-*" cases remove the shaping: each
#    run's before_run sets the qdisc its case needs;
#  - the namespace is the QEMU NVMe namespace on a 1 GiB raw file
#    (vm/run -p bench-file, MCL = MSSRL = 1 MiB): the target's copy is an
#    NVMe Copy that QEMU runs on that file, so the offload does real work;
#  - 8 KiB, 128 KiB and 1 MiB copies, sequential, one at a time (iobench
#    --copy, each block of the first half to the same offset in the second);
#  - before_run/after_run count the bytes through fp-tgt (both
#    directions) during the run (wire_bytes in the run's JSON; report.py
#    shows them per byte copied and as link utilisation) and check the
#    host's copy_stat: every feature copy offloaded, no baseline copy.
DESCRIPTION="copy over NVMe-oF/TCP on a veth pair at 1 Gbit/s and unshaped: copy_file_range offloaded to the target vs pread+pwrite across the link"
VM_PROFILE=bench-file
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-3}
LINK=${LINK:-1gbit}
SETUP_NOTE="nvmet tcp target on veth fp-tgt 192.0.2.1, nvme tcp host in netns fp-host on 192.0.2.2; 1gbit-* cases: tbf $LINK on both ends, none-*: unshaped; namespace: QEMU NVMe on a 1 GiB raw file, mssrl=mcl=2048 blocks (the target offloads)"

. "$TESTS_DIR/nvmet/rc"
FULL=/dev/null			# the nvmet helpers' log
NVMET_TRADDR=192.0.2.1
NVMET_HOST_NETNS=fp-host
FAB_DEV=			# the host's namespace
FAB_WIRE_BEFORE=0		# fp-tgt's rx + tx bytes before the current run
FAB_STAT_BEFORE=		# the host's offloaded copies before the current run
FAB_SHAPED=none			# the shaping in place: none, or $LINK

fab_die() {
	echo "bench copy-fabrics: $*" >&2
	exit 1
}

fab_wire_bytes() {
	local b
	b=$(_nvmet_veth_bytes) || return 1
	echo $((${b% *} + ${b#* }))
}

# The host's offloaded copies: copy_stat's first field
fab_offloaded() {
	awk 'NR == 1 { print $2 }' "/sys/kernel/debug/block/${FAB_DEV#/dev/}/copy_stat"
}

# The link's rate in bit/s, from tc's notation (1gbit, 100mbit).
fab_link_bps() {
	case $LINK in
	*gbit) echo $((${LINK%gbit} * 1000000000)) ;;
	*mbit) echo $((${LINK%mbit} * 1000000)) ;;
	*) echo "bench copy-fabrics: LINK=$LINK: use Ngbit or Nmbit" >&2; return 1 ;;
	esac
}

# fab_shape RATE|none: tbf at RATE on both ends of the pair, or no qdisc
fab_shape() {
	[ "$1" = "$FAB_SHAPED" ] && return 0
	local dev ns
	for dev in fp-tgt fp-host; do
		ns=()
		[ "$dev" = fp-host ] && ns=(-n fp-host)
		if [ "$1" = none ]; then
			tc "${ns[@]}" qdisc del dev "$dev" root 2> /dev/null || true
		else
			# the burst holds a 64 KiB GSO packet and then some
			tc "${ns[@]}" qdisc replace dev "$dev" root tbf rate "$1" \
				burst 256kb latency 50ms || return 1
		fi
	done
	FAB_SHAPED=$1
}

cases() {
	_find_nvme_pci || fab_die "no NVMe namespace"
	local pci=$NVME_DEV bs b shaping
	[ "$(cat "/sys/block/${pci#/dev/}/queue/copy_max_hw_bytes")" -gt 0 ] ||
		fab_die "$pci has no copy offload"
	fab_link_bps > /dev/null || exit 1
	_nvmet_veth || fab_die "veth pair or network namespace setup failed"
	echo "bench copy-fabrics: filling the first half of $pci"
	dd if=/dev/urandom of="$pci" bs=1M count=$(($(blockdev --getsize64 "$pci") >> 21)) \
		oflag=direct status=none
	_nvmet_setup tcp "$pci" || fab_die "target setup failed"
	FAB_DEV=$(_nvmet_connect tcp) || fab_die "connect from netns fp-host failed"
	echo "bench copy-fabrics: $FAB_DEV over tcp 192.0.2.2 -> 192.0.2.1, copy_max_hw_bytes" \
		"$(cat "/sys/block/${FAB_DEV#/dev/}/queue/copy_max_hw_bytes")"
	for shaping in "$LINK" none; do
		for bs in 8k 128k 1m; do
			[ "$shaping" = none ] && [ "$bs" = 128k ] && continue
			case $bs in
			*k) b=$((${bs%k} << 10)) ;;
			*m) b=$((${bs%m} << 20)) ;;
			esac
			bench_case "$shaping-$bs" "--copy 3 -b$b -R0 -O1 -r$RUNTIME $FAB_DEV" \
				"--copy 2 -b$b -R0 -O1 -r$RUNTIME $FAB_DEV"
		done
	done
}

before_run() {
	case $1 in
	none-*) fab_shape none ;;
	*) fab_shape "$LINK" ;;
	esac || { echo "bench copy-fabrics: tc failed" >&2; return 1; }
	FAB_STAT_BEFORE=$(fab_offloaded)
	FAB_WIRE_BEFORE=$(fab_wire_bytes)
}

after_run() {
	local variant=$2 json=$3 wire offloaded bps=0
	wire=$(($(fab_wire_bytes) - FAB_WIRE_BEFORE))
	offloaded=$(($(fab_offloaded) - FAB_STAT_BEFORE))
	bench_path_check "$1" "$variant" "$json" "$offloaded" "copies offloaded" || return 1
	case $1 in
	none-*) ;;
	*) bps=$(fab_link_bps) ;;
	esac
	/usr/bin/python3 - "$json" "$wire" "$bps" <<'PY'
import json, sys
path, wire, bps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    run = json.load(f)
run["wire_bytes"] = wire
if bps:
    run["link_bits_per_s"] = bps
with open(path, "w") as f:
    json.dump(run, f, indent=2)
PY
}
