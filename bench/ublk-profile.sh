#!/bin/bash
# Where the time of a QD1 `null --memcpy` write goes under ublkd's default
# mode (two copies) and NEED_GET_DATA (one): perf samples the whole guest
# (cpu-clock, both CPUs) while fio writes to each device, as
# bench/scenarios/ublk.sh runs it, and the samples become microseconds per
# write by function. bench/insn-ublk.sh counts instructions; under TCG an
# instruction's cost depends on its kind (a vector store, one step of a
# `rep movs`), so this is the profile that explains a latency ratio.
#
#   vm/run -k perf -p bench -t 900 -n ublk-profile -- bench/ublk-profile.sh [BS...]
#
# BS defaults to 512k 1m. Output in $FASTPATH_RESULTS/ublk-profile:
# profile.md (the table: medians of RUNS runs, default 3), profile.json, and
# per run the fio JSON and perf's report.
set -euo pipefail

REPO=${FASTPATH_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# shellcheck source=tests/common/rc
. "$REPO/tests/common/rc"
FREQ=999
RUNTIME=${RUNTIME:-5}
RUNS=${RUNS:-3}	# per mode and size, ABBA
out=${FASTPATH_RESULTS:-$REPO/results}/ublk-profile
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(512k 1m)

die() {
	echo "ublk-profile: $*" >&2
	exit 1
}

command -v perf > /dev/null || die "no perf in the guest (apt-get install linux-perf on the host)"
[ -x "$TOOLS/ublkd" ] || die "$TOOLS/ublkd not built (make tools)"
modprobe ublk_drv || die "no ublk_drv module"
mkdir -p "$out"
rm -f "$out"/*

# shellcheck source=bench/ublk-server.sh
. "$REPO/bench/ublk-server.sh"
declare -A DEV
for v in default gd; do
	DEV[$v]=$(ublk_memcpy_dev "$v") || die "ublkd add ($v mode) failed"
done
trap '"$TOOLS/ublkd" del -a' EXIT

for run in $(seq "$RUNS"); do
for bs in "${sizes[@]}"; do
	order=(default gd)
	[ $((run % 2)) = 0 ] && order=(gd default)
	for v in "${order[@]}"; do
		name=$v-$bs.$run
		echo "ublk-profile: $name on ${DEV[$v]}"
		# perf's data goes to the guest's scratch (tmpfs), not to the
		# results share: writing it over 9p would be sampled too.
		data=${TMPDIR:-/tmp}/ublk-profile-$name.data
		perf record -q -e cpu-clock -F "$FREQ" -a -o "$data" -- \
			fio --name=ublk --filename="${DEV[$v]}" --rw=randwrite --bs="$bs" \
			--iodepth=1 --ioengine=libaio --direct=1 --numjobs=1 --time_based \
			--runtime="$RUNTIME" --output-format=json --output="$out/$name.fio.json" \
			> /dev/null 2>&1 || die "perf record or fio failed for $name"
		# One line per symbol: samples, DSO, symbol. Unresolved
		# addresses (libc's internal memcpy variants) keep their DSO.
		perf report -q -i "$data" --stdio --sort dso,sym -F sample,dso,sym \
			> "$out/$name.report" 2> /dev/null || die "perf report failed for $name"
		rm -f "$data"
	done
done
done

/usr/bin/python3 - "$out" "$FREQ" "$RUNS" "${sizes[@]}" <<'EOF'
import json, os, re, statistics, sys

out, freq, runs, sizes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
# Groups, first match on "dso symbol" wins.
GROUPS = [
    ('idle', r'\[kernel\.kallsyms\] \[k\] (default_idle|pv_native_safe_halt|.*idle|cpuidle_.*|native_safe_halt)$'),
    ('kernel: copy into the server buffer (ublk_copy_user_pages)', r'.*\[k\] (ublk_copy_user_pages|rep_movs_alternative|copy_user_generic|copy_page_from_iter|_copy_from_iter|memcpy_orig|__memcpy)$'),
    ('kernel: pinning and dirtying fio\'s pages', r'.*\[k\] (gup_.*|try_grab_folio.*|folio_mark_dirty|set_page_dirty|folio_mapping|__iov_iter_get_pages_alloc|iov_iter_.*|bio_iov_iter_get_pages|unpin_user_.*|bio_release_pages|__bio_release_pages)$'),
    ('ublkd: libc (the target\'s memcpy)', r'libc\.so\.6 .*'),
    ('ublkd: other', r'ublkd .*'),
    ('fio', r'(fio|libaio\.so.*) .*'),
    ('kernel: other', r'\[kernel\.kallsyms\] .*'),
    ('other user space', r'.*'),
]
GRE = [(g, re.compile(r)) for g, r in GROUPS]

def parse(name):
    fio = json.load(open(os.path.join(out, f'{name}.fio.json')))['jobs'][0]['write']
    groups, top = {}, []
    for line in open(os.path.join(out, f'{name}.report')):
        m = re.match(r'\s*(\d+)\s+(\S+)\s+(.*\S)\s*$', line)
        if not m:
            continue
        n, dso, sym = int(m.group(1)), m.group(2), m.group(3)
        key = f'{dso} {sym}'
        g = next(g for g, r in GRE if r.match(key))
        groups[g] = groups.get(g, 0) + n
        top.append((n, key))
    ios = fio['total_ios']
    us = lambda n: n / freq / ios * 1e6
    return {'ios': ios, 'lat_us': fio['lat_ns']['mean'] / 1000,
            'groups': {g: us(n) for g, n in groups.items()},
            'top': [(us(n), k) for n, k in sorted(top, reverse=True)[:12]]}

lines = ['# ublkd `null --memcpy`, QD1 random writes: where the time goes', '',
         f'perf record -e cpu-clock -F {freq} -a (both guest CPUs) during each fio run',
         f'(bench/ublk-profile.sh), {runs} runs per mode and size, ABBA; samples /',
         'frequency / writes = CPU microseconds per write, the median of the runs',
         'per row. Idle is the two CPUs\' time with nothing to run.', '']
def median_of(mode, bs):
    """The runs of one mode and size: every figure their median."""
    rs = [parse(f'{mode}-{bs}.{n}') for n in range(1, runs + 1)]
    names = {g for r in rs for g in r['groups']}
    return {'runs': rs, 'lat_us': statistics.median(r['lat_us'] for r in rs),
            'groups': {g: statistics.median(r['groups'].get(g, 0.0) for r in rs)
                       for g in names},
            'top': rs[0]['top']}

res = {}
for bs in sizes:
    d, g = median_of('default', bs), median_of('gd', bs)
    res[bs] = {'default': d, 'gd': g}
    lines += [f'## {bs}', '',
              f'mean latency (median of {runs} runs): default {d["lat_us"]:.0f} us, '
              f'NEED_GET_DATA {g["lat_us"]:.0f} us ({g["lat_us"] / d["lat_us"]:.2f}x); per run: default '
              + ', '.join(f'{r["lat_us"]:.0f}' for r in d['runs']) + ', gd '
              + ', '.join(f'{r["lat_us"]:.0f}' for r in g['runs']), '',
              '| CPU us per write | default | NEED_GET_DATA | default minus gd |',
              '|---|---:|---:|---:|']
    busy_d = busy_g = 0.0
    for name, _ in GROUPS:
        a, b = d['groups'].get(name, 0.0), g['groups'].get(name, 0.0)
        if name != 'idle':
            busy_d, busy_g = busy_d + a, busy_g + b
        lines.append(f'| {name} | {a:.1f} | {b:.1f} | {a - b:.1f} |')
    lines += [f'| **busy** | {busy_d:.1f} | {busy_g:.1f} | {busy_d - busy_g:.1f} |', '']
    for mode, r in (('default', d), ('NEED_GET_DATA', g)):
        lines += [f'Top symbols, {mode}, run 1: ' + '; '.join(f'`{k}` {u:.1f}' for u, k in r['top']), '']
open(os.path.join(out, 'profile.md'), 'w').write('\n'.join(lines) + '\n')
json.dump(res, open(os.path.join(out, 'profile.json'), 'w'), indent=1)
print('\n'.join(lines))
EOF
