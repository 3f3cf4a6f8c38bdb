#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""copy_file_range(2) calls for the copy group, one per line of stdin, in one
process (a python start costs the debug guest about 2 s):

    NAME|SRC SRC_OFF DST DST_OFF LEN [FLAGS [MODES]]

Offsets are explicit (negative ones too); FLAGS 1 is COPY_FILE_OFFLOAD_ONLY;
MODES, two letters, opens source and destination r (read), w (write), a
(write, O_APPEND), d (write, O_DSYNC) or s (write, O_SYNC), default "rw".
Prints "NAME: RESULT" ("ok BYTES" or the errno name), or RESULT alone for
an empty NAME.

--stat DISK: the result is followed by the change of DISK's copy_stat
counters, and a copy that copied something is compared with its source
(both read with direct I/O): "NAME: destination differs from the source".

--fault ATTR (failslab or fail_page_alloc): each line, with a sixth field
METHOD and an optional seventh, errno names besides ENOMEM the device may
answer an allocation failure with (null_blk: ENOSPC), is a series of
attempts, attempt k writing to DST_OFF + k * LEN:
  random: the attribute's task-filter, with /proc/self/make-it-fail set
          around the call only, fails allocations of the copying task with
          a probability of 100, 100, 50, 50, 20, 20, 10, 10, 5, 5 percent;
  nth:    attempt k fails the kth fault point the task reaches in the call
          (/proc/thread-self/fail-nth: every should_fail() counts, also
          the null_blk's own timeout and requeue injection, so this is for
          devices without fault points of their own in the submitter's
          context), until an attempt reaches fewer than k.
Every attempt must end in such an errno or copy right what it reports; the line
then prints "NAME: clean" (the faults injected go to stderr), else each
wrong attempt.
"""
import argparse
import ctypes
import errno
import mmap
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--stat", default="")
ap.add_argument("--fault", choices=("failslab", "fail_page_alloc"))
opt = ap.parse_args()
stat = opt.stat.removeprefix("/dev/")

libc = ctypes.CDLL(None, use_errno=True)
cfr = libc.copy_file_range
cfr.restype = ctypes.c_ssize_t
cfr.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_longlong),
                ctypes.c_int, ctypes.POINTER(ctypes.c_longlong),
                ctypes.c_size_t, ctypes.c_uint]
MODE = {"r": os.O_RDONLY, "w": os.O_WRONLY, "a": os.O_WRONLY | os.O_APPEND,
        "d": os.O_WRONLY | os.O_DSYNC, "s": os.O_WRONLY | os.O_SYNC}
NAMES = ("offloaded", "split", "emulated", "failed")
buf = [mmap.mmap(-1, 1 << 20), mmap.mmap(-1, 1 << 20)]


def counters():
    with open(f"/sys/kernel/debug/block/{stat}/copy_stat") as f:
        return [int(line.split()[1]) for line in f]


def same(a, aoff, b, boff, n):
    """the two ranges read the same (a range that cannot be read does not)"""
    fds = [os.open(a, os.O_RDONLY | os.O_DIRECT), os.open(b, os.O_RDONLY | os.O_DIRECT)]
    try:
        while n:
            k = min(n, 1 << 20)
            got = [os.preadv(fd, [memoryview(m)[:k]], off)
                   for fd, m, off in zip(fds, buf, (aoff, boff))]
            if got != [k, k] or buf[0][:k] != buf[1][:k]:
                return False
            n, aoff, boff = n - k, aoff + k, boff + k
        return True
    except OSError:
        return False
    finally:
        for fd in fds:
            os.close(fd)


def copy(src, soff, dst, doff, n, flags=0, modes="rw", around=None):
    """one call; around: (before, after) callables right around it"""
    fi, fo = os.open(src, MODE[modes[0]]), os.open(dst, MODE[modes[1]])
    oi, oo = ctypes.c_longlong(soff), ctypes.c_longlong(doff)
    if around:
        around[0]()
    ret = cfr(fi, ctypes.byref(oi), fo, ctypes.byref(oo), n, flags)
    err = ctypes.get_errno()
    if around:
        around[1]()
    os.close(fi)
    os.close(fo)
    return ret, (f"ok {ret}" if ret >= 0 else errno.errorcode[err])


def attr(name, value):
    with open(f"/sys/kernel/debug/{opt.fault}/{name}", "w") as f:
        f.write(f"{value}\n")


def times():
    with open(f"/sys/kernel/debug/{opt.fault}/times") as f:
        return int(f.read())


# --task-filter: the probability of each attempt's allocation failures
PROBABILITIES = (100, 100, 50, 50, 20, 20, 10, 10, 5, 5)


def sweep(name, method, src, soff, dst, doff, n, errnos):
    """the attempts of one --fault line; returns the lines to print"""
    bad, log = [], []
    injected = 0
    nth = os.open("/proc/thread-self/fail-nth", os.O_RDWR)
    mif = os.open("/proc/self/make-it-fail", os.O_WRONLY)
    for k in range(1, 200):
        if method == "random":
            if k > len(PROBABILITIES):
                break
            attr("probability", PROBABILITIES[k - 1])
            left = times()
            around = (lambda: os.write(mif, b"1"), lambda: os.write(mif, b"0"))
        else:
            around = (lambda: os.write(nth, str(k).encode()), lambda: None)
        ret, res = copy(src, soff, dst, doff + k * n, n, around=around)
        if method == "random":
            hit = left - times()
        else:
            hit = int(os.pread(nth, 16, 0).strip() == b"0")
            os.write(nth, b"0")
        injected += hit
        log.append(f"{k}:{res}" + (f"({hit})" if hit else "(no fault)"))
        if ret > 0 and not same(src, soff, dst, doff + k * n, ret):
            bad.append(f"{name}: attempt {k}: {res}, destination differs from the source")
        elif ret == 0 or (ret < 0 and res not in errnos):
            bad.append(f"{name}: attempt {k}: {res}")
        elif ret != n and not hit:
            bad.append(f"{name}: attempt {k}, no fault injected: {res}")
        if method == "nth" and not hit:
            break
    os.close(nth)
    os.close(mif)
    print(f"{name}: {injected} faults injected: {' '.join(log)}", file=sys.stderr)
    if not injected:
        bad.append(f"{name}: no fault reached the copy")
    return bad or [f"{name}: clean"]


if opt.fault:
    attr("verbose", 0)
    attr("ignore-gfp-wait", "N")
    if opt.fault == "fail_page_alloc":
        attr("min-order", 0)
    attr("task-filter", "Y")
    attr("interval", 1)
    attr("times", 1000000)
for line in sys.stdin:
    if not line.strip():
        continue
    name, _, args = line.rstrip("\n").partition("|")
    a = args.split()
    src, soff, dst, doff, n = a[0], int(a[1]), a[2], int(a[3]), int(a[4])
    if opt.fault:
        errnos = ["ENOMEM"] + (a[6].split(",") if len(a) > 6 else [])
        for out in sweep(name, a[5], src, soff, dst, doff, n, errnos):
            print(out, flush=True)
        continue
    before = counters() if stat else None
    ret, res = copy(src, soff, dst, doff, n, int(a[5]) if len(a) > 5 else 0,
                    a[6] if len(a) > 6 else "rw")
    if stat:
        d = [x - y for x, y in zip(counters(), before)]
        res += " (" + " ".join(f"{k}={v}" for k, v in zip(NAMES, d)) + ")"
    print(f"{name}: {res}" if name else res, flush=True)
    if stat and ret > 0 and not same(src, soff, dst, doff, ret):
        print(f"{name}: destination differs from the source", flush=True)
if opt.fault:
    # the attribute's defaults again (copy_cleanup restores them too)
    attr("probability", 0)
    attr("times", 1)
    attr("task-filter", "N")
    if opt.fault == "fail_page_alloc":
        attr("min-order", 1)
    attr("ignore-gfp-wait", "Y")
    attr("verbose", 2)
