#!/usr/bin/env python3
"""Where a traced test spent its time (tests/run -X, make test TRACE=1).

    scripts/trace-gaps.py [-n N] [-d DEPTHS] TRACE...

Each trace line is "+... EPOCH PID DEPTH FUNC: command": PID is the shell
($BASHPID) that ran it, DEPTH its function depth. A command's time runs
from its line to the next line of the same shell at the same or a smaller
depth, so what ran inside it is inside that time, and a test's background
shells (tests that run modes side by side) are timed each on their own.
Prints the N longest commands at each of the DEPTHS outermost depths
below test(): where a slow test's time goes.
"""
import argparse
import re
import sys
from collections import defaultdict

LINE = re.compile(r'^\++ (\d+\.\d+) (?:(\d+) )?(\d+) (\S+): (.*)$')


def parse(path):
    streams = defaultdict(list)
    first = last = None
    with open(path, errors='replace') as f:
        for raw in f:
            m = LINE.match(raw.rstrip('\n'))
            if not m:
                continue
            t = float(m.group(1))
            first = t if first is None else min(first, t)
            last = t if last is None else max(last, t)
            streams[m.group(2) or '?'].append((t, int(m.group(3)), m.group(4), m.group(5)))
    return streams, first, last


def spans(rows, end):
    """(seconds, depth, func, command) for each row of one shell."""
    out, pending = [], []
    for i, (t, depth, _, _) in enumerate(rows):
        while pending and rows[pending[-1]][1] >= depth:
            j = pending.pop()
            out.append((t - rows[j][0], j))
        pending.append(i)
    out.extend((end - rows[j][0], j) for j in pending)
    return [(d, rows[j][1], rows[j][2], rows[j][3]) for d, j in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('-n', type=int, default=12, help='commands shown per depth')
    ap.add_argument('-d', type=int, default=2, help='depths shown')
    ap.add_argument('traces', nargs='+')
    args = ap.parse_args()
    rc = 0
    for path in args.traces:
        try:
            streams, first, last = parse(path)
        except OSError as e:
            print(f'{path}: {e.strerror}', file=sys.stderr)
            rc = 1
            continue
        if not streams:
            print(f'{path}: no trace lines (not from tests/run -X?)', file=sys.stderr)
            rc = 1
            continue
        print(f'== {path}: {last - first:.1f} s traced, {len(streams)} shells')
        all_spans = []
        for rows in streams.values():
            all_spans.extend(spans(rows, rows[-1][0]))
        base = min((s[1] for s in all_spans if s[2] == 'test'),
                   default=min(s[1] for s in all_spans))
        for depth in range(base, base + args.d):
            top = sorted((s for s in all_spans if s[1] == depth), reverse=True)
            for secs, _, func, cmd in top[:args.n]:
                print(f'  {secs:7.1f}  {func}: {cmd[:110]}')
            print()
    return rc


if __name__ == '__main__':
    sys.exit(main())
