# shellcheck shell=bash
# How the ublk benchmarks start their servers (bench/scenarios/ublk.sh,
# bench/insn-ublk.sh, bench/ublk-profile.sh), so that all of them measure
# the same thing. Needs $TOOLS (tests/common/rc).
#
# The servers (ublkd and rublk alike) start with glibc's memcpy kept off
# `rep movsb`: QEMU's TCG runs that instruction one step per byte, and glibc
# picks it from a few KiB up to its non-temporal threshold (~256 KiB here), so
# the default mode's second copy took 3-12x what vector stores take, and
# erratically (docs/performance.md, ublk). That is the emulator's cost, not the flag's;
# UBLK_SERVER_TUNABLES= (empty) measures glibc as it is.
UBLK_SERVER_TUNABLES=${UBLK_SERVER_TUNABLES-glibc.cpu.x86_rep_movsb_threshold=1073741824}

# The `null --memcpy` target of the data-mode cases: it copies each WRITE
# into a pool of its own, so the modes differ by that copy.
UBLK_MEMCPY_ARGS=(-t null --memcpy -q 1 -d 128)

# ublk_server CMD [ARGS...]: run a server's command (ublkd add, rublk add),
# the daemon it starts inheriting the environment above.
ublk_server() {
	GLIBC_TUNABLES=$UBLK_SERVER_TUNABLES "$@"
}

# ublk_memcpy_dev default|gd: add a `null --memcpy` device in the default
# data mode or with NEED_GET_DATA; prints its /dev/ublkbN.
ublk_memcpy_dev() {
	local args=("${UBLK_MEMCPY_ARGS[@]}")
	if [ "$1" = gd ]; then args+=(--get-data); fi
	ublk_server "$TOOLS/ublkd" add "${args[@]}"
}
