#!/usr/bin/env python3
"""Guest instructions per I/O from the insn-profile plugin's counts.

    python3 bench/insn.py [DIR] [--top N] [--json OUT] [--md OUT] [--functions]

DIR (default results/insn) is what make bench-insn leaves: counts.txt (the
plugin's snapshots, instructions and executions per translation block start
address, cumulative), kallsyms (the guest's text symbols), runs.tsv (the
marks that bracket each iobench run, and its I/O count) and setup.txt, whose
variants= line names the baseline and the feature path (k0 and k1, the
userq scenario's, when it has none) and title= what they are.

Every run is the difference of the snapshots at its two marks. Per case and
path the long and the short run of each repetition are subtracted, so that
what a run costs whatever its length (process start and exit, ring and user
queue setup and teardown, the marks) drops out; the sums over the
repetitions are divided by the difference in I/Os. Functions are found in
kallsyms; a block starting at a function's first byte is a call, so
"calls" counts entries (of functions that are not inlined).

Polling: a pass of io_do_iopoll() calls ->uring_cmd_iopoll() for each
request on the ring's iopoll list until one has completed, and every such
call (a "poll") polls the whole queue. The passes that complete something
go on to __io_submit_flush_completions(); the other polls are empty, and
their number depends on how soon QEMU's device model posts a completion,
not on the path. Their cost is estimated from the iopoll loop category's
instructions per poll and reported apart, with a total that leaves them
out.

Writes DIR/insn.json and DIR/insn.md unless --json/--md say otherwise.
"""
import argparse
import bisect
import json
import os
import re
import statistics
import sys

USER = '[user]'
OTHER = '[kernel-other]'
# What io_do_iopoll() calls once per request it polls, per path.
POLL_ENTRIES = ('nvme_ns_chr_uring_cmd_iopoll', 'virtblk_chr_uring_cmd_iopoll',
                'iocb_bio_iopoll')

# Categories, first match wins; the function name is matched with re.match.
CATEGORIES = [
    ('user space', [r'\[user\]$']),
    # What every poll of the ring runs, whether it finds a CQE or not: the
    # io_uring loop, the per-request ->uring_cmd_iopoll, and on -k0
    # blk_rq_poll's queue reference and hctx poll, on -k1 the user queue's
    # lock and its (then empty) finish. The spinlock entry points are here
    # because in this workload nearly all their calls come from the -k1
    # poll (100 per I/O); -k0 takes about 3 locks per I/O elsewhere.
    ('io_uring iopoll loop', [
        r'io_iopoll_check$', r'io_do_iopoll$', r'io_uring_classic_poll$',
        r'io_uring_cmd_iopoll$', r'nvme_ns_chr_uring_cmd_iopoll$', r'blk_rq_poll$',
        r'blk_rq_is_poll$', r'blk_queue_exit$', r'blk_hctx_poll$', r'bio_poll$',
        r'nvme_poll$', r'nvme_pci_uq_poll$', r'nvme_uq_finish$',
        r'virtblk_chr_uring_cmd_iopoll$', r'iocb_bio_iopoll$', r'virtblk_poll$',
        r'_raw_spin_lock$', r'_raw_spin_unlock$']),
    ('nvme poll/completion', [
        r'nvme_poll_cq$', r'nvme_.*(complete|end_io|cqe|finish|reap)', r'nvme_pci_complete',
        r'nvme_uq_(finish|reap|cqe)', r'nvme_handle_cqe', r'nvme_uring_task_cb',
        r'nvme_uring_cmd_end_io']),
    ('page pinning/DMA mapping', [
        r'.*dma_', r'.*iommu', r'.*swiotlb', r'.*sg_', r'__?sg_', r'.*gup',
        r'pin_user_pages', r'.*get_user_pages', r'unpin_user', r'.*iov_iter',
        r'bio_map_', r'blk_rq_map_', r'blk_rq_unmap_', r'blk_rq_append_bio',
        r'bio_add_', r'bvec_', r'io_uring_cmd_import_fixed', r'io_import_',
        r'nvme_uq_(map|unmap)_buf', r'nvme_map_data', r'nvme_unmap_data',
        r'nvme_pci_setup_prps', r'nvme_setup_prp', r'nvme_pci_setup_sgls',
        r'nvme_.*prp', r'nvme_.*sgl', r'.*bio_(alloc|put|free|init|uninit|release)',
        r'bio_endio', r'blk_rq_unmap_user', r'folio', r'.*page_ref', r'.*put_page']),
    ('nvme submit', [
        r'nvme_uring_cmd', r'nvme_ns_chr_uring_cmd', r'nvme_ns_uring_cmd',
        r'nvme_pci_uq_submit', r'nvme_uq_', r'nvme_queue_rq', r'nvme_queue_rqs',
        r'nvme_submit_', r'nvme_sq_copy_cmd', r'nvme_write_sq_db', r'nvme_commit_rqs',
        r'nvme_setup_cmd', r'nvme_prep_rq', r'nvme_alloc_user_request',
        r'nvme_map_user_request', r'nvme_init_request', r'nvme_cmd_allowed',
        r'nvme_ns_chr_', r'nvme_passthru_', r'nvme_pci_uq_get', r'nvme_']),
    ('virtio-blk and virtqueue', [
        r'virtblk_', r'virtio_', r'__?virtqueue_', r'virtqueue_', r'vring_', r'vp_',
        r'detach_buf', r'vm_notify']),
    ('copy offload, page cache checks, null_blk', [
        r'blk_copy_', r'blkdev_copy', r'.*copy_file_range', r'generic_copy_file',
        r'generic_file_rw_checks', r'filemap_', r'invalidate_', r'null_',
        r'nullb_', r'copy_to_nullb', r'copy_from_nullb', r'__?null_']),
    ('blk-mq', [r'__?blk_', r'blk_', r'bio_', r'submit_bio', r'__?rq_', r'sbitmap',
                r'__sbitmap', r'sbq_']),
    ('io_uring submit', [
        r'__x64_sys_io_uring_enter', r'__do_sys_io_uring_enter', r'io_submit_sqes',
        r'io_issue_sqe', r'io_init_req', r'io_uring_cmd', r'io_uring_cmd_prep',
        r'io_queue_sqe', r'io_submit_', r'io_alloc_', r'__io_alloc_',
        r'io_req_', r'__io_req_', r'io_get_sqe', r'io_uring_', r'__io_uring_',
        r'io_cqring_', r'__io_cqring_', r'io_fill_cqe', r'io_free_',
        r'__io_submit_flush_completions', r'io_', r'__io_', r'tctx_task_work']),
    ('syscall entry/exit', [
        r'entry_SYSCALL', r'do_syscall_64', r'syscall_exit', r'x64_sys_call',
        r'__?fdget', r'fput', r'__fput', r'syscall_', r'.*exit_to_user_mode',
        r'fpregs_', r'switch_fpu', r'restore_fpregs', r'arch_exit_to_user_mode']),
    ('interrupts/timers/sched', [
        r'.*irq', r'.*apic', r'.*timer', r'hrtimer', r'tick_', r'.*sched',
        r'update_', r'.*rcu', r'ktime_', r'.*clock', r'asm_', r'__sysvec',
        r'sysvec', r'account_', r'.*task_tick', r'cpuacct', r'pick_',
        r'enqueue_', r'dequeue_', r'psi_', r'.*softirq', r'run_timer']),
]
ORDER = [c for c, _ in CATEGORIES] + ['other']
_CAT_RE = [(c, re.compile('|'.join(f'(?:{p})' for p in ps))) for c, ps in CATEGORIES]


def base_name(func):
    """A module symbol without its " [module]"."""
    return func.split(' ', 1)[0]


def category(func):
    for c, r in _CAT_RE:
        if r.match(base_name(func)):
            return c
    return 'other'


class Symbols:
    """Address -> containing function, from the guest's kallsyms."""

    def __init__(self, path):
        syms = {}
        self.etext = None
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) < 3:
                    continue
                a = int(p[0], 16)
                name = p[2] + (f' {p[3]}' if len(p) > 3 else '')
                if p[2] == '_etext':
                    self.etext = a
                # __pfx_/__cfi_ mark the padding before a function; a name
                # already at that address (an alias) is as good as any.
                if p[2].startswith(('__pfx_', '__cfi_')) or a in syms:
                    continue
                syms[a] = name
        self.addrs = sorted(syms)
        self.names = [syms[a] for a in self.addrs]
        self.starts = set(self.addrs)

    def lookup(self, a):
        """(function, is_entry) for a TB start address."""
        if a is None:
            return USER, False
        i = bisect.bisect_right(self.addrs, a) - 1
        if i < 0:
            return OTHER, False
        # past the core kernel's text (entry trampolines, BPF, ...) and not
        # in a module: module symbols carry their " [module]", and their
        # area starts at 0xffffffffa0000000 without KASLR
        if self.etext is not None and a >= self.etext and ' [' not in self.names[i]:
            return OTHER, False
        return self.names[i], a == self.addrs[i]


def read_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            p = line.rstrip('\n').split('\t')
            if len(p) != 8:
                sys.exit(f'insn: bad line in {path}: {line!r}')
            runs.append(dict(case=p[0], variant=p[1], run=int(p[2]), secs=int(p[3]),
                             first=int(p[4]), last=int(p[5]), ios=int(p[6]), cmd=p[7]))
    if not runs:
        sys.exit(f'insn: no runs in {path}')
    return runs


def run_deltas(counts, runs, syms):
    """Per run: {function: [insns, calls]} between its two marks."""
    at = {}                     # mark seq -> runs that start or end there
    for r in runs:
        at.setdefault(r['first'], []).append(('first', r))
        at.setdefault(r['last'], []).append(('last', r))
    state = {}                  # address (None: user space) -> (insns, execs)
    saved = {}                  # id(run) -> state at its first mark
    marks = 0
    mark = None

    def finish(seq, why):
        nonlocal marks
        if why == 'mark':
            marks += 1
            if seq != marks:
                sys.exit(f'insn: {counts}: snapshot {seq} out of order')
        for what, r in at.get(seq, []) if why == 'mark' else []:
            if what == 'first':
                saved[id(r)] = dict(state)
                continue
            before = saved.pop(id(r))
            funcs = {}
            for a, (ins, ex) in state.items():
                b = before.get(a, (0, 0))
                if ins == b[0] and ex == b[1]:
                    continue
                f, entry = syms.lookup(a)
                v = funcs.setdefault(f, [0, 0])
                v[0] += ins - b[0]
                if entry:
                    v[1] += ex - b[1]
            r['funcs'] = funcs

    with open(counts) as f:
        seq = None
        for line in f:
            if line.startswith('#'):
                m = re.search(r'mark=(\S+) addr=0x([0-9a-f]+)', line)
                mark = (m.group(1), int(m.group(2), 16)) if m else None
                continue
            p = line.split()
            if p[0] == 'snap':
                seq, why = int(p[1]), p[2]
            elif p[0] == 'end':
                finish(seq, why)
                seq = None
            else:
                a = None if p[0] == 'user' else int(p[0], 16)
                state[a] = (int(p[1]), int(p[2]))
    if seq is not None:
        sys.exit(f'insn: {counts}: snapshot {seq} cut short (did QEMU die?)')
    return marks, mark


def per_io(runs, case, variant):
    """Per-I/O figures of one case and path from its long-short pairs."""
    rs = [r for r in runs if r['case'] == case and r['variant'] == variant]
    if not rs:
        sys.exit(f'insn: no {variant} runs of {case} in runs.tsv')
    longest = max(r['secs'] for r in rs)
    shortest = min(r['secs'] for r in rs)
    pairs = []
    for n in sorted({r['run'] for r in rs}):
        lo = [r for r in rs if r['run'] == n and r['secs'] == longest]
        sh = [r for r in rs if r['run'] == n and r['secs'] == shortest]
        if len(lo) != 1 or len(sh) != 1:
            sys.exit(f'insn: {case} {variant} run {n}: no long and short run pair')
        pairs.append((lo[0], sh[0]))
    funcs = {}
    dios = 0
    totals = []                 # per pair, instructions per I/O
    for lo, sh in pairs:
        d = lo['ios'] - sh['ios']
        if d <= 0:
            sys.exit(f'insn: {case} {variant} run {lo["run"]}: the long run did '
                     f'not do more I/Os ({lo["ios"]} vs {sh["ios"]})')
        dios += d
        t = 0
        for f in set(lo['funcs']) | set(sh['funcs']):
            a = lo['funcs'].get(f, [0, 0])
            b = sh['funcs'].get(f, [0, 0])
            v = funcs.setdefault(f, [0, 0])
            v[0] += a[0] - b[0]
            v[1] += a[1] - b[1]
            t += a[0] - b[0]
        totals.append(t / d)
    fio = {f: {'insns': v[0] / dios, 'calls': v[1] / dios, 'category': category(f)}
           for f, v in funcs.items()}
    cats = {c: 0.0 for c in ORDER}
    for v in fio.values():
        cats[v['category']] += v['insns']
    total = sum(cats.values())
    user = cats['user space']
    # A pass of io_do_iopoll() calls ->uring_cmd_iopoll() for every request
    # on the ring's iopoll list until one has completed; each such call
    # polls the whole queue. A pass that completed something flushes the
    # CQEs (__io_submit_flush_completions); count one call of it as
    # productive, every other call as empty.
    passes = fio.get('io_do_iopoll', {}).get('calls', 0.0)
    polls = sum(v['calls'] for f, v in fio.items() if base_name(f) in POLL_ENTRIES)
    productive = fio.get('__io_submit_flush_completions', {}).get('calls', 0.0)
    loop = cats['io_uring iopoll loop']
    per_poll = loop / polls if polls else 0.0
    empty = max(polls - productive, 0.0)
    raw = [sum(v[0] for v in lo['funcs'].values()) / lo['ios'] for lo, _ in pairs]
    return {
        'pairs': len(pairs), 'long_s': longest, 'short_s': shortest,
        'ios_diff': dios,
        'ios': [[lo['ios'], sh['ios']] for lo, sh in pairs],
        'iops_long': [lo['ios'] / lo['secs'] for lo, _ in pairs],
        'total': total, 'kernel': total - user, 'user': user,
        'total_per_pair': totals,
        'total_median_pair': statistics.median(totals),
        'long_run_only': raw,
        'categories': cats,
        'passes': passes, 'polls': polls, 'productive_polls': productive, 'empty_polls': empty,
        'insns_per_poll': per_poll,
        'empty_poll_insns': empty * per_poll,
        'total_without_empty_polls': total - empty * per_poll,
        'functions': fio,
    }


def fmt(v):
    return f'{v:,.0f}' if abs(v) >= 100 else f'{v:.1f}'


def ratio(a, b):
    return f'{a / b:.2f}x' if b else '-'


def setup_value(setup, key, default):
    for line in setup:
        if line.startswith(key + '='):
            return line[len(key) + 1:]
    return default


def markdown(res, setup, cmds, top, qemu, va, vb):
    title = setup_value(setup, 'title', f'{va} vs {vb}')
    out = [f'# Guest instructions per I/O: {title}', '']
    out += ['Counted by the insn-profile QEMU plugin (bench/insn-profile), per I/O from',
            'the difference of a long and a short run (bench/insn-lib.sh), pooled over',
            'the pairs (the median pair is shown too: one pair that spun in the poll',
            f'loop moves the pooled figure). Ratio is {va} / {vb}: how many times more',
            'instructions the baseline spends per I/O. IOPS: median of the long runs.', '']
    out += ['## Summary', '',
            f'| case | {va} insns/IO | {vb} insns/IO | ratio | median of pairs {va} / {vb} | '
            f'{va} w/o empty polls | {vb} w/o empty polls | ratio | polls/IO {va} | polls/IO {vb} '
            f'| IOPS {va} | IOPS {vb} |',
            '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for case, v in res.items():
        a, b = v[va], v[vb]
        out.append(f"| {case} | {fmt(a['total'])} | {fmt(b['total'])} | {ratio(a['total'], b['total'])} "
                   f"| {fmt(a['total_median_pair'])} / {fmt(b['total_median_pair'])} "
                   f"({ratio(a['total_median_pair'], b['total_median_pair'])}) "
                   f"| {fmt(a['total_without_empty_polls'])} | {fmt(b['total_without_empty_polls'])} "
                   f"| {ratio(a['total_without_empty_polls'], b['total_without_empty_polls'])} "
                   f"| {a['polls']:.2f} | {b['polls']:.2f} "
                   f"| {fmt(statistics.median(a['iops_long']))} | {fmt(statistics.median(b['iops_long']))} |")
    out.append('')
    for case, v in res.items():
        a, b = v[va], v[vb]
        out += [f'## {case}', '']
        out += [f"{a['pairs']} pairs of {a['long_s']} s and {a['short_s']} s runs per path; "
                f"per-pair totals {va} {', '.join(fmt(x) for x in a['total_per_pair'])}, "
                f"{vb} {', '.join(fmt(x) for x in b['total_per_pair'])} instructions/IO.", '']
        out += [f'| | {va} | {vb} | {va} minus {vb} |', '|---|---:|---:|---:|']
        rows = [('total', 'total'), ('kernel', 'kernel'), ('user', 'user')]
        for label, k in rows:
            out.append(f'| **{label}** | {fmt(a[k])} | {fmt(b[k])} | {fmt(a[k] - b[k])} |')
        for c in ORDER:
            x, y = a['categories'][c], b['categories'][c]
            if abs(x) < 0.5 and abs(y) < 0.5:
                continue
            out.append(f'| {c} | {fmt(x)} | {fmt(y)} | {fmt(x - y)} |')
        out.append(f"| iopoll passes per IO (io_do_iopoll calls) | {a['passes']:.2f} | {b['passes']:.2f} | |")
        out.append(f"| polls per IO (->uring_cmd_iopoll calls) | {a['polls']:.2f} | {b['polls']:.2f} | |")
        out.append(f"| passes that completed something, per IO | {a['productive_polls']:.3f} "
                   f"| {b['productive_polls']:.3f} | |")
        out.append(f"| iopoll loop instructions per poll | {fmt(a['insns_per_poll'])} "
                   f"| {fmt(b['insns_per_poll'])} | |")
        out.append(f"| empty polls' instructions (estimate) | {fmt(a['empty_poll_insns'])} "
                   f"| {fmt(b['empty_poll_insns'])} | |")
        out.append(f"| **total without empty polls** | {fmt(a['total_without_empty_polls'])} "
                   f"| {fmt(b['total_without_empty_polls'])} "
                   f"| {fmt(a['total_without_empty_polls'] - b['total_without_empty_polls'])} |")
        out.append('')
        out += [f'Top {top} functions by instructions per I/O (calls per I/O where the '
                'function is entered as a call):', '']
        out += [f'| function | category | {va} insns | {va} calls | {vb} insns | {vb} calls |',
                '|---|---|---:|---:|---:|---:|']
        fs = set(a['functions']) | set(b['functions'])
        z = {'insns': 0.0, 'calls': 0.0}
        key = lambda f: -max(a['functions'].get(f, z)['insns'], b['functions'].get(f, z)['insns'])
        for f in sorted(fs, key=key)[:top]:
            x, y = a['functions'].get(f, z), b['functions'].get(f, z)
            out.append(f"| `{f}` | {category(f)} | {fmt(x['insns'])} | {x['calls']:.2f} "
                       f"| {fmt(y['insns'])} | {y['calls']:.2f} |")
        out.append('')
    out += ['## Setup', '', '```']
    out += setup
    out += ['```', '', 'Commands (guest; each run twice, -r long and -r short):', '', '```']
    out += sorted(set(cmds))
    out += ['```', '']
    if qemu:
        out += ['QEMU:', '', '```', qemu, '```', '']
    return '\n'.join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('dir', nargs='?', default='results/insn')
    ap.add_argument('--top', type=int, default=25, help='functions listed per case (25)')
    ap.add_argument('--json', help='JSON output (DIR/insn.json)')
    ap.add_argument('--md', help='Markdown output (DIR/insn.md)')
    ap.add_argument('--functions', action='store_true',
                    help='print every function with its category and exit')
    args = ap.parse_args()
    d = args.dir
    for f in ('counts.txt', 'kallsyms', 'runs.tsv'):
        if not os.path.exists(os.path.join(d, f)):
            sys.exit(f'insn: no {f} in {d} (run make bench-insn)')
    syms = Symbols(os.path.join(d, 'kallsyms'))
    runs = read_runs(os.path.join(d, 'runs.tsv'))
    marks, mark = run_deltas(os.path.join(d, 'counts.txt'), runs, syms)
    want = max(r['last'] for r in runs)
    if marks < want:
        sys.exit(f'insn: {marks} marks in counts.txt, the runs need {want}: did the '
                 'plugin see the guest\'s marks (nokaslr, mark symbol)?')
    mfile = os.path.join(d, 'marks')
    if os.path.exists(mfile) and int(open(mfile).read()) != marks:
        sys.exit(f'insn: the guest made {open(mfile).read().strip()} marks, the plugin '
                 f'saw {marks}: something else entered the mark symbol')
    # The plugin took the mark's address from System.map: the guest must
    # have run that kernel, unrelocated, for any address to be right.
    if mark and syms.lookup(mark[1]) != (mark[0], True):
        sys.exit(f'insn: the plugin marked {mark[0]} at {mark[1]:#x}, where the guest has '
                 f'{syms.lookup(mark[1])[0]}: another kernel, or KASLR (vm/run -P boots nokaslr)')
    if args.functions:
        fs = {}
        for r in runs:
            for f, v in r['funcs'].items():
                fs[f] = fs.get(f, 0) + v[0]
        for f, n in sorted(fs.items(), key=lambda x: -x[1]):
            print(f'{n:14d} {category(f):28s} {f}')
        return
    setup = []
    if os.path.exists(os.path.join(d, 'setup.txt')):
        setup = open(os.path.join(d, 'setup.txt')).read().splitlines()
    variants = setup_value(setup, 'variants', 'k0 k1').split()
    if len(variants) != 2:
        sys.exit(f'insn: setup.txt: variants= must name two paths, not {variants}')
    res = {}
    for case in dict.fromkeys(r['case'] for r in runs):
        res[case] = {v: per_io(runs, case, v) for v in variants}
    qemu = ''
    if os.path.exists(os.path.join(d, 'qemu.cmdline')):
        qemu = open(os.path.join(d, 'qemu.cmdline')).read().strip()
    cmds = [r['cmd'] for r in runs]
    md = markdown(res, setup, cmds, args.top, qemu, *variants)
    jout = args.json or os.path.join(d, 'insn.json')
    mout = args.md or os.path.join(d, 'insn.md')
    with open(jout, 'w') as f:
        json.dump({'setup': setup, 'qemu': qemu, 'variants': variants,
                   'commands': sorted(set(cmds)),
                   'runs': [{k: v for k, v in r.items() if k != 'funcs'} for r in runs],
                   'cases': res}, f, indent=1)
    with open(mout, 'w') as f:
        f.write(md)
    # The summary on the terminal; the rest is in the files.
    print('## ' + md.split('\n## ')[1].strip())
    print(f'insn: {mout}, {jout}')


if __name__ == '__main__':
    main()
