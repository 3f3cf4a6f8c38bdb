#!/bin/bash
# Install everything the project needs from Debian's archive: the pinned
# kernel source, the toolchain, QEMU and the userspace the guest runs (the
# guest boots with this machine's root filesystem, so fio, nvme-cli and
# python3 installed here are the guest's too). Quick when nothing is missing.
# Then builds Debian's fio with our patches into build/fio (scripts/fio.sh;
# cached), which the tests and benches run.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
load_base

packages=(
	build-essential bc bison flex libelf-dev libssl-dev cpio kmod ccache
	rsync xz-utils git dwarves sparse shellcheck
	qemu-system-x86 qemu-utils busybox-static
	fio nvme-cli liburing-dev util-linux python3 python3-matplotlib
	python3-ply python3-git iproute2 procps nbdkit xfsprogs e2fsprogs dmsetup
	# bench/ublk-profile.sh: perf, sampling in the guest
	linux-perf
	# scripts/lint.sh: the man pages of tools/man
	mandoc man-db
	# scripts/fio.sh: apt-get source fio, and what its build needs
	dpkg-dev patch libaio-dev zlib1g-dev
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done

want_src="$DEB_PACKAGE=$DEB_VERSION"
have_src=$(dpkg-query -W -f='${Version}' "$DEB_PACKAGE" 2>/dev/null || true)
[ "$have_src" = "$DEB_VERSION" ] || missing+=("$want_src")

if [ ${#missing[@]} -eq 0 ]; then
	step "setup: all packages present ($DEB_PACKAGE $DEB_VERSION)"
	exec "$REPO/scripts/fio.sh"
fi

[ "$(id -u)" -eq 0 ] || die "setup needs root to install: ${missing[*]}"
step "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
if ! apt-get install -y -q --no-install-recommends "${missing[@]}"; then
	# The archive moves on; the pinned version may be gone. Take what it
	# has and let scripts/kernel.sh decide whether the series still applies.
	printf 'warning: %s not installable, trying the current %s\n' \
		"$want_src" "$DEB_PACKAGE" >&2
	missing=("${missing[@]/$want_src/$DEB_PACKAGE}")
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
step "setup: done"
exec "$REPO/scripts/fio.sh"
