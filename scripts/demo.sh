#!/bin/bash
# make demo: the tour (demo/tour.sh) on the perf kernel with the test
# profile's devices. FASTPATH_VM_NAME names the guest (results/vm/NAME,
# demo by default), for a run beside others.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
vm/run -k perf -p test -t "${DEMO_TIMEOUT:-1200}" -n "${FASTPATH_VM_NAME:-demo}" -- demo/tour.sh
