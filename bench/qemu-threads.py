#!/usr/bin/env python3
"""CPU time of each QEMU thread, per phase a guest names in a file.

    python3 bench/qemu-threads.py OUTDIR NAME

Waits for the QEMU of `vm/run -n NAME` (found by its console log,
results/vm/NAME/console.log, and the -name ...,debug-threads=on vm/run
gives it), then every 0.25 s reads OUTDIR/phase (written by the
guest through results/) and adds each thread's CPU time since the last
sample to the phase. Ends when the phase is "end" or QEMU exits. With
OUTDIR/runs.txt ("RUN PHASE IOPS" lines, from the guest), writes
OUTDIR/stall.json and OUTDIR/stall.md: per phase, each thread's busy share
of the wall clock and the IOPS, medians over the runs. bench/userq-stall.sh
runs it.
"""
import collections
import glob
import json
import os
import statistics
import sys
import time

TICK = os.sysconf('SC_CLK_TCK')


def find_qemu(name, timeout=120):
    console = f'/vm/{name}/console.log'.encode()
    end = time.time() + timeout
    while time.time() < end:
        for p in os.listdir('/proc'):
            if not p.isdigit():
                continue
            try:
                cmd = open(f'/proc/{p}/cmdline', 'rb').read().split(b'\0')
            except OSError:
                continue
            if cmd and cmd[0].endswith(b'qemu-system-x86_64') and \
                    b'fastpath,debug-threads=on' in cmd and \
                    any(a.endswith(console) for a in cmd):
                return p
        time.sleep(0.2)
    sys.exit(f'qemu-threads: no QEMU of vm/run -n {name} within 120 s')


def sample(pid):
    """tid -> (thread name, CPU seconds)"""
    d = {}
    for t in glob.glob(f'/proc/{pid}/task/*'):
        try:
            name = open(t + '/comm').read().strip()
            st = open(t + '/stat').read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        # utime, stime: fields 14 and 15 of stat, 12 and 13 after the comm
        d[t.rsplit('/', 1)[1]] = (name, (int(st[11]) + int(st[12])) / TICK)
    return d


def kind(name):
    if '/TCG' in name:
        return 'vCPU threads'
    if name.startswith('qemu-system'):
        return 'main loop (device models)'
    return 'other threads'


def main():
    out, name = sys.argv[1], sys.argv[2]
    pid = find_qemu(name)
    # phase -> segment index -> thread kind -> CPU seconds; wall per segment
    cpu = collections.defaultdict(lambda: collections.defaultdict(float))
    wall = collections.defaultdict(float)
    seg = 0
    last_phase = None
    prev, pt = sample(pid), time.time()
    while os.path.exists(f'/proc/{pid}'):
        time.sleep(0.25)
        try:
            phase = open(os.path.join(out, 'phase')).read().strip()
        except OSError:
            phase = '?'
        cur, t = sample(pid), time.time()
        if phase != last_phase:
            seg += 1
            last_phase = phase
        key = (phase, seg)
        for tid, (name, c) in cur.items():
            if tid in prev:
                cpu[key][kind(name)] += c - prev[tid][1]
        wall[key] += t - pt
        prev, pt = cur, t
        if phase == 'end':
            break
    runs = collections.defaultdict(list)
    try:
        for line in open(os.path.join(out, 'runs.txt')):
            r, k, iops = line.split()
            runs[k].append(int(iops))
    except OSError:
        pass
    kinds = ['vCPU threads', 'main loop (device models)', 'other threads']
    res = {}
    for phase in ('k0', 'k1'):
        segs = [k for k in wall if k[0] == phase and wall[k] > 1]
        if not segs:
            continue
        res[phase] = {
            'segments': len(segs),
            'busy_pct': {kd: statistics.median(100 * cpu[s][kd] / wall[s] for s in segs)
                         for kd in kinds},
            'iops': runs.get(phase, []),
            'iops_median': statistics.median(runs[phase]) if runs.get(phase) else None,
        }
    json.dump(res, open(os.path.join(out, 'stall.json'), 'w'), indent=1)
    names = {'k0': 'blk-mq `ng` passthrough (-k0)', 'k1': 'user queue (-k1)'}
    md = ['# QEMU threads while iobench -c32 -s32 runs (bench/userq-stall.sh)', '',
          'Share of the wall clock each kind of QEMU thread was on a host CPU, '
          'median over the runs; the guest task polls without sleeping, so '
          'its vCPU thread below 100% was blocked (QEMU\'s big lock).', '',
          '| path | IOPS | ' + ' | '.join(kinds) + ' |',
          '|---|---:|' + '---:|' * len(kinds)]
    for phase, r in res.items():
        md.append(f'| {names[phase]} | {r["iops_median"]} | ' +
                  ' | '.join(f'{r["busy_pct"][kd]:.0f}%' for kd in kinds) + ' |')
    open(os.path.join(out, 'stall.md'), 'w').write('\n'.join(md) + '\n')


if __name__ == '__main__':
    main()
