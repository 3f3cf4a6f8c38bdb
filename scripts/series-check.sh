#!/bin/bash
# make series-check: prove the series is bisectable and adds no warnings.
#
# For every patch, in order, in build/src/linux: check it out, build the perf
# kernel incrementally (bzImage + modules, in build/kernel-perf), then run
# sparse (C=2) and W=1 on every .c file the patch touches and compare with
# the same files at the base commit: a warning the base did not have fails
# the check. checkpatch --strict is make lint's job. The tree is left at the
# series' last commit and the perf build matches it again.
#
# FROM=REV checks only the commits after REV (patches appended to a series
# whose earlier part passed), against REV's warnings rather than the
# base's; the perf build should be at REV or later already, as a previous
# series-check or make kernel-perf leaves it, so that only what the new
# patches touch is rebuilt.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SRC=$BUILD/src/linux
OUT=$BUILD/kernel-perf
[ -f "$OUT/.config" ] || die "build the perf kernel first (make kernel-perf)"
[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no)" ] ||
	die "build/src/linux has uncommitted changes"
export CCACHE_BASEDIR=$REPO CCACHE_NOHASHDIR=1
head=$(git -C "$SRC" rev-parse HEAD)
trap 'git -C "$SRC" checkout -q "$head"' EXIT

# The release string of the series head (kernel.sh version), so that the
# build left behind is the one make kernel-perf would make.
version=$("$REPO/scripts/kernel.sh" version)
kmake() {
	make -C "$SRC" O="$OUT" -j"${JOBS:-3}" CC="ccache gcc" LOCALVERSION="$version" "$@"
}

# Warnings of sparse and W=1 for FILES (.c), without line numbers so that
# moved code does not count as new. Only files the perf config builds (their
# object exists after the full build): one behind an option that is off
# (null_blk/zoned.c without CONFIG_BLK_DEV_ZONED) cannot be built alone.
warnings() {
	local f objs=()
	for f in "$@"; do
		[ -f "$SRC/$f" ] && [ -f "$OUT/${f%.c}.o" ] && objs+=("${f%.c}.o")
	done
	[ ${#objs[@]} -gt 0 ] || return 0
	kmake -s C=2 W=1 "${objs[@]}" 2>&1 |
		{ grep -E 'warning:|error:' || true; } | sed -E 's/:[0-9]+:[0-9]+:/:/' | sort -u
}

from=$(git -C "$SRC" rev-parse --verify "${FROM:-base}^{commit}") ||
	die "FROM=${FROM:-}: not a commit of build/src/linux"
mapfile -t commits < <(git -C "$SRC" rev-list --reverse "$from..HEAD")
[ ${#commits[@]} -gt 0 ] || die "no commits after ${FROM:-base}"
mapfile -t touched < <(git -C "$SRC" diff --name-only "$from" HEAD -- '*.c')
step "series-check: warnings of ${FROM:-base} in ${#touched[@]} touched file(s)"
git -C "$SRC" checkout -q "$from"
warnings "${touched[@]}" > "$OUT/series-check.base"

fail=0 n=0
for c in "${commits[@]}"; do
	n=$((n + 1))
	git -C "$SRC" checkout -q "$c"
	subject=$(git -C "$SRC" log -1 --format=%s)
	step "series-check: [$n/${#commits[@]}] $subject"
	if ! kmake -s bzImage modules > "$OUT/series-check.log" 2>&1; then
		grep -E 'error' "$OUT/series-check.log" | head -20
		echo "    does not build"
		fail=1
		continue
	fi
	mapfile -t files < <(git -C "$SRC" diff --name-only "$c^" "$c" -- '*.c')
	mapfile -t new < <(warnings "${files[@]}" | comm -23 - "$OUT/series-check.base")
	if [ ${#new[@]} -gt 0 ]; then
		printf '    new: %s\n' "${new[@]}"
		fail=1
	else
		echo "    builds; no new sparse/W=1 warnings in ${#files[@]} touched .c file(s)"
	fi
done
git -C "$SRC" checkout -q "$head"
trap - EXIT
step "series-check: rebuilding the series head"
kmake -s bzImage modules > /dev/null
if [ $fail = 0 ]; then step "series-check: clean"; else step "series-check: FAILED"; fi
exit $fail
