# shellcheck shell=bash
# Copy offload over NVMe-oF/TCP, the posted series' fabrics measurement: a
# host copies inside a namespace of an nvmet target across a 1 Gbit/s
# link, either with copy_file_range() (the host sends Copy commands, the
# target copies on its own device) or with pread + pwrite with O_DIRECT
# (every byte crosses the link twice). Target and host are one guest; the
# link is its loopback, shaped by tbf to LINK (1gbit; LINK=10gbit etc.).
#  - the namespace is the QEMU NVMe namespace on a 1 GiB raw file
#    (vm/run -p bench-file, MCL = MSSRL = 1 MiB): the target's copy is an
#    NVMe Copy that QEMU runs on that file, so the offload does real work;
#  - 8 KiB, 128 KiB and 1 MiB copies, sequential, one at a time (iobench
#    --copy, each block of the first half to the same offset in the second);
#  - before_run/after_run count the loopback's bytes during the run
#    (wire_bytes in the run's JSON; report.py shows the link utilisation)
#    and check the host's copy_stat: every feature copy offloaded, no
#    baseline copy.
DESCRIPTION="copy over NVMe-oF/TCP at 1 Gbit/s: copy_file_range offloaded to the target vs pread+pwrite across the link"
VM_PROFILE=bench-file
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-3}
LINK=${LINK:-1gbit}
SETUP_NOTE="nvmet tcp on the guest's lo shaped by tbf to $LINK; namespace: QEMU NVMe on a 1 GiB raw file, mssrl=mcl=2048 blocks (the target offloads)"

. "$TESTS_DIR/nvmet/rc"
FULL=/dev/null			# the nvmet helpers' log
TCP_DEV=			# the host's namespace
TCP_WIRE_BEFORE=0		# lo's tx_bytes before the current run
TCP_STAT_BEFORE=		# the host's copy_stat before the current run

tcp_lo_bytes() {
	cat /sys/class/net/lo/statistics/tx_bytes
}

# The link's rate in bit/s, from tc's notation (1gbit, 100mbit).
tcp_link_bps() {
	case $LINK in
	*gbit) echo $((${LINK%gbit} * 1000000000)) ;;
	*mbit) echo $((${LINK%mbit} * 1000000)) ;;
	*) echo "bench copy-tcp: LINK=$LINK: use Ngbit or Nmbit" >&2; return 1 ;;
	esac
}

cases() {
	_find_nvme_pci || { echo "bench copy-tcp: no NVMe namespace" >&2; exit 1; }
	local pci=$NVME_DEV bs b
	[ "$(cat "/sys/block/${pci#/dev/}/queue/copy_max_hw_bytes")" -gt 0 ] ||
		{ echo "bench copy-tcp: $pci has no copy offload" >&2; exit 1; }
	tcp_link_bps > /dev/null || exit 1
	echo "bench copy-tcp: filling the first half of $pci"
	dd if=/dev/urandom of="$pci" bs=1M count=$(($(blockdev --getsize64 "$pci") >> 21)) \
		oflag=direct status=none
	_nvmet_setup tcp "$pci" || { echo "bench copy-tcp: target setup failed" >&2; exit 1; }
	# the burst must hold lo's 64 KiB packets
	tc qdisc add dev lo root tbf rate "$LINK" burst 256kb latency 50ms ||
		{ echo "bench copy-tcp: tc tbf failed" >&2; exit 1; }
	TCP_DEV=$(_nvmet_connect tcp) || { echo "bench copy-tcp: connect failed" >&2; exit 1; }
	echo "bench copy-tcp: $TCP_DEV over tcp ($LINK), copy_max_hw_bytes" \
		"$(cat "/sys/block/${TCP_DEV#/dev/}/queue/copy_max_hw_bytes")"
	for bs in 8k 128k 1m; do
		case $bs in
		*k) b=$((${bs%k} << 10)) ;;
		*m) b=$((${bs%m} << 20)) ;;
		esac
		bench_case "tcp-$bs-vs-rw" "--copy 3 -b$b -R0 -O1 -r$RUNTIME $TCP_DEV" \
			"--copy 2 -b$b -R0 -O1 -r$RUNTIME $TCP_DEV"
	done
}

before_run() {
	TCP_STAT_BEFORE=$(awk '{ print $2 }' "/sys/kernel/debug/block/${TCP_DEV#/dev/}/copy_stat" | head -n1)
	TCP_WIRE_BEFORE=$(tcp_lo_bytes)
}

after_run() {
	local variant=$2 json=$3 wire offloaded
	wire=$(($(tcp_lo_bytes) - TCP_WIRE_BEFORE))
	offloaded=$(($(awk '{ print $2 }' "/sys/kernel/debug/block/${TCP_DEV#/dev/}/copy_stat" | head -n1) - TCP_STAT_BEFORE))
	bench_path_check "$1" "$variant" "$json" "$offloaded" "copies offloaded" || return 1
	/usr/bin/python3 - "$json" "$wire" "$(tcp_link_bps)" <<'PY'
import json, sys
path, wire, bps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    run = json.load(f)
run["wire_bytes"] = wire
run["link_bits_per_s"] = bps
with open(path, "w") as f:
    json.dump(run, f, indent=2)
PY
}
