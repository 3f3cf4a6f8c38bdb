# shellcheck shell=bash
# Helpers shared by the host-side scripts. Source it; it sets REPO.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${FASTPATH_BUILD:-$REPO/build}
RESULTS=${FASTPATH_RESULTS:-$REPO/results}
export REPO BUILD RESULTS

# One progress line per step, so a CI log shows where time goes.
step() {
	printf '==> [%(%H:%M:%S)T] %s\n' -1 "$*"
}

die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# kernel/BASE is plain KEY=VALUE lines.
load_base() {
	# shellcheck source=../kernel/BASE
	. "$REPO/kernel/BASE"
}
