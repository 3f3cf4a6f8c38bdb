#!/usr/bin/env python3
"""Per-phase medians from the traces bench/breakdown.sh leaves behind.

    python3 bench/breakdown.py [DIR] [--json OUT] [--md OUT]

DIR (default results/breakdown) holds CASE.trace (ftrace, x86-tsc clock,
function entries + io_uring/power/sched events), CASE.json (the untraced
iobench run) and CASE.stat.  For every case the IOs of the iobench worker
are cut at each __x64_sys_io_uring_enter entry (QD1: one syscall submits one
IO and waits for it), and the first hit of each phase marker inside an IO
gives the phase boundaries:

  enter  -> issue     io_uring front end (SQE fetch, prep, issue call)
  issue  -> queue_rq  block layer / driver: bio or request, mapping, dispatch
  queue_rq -> notify  virtio_queue_rq: virtqueue add, kick
  notify -> irq       wait for the device (idle time reported apart)
  irq    -> tw_add    hard-irq completion: vring_interrupt .. task_work add
  tw_add -> tw_run    wake-up, context switch back to the submitter
  tw_run -> cqe       task_work: completion handler, CQE fill
  cqe    -> enter'    syscall exit, user reap, next SQE, next syscall entry
  (polled cases: notify -> done is the polling loop; the irq and task_work
   markers do not occur)

Under icount (1 instruction = 1 ns) a busy interval is an instruction count;
idle time (power:cpu_idle) passes in real time and is subtracted.  Every
traced function entry adds the tracer's own instructions; the per-event cost
is estimated by comparing the traced busy cycle with the untraced run's busy
ns/IO and divided out ("corrected" columns).
"""
import argparse
import json
import os
import re
import statistics
import sys

LINE = re.compile(r'^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+'
                  r'(?P<ts>\d+(?:\.\d+)?):\s+(?P<what>[^:\s]+):?\s?(?P<rest>.*)$')

# marker name -> functions (first hit inside an IO wins)
MARKERS = {
    'enter': ['__x64_sys_io_uring_enter'],
    'issue': ['io_read', 'io_uring_cmd'],
    'queue_rq': ['virtio_queue_rq', 'virtio_queue_rqs'],
    'notify': ['vp_notify'],
    'irq': ['vring_interrupt'],
    'tw_add': ['__io_req_task_work_add'],
    'tw_run': ['tctx_task_work'],
    'done': ['io_req_rw_complete', 'io_uring_cmd_work', 'io_do_iopoll'],
    'cqe': ['__io_submit_flush_completions'],
}
FUNC_ROLE = {f: m for m, fs in MARKERS.items() for f in fs}
PHASES = [
    ('enter', 'issue', 'io_uring front end (enter -> issue)'),
    ('issue', 'queue_rq', 'blk/driver submit (issue -> virtio_queue_rq)'),
    ('queue_rq', 'notify', 'virtio_queue_rq -> vp_notify'),
    ('notify', 'irq', 'device + wait (vp_notify -> vring_interrupt)'),
    ('irq', 'tw_add', 'hard-irq completion (vring_interrupt -> task_work add)'),
    ('tw_add', 'tw_run', 'irq exit, rest of submit, wait/wake-up (-> tctx_task_work)'),
    ('tw_run', 'cqe', 'task_work completion (-> CQE flush)'),
    ('notify', 'done', 'polled: vp_notify -> first io_do_iopoll'),
    ('done', 'cqe', 'polled: poll loop until CQE flush'),
    ('cqe', 'next', 'return to user, reap, next enter'),
]
COUNT_EVENTS = ['io_uring_queue_async_work', 'io_wq_submit_work', 'io_queue_iowq',
                'io_uring_task_add', 'io_uring_req_failed', 'blk_mq_run_hw_queue',
                'blk_mq_insert_request', 'blk_mq_try_issue_directly',
                'blk_mq_dispatch_rq_list', 'blk_mq_sched_dispatch_requests',
                'blk_queue_enter', '__blk_mq_alloc_requests', 'blk_execute_rq_nowait',
                'blk_mq_alloc_request', 'blk_rq_map_user_iov', 'blk_rq_unmap_user',
                'bio_iov_iter_get_pages', 'blk_mq_submit_bio', 'virtio_queue_rqs',
                'blk_mq_end_request', 'blk_mq_end_request_batch', 'sched_switch',
                'io_cqring_wait', 'blk_mq_complete_request', 'virtblk_complete_batch',
                'blk_mq_flush_plug_list', 'virtio_queue_rq', 'tctx_task_work']


def parse(path):
    """Yield (ts, cpu, pid, comm, what, rest) for each trace line."""
    with open(path, errors='replace') as f:
        for line in f:
            if line.startswith('#'):
                continue
            m = LINE.match(line)
            if not m:
                continue
            ts = m['ts']
            ts = float(ts) * 1e9 if '.' in ts else int(ts)
            yield ts, int(m['cpu']), int(m['pid']), m['comm'], m['what'], m['rest']


def tsc_scale(path):
    """TSC units per ns from the two breakdown-clock markers (1.0 if absent)."""
    marks = []
    for ts, _cpu, _pid, _comm, what, rest in parse(path):
        if what == 'tracing_mark_write' and 'breakdown-clock' in rest:
            marks.append((ts, int(rest.split('mono_ns=')[1].split()[0])))
            if len(marks) == 2:
                break
    if len(marks) < 2 or marks[1][1] == marks[0][1]:
        return 1.0
    return (marks[1][0] - marks[0][0]) / (marks[1][1] - marks[0][1])


def read_kv(path):
    kv = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if '=' in line:
                    k, v = line.rstrip('\n').split('=', 1)
                    kv[k] = v
    return kv


def analyse(tracefile, ncpu=2, warmup=0.1):
    scale = tsc_scale(tracefile)
    events = list(parse(tracefile))
    # the worker: the task that enters io_uring most often
    enters = {}
    for e in events:
        if e[4] == '__x64_sys_io_uring_enter':
            enters[e[2]] = enters.get(e[2], 0) + 1
    if not enters:
        return None
    worker = max(enters, key=enters.get)
    wcpu = None
    ios, cur = [], None
    ncpus = ncpu
    idle_cpus = set()
    all_idle_since = None
    for ts, cpu, pid, _comm, what, rest in events:
        ts = ts / scale
        if what == 'cpu_idle':
            # under icount only time with every vCPU halted is real time
            st = int(re.search(r'state=(\d+)', rest).group(1))
            if st == 4294967295:
                if all_idle_since is not None and cur is not None:
                    cur['idle'] += ts - max(all_idle_since, cur['t']['enter'])
                all_idle_since = None
                idle_cpus.discard(cpu)
            else:
                idle_cpus.add(cpu)
                if len(idle_cpus) == ncpus:
                    all_idle_since = ts
            continue
        if what == 'vring_interrupt' and cur is not None:
            cur['irq_cpu'] = cpu
        if what == '__x64_sys_io_uring_enter' and pid == worker:
            wcpu = cpu
            if cur is not None:
                cur['t']['next'] = ts
                ios.append(cur)
            cur = {'t': {'enter': ts}, 'n': 0, 'idle': 0.0, 'cnt': {}, 'ev': [],
                   'cpu': cpu, 'irq_cpu': None}
            continue
        if cur is None:
            continue
        if what == 'tracing_mark_write':
            continue
        cur['n'] += 1
        cur['ev'].append((ts, what))
        role = FUNC_ROLE.get(what)
        if role and role not in cur['t']:
            # the CQE flush that counts is the one after completion
            if role == 'cqe' and 'done' not in cur['t']:
                pass
            else:
                cur['t'][role] = ts
        if what in COUNT_EVENTS:
            cur['cnt'][what] = cur['cnt'].get(what, 0) + 1
    # the last IO may be cut by a full buffer; drop warm-up IOs too
    ios = ios[int(len(ios) * warmup):]
    ios = [io for io in ios if 'notify' in io['t']]
    return {'worker': worker, 'cpu': wcpu, 'scale': scale, 'ios': ios}


def events_between(io, a, b):
    ta, tb = io['t'][a], io['t'][b]
    return sum(1 for ts, _w in io['ev'] if ta <= ts < tb) + (1 if a == 'enter' else 0)


def summarise(name, res, stat, js):
    ios = res['ios']
    out = {'case': name, 'ios_traced': len(ios), 'worker_cpu': res['cpu'],
           'tsc_per_ns': round(res['scale'], 4)}
    cycle = [io['t']['next'] - io['t']['enter'] for io in ios]
    idle = [io['idle'] for io in ios]
    busy = [c - i for c, i in zip(cycle, idle)]
    nev = [io['n'] + 1 for io in ios]
    out['traced_cycle_ns'] = statistics.median(cycle)
    out['traced_idle_ns'] = statistics.median(idle)
    out['traced_idle_mean_ns'] = statistics.mean(idle)
    out['slept_share'] = round(sum(1 for io in ios if io['cnt'].get('sched_switch')) / len(ios), 3)
    out['traced_busy_ns'] = statistics.median(busy)
    out['events_per_io'] = statistics.median(nev)
    # untraced totals
    if js:
        # per-second samples; the first second is warm-up
        smp = js.get('samples') or [js['iops']]
        out['iops_samples'] = smp
        out['iops'] = statistics.median(smp[1:] if len(smp) > 2 else smp)
        out['ns_per_io'] = 1e9 / out['iops'] if out['iops'] else None
        ios_total = js['ios']
        idle_j = int(stat.get('idle_jiffies', 0))
        tck = int(stat.get('clk_tck', 100))
        if stat.get('cpu', '1') == 'all':
            # /proc/stat cannot tell all-CPUs-idle time (the only idle time
            # icount runs in real time) from one idle CPU: use the trace's
            out['idle_ns_per_io'] = out['traced_idle_mean_ns']
        else:
            out['idle_ns_per_io'] = idle_j * 1e9 / tck / ios_total if ios_total else None
        out['busy_ns_per_io'] = out['ns_per_io'] - out['idle_ns_per_io']
        nev_m = out['events_per_io']
        out['ns_per_event'] = max(0.0, (out['traced_busy_ns'] - out['busy_ns_per_io']) / nev_m)
    else:
        out['ns_per_event'] = 0.0
    per = out['ns_per_event']
    phases = []
    irq_mode = sum(1 for io in ios if 'irq' in io['t']) > len(ios) / 2
    for a, b, label in PHASES:
        if irq_mode and (a, b) in (('notify', 'done'), ('done', 'cqe')):
            continue
        if not irq_mode and 'irq' in (a, b):
            continue
        sel = [io for io in ios if a in io['t'] and b in io['t'] and io['t'][b] >= io['t'][a]]
        if len(sel) < len(ios) / 2:
            continue
        raw = [io['t'][b] - io['t'][a] for io in sel]
        ev = [events_between(io, a, b) for io in sel]
        idl = []
        if (a, b) in (('notify', 'irq'), ('notify', 'done'), ('tw_add', 'tw_run')):
            # idle of the worker CPU inside the phase is counted in io['idle'];
            # attribute it to the device/wake phase it belongs to
            idl = [io['idle'] for io in sel]
        ph = {'phase': label, 'from': a, 'to': b, 'n': len(sel),
              'raw_ns': statistics.median(raw),
              'events': statistics.median(ev),
              'corrected_ns': statistics.median([r - e * per for r, e in zip(raw, ev)])}
        if idl and a == 'notify':
            ph['idle_ns'] = statistics.median(idl)
            ph['busy_corrected_ns'] = statistics.median(
                [r - i - e * per for r, i, e in zip(raw, idl, ev)])
        phases.append(ph)
    out['phases'] = phases
    cnt = {}
    for k in COUNT_EVENTS:
        vals = [io['cnt'].get(k, 0) for io in ios]
        if any(vals):
            cnt[k] = round(sum(vals) / len(vals), 3)
    out['per_io_counts'] = cnt
    out['irq_on_other_cpu'] = round(sum(1 for io in ios if io['irq_cpu'] is not None
                                        and io['irq_cpu'] != io['cpu']) / len(ios), 3)
    cpus = {}
    for io in ios:
        cpus[io['cpu']] = cpus.get(io['cpu'], 0) + 1
    out['worker_cpus'] = {str(k): round(v / len(ios), 3) for k, v in sorted(cpus.items())}
    return out


def fmt(v, w=9):
    return f'{v:{w}.0f}' if isinstance(v, (int, float)) else f'{"-":>{w}}'


def table(results):
    lines = []
    names = [r['case'] for r in results]
    lines.append('| phase (medians, ns = guest instructions) | ' +
                 ' | '.join(f'{n} raw | {n} corr.' for n in names) + ' |')
    lines.append('|---|' + '---:|---:|' * len(names))
    labels = []
    for r in results:
        for p in r['phases']:
            if p['phase'] not in labels:
                labels.append(p['phase'])
    for lab in labels:
        row = [lab]
        for r in results:
            p = next((p for p in r['phases'] if p['phase'] == lab), None)
            if p is None:
                row += ['-', '-']
            else:
                corr = p.get('busy_corrected_ns', p['corrected_ns'])
                extra = f' (+{p["idle_ns"]:.0f} idle)' if 'idle_ns' in p else ''
                row += [f'{p["raw_ns"]:.0f}', f'{corr:.0f}{extra}']
        lines.append('| ' + ' | '.join(row) + ' |')
    def val(v):
        if isinstance(v, float) and v < 10:
            return f'{v:.2f}'
        return fmt(v).strip()

    for key, lab in [('traced_cycle_ns', 'traced cycle enter->enter'),
                     ('traced_idle_ns', 'traced all-CPUs-idle ns per IO'),
                     ('traced_idle_mean_ns', 'traced all-CPUs-idle ns per IO, mean'),
                     ('slept_share', 'share of IOs where the submitter slept'),
                     ('traced_busy_ns', 'traced busy ns per IO'),
                     ('irq_on_other_cpu', 'share of IOs with the irq on another CPU'),
                     ('events_per_io', 'trace events per IO'),
                     ('ns_per_event', 'tracer cost per event (est.)'),
                     ('iops', 'untraced IOPS'),
                     ('ns_per_io', 'untraced ns per IO'),
                     ('idle_ns_per_io', 'untraced idle ns per IO (/proc/stat; trace mean if unpinned)'),
                     ('busy_ns_per_io', 'untraced busy ns (instructions) per IO')]:
        row = [lab]
        for r in results:
            v = r.get(key)
            row += [val(v), '']
        lines.append('| ' + ' | '.join(row) + ' |')
    lines.append('')
    lines.append('Per-IO event counts (traced run):')
    lines.append('')
    for r in results:
        lines.append(f'- {r["case"]}: ' + ', '.join(f'{k} {v}' for k, v in r['per_io_counts'].items()))
    return '\n'.join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('dir', nargs='?', default='results/breakdown')
    ap.add_argument('--json')
    ap.add_argument('--md')
    args = ap.parse_args()
    order = ['block-qd1', 'pt-qd1', 'block-qd1-unpinned', 'pt-qd1-unpinned',
             'block-qd1-poll', 'pt-qd1-poll']
    cases = sorted((f[:-6] for f in os.listdir(args.dir) if f.endswith('.trace')),
                   key=lambda c: (order.index(c) if c in order else 99, c))
    if not cases:
        sys.exit(f'breakdown.py: no *.trace in {args.dir}')
    results = []
    for c in cases:
        setup = read_kv(os.path.join(args.dir, 'setup.txt'))
        res = analyse(os.path.join(args.dir, c + '.trace'), int(setup.get('cpus', 2)))
        if not res or not res['ios']:
            print(f'{c}: no complete IO in the trace', file=sys.stderr)
            continue
        stat = read_kv(os.path.join(args.dir, c + '.stat'))
        js = None
        jp = os.path.join(args.dir, c + '.json')
        if os.path.exists(jp):
            with open(jp) as f:
                js = json.load(f)
        results.append(summarise(c, res, stat, js))
    md = table(results)
    print(md)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    if args.md:
        with open(args.md, 'w') as f:
            f.write(md + '\n')


if __name__ == '__main__':
    main()
