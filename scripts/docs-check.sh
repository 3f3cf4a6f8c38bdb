#!/bin/bash
# make docs-check [DOC=name]: boot the perf kernel with the test profile's
# devices (the VM make shell gives a reader) and run the guides' examples
# there (docs/check). Logs and the extracted scripts: results/docs/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step "docs-check: the examples of ${*:-every guide} in the perf guest"
vm/run -k perf -p test -t "${DOCS_TIMEOUT:-2400}" -n "${FASTPATH_VM_NAME:-docs}" -- docs/check "$@"
