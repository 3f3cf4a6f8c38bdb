#!/bin/bash
# Print, as JSON, what a result was produced from: the project commit and
# whether the work tree had uncommitted changes, the series hash, the
# kernel release (which carries the series hash, see kernel.sh version),
# and the QEMU version. scripts/test.sh and scripts/bench.sh store it with
# every result.
#
#   scripts/provenance.sh FLAVOR
set -euo pipefail
. "$(dirname "$0")/lib.sh"
flavor=${1:?usage: provenance.sh perf|debug}

commit=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=false
[ -z "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] || dirty=true
series=$(cut -d' ' -f1 "$BUILD/src/applied" 2>/dev/null || echo unknown)
release=$(cat "$BUILD/kernel-$flavor/release" 2>/dev/null || echo unknown)
qemu=$(qemu-system-x86_64 --version 2>/dev/null | head -n1 || echo unknown)

/usr/bin/python3 - "$commit" "$dirty" "$series" "$release" "$qemu" "$flavor" <<'PY'
import json, sys
commit, dirty, series, release, qemu, flavor = sys.argv[1:]
print(json.dumps({"project_commit": commit, "project_dirty": dirty == "true",
                  "series_hash": series, "kernel_flavor": flavor,
                  "kernel_release": release, "qemu_version": qemu}, indent=2))
PY
