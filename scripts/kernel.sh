#!/bin/bash
# Kernel source and build management.
#
#   kernel.sh prepare          extract the pinned base into build/src/linux as a
#                              git tree (base = first commit) and git-am the series
#   kernel.sh build FLAVOR     build kernel FLAVOR (perf|debug) into build/kernel-FLAVOR
#   kernel.sh export [TOPIC]   write the commits in build/src/linux back to the series
#   kernel.sh version          the suffix the kernel release gets (series hash)
#
# The source tree is yours to edit between prepare and export: prepare never
# throws away commits or changes it did not make itself.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
load_base

SRC=$BUILD/src/linux
PATCHES=$REPO/kernel/patches
STAMP=$BUILD/src/applied

# Fixed identity and dates make the base commit's hash a function of the
# tarball alone, so kernel/BASE can pin it (BASE_COMMIT).
export GIT_AUTHOR_NAME="Fastpath Developers" GIT_AUTHOR_EMAIL="fastpath@example.org"
export GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
base_date="2024-11-17T00:00:00Z"

series_patches() {
	sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$PATCHES/series" | grep -v '^$' || true
}

# Everything that decides what prepare produces.
series_hash() {
	{
		cat "$REPO/kernel/BASE" "$PATCHES/series"
		series_patches | while read -r p; do cat "$PATCHES/$p"; done
	} | sha256sum | cut -d' ' -f1
}

# One line per step of the tree: kernel/BASE, then every patch in order.
# A tree whose list is a prefix of the wanted one only needs the rest.
series_steps() {
	sha256sum < "$REPO/kernel/BASE" | cut -d' ' -f1
	series_patches | while read -r p; do
		echo "$(sha256sum < "$PATCHES/$p" | cut -d' ' -f1) $p"
	done
}

apply_patches() { # apply_patches FIRST_INDEX (0-based into the series)
	local skip=$1 n=0 p
	while read -r p; do
		[ -n "$p" ] || continue
		n=$((n + 1))
		[ "$n" -gt "$skip" ] || continue
		[ -f "$PATCHES/$p" ] || die "series names $p, which does not exist"
		if ! git -C "$SRC" am -q --keep-cr --committer-date-is-author-date "$PATCHES/$p"; then
			git -C "$SRC" am --abort || true
			die "$p does not apply to $DEB_PACKAGE $(dpkg-query -W -f='${Version}' "$DEB_PACKAGE") (series pinned to $DEB_VERSION, base $BASE_COMMIT)"
		fi
	done < <(series_patches)
	series_steps > "$BUILD/src/applied.list"
	echo "$(series_hash) $(git -C "$SRC" rev-parse HEAD)" > "$STAMP"
	step "source: $((n - skip)) patch(es) applied, $n in the series"
}

check_base_version() {
	local have
	have=$(dpkg-query -W -f='${Version}' "$DEB_PACKAGE" 2>/dev/null) ||
		die "$DEB_PACKAGE is not installed; run scripts/setup.sh (make setup)"
	[ -f "$TARBALL" ] || die "$TARBALL missing; reinstall $DEB_PACKAGE"
	if [ "$have" != "$DEB_VERSION" ]; then
		printf 'warning: installed %s %s, series pinned to %s; trying to apply anyway\n' \
			"$DEB_PACKAGE" "$have" "$DEB_VERSION" >&2
	fi
	echo "$have"
}

cmd_prepare() {
	local want have_ver
	want=$(series_hash)
	if [ -d "$SRC/.git" ] && [ -f "$STAMP" ]; then
		local stamp_hash stamp_head
		read -r stamp_hash stamp_head < "$STAMP"
		local head dirty
		head=$(git -C "$SRC" rev-parse HEAD)
		dirty=$(git -C "$SRC" status --porcelain --untracked-files=no)
		if [ "$head" = "$stamp_head" ] && [ -z "$dirty" ] && [ "$stamp_hash" = "$want" ]; then
			step "source: build/src/linux up to date ($(git -C "$SRC" log --oneline base..HEAD | wc -l) patches applied)"
			return
		fi
		# New patches appended to an applied series: apply just those,
		# keeping the tree (and the build's timestamps) as it is.
		local applied=$BUILD/src/applied.list
		if [ "$head" = "$stamp_head" ] && [ -z "$dirty" ] && [ -f "$applied" ] &&
			series_steps | head -n "$(wc -l < "$applied")" | cmp -s - "$applied"; then
			step "source: applying the new patches of the series"
			apply_patches "$(($(wc -l < "$applied") - 1))"
			return
		fi
		if [ "$head" != "$stamp_head" ] || [ -n "$dirty" ]; then
			if [ "$stamp_hash" = "$want" ]; then
				step "source: building your local changes in build/src/linux (make series-export saves them)"
				return
			fi
			die "build/src/linux has local changes and the series changed too.
Save your work with 'make series-export' (or drop it: 'make src-reset') first."
		fi
	fi

	have_ver=$(check_base_version)
	step "source: extracting $DEB_PACKAGE $have_ver"
	rm -rf "$SRC" "$BUILD/src/$TOPDIR" "$STAMP"
	mkdir -p "$BUILD/src"
	# -m: every file gets the extraction time. With the tarball's dates, a
	# file that the previous series patched and this one does not would be
	# older than its object in build/kernel-*, and make would keep the old
	# object (and the old exported header). Newer sources make make rebuild
	# everything once; ccache turns that into about a minute.
	tar -m -xf "$TARBALL" -C "$BUILD/src"
	mv "$BUILD/src/$TOPDIR" "$SRC"

	step "source: creating the base commit"
	git -C "$SRC" init -q -b main
	git -C "$SRC" config core.autocrlf false
	git -C "$SRC" config gc.auto 0  # a background repack of 80k files would steal the build's CPUs
	git -C "$SRC" add -A -f  # Debian's .gitignore ignores the top level
	GIT_AUTHOR_DATE=$base_date GIT_COMMITTER_DATE=$base_date \
		git -C "$SRC" commit -q -m "base: $DEB_PACKAGE $have_ver"
	git -C "$SRC" tag base
	local base_commit
	base_commit=$(git -C "$SRC" rev-parse HEAD)
	if [ -n "${BASE_COMMIT:-}" ] && [ "$base_commit" != "$BASE_COMMIT" ]; then
		printf 'warning: base commit %s differs from the pinned %s (different tarball)\n' \
			"$base_commit" "$BASE_COMMIT" >&2
	fi

	apply_patches 0
}

# Fail when an option of the fragment did not survive olddefconfig: a
# missing dependency would otherwise drop a driver silently.
check_config() {
	local frag=$1 config=$2 bad=0 line sym val
	# shellcheck disable=SC2094 # the loop only reads $frag, twice
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) sym=${line%%=*} val=${line#*=} ;;
		"# CONFIG_"*" is not set") sym=${line#\# } sym=${sym%% *} val=n ;;
		*) continue ;;
		esac
		# The last assignment wins, as in kconfig.
		[ "$(grep -E "^(# )?${sym}[= ]" "$frag" | tail -n1)" = "$line" ] || continue
		if [ "$val" = n ]; then
			grep -q "^$sym=" "$config" || continue
		else
			grep -qxF "$sym=$val" "$config" && continue
		fi
		printf 'config: %s wanted %s, got: %s\n' "$sym" "$val" \
			"$(grep -E "^(# )?${sym}[= ]" "$config" || echo unset)" >&2
		bad=1
	done < "$frag"
	return $bad
}

# What the kernel release says about its source: "-s" and the first 12
# digits of the series hash when build/src/linux is exactly the series,
# "-local" and the tree's commit when it carries changes of its own, so a
# result that records `uname -r` names the code that produced it.
tree_version() {
	local stamp_hash stamp_head
	read -r stamp_hash stamp_head < "$STAMP" 2>/dev/null || true
	if [ "${stamp_hash:-}" = "$(series_hash)" ] &&
		[ "$(git -C "$SRC" rev-parse HEAD)" = "${stamp_head:-}" ] &&
		[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no)" ]; then
		echo "-s${stamp_hash:0:12}"
	else
		echo "-local$(git -C "$SRC" rev-parse --short=12 HEAD)"
	fi
}

kmake() {
	# An explicit LOCALVERSION also keeps setlocalversion from appending
	# "+" for the git tree.
	make -C "$SRC" O="$OUT" -j"${JOBS:-3}" CC="ccache gcc" HOSTCC="ccache gcc" \
		LOCALVERSION="$TREE_VERSION" "$@"
}

cmd_build() {
	local flavor=${1:?usage: kernel.sh build perf|debug}
	[ -f "$REPO/kernel/configs/$flavor.config" ] || die "no kernel/configs/$flavor.config"
	OUT=$BUILD/kernel-$flavor
	mkdir -p "$OUT"
	TREE_VERSION=$(tree_version)

	export CCACHE_BASEDIR=$REPO CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
	export KBUILD_BUILD_TIMESTAMP="$base_date" KBUILD_BUILD_USER=fastpath KBUILD_BUILD_HOST=fastpath

	cat "$REPO/kernel/configs/base.config" "$REPO/kernel/configs/$flavor.config" > "$OUT/fragment.config.new"
	if ! cmp -s "$OUT/fragment.config.new" "$OUT/fragment.config" || [ ! -f "$OUT/.config" ]; then
		step "kernel-$flavor: configuring (allnoconfig + base.config + $flavor.config)"
		mv "$OUT/fragment.config.new" "$OUT/fragment.config"
		kmake -s KCONFIG_ALLCONFIG="$OUT/fragment.config" allnoconfig > "$OUT/config.log" 2>&1 ||
			{ cat "$OUT/config.log"; die "kernel-$flavor: configuration failed"; }
		check_config "$OUT/fragment.config" "$OUT/.config" ||
			{ rm -f "$OUT/fragment.config"; die "kernel-$flavor: fragment options did not stick (missing dependency?)"; }
	else
		rm -f "$OUT/fragment.config.new"
	fi

	step "kernel-$flavor: building $(git -C "$SRC" describe --always --tags 2>/dev/null) (log: $OUT/build.log)"
	local start=$SECONDS
	# One progress line per 500 objects keeps CI logs readable.
	if ! kmake bzImage modules 2>&1 | tee "$OUT/build.log" |
		awk '/^  (CC|AS|LD)/ { if (++n % 500 == 0) { printf "    %d objects compiled\n", n; fflush() } }'; then
		grep -E -B2 -A8 '(error:|Error [0-9])' "$OUT/build.log" | head -60 >&2
		die "kernel-$flavor: build failed, see $OUT/build.log"
	fi

	# A guest booted from this build (make shell, a demo) loads its modules
	# from mods/ as it runs: reinstall only when the build changed them,
	# so a no-op rebuild (make install, make docs-check) does not pull
	# mods/ and hdr/ from under it.
	local installed
	installed="$TREE_VERSION $(git -C "$SRC" rev-parse HEAD)"
	if [ "$(cat "$OUT/installed.stamp" 2>/dev/null)" = "$installed" ] &&
		[ -d "$OUT/mods" ] && [ -d "$OUT/hdr" ] &&
		[ ! "$OUT/arch/x86/boot/bzImage" -nt "$OUT/installed.stamp" ] &&
		[ ! "$OUT/include/generated/uapi" -nt "$OUT/installed.stamp" ] &&
		[ -z "$(find "$OUT" -name '*.ko' -newer "$OUT/installed.stamp" -print -quit)" ]; then
		step "kernel-$flavor: unchanged, modules and headers kept"
	else
		rm -rf "$OUT/mods" "$OUT/hdr" "$OUT/installed.stamp"
		kmake -s INSTALL_MOD_PATH="$OUT/mods" INSTALL_MOD_STRIP=1 modules_install > /dev/null
		kmake -s INSTALL_HDR_PATH="$OUT/hdr" headers_install > /dev/null
		echo "$installed" > "$OUT/installed.stamp"
	fi
	kmake -s kernelrelease > "$OUT/release"
	step "kernel-$flavor: $(cat "$OUT/release") built in $((SECONDS - start))s"
}

cmd_export() {
	[ -d "$SRC/.git" ] || die "no source tree; run make prepare first"
	[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no)" ] ||
		die "build/src/linux has uncommitted changes; commit them there first"
	# A series changed under the tree (a merge, a pull, another worktree's
	# export) would be overwritten with the tree's older patches.
	local stamp_hash stamp_head
	read -r stamp_hash stamp_head < "$STAMP" 2>/dev/null || true
	[ "${stamp_hash:-}" = "$(series_hash)" ] ||
		die "kernel/patches changed since build/src/linux was prepared from it; exporting would
overwrite those changes with the tree's older patches. Save your commits
(git -C build/src/linux format-patch base..), run 'make src-reset', apply them again, then export."
	/usr/bin/python3 "$REPO/scripts/series-export.py" "$SRC" "$PATCHES" "${1:-}"
	series_steps > "$BUILD/src/applied.list"
	echo "$(series_hash) $(git -C "$SRC" rev-parse HEAD)" > "$STAMP"
}

cmd_reset() {
	rm -rf "$SRC" "$STAMP"
	cmd_prepare
}

case "${1:-}" in
prepare) cmd_prepare ;;
build) shift; cmd_prepare; cmd_build "$@" ;;
export) shift; cmd_export "$@" ;;
version) tree_version ;;
reset) cmd_reset ;;
*) die "usage: kernel.sh prepare | build perf|debug | export [TOPIC] | reset" ;;
esac
