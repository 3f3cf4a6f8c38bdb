#!/bin/bash
# make demo: the tour (demo/tour.sh) on the perf kernel with the test
# profile's devices.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
vm/run -k perf -p test -t "${DEMO_TIMEOUT:-1200}" -n demo -- demo/tour.sh
