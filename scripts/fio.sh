#!/bin/bash
# Build Debian's fio (fio/BASE) with our patches (fio/patches/series) into
# build/fio; the tests and benches run build/fio/bin/fio, the host's
# /usr/bin/fio stays Debian's. Quick when nothing changed: the build is
# stamped with a hash of fio/BASE and the series, and redone only when they
# change.
#
#   scripts/fio.sh          build if needed
#   scripts/fio.sh -f       rebuild even if the stamp matches
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# shellcheck source=../fio/BASE
. "$REPO/fio/BASE"

force=0
[ "${1:-}" = -f ] && force=1
PDIR=$REPO/fio/patches
SRCDIR=$BUILD/fio-src
DEST=$BUILD/fio
mapfile -t patches < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$PDIR/series")

stamp=$( { cat "$REPO/fio/BASE" "$PDIR/series"
	for p in "${patches[@]}"; do cat "$PDIR/$p"; done; } | sha256sum | cut -d' ' -f1)
if [ "$force" = 0 ] && [ -x "$DEST/bin/fio" ] &&
	[ "$(cat "$DEST/.stamp" 2>/dev/null)" = "$stamp" ]; then
	step "fio: $("$DEST/bin/fio" --version) ($FIO_VERSION + ${#patches[@]} patches) up to date in build/fio"
	exit 0
fi

# apt-get source needs deb-src lines. This file is ours: the same suites
# and components as the system's deb lines, as deb-src.
sources=/etc/apt/sources.list.d/debian.sources
ours=/etc/apt/sources.list.d/fastpath-deb-src.sources
mkdir -p "$SRCDIR"
dsc=$SRCDIR/${FIO_PACKAGE}_${FIO_VERSION}.dsc
if [ ! -f "$dsc" ]; then
	if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		[ "$(id -u)" -eq 0 ] || die "fio: apt-get source needs a deb-src entry; run as root once to add $ours"
		[ -f "$sources" ] || die "fio: no $sources to derive deb-src lines from"
		step "fio: adding deb-src lines ($ours)"
		{
			echo "# Added by fastpath scripts/fio.sh for apt-get source fio: the"
			echo "# suites of $sources, as source packages."
			sed 's/^Types:.*/Types: deb-src/' "$sources"
		} > "$ours"
		apt-get update -q > /dev/null
	fi
	step "fio: apt-get source $FIO_PACKAGE=$FIO_VERSION"
	(cd "$SRCDIR" && apt-get source -q --download-only "$FIO_PACKAGE=$FIO_VERSION" > apt-source.log 2>&1) ||
		die "fio: apt-get source $FIO_PACKAGE=$FIO_VERSION failed (is it still in the archive? see ${SRCDIR#"$REPO"/}/apt-source.log)"
fi

step "fio: building $FIO_PACKAGE $FIO_VERSION with ${#patches[@]} patches from fio/patches"
start=$SECONDS
tree=$SRCDIR/$FIO_TOPDIR
rm -rf "$tree"
# Debian's own patches (debian/patches) are applied by the extraction.
(cd "$SRCDIR" && dpkg-source -q -x "$dsc" "$FIO_TOPDIR" > /dev/null 2>&1) ||
	die "fio: dpkg-source -x $dsc failed"
for p in "${patches[@]}"; do
	patch -d "$tree" -p1 --batch --quiet --no-backup-if-mismatch < "$PDIR/$p" ||
		die "fio: fio/patches/$p does not apply to $FIO_PACKAGE $FIO_VERSION"
done
# --disable-native: the binary runs in the TCG guest too, whose -cpu max
# lacks some of this host's instructions.
(cd "$tree" && ./configure --prefix="$DEST" --disable-native > "$SRCDIR/configure.log" 2>&1) ||
	die "fio: configure failed, see ${SRCDIR#"$REPO"/}/configure.log"
make -s -C "$tree" -j3 > "$SRCDIR/make.log" 2>&1 ||
	die "fio: build failed, see ${SRCDIR#"$REPO"/}/make.log"
rm -rf "$DEST"
make -s -C "$tree" install prefix="$DEST" > /dev/null 2>&1 || die "fio: make install failed"
echo "$stamp" > "$DEST/.stamp"
step "fio: $("$DEST/bin/fio" --version) ($FIO_VERSION + ${#patches[@]} patches) installed in build/fio/bin in $((SECONDS - start)) s"
