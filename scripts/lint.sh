#!/bin/bash
# make lint: checkpatch --strict over every patch of the series, shellcheck
# over the scripts, the C tools built with -Wall -Wextra -Werror, and their
# man pages (mandoc's and groff's warnings, OPTIONS against --help).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
# checkpatch's helpers (spdxcheck.py) need Debian's python3 with python3-ply.
export PATH=/usr/bin:$PATH
fail=0

step "lint: checkpatch --strict over the series"
checkpatch=$BUILD/src/linux/scripts/checkpatch.pl
[ -x "$checkpatch" ] || die "no kernel source for checkpatch; run make prepare"
# checkpatch_noise PATCH: checkpatch's report on PATCH less two kinds of
# line that are not findings:
#  - MACRO_ARG_REUSE on a for_each iterator macro, which is what every such
#    macro in the kernel does (bio_for_each_segment() names its iterator
#    and bio in each clause; its arguments are lvalues by contract), keyed
#    on the #define the report points at;
#  - FILE_PATH_CHANGES when new_files_covered (below).
checkpatch_noise() {
	local line n
	while IFS= read -r line; do
		if [[ $line =~ :([0-9]+):\ CHECK:\ Macro\ argument\ reuse ]]; then
			n=${BASH_REMATCH[1]}
			sed -n "${n}p" "$1" | grep -qE '^\+#define [a-z_]*for_each[a-z_]*\(' && continue
		fi
		if [[ $line == *"does MAINTAINERS need updating?"* ]] && new_files_covered "$1"; then
			continue
		fi
		printf '%s\n' "$line"
	done
}

# new_files_covered PATCH: FILE_PATH_CHANGES asks whether MAINTAINERS needs
# updating for the files a patch adds; it does not when an existing entry's
# maintainer covers each of them (Documentation/block/ is the block
# layer's), as get_maintainer.pl in the patched tree says.
new_files_covered() {
	local f
	while read -r f; do
		[ -n "$(cd "$BUILD/src/linux" && perl scripts/get_maintainer.pl --nol --nor \
			--nogit --nogit-fallback --norolestats -f "$f" 2>/dev/null)" ] || return 1
	done < <(awk '/^diff --git /{f=substr($4, 3)} /^new file mode/{print f}' "$1")
}

n=0
while read -r p; do
	n=$((n + 1))
	# UNKNOWN_COMMIT_ID: the tree is Debian's source tarball, without the
	# upstream history that the ids in Fixes: tags and commit references
	# name; they are checked against upstream's logs when written.
	# its exit status counts what the filter may drop: judge by the output
	out=$("$checkpatch" --strict --quiet --no-summary --terse --max-line-length=100 \
		--ignore UNKNOWN_COMMIT_ID \
		--root="$BUILD/src/linux" "$REPO/kernel/patches/$p" 2>&1 |
		checkpatch_noise "$REPO/kernel/patches/$p")
	if [ -n "$out" ]; then
		printf '%s\n%s\n' "$p:" "$out"
		fail=1
	fi
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$REPO/kernel/patches/series")
echo "    $n patches checked"

step "lint: shellcheck"
mapfile -t scripts < <(cd "$REPO" && { git ls-files; git ls-files -o --exclude-standard; } |
	while read -r f; do
		case "$f" in *.patch|*.out|*.md|*.py|*.c|*.h|*.json|*.config) continue ;; esac
		[ -f "$f" ] && head -n1 "$f" | grep -qE '^#!.*(ba)?sh|shellcheck shell=' && echo "$f"
	done | sort -u)
(cd "$REPO" && shellcheck -x -e SC1090,SC1091,SC2034,SC2154 "${scripts[@]}") || fail=1
echo "    ${#scripts[@]} scripts checked"

step "lint: C tools with -Wall -Wextra -Werror, against the series' UAPI headers"
# The tools are built against the patched kernel's headers by make test and
# make demo; without them the passthrough code would compile out (or not at
# all), so lint checks exactly that build. headers_install needs no kernel
# build, only the prepared source.
hdr=$BUILD/lint-hdr
make -s -C "$BUILD/src/linux" O="$hdr/obj" INSTALL_HDR_PATH="$hdr" headers_install > /dev/null ||
	die "lint: headers_install from build/src/linux failed"
make -s -C "$REPO/tools" O="$BUILD/lint-tools" KHDR="$hdr/include" > /dev/null || fail=1
# The QEMU plugin of make bench-insn, a host-side shared object.
make -s -C "$REPO/bench/insn-profile" O="$BUILD/lint-tools" > /dev/null || fail=1

step "lint: man pages"
# Each page of tools/man twice: mandoc's linter, failing on its WARNING,
# ERROR and UNSUPP messages (-W warning) but not on STYLE ones, which are
# mdoc(7) conventions and whether a page it names is installed here; and
# groff as man(1) renders it, failing on groff's "mac" warnings (an
# undefined macro, one misused), not on the layout ones --warnings=all
# adds ("cannot adjust line"), which depend on the terminal's width.
pages=("$REPO"/tools/man/*.[1-8])
for page in "${pages[@]}"; do
	out=$({
		mandoc -T lint -W warning "$page" || echo "mandoc -T lint: exit status $?"
		man --warnings -l "$page" > /dev/null
	} 2>&1)
	if [ -n "$out" ]; then
		printf '%s\n' "${page#"$REPO"/}:" "$out"
		fail=1
	fi
done
echo "    ${#pages[@]} pages checked"
# ... and each page's OPTIONS against what its tool's --help lists, both ways.
/usr/bin/python3 "$REPO/scripts/man-options.py" "$BUILD/lint-tools" || fail=1

if [ $fail = 0 ]; then step "lint: clean"; else step "lint: FAILED"; fi
exit $fail
