#!/usr/bin/python3 -S
# SPDX-License-Identifier: GPL-2.0
"""logwrites.py: read a dm-log-writes log, replay it, and check what a power
cut at a point of it would have kept.

    logwrites.py entries LOG [--from N]
    logwrites.py boundaries LOG
    logwrites.py replay LOG IMAGE (--to N | --mark NAME) [--weakest]
    logwrites.py check LOG ((--mark NAME | --at N) --expect FILE)... [--base IMAGE]
    logwrites.py sweep LOG IMAGE --cmd CMD [--cap N] [--from-mark NAME]

Each takes --scan: read entries past the super block's count (below).

Exit status: 0 done (check: every range durable; sweep: the command held at
every boundary), 1 a check or sweep found a loss, 2 a bad log or usage.

The format (Documentation/admin-guide/device-mapper/log-writes.rst and
drivers/md/dm-log-writes.c; QEMU's blklogwrites block driver writes it too),
all little-endian, in units of the log's sector size S (the data device's
logical block size):
  byte 0:  the super block: u64 magic 0x6a736677736872, u64 version (1),
           u64 nr_entries, u32 S;
  byte S:  nr_entries entries, each one S-byte sector holding u64 sector,
           u64 nr_sectors, u64 flags, u64 data_len (the sector and the count
           of the write, in units of S) and, for a MARK, its name (data_len
           bytes) right after; then, unless the entry is a DISCARD or a
           MARK, the nr_sectors * S bytes written.
  flags:   FLUSH 1, FUA 2, DISCARD 4, MARK 8, METADATA 16 (REQ_META).

What dm-log-writes logs, and when (dm-log-writes.c): an entry is added when
the data is on stable media, not when the write completes.
  - A completed write waits on a list. A flush (an empty REQ_PREFLUSH bio;
    dm splits a PREFLUSH write into an empty flush and the write) takes the
    list as it is when the flush is *issued*, and when the flush completes,
    those writes are logged in completion order immediately followed by the
    FLUSH entry. A write completing while a flush is in flight waits for
    the next flush.
  - A FUA write is logged when it completes; a DISCARD waits like a write.
  - A mark (`dmsetup message DEV 0 mark NAME`) is logged when the message
    arrives, in order with the above; so is the end: at `dmsetup remove`
    the writes still waiting are logged with no FLUSH after them, then the
    mark "dm-log-writes-end".
  - The super block's nr_entries is written with each FUA or MARK entry and
    at the removal: read the log after a mark or a removal. A write of the
    log device that failed turns logging off ("logging_disabled" in
    `dmsetup status`); a log read then is short of what happened.
  - It logs a write or a flush whether or not it failed on the data
    device (its end_io ignores the error): fail I/O above dm-log-writes
    (make-it-fail on the dm disk), never below it, or the log claims
    writes that never landed.
So every write dm-log-writes logs before a FLUSH entry is durable at it,
for I/O that succeeded. Another writer of the format (QEMU's blklogwrites)
need not hold writes back until a flush; the rule here holds either way:

  Entry i is durable at entry p (i <= p) when it has FUA, or a FLUSH entry
  j with i < j <= p follows it. A FLUSH entry's own data (hand-made logs)
  comes after its flush: durable only with FUA.

Two limits of reading durability from the order of a log: QEMU logs a
write when its data file has done it and a FLUSH when the file's flush
has returned, so a write logged before a FLUSH may have overlapped that
flush (the tests complete their writes before they issue the flush, and
cannot catch a flush that overtakes writes); and replay is in log order,
not completion order, so a FUA write logged ahead of an older unflushed
write to the same sectors (logged at the next FLUSH) is replayed under
it: a false loss, never a false pass.

The weakest power cut at p keeps the durable entries only: the image it
leaves is the base (the device as it was when logging began: zeroes, or
--base) with those entries applied in log order; any other write may be
lost. (Only the weakest: a write not yet durable may also have landed, in
whole or in part; check and sweep do not try those.) A point is "at a
mark" M when it is just before M's entry; a boundary is a FLUSH or FUA
entry, the points a power cut can tell apart.

A DISCARD is replayed as zeroes: the log holds no data for it, and a
device may return zeroes or the old data after it; zeroes make a range
the path still needed show as lost instead of passing on stale bytes.

QEMU's blklogwrites (7.2) logs a write or a flush when the data file has
done it, appending its entry then, and never a mark; a FUA write becomes a
write and a flush, and a flush with no write completed since the last one
is not sent, so not logged. It rewrites the super block at a flush and
every log-super-update-interval entries, but writes completing together
can leave an older count there last. --scan reads on past the count while
the next sector holds an entry, up to an all-zero sector or the end of the
file: right for a log that was empty when its writer began (vm/run makes
QEMU's afresh at each boot) and is read while no write is in flight.

  entries     one line per entry: index, sector, nr_sectors (units of S),
              flags, mark name; --from N: only entries N on (the header
              line still counts them all).
  boundaries  the FLUSH and FUA entries, with how many entries each makes
              durable.
  replay      apply entries 0..N (--to N, or up to --mark NAME) as logged
              to IMAGE (a file or block device); --weakest: only those
              durable at that point.
  check       FILE lists "OFFSET LENGTH SHA256" lines (bytes; '#' starts
              a comment), what the path acknowledged before the mark;
              rebuild those ranges as the weakest power cut at the mark
              leaves them and report each range whose sha256 differs, with
              why: written before the mark but not durable there, logged
              only after the mark, or not in the log with that content.
              Several marks: a --mark and its --expect each. --at N
              instead of a mark is the point after the log's first N
              entries (a writer without marks: the count read before and
              after an event lines it up with the log).
  sweep       replay the weakest image to each boundary in turn (after
              --from-mark's mark only) and run CMD (sh -c) with the image's
              path in $IMAGE and the entry in $ENTRY; stop at the first
              boundary where it fails. --cap N: at most N boundaries,
              spread evenly over the log and always the last (default 16:
              a test within a minute with an fsck of a small disk on the
              debug guest); 0 is every boundary.
"""
import argparse
import os
import struct
import sys
# hashlib (check) and subprocess (sweep) are imported where they are used:
# loading them (OpenSSL's library among them) is a third of a start's
# imports, and a test lining steps up with QEMU's log starts "entries"
# after each step in a debug guest where every file load crosses 9p.

MAGIC = 0x6A736677736872
SUPER = struct.Struct("<QQQI")
ENTRY = struct.Struct("<QQQQ")
FLUSH, FUA, DISCARD, MARK, METADATA = 1, 2, 4, 8, 16
FLAG_NAMES = ((FLUSH, "FLUSH"), (FUA, "FUA"), (DISCARD, "DISCARD"),
              (MARK, "MARK"), (METADATA, "METADATA"))
ALL_FLAGS = FLUSH | FUA | DISCARD | MARK | METADATA
CHUNK = 1 << 20


class LogError(Exception):
    pass


class Entry:
    """one entry; pos is the byte offset of its sector in the log"""
    __slots__ = ("index", "sector", "nr", "flags", "mark", "pos")

    def __init__(self, index, sector, nr, flags, mark, pos):
        self.index, self.sector, self.nr = index, sector, nr
        self.flags, self.mark, self.pos = flags, mark, pos

    def touches(self):
        """writes or discards device sectors"""
        return self.nr > 0 and not self.flags & MARK

    def flag_str(self):
        return "|".join(n for f, n in FLAG_NAMES if self.flags & f) or "-"


class Log:
    """a log opened and read whole (the entries, not their data)"""

    def __init__(self, path, scan=False):
        self.path = path
        try:
            self.f = open(path, "rb")
            size = self.f.seek(0, os.SEEK_END)  # (a block device too)
        except OSError as e:
            raise LogError(e.strerror)
        head = self.read(0, SUPER.size)
        if len(head) < SUPER.size:
            raise LogError(f"{size} bytes: too short for a super block")
        magic, version, n, ss = SUPER.unpack(head)
        if magic != MAGIC:
            raise LogError(f"not a dm-log-writes log (magic {magic:#x})")
        if version != 1:
            raise LogError(f"log version {version}, only 1 is known")
        if ss < 512 or ss > 65536 or ss & (ss - 1):
            raise LogError(f"sector size {ss} in the super block")
        self.ss, self.entries, pos, i = ss, [], ss, 0
        while i < n or scan:
            if i >= n and (pos + ss > size or
                           not any(self.read(pos, ENTRY.size))):
                break  # --scan: the end of what was written
            if pos + ss > size:
                raise LogError(f"truncated: entry {i} of {n} would start at "
                               f"byte {pos}, the log has {size}")
            sector, nr, flags, dlen = ENTRY.unpack(self.read(pos, ENTRY.size))
            where = f"entry {i} (byte {pos})"
            if flags & ~ALL_FLAGS:
                raise LogError(f"{where}: unknown flags {flags:#x}: corrupt log")
            mark, data = None, 0
            if flags & MARK:
                if dlen > ss - ENTRY.size or nr:
                    raise LogError(f"{where}: a mark of {dlen} bytes, "
                                   f"{nr} sectors: corrupt log")
                mark = self.read(pos + ENTRY.size, dlen).decode(errors="replace")
            elif dlen:
                raise LogError(f"{where}: inline data ({dlen} bytes) is not supported")
            elif not flags & DISCARD:
                data = nr * ss
            if pos + ss + data > size:
                raise LogError(f"truncated: {where} has {data} bytes of data, "
                               f"the log ends {size - pos - ss} bytes after its sector")
            self.entries.append(Entry(i, sector, nr, flags, mark, pos))
            pos += ss + data
            i += 1
        self.durable_at = self._durable_at()

    def read(self, off, n):
        self.f.seek(off)
        return self.f.read(n)

    def _durable_at(self):
        """for each entry, the index where it becomes durable (None: never);
        only for entries that touch sectors"""
        out, pending = [None] * len(self.entries), []
        for e in self.entries:
            if e.flags & FLUSH:
                for i in pending:
                    out[i] = e.index
                pending = []
            if e.touches():
                if e.flags & FUA:
                    out[e.index] = e.index
                else:
                    pending.append(e.index)
        return out

    def durable(self, i, p):
        """entry i is durable at entry p"""
        d = self.durable_at[i]
        return d is not None and d <= p

    def find_mark(self, name):
        for e in self.entries:
            if e.flags & MARK and e.mark == name:
                return e.index
        names = ", ".join(e.mark for e in self.entries if e.flags & MARK) or "none"
        raise LogError(f"{self.path}: no mark {name!r} in the log (marks: {names})")

    def boundaries(self):
        return [e.index for e in self.entries if e.flags & (FLUSH | FUA)]

    def pieces(self, e, lo=0, hi=None):
        """(device offset, bytes) of entry e's data clipped to [lo, hi),
        in chunks; zeroes for a DISCARD"""
        start, end = e.sector * self.ss, (e.sector + e.nr) * self.ss
        off, end = max(start, lo), end if hi is None else min(end, hi)
        while off < end:
            n = min(CHUNK, end - off)
            if e.flags & DISCARD:
                yield off, bytes(n)
            else:
                b = self.read(e.pos + self.ss + off - start, n)
                if len(b) != n:
                    raise LogError(f"{self.path}: entry {e.index}: short read of its data")
                yield off, b
            off += n


class Image:
    """the file or block device a log is replayed into"""

    def __init__(self, path):
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise LogError(f"{path}: {e.strerror}")

    def apply(self, log, e):
        for off, b in log.pieces(e):
            if os.pwrite(self.fd, b, off) != len(b):
                raise LogError(f"{self.path}: short write at byte {off} "
                               f"(entry {e.index}): past its end?")

    def sync(self):
        os.fsync(self.fd)


def cmd_entries(log, opt):
    print(f"# {log.path}: sector size {log.ss}, {len(log.entries)} entries")
    for e in log.entries[opt.first:]:
        print(e.index, e.sector, e.nr, e.flag_str(), *([e.mark] if e.flags & MARK else []))


def cmd_boundaries(log, opt):
    for b in log.boundaries():
        n = sum(1 for d in log.durable_at if d == b)
        print(b, log.entries[b].flag_str(), f"{n} durable")


def cmd_replay(log, opt):
    if opt.mark is not None:
        upto = log.find_mark(opt.mark)
    elif opt.to < len(log.entries):
        upto = opt.to
    else:
        raise LogError(f"{log.path}: --to {opt.to}: the log has {len(log.entries)} entries")
    img, n = Image(opt.image), 0
    for e in log.entries[:upto + 1]:
        if e.touches() and (not opt.weakest or log.durable(e.index, upto)):
            img.apply(log, e)
            n += 1
    img.sync()
    print(f"replayed {n} entries up to entry {upto} into {opt.image}")


def read_expect(path):
    ranges = []
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        raise LogError(f"{path}: {e.strerror}")
    for k, line in enumerate(lines, 1):
        w = line.split("#")[0].split()
        if not w:
            continue
        try:
            off, ln, sha = int(w[0], 0), int(w[1], 0), w[2].lower()
            assert len(w) == 3 and off >= 0 and ln > 0 and len(sha) == 64
            int(sha, 16)
        except (AssertionError, IndexError, ValueError):
            raise LogError(f"{path}:{k}: not 'OFFSET LENGTH SHA256': {line!r}")
        ranges.append((off, ln, sha))
    return ranges


def rebuild(log, base, off, ln, keep):
    """sha256 of [off, off + ln) after the entries keep() takes"""
    buf = bytearray(ln)
    if base is not None:
        got = os.pread(base, ln, off)
        buf[:len(got)] = got
    for e in log.entries:
        if e.touches() and keep(e):
            for o, b in log.pieces(e, off, off + ln):
                buf[o - off:o - off + len(b)] = b
    import hashlib
    return hashlib.sha256(buf).hexdigest()


def check_point(log, point):
    """(what, last, end) of a --mark or --at point: a range is durable there
    when a boundary at or before entry last makes it so; entries before
    end were written before it"""
    kind, v = point
    if kind == "mark":
        m = log.find_mark(v)
        return f"mark {v}", m, m
    if not 0 <= v <= len(log.entries):
        raise LogError(f"{log.path}: --at {v}: the log has {len(log.entries)} entries")
    return f"{v} entries", v - 1, v


def cmd_check(log, opt):
    if not opt.points or len(opt.points) != len(opt.expect):
        raise LogError("check: each --mark or --at needs its --expect, in order")
    pairs = [check_point(log, p) + (read_expect(f),) for p, f in zip(opt.points, opt.expect)]
    base = None
    if opt.base:
        try:
            base = os.open(opt.base, os.O_RDONLY)
        except OSError as e:
            raise LogError(f"{opt.base}: {e.strerror}")
    bad = 0
    for name, last, end, ranges in pairs:
        point = "mark" if name.startswith("mark") else "point"
        for off, ln, sha in ranges:
            what = f"{off}+{ln}"
            if rebuild(log, base, off, ln, lambda e: log.durable(e.index, last)) == sha:
                print(f"{what}: durable at {name}")
                continue
            bad += 1
            if rebuild(log, base, off, ln, lambda e: e.index < end) == sha:
                why = f"written before the {point}, but no FLUSH after it and not FUA"
            elif rebuild(log, base, off, ln, lambda e: True) == sha:
                why = f"logged only after the {point}"
            else:
                why = "not in the log with that content"
            print(f"{what}: NOT durable at {name}: {why}")
    return 1 if bad else 0


def pick(points, cap):
    """at most cap of points, spread evenly, the last always in"""
    if not cap or len(points) <= cap:
        return points
    return [points[(k + 1) * len(points) // cap - 1] for k in range(cap)]


def cmd_sweep(log, opt):
    points = log.boundaries()
    if opt.from_mark is not None:
        m = log.find_mark(opt.from_mark)
        points = [b for b in points if b > m]
    chosen = pick(points, opt.cap)
    first = {}  # boundary: the first entry it makes durable
    for i, d in enumerate(log.durable_at):
        if d is not None:
            first.setdefault(d, i)
    img, prev = Image(opt.image), -1
    for b in chosen:
        # The weakest image at b. Entries that became durable since the
        # last point may lie before ones already applied (a write waiting
        # for a flush, a FUA write after it): apply again, in log order,
        # every durable entry from the first of them on.
        lo = min((first[d] for d in range(prev + 1, b + 1) if d in first),
                 default=b + 1)
        for e in log.entries[lo:b + 1]:
            if e.touches() and log.durable(e.index, b):
                img.apply(log, e)
        img.sync()
        prev = b
        env = dict(os.environ, IMAGE=opt.image, ENTRY=str(b))
        import subprocess
        rc = subprocess.run(opt.cmd, shell=True, env=env).returncode
        what = f"entry {b} {log.entries[b].flag_str()}"
        if rc:
            print(f"{what}: the command failed (exit {rc})")
            return 1
        print(f"{what}: ok")
    print(f"{len(chosen)} of {len(points)} boundaries checked")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="logwrites.py",
                                 description="dm-log-writes logs: list, replay, check")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("entries", help="one line per entry")
    p.add_argument("log")
    p.add_argument("--from", dest="first", type=int, default=0, metavar="N",
                   help="only the entries from index N on")
    p = sub.add_parser("boundaries", help="the FLUSH and FUA entries")
    p.add_argument("log")
    p = sub.add_parser("replay", help="apply entries to an image")
    p.add_argument("log")
    p.add_argument("image")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--to", type=int, metavar="N")
    g.add_argument("--mark", metavar="NAME")
    p.add_argument("--weakest", action="store_true",
                   help="only the entries durable at that point")
    p = sub.add_parser("check", help="expected ranges durable at a mark")
    p.add_argument("log")
    p.add_argument("--mark", dest="points", action="append", metavar="NAME",
                   type=lambda v: ("mark", v))
    p.add_argument("--at", dest="points", action="append", metavar="N",
                   type=lambda v: ("at", int(v)),
                   help="the point after the first N entries, instead of a mark")
    p.add_argument("--expect", required=True, action="append", metavar="FILE")
    p.add_argument("--base", metavar="IMAGE",
                   help="the device before logging began (default: zeroes)")
    p = sub.add_parser("sweep", help="a command at each boundary")
    p.add_argument("log")
    p.add_argument("image")
    p.add_argument("--cmd", required=True)
    p.add_argument("--cap", type=int, default=16, metavar="N",
                   help="at most N boundaries, 0 all (default 16)")
    p.add_argument("--from-mark", metavar="NAME")
    for p in sub.choices.values():
        p.add_argument("--scan", action="store_true",
                       help="read entries past the super block's count")
    opt = ap.parse_args(argv)
    run = {"entries": cmd_entries, "boundaries": cmd_boundaries,
           "replay": cmd_replay, "check": cmd_check, "sweep": cmd_sweep}
    try:
        log = Log(opt.log, opt.scan)
    except LogError as e:
        print(f"logwrites.py: {opt.log}: {e}", file=sys.stderr)
        return 2
    try:
        return run[opt.command](log, opt) or 0
    except LogError as e:
        print(f"logwrites.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
