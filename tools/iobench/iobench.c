// SPDX-License-Identifier: GPL-2.0
/*
 * iobench - drive block devices, files or passthrough char devices with
 * io_uring and report IOPS, in the spirit of fio's t/io_uring.
 *
 * Every letter t/io_uring has means the same here, with the same default,
 * so "iobench -d128 -b4096 -p1 -B1 -F1 -n1 /dev/nvme0n1" reads the same
 * way, -N1 issues no-op requests, -S1 reads with preadv2 instead of a ring
 * and -X1 registers the ring fd; -k1 is the NVMe user queue RFC's
 * t/io_uring -k1. Options of our own take letters t/io_uring does not use
 * (-V -w -Q -C -L -v) or long names. t/io_uring's -a (aio),
 * -D (DMA-mapped buffers), -P (NUMA placement) and -T (TSC rate) are not
 * implemented. Run with -h for the list; the defaults shown are the
 * current values.
 *
 * The ring is set up the way t/io_uring sets it up, since its numbers are
 * what ours are compared with: a CQ ring as big as the SQ ring,
 * COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN where the kernel takes them
 * (--defer-taskrun 0 asks for none), the ring fd registered (-X1), and
 * io_uring_enter() called only to submit, to wait for completions, or to
 * wake a sleeping SQPOLL thread; IOS/call counts those calls. The first
 * lines of the output echo the setup, as t/io_uring's do.
 *
 * Structure:
 *  - devices are split over the threads as t/io_uring splits them: with
 *    at least as many threads as devices every thread drives one device
 *    and every device gets -n/devices threads (the first ones one more);
 *    with fewer threads, device i goes to thread i % -n;
 *  - every thread ("worker") owns one ring, depth IO slots and one buffer
 *    per slot; a slot's index is its user_data, its fixed-buffer index and
 *    its iovec; each worker round-robins its IOs over its devices;
 *  - an engine per kind of device (engine-*.c, engines[] below) turns an
 *    IO into an SQE and judges its result: plain read/write for block
 *    devices and files, IORING_OP_URING_CMD for NVMe ng and virtio-blk
 *    vdXc0 char devices (-u1), IORING_OP_NOP for -N1;
 *  - -k1 (engine-userq.c, NVMe ng devices with -u1 -p1) attaches an NVMe
 *    user queue to every ring through the engines' per-ring hook
 *    (ring_init) and asks for it in every command; a ring holds one user
 *    queue, so with -k1 each thread drives exactly one device;
 *  - the main thread only samples counters once a second and prints them.
 *
 * -v is a data integrity check rather than a benchmark: one thread writes a
 * pattern to the first -L blocks of every device, waits for all writes, then
 * reads them back into poisoned buffers and compares; -R, -w and -r do not
 * apply to it.
 *
 * Exit status: 0 on success, 1 on any error (bad value, unusable device,
 * failed IO, verify mismatch), 2 on command line syntax errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <liburing.h>

#include "iobench.h"
#include "rng.h"

/* Older liburing copies of io_uring.h predate registered-buffer uring_cmd. */
#ifndef IORING_URING_CMD_FIXED
#define IORING_URING_CMD_FIXED	(1U << 0)
#endif

#define NSEC_PER_SEC	1000000000ULL

/*
 * The engines a device is matched against, in this order; -N1 uses
 * engine_nop instead, and --copy and -k1 name their engine (engine_copy,
 * engine_userq; see pick_engine()). A new kind of device is one more file
 * and one more line here.
 */
static const struct engine_ops *const engines[] = {
	&engine_block,
	&engine_nvme,
	&engine_vblk,
};

/* ------------------------------------------------------------------ */
/* Options                                                            */
/* ------------------------------------------------------------------ */

struct options opt = {
	.depth		= 128,
	.sbatch		= 32,
	.cbatch		= 32,
	.bs		= 4096,
	.polled		= 1,
	.fixedbufs	= 1,
	.regfiles	= 1,
	.odirect	= 1,
	.nthreads	= 1,
	.nop		= 0,
	.track_lat	= 0,
	.runtime	= 0,
	.random		= 1,
	.sync		= 0,
	.regring	= 1,
	.passthru	= 0,
	.vectored	= 0,
	.wpct		= 0,
	.sqpoll		= 0,
	.sqpoll_cpu	= -1,
	.defer_taskrun	= 1,
	.verify		= 0,
	.nverify	= 256,
	.copy		= COPY_NONE,
	.userq		= 0,
};

struct opt_desc {
	char letter;		/* 0: long option only */
	const char *name;	/* long option, NULL: letter only */
	bool is_switch;		/* takes no value, e.g. -v */
	long min, max;
	size_t off;		/* of the long in struct options */
	const char *key;	/* name in the JSON "options" object */
	const char *help;
};

#define OPT(l, name, field, lo, hi, key, help) \
	{ l, name, false, lo, hi, offsetof(struct options, field), key, help }

/* t/io_uring's letters first, in the order its usage() lists them. */
static const struct opt_desc opt_table[] = {
	OPT('d', NULL, depth, 1, 32768, "depth", "IO depth"),
	OPT('s', NULL, sbatch, 1, 32768, "batch_submit", "Batch submit (capped at -d)"),
	OPT('c', NULL, cbatch, 1, 32768, "batch_complete", "Batch complete (capped at -d)"),
	OPT('b', NULL, bs, 1, 1L << 30, "bs", "Block size in bytes"),
	OPT('p', NULL, polled, 0, 1, "polled",
	    "Polled IO (IORING_SETUP_IOPOLL, RWF_HIPRI with -S1)"),
	OPT('B', NULL, fixedbufs, 0, 1, "fixedbufs",
	    "Fixed (registered) buffers, off by default with -V1"),
	OPT('F', NULL, regfiles, 0, 1, "register_files", "Registered files"),
	OPT('n', NULL, nthreads, 1, 1024, "threads",
	    "Number of threads, one ring each; devices are split over them"),
	OPT('O', NULL, odirect, 0, 1, "o_direct", "Use O_DIRECT (no effect with -u1)"),
	OPT('N', NULL, nop, 0, 1, "nop", "Perform just no-op requests (IORING_OP_NOP), no device"),
	OPT('t', NULL, track_lat, 0, 1, "track_latency", "Track per-IO latency"),
	OPT('r', NULL, runtime, 0, INT_MAX, "runtime", "Runtime in seconds, 0 = until SIGINT"),
	OPT('R', NULL, random, 0, 1, "random_io", "Random IO, 0 = sequential"),
	OPT('S', NULL, sync, 0, 1, "sync",
	    "Sync IO (preadv2/pwritev2, one at a time) instead of a ring"),
	OPT('X', NULL, regring, 0, 1, "register_ring",
	    "Registered ring fd (io_uring_register_ring_fd)"),
	OPT('u', NULL, passthru, 0, 1, "passthrough", "Passthrough (URING_CMD) on a char device"),
	OPT('k', NULL, userq, 0, 1, "user_queue",
	    "NVMe user queue on each ring (needs -u1 -p1, user queues on the controller)"),
	OPT('V', NULL, vectored, 0, 1, "vectored",
	    "Vectored IO (readv/writev, vectored passthrough)"),
	OPT('w', NULL, wpct, 0, 100, "write_pct", "Write percentage (overwrites data! the pattern only with -v)"),
	OPT('Q', "sqpoll", sqpoll, 0, 1, "sqpoll", "SQPOLL (IORING_SETUP_SQPOLL)"),
	OPT('C', "sqpoll-cpu", sqpoll_cpu, -1, INT_MAX, "sqpoll_cpu",
	    "SQPOLL thread CPU, -1 = not bound"),
	OPT(0, "defer-taskrun", defer_taskrun, 0, 1, "defer_taskrun",
	    "t/io_uring's COOP_TASKRUN|SINGLE_ISSUER|DEFER_TASKRUN ring flags, 0 = none"),
	OPT('L', "verify-blocks", nverify, 1, INT_MAX, "verify_blocks",
	    "Blocks per device covered by -v"),
	OPT(0, "copy", copy, 0, 3, "copy",
	    "Copy workload on a block device (first half -> second half): 1 copy_file_range, 2 offload only, 3 pread+pwrite"),
	{ 'v', "verify", true, 0, 1, offsetof(struct options, verify), "verify",
	  "Verify the first -L blocks: write, read back, compare (overwrites data!)" },
};

/* getopt value of a long-only option: past every char. */
#define OPT_LONG_BASE	256

/* Which options the command line set, for defaults that depend on others. */
static bool opt_given[ARRAY_SIZE(opt_table)];

static long *opt_field(const struct opt_desc *d)
{
	return (long *)((char *)&opt + d->off);
}

static bool given(const long *field)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opt_table); i++)
		if (opt_field(&opt_table[i]) == field)
			return opt_given[i];
	return false;
}

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p)
		die("out of memory");
	return p;
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p)
		die("out of memory");
	return p;
}

/* Zeroed, so buffer pages are faulted in before the clock starts. */
static void *xaligned(size_t align, size_t size)
{
	void *p;
	int ret = posix_memalign(&p, align, size);

	if (ret)
		die("cannot allocate %zu bytes: %s", size, strerror(ret));
	memset(p, 0, size);
	return p;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* The byte count or a negative errno; only a full block is success. */
const char *res_error_full_block(const struct dev *d, int res, char *buf,
				 size_t len)
{
	(void)d;
	if (res < 0)
		return strerror(-res);
	if (res != opt.bs) {
		snprintf(buf, len, "short transfer (%d of %ld bytes)", res,
			 opt.bs);
		return buf;
	}
	return NULL;
}

const char *res_error_zero_ok(const struct dev *d, int res, char *buf,
			      size_t len)
{
	(void)d;
	if (!res)
		return NULL;
	if (res < 0)
		return strerror(-res);
	snprintf(buf, len, "unexpected result %d", res);
	return buf;
}

void prep_uring_cmd(struct io_uring_sqe *sqe, const struct io_req *io)
{
	/* The command runs into the second half of the 128-byte SQE. */
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = io->fd;
	if (io->buf_index >= 0) {
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (__u16)io->buf_index;
	}
}

/* ------------------------------------------------------------------ */
/* Devices                                                            */
/* ------------------------------------------------------------------ */

static struct dev *devs;
static unsigned int ndevs;

/* Last component of the path /sys/dev/char/MAJ:MIN<suffix> points to. */
static bool sysfs_char_name(dev_t rdev, const char *suffix, char *out,
			    size_t len)
{
	char link[96];
	char *real, *base;

	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u%s", major(rdev),
		 minor(rdev), suffix);
	real = realpath(link, NULL);
	if (!real)
		return false;
	base = strrchr(real, '/');
	snprintf(out, len, "%s", base ? base + 1 : real);
	free(real);
	return true;
}

static void pick_engine(struct dev *d, const struct stat *st)
{
	char name[NAME_MAX + 1] = "", class[NAME_MAX + 1] = "";
	const struct engine_ops *forced = NULL;
	unsigned int i;

	if (S_ISCHR(st->st_mode)) {
		if (!sysfs_char_name(st->st_rdev, "", name, sizeof(name)))
			die("%s: char device %u:%u not found in /sys/dev/char",
			    d->path, major(st->st_rdev), minor(st->st_rdev));
		if (!sysfs_char_name(st->st_rdev, "/subsystem", class,
				     sizeof(class)))
			class[0] = '\0';
	}
	/* An option that names its engine only takes devices of its kind. */
	if (opt.copy)
		forced = &engine_copy;
	else if (opt.userq)
		forced = &engine_userq;
	if (forced) {
		if (!forced->probe(st, name, class))
			die("%s: %s", d->path, opt.copy ?
			    "--copy needs a block device (copy_file_range between two ranges of it)" :
			    "-k1 needs an NVMe generic char device (/dev/ngXnY)");
		d->engine = forced;
	}
	for (i = 0; i < ARRAY_SIZE(engines) && !d->engine; i++)
		if (engines[i]->probe(st, name, class))
			d->engine = engines[i];
	if (!d->engine)
		die("%s: %s (class '%s') is not a known passthrough device",
		    d->path, name, class);
	if (!d->engine->setup)
		die("%s: %s passthrough not supported by this build", d->path,
		    d->engine->name);
	if (opt.sync && !d->engine->sync_io)
		die("%s: -S1 (sync IO) is not supported on %s devices", d->path,
		    d->engine->name);
}

static void open_dev(struct dev *d, const char *path)
{
	int flags = (opt.wpct || opt.verify || opt.copy) ? O_RDWR : O_RDONLY;
	struct stat st;

	d->path = path;
	if (stat(path, &st))
		die("%s: %s", path, strerror(errno));
	if (S_ISCHR(st.st_mode) && !opt.passthru)
		die("%s: char device, needs -u1 (passthrough)", path);
	if (!S_ISCHR(st.st_mode) && opt.passthru)
		die("%s: -u1 needs a passthrough char device (e.g. /dev/ng0n1)",
		    path);
	if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))
		die("%s: not a block device, char device or regular file", path);
	/* Char devices refuse O_DIRECT; passthrough bypasses caches anyway. */
	if (opt.odirect && !S_ISCHR(st.st_mode))
		flags |= O_DIRECT;

	d->fd = open(path, flags);
	if (d->fd < 0)
		die("%s: %s", path, strerror(errno));
	pick_engine(d, &st);
	d->engine->setup(d);
	if (opt.bs & ((1L << d->lba_shift) - 1))
		die("%s: -b %ld is not a multiple of the %u byte LBA size",
		    path, opt.bs, 1U << d->lba_shift);

	d->nblocks = d->size / (uint64_t)opt.bs;
	if (!d->nblocks)
		die("%s: smaller than one %ld byte block", path, opt.bs);
	if (opt.verify && (uint64_t)opt.nverify > d->nblocks)
		die("%s: -L %ld exceeds its %" PRIu64 " blocks", path,
		    opt.nverify, d->nblocks);
}

static void open_devices(char **paths, unsigned int n)
{
	unsigned int i;

	if (opt.nop) {
		/* As t/io_uring -N1: no device is opened, whatever is named. */
		devs = xcalloc(1, sizeof(*devs));
		ndevs = 1;
		devs[0].path = "(no-op)";
		devs[0].fd = -1;
		devs[0].engine = &engine_nop;
		engine_nop.setup(&devs[0]);
		devs[0].nblocks = 1;
		return;
	}
	devs = xcalloc(n, sizeof(*devs));
	ndevs = n;
	for (i = 0; i < n; i++)
		open_dev(&devs[i], paths[i]);
}

/* ------------------------------------------------------------------ */
/* Data pattern (writes, -v)                                          */
/* ------------------------------------------------------------------ */

/* "iobench!": keeps zeroed or never-written blocks from matching. */
#define PATTERN_TAG	0x696f62656e636821ULL

/*
 * Each 8-byte word holds its own device byte offset, so data landing at
 * the wrong offset is caught as well as corrupted data.
 */
static uint64_t pattern_word(uint64_t off, size_t i)
{
	return (off + i) ^ PATTERN_TAG;
}

static void fill_pattern(void *buf, size_t len, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t v = pattern_word(off, i);

		memcpy((char *)buf + i, &v, MIN(sizeof(v), len - i));
	}
}

/*
 * Before a -v read: every word the complement of the one the read must
 * bring. A read that moves no data, or stops short, then fails the compare
 * at the first word it left alone, also when the slot's buffer last held
 * the very block it wrote (-L1).
 */
static void fill_poison(void *buf, size_t len, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t v = ~pattern_word(off, i);

		memcpy((char *)buf + i, &v, MIN(sizeof(v), len - i));
	}
}

/* Byte position of the first differing word, or SIZE_MAX if none. */
static size_t pattern_mismatch(const void *buf, size_t len, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t v = pattern_word(off, i);

		if (memcmp((const char *)buf + i, &v, MIN(sizeof(v), len - i)))
			return i;
	}
	return SIZE_MAX;
}

/* ------------------------------------------------------------------ */
/* Latency histogram (-t)                                             */
/* ------------------------------------------------------------------ */

/*
 * Log-linear buckets: values below 64ns are exact, above that each power
 * of two is split into 64 buckets, i.e. under 1% error at a fixed 30 KiB
 * per thread however long the run.
 */
#define LAT_SUB_BITS	6
#define LAT_SUB		(1U << LAT_SUB_BITS)
#define LAT_BUCKETS	((64 - LAT_SUB_BITS + 1) * LAT_SUB)

struct lat_hist {
	uint64_t count, sum, max;
	uint64_t bucket[LAT_BUCKETS];
};

static unsigned int lat_bucket(uint64_t ns)
{
	unsigned int shift;

	if (ns < LAT_SUB)
		return (unsigned int)ns;
	shift = 63 - (unsigned int)__builtin_clzll(ns) - LAT_SUB_BITS;
	return (shift + 1) * LAT_SUB + (unsigned int)((ns >> shift) - LAT_SUB);
}

/* Middle of bucket idx. */
static uint64_t lat_bucket_value(unsigned int idx)
{
	unsigned int shift;

	if (idx < LAT_SUB)
		return idx;
	shift = idx / LAT_SUB - 1;
	return ((uint64_t)(LAT_SUB + idx % LAT_SUB) << shift) +
	       ((1ULL << shift) >> 1);
}

static void lat_add(struct lat_hist *h, uint64_t ns)
{
	h->bucket[lat_bucket(ns)]++;
	h->count++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
}

static void lat_merge(struct lat_hist *dst, const struct lat_hist *src)
{
	unsigned int i;

	for (i = 0; i < LAT_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
}

static uint64_t lat_percentile(const struct lat_hist *h, unsigned int pct)
{
	uint64_t rank = (h->count * pct + 99) / 100, seen = 0;
	unsigned int i;

	for (i = 0; i < LAT_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen && seen >= rank)
			return MIN(lat_bucket_value(i), h->max);
	}
	return 0;
}

static double lat_mean(const struct lat_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

/* ------------------------------------------------------------------ */
/* Workers                                                            */
/* ------------------------------------------------------------------ */

struct io_slot {
	uint64_t off;		/* bytes */
	uint64_t start_ns;	/* -t1 only */
	unsigned int dev;	/* in devs[] */
	unsigned int fidx;	/* in the worker's devices: its fixed file */
	bool write;
};

/* One of a worker's devices. */
struct wdev {
	unsigned int dev;	/* in devs[]; its index here is its fixed file */
	uint64_t seq_blk;	/* -R0: next block */
	const char *ring_note;	/* the engine's ring_init said, for the echo */
};

enum verify_phase { VERIFY_WRITE, VERIFY_READ };

/* What the IO source can hand out right now. */
enum src_state {
	SRC_MORE,	/* another IO */
	SRC_BARRIER,	/* nothing until the inflight IOs complete */
	SRC_DONE,	/* nothing ever again */
};

struct worker {
	/* Written by the worker only, sampled by the main thread. */
	_Atomic unsigned long ios;	/* completed */
	_Atomic unsigned long submitted;	/* SQEs the kernel took */
	_Atomic unsigned long calls;	/* io_uring_enter() (-S1: IO) syscalls */
	_Atomic unsigned long wakeups;	/* of those, SQPOLL thread wakeups */

	unsigned int id;
	pid_t tid;
	pthread_t thread;
	struct io_uring ring;
	unsigned int ring_flags;	/* as the kernel took them */
	bool reg_ring;		/* ring fd registered: enter by its index */
	struct wdev *wdev;	/* its devices */
	unsigned int ndev;
	void *bufs;
	struct iovec *iov;	/* slot i's buffer, fixed buffer index i */
	struct io_slot *slots;
	unsigned int *free_slots;
	unsigned int nfree;
	unsigned int busy;	/* slots queued or in flight */
	uint64_t rng;
	unsigned int next_dev;
	enum verify_phase vphase;
	uint64_t vcursor;	/* -v: IOs issued in this phase */
	struct lat_hist *lat;	/* -t1 only */
} __attribute__((aligned(64)));	/* no false sharing between workers */

static atomic_bool stop;
static atomic_uint running;	/* workers not finished yet */
static sem_t wake;		/* kicks the sampling loop early */
/* Passed twice: rings are set up, then (after the echo) the clock starts. */
static pthread_barrier_t start_barrier;

static bool stop_requested(void)
{
	return atomic_load_explicit(&stop, memory_order_relaxed);
}

static void request_stop(void)
{
	atomic_store_explicit(&stop, true, memory_order_relaxed);
}

/* Single writer: a plain load/store pair avoids a locked instruction. */
static void stat_add(_Atomic unsigned long *c, unsigned long n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static uint64_t verify_total(const struct worker *w)
{
	return (uint64_t)opt.nverify * w->ndev;
}

/*
 * This worker's share of t/io_uring's split: with at least as many threads
 * as devices, device i gets n / ndevs threads, the first n % ndevs devices
 * one more, so that every thread drives exactly one device; with fewer
 * threads every device gets one, device i thread i % n. Each worker works
 * its share out alone, from its id.
 */
static void worker_assign_devices(struct worker *w)
{
	unsigned int n = (unsigned int)opt.nthreads, per = n / ndevs;
	unsigned int first = 0, i, k, limit;
	struct wdev *wd;
	long extra = 0;

	/* A worker drives each device at most once: ndevs entries do. */
	w->wdev = xcalloc(ndevs, sizeof(*w->wdev));
	if (!per)
		per = 1;
	else
		extra = (long)n - (long)per * ndevs;
	for (i = 0; i < ndevs; i++) {
		limit = per + (extra > 0);
		for (k = 0; k < limit; k++) {
			if ((first + k) % n != w->id)
				continue;
			wd = &w->wdev[w->ndev++];
			wd->dev = i;
			/* Threads sharing a device start apart: -R0 runs don't overlap. */
			wd->seq_blk = devs[i].nblocks / limit * k;
		}
		extra--;
		first += limit;
	}
}

static const struct {
	unsigned int flag;
	const char *name;
} ring_flag_names[] = {
	{ IORING_SETUP_IOPOLL, "IOPOLL" },
	{ IORING_SETUP_SQPOLL, "SQPOLL" },
	{ IORING_SETUP_SQ_AFF, "SQ_AFF" },
	{ IORING_SETUP_CQSIZE, "CQSIZE" },
	{ IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN" },
	{ IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER" },
	{ IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN" },
	{ IORING_SETUP_SQE128, "SQE128" },
	{ IORING_SETUP_CQE32, "CQE32" },
};

/* "IOPOLL|CQSIZE|..." into buf. */
static const char *ring_flags_str(unsigned int flags, char *buf, size_t len)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(ring_flag_names); i++)
		if (flags & ring_flag_names[i].flag)
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0,
					      "%s%s", n ? "|" : "",
					      ring_flag_names[i].name);
	return buf;
}

static int try_ring_init(struct worker *w, unsigned int flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	/* At most -d IOs are in flight: a bigger CQ ring is never used. */
	p.cq_entries = (unsigned int)opt.depth;
	if (flags & IORING_SETUP_SQ_AFF)
		p.sq_thread_cpu = (__u32)opt.sqpoll_cpu;
	return io_uring_queue_init_params((unsigned int)opt.depth, &w->ring, &p);
}

/*
 * As t/io_uring: ask for COOP_TASKRUN, SINGLE_ISSUER and DEFER_TASKRUN,
 * and drop them one by one, in that order, while the kernel says EINVAL
 * (kernels before 6.1, and SQPOLL, which takes neither taskrun flag).
 */
static void worker_init_ring(struct worker *w)
{
	static const unsigned int optional[] = {
		IORING_SETUP_COOP_TASKRUN,
		IORING_SETUP_SINGLE_ISSUER,
		IORING_SETUP_DEFER_TASKRUN,
	};
	unsigned int flags = IORING_SETUP_CQSIZE, i;
	char names[160];
	int ret;

	if (opt.polled)
		flags |= IORING_SETUP_IOPOLL;
	for (i = 0; i < w->ndev; i++)
		flags |= devs[w->wdev[i].dev].engine->ring_flags;
	if (opt.sqpoll)
		flags |= IORING_SETUP_SQPOLL;
	if (opt.sqpoll_cpu >= 0)
		flags |= IORING_SETUP_SQ_AFF;
	if (opt.defer_taskrun)
		for (i = 0; i < ARRAY_SIZE(optional); i++)
			flags |= optional[i];

	ret = try_ring_init(w, flags);
	for (i = 0; ret == -EINVAL && i < ARRAY_SIZE(optional); i++) {
		if (!(flags & optional[i]))
			continue;
		flags &= ~optional[i];
		ret = try_ring_init(w, flags);
	}
	if (ret < 0)
		die("io_uring_queue_init (flags %s): %s",
		    ring_flags_str(flags, names, sizeof(names)), strerror(-ret));
	w->ring_flags = flags;

	/* t/io_uring too goes on without when the kernel lacks it (< 5.18). */
	if (opt.regring)
		w->reg_ring = io_uring_register_ring_fd(&w->ring) == 1;
}

static void worker_register(struct worker *w)
{
	unsigned int i;
	int *fds, ret;

	if (opt.fixedbufs) {
		ret = io_uring_register_buffers(&w->ring, w->iov,
						(unsigned int)opt.depth);
		if (ret < 0)
			die("io_uring_register_buffers: %s%s", strerror(-ret),
			    ret == -ENOMEM ? " (RLIMIT_MEMLOCK too low? try -B0)" : "");
	}
	if (opt.regfiles) {
		fds = xcalloc(w->ndev, sizeof(*fds));
		for (i = 0; i < w->ndev; i++)
			fds[i] = devs[w->wdev[i].dev].fd;
		ret = io_uring_register_files(&w->ring, fds, w->ndev);
		if (ret < 0)
			die("io_uring_register_files: %s", strerror(-ret));
		free(fds);
	}
}

/* What an SQE for the worker's device l puts in sqe->fd. */
static int wdev_sqe_fd(const struct worker *w, unsigned int l)
{
	return opt.regfiles ? (int)l : devs[w->wdev[l].dev].fd;
}

/* The engines' per-ring set-up, once the ring is otherwise ready. */
static void worker_ring_init(struct worker *w)
{
	unsigned int i;

	for (i = 0; i < w->ndev; i++) {
		struct wdev *wd = &w->wdev[i];
		const struct dev *d = &devs[wd->dev];

		if (d->engine->ring_init)
			wd->ring_note = d->engine->ring_init(d, &w->ring,
							     wdev_sqe_fd(w, i),
							     opt.regfiles);
	}
}

static void worker_setup(struct worker *w)
{
	size_t bs = (size_t)opt.bs;
	unsigned int i, depth = (unsigned int)opt.depth;

	w->tid = gettid();
	worker_assign_devices(w);
	w->bufs = xaligned(4096, depth * bs);
	w->iov = xcalloc(depth, sizeof(*w->iov));
	w->slots = xcalloc(depth, sizeof(*w->slots));
	w->free_slots = xcalloc(depth, sizeof(*w->free_slots));
	for (i = 0; i < depth; i++) {
		w->iov[i].iov_base = (char *)w->bufs + i * bs;
		w->iov[i].iov_len = bs;
		w->free_slots[i] = depth - 1 - i;
	}
	w->nfree = depth;
	/* Created here: with SINGLE_ISSUER only this thread may submit. */
	if (!opt.sync) {
		worker_init_ring(w);
		worker_register(w);
		worker_ring_init(w);
	}

	w->rng = (now_ns() ^ ((uint64_t)(w->id + 1) * 0x9e3779b97f4a7c15ULL)) | 1;
	if (opt.track_lat)
		w->lat = xcalloc(1, sizeof(*w->lat));
}

static void worker_teardown(struct worker *w)
{
	if (!opt.sync)
		io_uring_queue_exit(&w->ring);
	free(w->wdev);
	free(w->free_slots);
	free(w->slots);
	free(w->iov);
	free(w->bufs);
}

static enum src_state source_state(struct worker *w)
{
	if (stop_requested())
		return SRC_DONE;
	if (!opt.verify || w->vcursor < verify_total(w))
		return SRC_MORE;
	if (w->vphase == VERIFY_READ)
		return SRC_DONE;
	/* Reads must not overtake the writes they check. */
	if (w->busy)
		return SRC_BARRIER;
	w->vphase = VERIFY_READ;
	w->vcursor = 0;
	return SRC_MORE;
}

/* Pick device, offset and direction; only called after SRC_MORE. */
static void next_io(struct worker *w, struct io_slot *s)
{
	const struct dev *d;
	unsigned int l;
	uint64_t blk;

	if (opt.verify) {
		l = (unsigned int)(w->vcursor % w->ndev);
		s->dev = w->wdev[l].dev;
		s->fidx = l;
		s->off = w->vcursor / w->ndev * (uint64_t)opt.bs;
		s->write = w->vphase == VERIFY_WRITE;
		w->vcursor++;
		return;
	}

	l = w->next_dev;
	w->next_dev = (l + 1) % w->ndev;
	s->dev = w->wdev[l].dev;
	s->fidx = l;
	s->write = false;
	if (opt.nop) {
		s->off = 0;
		return;
	}
	d = &devs[s->dev];
	if (opt.random) {
		blk = rng_below(&w->rng, d->nblocks);
	} else {
		blk = w->wdev[l].seq_blk;
		w->wdev[l].seq_blk = blk + 1 == d->nblocks ? 0 : blk + 1;
	}
	s->off = blk * (uint64_t)opt.bs;
	s->write = opt.wpct && rng_below(&w->rng, 100) < (uint64_t)opt.wpct;
}

/* Describe slot idx's IO for an engine, its buffer filled or poisoned. */
static void make_req(struct worker *w, unsigned int idx, struct io_req *io)
{
	const struct io_slot *s = &w->slots[idx];
	void *buf = w->iov[idx].iov_base;

	/*
	 * Only -v needs each write's data to be the pattern of its offset.
	 * Otherwise a buffer is written as it is, as fio does without
	 * refill_buffers: filling it costs about 4 instructions a byte,
	 * which would bury the I/O path in what is measured.
	 */
	if (opt.verify)
		(s->write ? fill_pattern : fill_poison)(buf, (size_t)opt.bs, s->off);
	io->off = s->off;
	io->len = (uint32_t)opt.bs;
	io->write = s->write;
	io->buf = buf;
	io->iov = opt.vectored ? &w->iov[idx] : NULL;
	io->buf_index = opt.fixedbufs ? (int)idx : -1;
	io->fd = wdev_sqe_fd(w, s->fidx);
}

static void prep_io(struct worker *w, struct io_uring_sqe *sqe,
		    unsigned int idx)
{
	struct io_slot *s = &w->slots[idx];
	const struct dev *d = &devs[s->dev];
	struct io_req io;

	make_req(w, idx, &io);
	d->engine->prep(d, sqe, &io);
	if (opt.regfiles)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, idx);
	if (w->lat)
		s->start_ns = now_ns();
}

/* Queue up to -s IOs into free slots; tell the caller why it stopped. */
static enum src_state queue_ios(struct worker *w)
{
	enum src_state st = SRC_MORE;
	unsigned long n = 0;

	while (w->nfree && n < (unsigned long)opt.sbatch) {
		struct io_uring_sqe *sqe;
		unsigned int idx;

		st = source_state(w);
		if (st != SRC_MORE)
			break;
		/* Cannot fail: the SQ ring has at least -d entries. */
		sqe = io_uring_get_sqe(&w->ring);
		if (!sqe)
			break;
		idx = w->free_slots[--w->nfree];
		next_io(w, &w->slots[idx]);
		prep_io(w, sqe, idx);
		w->busy++;
		n++;
	}
	return st;
}

/* Judge slot idx's result; a failed IO or a verify mismatch ends the run. */
static void check_io(struct worker *w, unsigned int idx, int res)
{
	const struct io_slot *s = &w->slots[idx];
	const struct dev *d = &devs[s->dev];
	const char *err;
	char buf[80];
	size_t bad;

	err = d->engine->res_error(d, res, buf, sizeof(buf));
	if (err && opt.copy)
		die("Copy error: %s copying offset %" PRIu64 " to %" PRIu64 " (%s %s)%s",
		    err, s->off, s->off + d->u.copy.half, d->path,
		    opt.copy == COPY_RW ? "pread+pwrite" : "copy_file_range",
		    res == -EOPNOTSUPP && opt.copy == COPY_OFFLOAD_ONLY ?
		    "; the device cannot offload this copy, see copy_max_bytes in /sys/block/<disk>/queue/" :
		    res == -EINVAL && opt.copy != COPY_RW ?
		    "; a kernel without copy_file_range on block devices?" : "");
	if (err)
		die("IO error: %s at offset %" PRIu64 " (%s %s)%s", err, s->off,
		    s->write ? "write" : "read", d->path,
		    opt.polled && res == -EOPNOTSUPP ?
		    "; no polled IO support here, try -p0" : "");

	if (opt.verify && !s->write) {
		bad = pattern_mismatch(w->iov[idx].iov_base, (size_t)opt.bs,
				       s->off);
		if (bad != SIZE_MAX)
			die("Verify error: %s: block at offset %" PRIu64
			    " differs from what was written, from byte %zu on",
			    d->path, s->off, bad);
	}
	if (w->lat)
		lat_add(w->lat, now_ns() - s->start_ns);
}

static void complete_io(struct worker *w, const struct io_uring_cqe *cqe)
{
	unsigned int idx = (unsigned int)cqe->user_data;

	if (cqe->user_data >= (uint64_t)opt.depth)
		die("BUG: CQE with unknown user_data %llu",
		    (unsigned long long)cqe->user_data);
	check_io(w, idx, cqe->res);
	w->free_slots[w->nfree++] = idx;
}

static unsigned int reap(struct worker *w)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;

	io_uring_for_each_cqe(&w->ring, head, cqe) {
		complete_io(w, cqe);
		n++;
	}
	io_uring_cq_advance(&w->ring, n);
	w->busy -= n;
	stat_add(&w->ios, n);
	return n;
}

/*
 * Publish the SQEs queued since the last call and return how many the
 * kernel has not taken yet; *added is how many this call published.
 * liburing does this inside io_uring_submit() but does not export it, and
 * we make the io_uring_enter() calls ourselves so that we can count them.
 */
static unsigned int sq_flush(struct io_uring *ring, unsigned int *added)
{
	struct io_uring_sq *sq = &ring->sq;
	unsigned int tail = sq->sqe_tail;

	*added = tail - sq->sqe_head;
	if (*added) {
		sq->sqe_head = tail;
		/* The SQEs must be visible before the tail that hands them over. */
		io_uring_smp_store_release(sq->ktail, tail);
	}
	return tail - io_uring_smp_load_acquire(sq->khead);
}

/* io_uring_enter(2), counted; returns what it returned or -errno. */
static int ring_enter(struct worker *w, unsigned int to_submit,
		      unsigned int wait_nr, unsigned int flags)
{
	int fd = w->ring.ring_fd;
	long ret;

	if (w->reg_ring) {
		fd = w->ring.enter_ring_fd;
		flags |= IORING_ENTER_REGISTERED_RING;
	}
	stat_add(&w->calls, 1);
	if (flags & IORING_ENTER_SQ_WAKEUP)
		stat_add(&w->wakeups, 1);
	ret = syscall(__NR_io_uring_enter, fd, to_submit, wait_nr, flags,
		      NULL, 0);
	return ret < 0 ? -errno : (int)ret;
}

/*
 * io_uring_enter() refused new work: -EAGAIN (out of request memory) or
 * -EBUSY (CQ overflow backlog). Only completions make room, so wait for
 * one without submitting; with IOPOLL this is also what polls.
 */
static void wait_for_room(struct worker *w)
{
	unsigned int inflight = w->busy - io_uring_sq_ready(&w->ring);
	int ret;

	if (io_uring_cq_ready(&w->ring))
		return;
	if (!inflight) {
		sched_yield();
		return;
	}
	ret = ring_enter(w, 0, 1, IORING_ENTER_GETEVENTS);
	if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
		die("io_uring_enter (wait): %s", strerror(-ret));
}

/*
 * Hand what is queued to the kernel and, if asked, wait for wait_nr
 * completions, then reap whatever completed. As t/io_uring: enter only to
 * submit or wait, with GETEVENTS only to wait (that is also when IOPOLL
 * polls and DEFER_TASKRUN runs completions); with SQPOLL enter only to
 * wake the thread, and wait by spinning on the CQ ring. SQEs the kernel
 * did not take stay in the SQ ring and go out with the next call.
 */
static void submit_and_reap(struct worker *w, unsigned int wait_nr)
{
	bool sqpoll = w->ring_flags & IORING_SETUP_SQPOLL;
	unsigned int added, flags = 0, reaped;
	unsigned int to_submit = sq_flush(&w->ring, &added);
	bool enter = to_submit || wait_nr;
	int ret;

	if (sqpoll) {
		/* The tail store must be seen before NEED_WAKEUP is read. */
		io_uring_smp_mb();
		if (IO_URING_READ_ONCE(*w->ring.sq.kflags) & IORING_SQ_NEED_WAKEUP)
			flags |= IORING_ENTER_SQ_WAKEUP;
		else
			enter = false;
		/* The SQPOLL thread takes them, woken or not. */
		stat_add(&w->submitted, added);
	}
	if (wait_nr)
		flags |= IORING_ENTER_GETEVENTS;

	if (enter) {
		ret = ring_enter(w, to_submit, wait_nr, flags);
		if (ret == -EAGAIN || ret == -EBUSY)
			wait_for_room(w);
		else if (ret < 0 && ret != -EINTR)
			die("io_uring_enter: %s", strerror(-ret));
		else if (ret > 0 && !sqpoll)
			stat_add(&w->submitted, (unsigned long)ret);
	}
	reaped = reap(w);
	while (sqpoll && reaped < wait_nr)
		reaped += reap(w);
}

static void worker_run(struct worker *w)
{
	for (;;) {
		enum src_state st = queue_ios(w);
		unsigned int wait_nr = 0;

		if (st == SRC_DONE && !w->busy)
			break;
		/* Like t/io_uring: only block once no more IO can be queued. */
		if (st != SRC_MORE || !w->nfree)
			wait_nr = MIN(w->busy, (unsigned int)opt.cbatch);
		submit_and_reap(w, wait_nr);
	}
}

/* -S1: one IO at a time through the engine's sync_io, in slot 0. */
static void worker_run_sync(struct worker *w)
{
	struct io_slot *s = &w->slots[0];
	const struct dev *d;
	struct io_req io;
	int res;

	while (source_state(w) == SRC_MORE) {
		next_io(w, s);
		d = &devs[s->dev];
		make_req(w, 0, &io);
		if (w->lat)
			s->start_ns = now_ns();
		res = d->engine->sync_io(d, &io);
		stat_add(&w->calls, 1);
		stat_add(&w->submitted, 1);
		check_io(w, 0, res);
		stat_add(&w->ios, 1);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	worker_setup(w);
	pthread_barrier_wait(&start_barrier);	/* set up */
	pthread_barrier_wait(&start_barrier);	/* go */
	if (opt.sync)
		worker_run_sync(w);
	else
		worker_run(w);
	worker_teardown(w);
	atomic_fetch_sub(&running, 1);
	sem_post(&wake);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Main thread: start, sample, summarise                              */
/* ------------------------------------------------------------------ */

struct totals {
	unsigned long ios, submitted, calls, wakeups;
};

/*
 * CPU time over the run: this process's (fio's usr_cpu and sys_cpu) and
 * the whole system's busy time from /proc/stat, which also counts the
 * kernel threads a copy or a completion may run in (kblockd, softirqs).
 */
struct cpu_usage {
	struct rusage self;
	double busy_s;		/* system-wide, all CPUs; < 0: unknown */
};

static double proc_stat_busy_s(void)
{
	unsigned long long v[10] = { 0 }, busy = 0;
	FILE *f = fopen("/proc/stat", "r");
	int i, n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
		   &v[8], &v[9]);
	fclose(f);
	if (n < 5)
		return -1;
	/* all but idle (3) and iowait (4); guest time is inside user */
	for (i = 0; i < 8 && i < n; i++)
		if (i != 3 && i != 4)
			busy += v[i];
	return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

static void cpu_usage_read(struct cpu_usage *c)
{
	getrusage(RUSAGE_SELF, &c->self);
	c->busy_s = proc_stat_busy_s();
}

static double tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

struct result {
	double runtime_s;
	double usr_s, sys_s;	/* this process */
	double busy_s;		/* the system, < 0: unknown */
	struct totals t;
	unsigned long iops, iops_max;
	unsigned long *samples;
	size_t nsamples, samples_cap;
	struct lat_hist *lat;	/* merged over workers, -t1 only */
};

static void on_signal(int sig)
{
	(void)sig;
	request_stop();
	sem_post(&wake);
}

static void install_signal_handlers(void)
{
	/* SA_RESETHAND: a second ^C kills a run stuck draining a dead device. */
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* t/io_uring's first lines: who drives what, and how the ring came out. */
static void print_setup(const struct worker *w)
{
	char names[160];
	unsigned int i, k;

	for (i = 0; i < (unsigned int)opt.nthreads; i++) {
		printf("submitter=%u, tid=%d, file=", i, (int)w[i].tid);
		for (k = 0; k < w[i].ndev; k++)
			printf("%s%s", k ? "," : "", devs[w[i].wdev[k].dev].path);
		putchar('\n');
	}
	printf("polled=%ld, fixedbufs=%ld, register_files=%ld, buffered=%d, QD=%ld, user_queue=%ld\n",
	       opt.polled, opt.fixedbufs, opt.regfiles, !opt.odirect, opt.depth,
	       opt.userq);
	if (opt.sync)
		printf("Engine=%s\n", opt.copy == COPY_RW ? "pread+pwrite" :
		       opt.copy ? "copy_file_range" : "preadv2");
	else
		printf("Engine=io_uring, sq_ring=%u, cq_ring=%u, flags=%s, register_ring=%d\n",
		       w[0].ring.sq.ring_entries, w[0].ring.cq.ring_entries,
		       ring_flags_str(w[0].ring_flags, names, sizeof(names)),
		       w[0].reg_ring);
	for (i = 0; i < (unsigned int)opt.nthreads; i++)
		for (k = 0; k < w[i].ndev; k++)
			if (w[i].wdev[k].ring_note)
				printf("%s (ring %u)\n", w[i].wdev[k].ring_note, i);
}

static struct worker *start_workers(void)
{
	unsigned int i, n = (unsigned int)opt.nthreads;
	struct worker *w;
	sigset_t block, old;
	int ret;

	w = xaligned(64, n * sizeof(*w));
	if (sem_init(&wake, 0, 0))
		die("sem_init: %s", strerror(errno));
	ret = pthread_barrier_init(&start_barrier, NULL, n + 1);
	if (ret)
		die("pthread_barrier_init: %s", strerror(ret));
	atomic_store(&running, n);

	/* Workers inherit the blocked mask: signals wake the main thread. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (i = 0; i < n; i++) {
		w[i].id = i;
		ret = pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
		if (ret)
			die("pthread_create: %s", strerror(ret));
	}
	install_signal_handlers();
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	/* Rings and buffers are set up: say how, then start the clock. */
	pthread_barrier_wait(&start_barrier);
	print_setup(w);
	pthread_barrier_wait(&start_barrier);
	return w;
}

static struct totals read_totals(struct worker *w)
{
	struct totals t = { 0, 0, 0, 0 };
	long i;

	for (i = 0; i < opt.nthreads; i++) {
		t.ios += atomic_load_explicit(&w[i].ios, memory_order_relaxed);
		t.submitted += atomic_load_explicit(&w[i].submitted,
						    memory_order_relaxed);
		t.calls += atomic_load_explicit(&w[i].calls, memory_order_relaxed);
		t.wakeups += atomic_load_explicit(&w[i].wakeups,
						  memory_order_relaxed);
	}
	return t;
}

static void add_sample(struct result *r, unsigned long iops)
{
	if (r->nsamples == r->samples_cap) {
		r->samples_cap = r->samples_cap ? 2 * r->samples_cap : 64;
		r->samples = xrealloc(r->samples,
				      r->samples_cap * sizeof(*r->samples));
	}
	r->samples[r->nsamples++] = iops;
	if (iops > r->iops_max)
		r->iops_max = iops;
}

/*
 * IOPS=..., BW=..., IOS/call=s/c as t/io_uring prints it: SQEs submitted
 * and completions reaped per io_uring_enter() call ("-" without a call,
 * where t/io_uring prints -1). With SQPOLL, how many calls there were and
 * how many of them woke the thread; no BW for -N1.
 */
static void print_sample(struct result *r, const struct totals *prev,
			 const struct totals *cur, uint64_t elapsed_ns)
{
	unsigned long ios = cur->ios - prev->ios;
	unsigned long calls = cur->calls - prev->calls;
	unsigned long iops = (unsigned long)(ios * NSEC_PER_SEC / elapsed_ns);

	printf("IOPS=%lu, ", iops);
	if (!opt.nop)
		printf("BW=%luMiB/s, ", (unsigned long)(iops * (uint64_t)opt.bs >> 20));
	if (calls)
		printf("IOS/call=%lu/%lu", (cur->submitted - prev->submitted) / calls,
		       ios / calls);
	else
		printf("IOS/call=-/-");
	if (opt.sqpoll)
		printf(", enters=%lu, wakeups=%lu", calls,
		       cur->wakeups - prev->wakeups);
	putchar('\n');
	add_sample(r, iops);
}

/* One line per second until stopped, runtime is up, or workers are done. */
static void sample_loop(struct worker *w, struct result *r, uint64_t start)
{
	uint64_t deadline = start + NSEC_PER_SEC, last_ns = start, now;
	struct totals last = { 0, 0, 0, 0 }, cur;
	struct timespec ts;

	while (!stop_requested() && atomic_load(&running)) {
		ts.tv_sec = (time_t)(deadline / NSEC_PER_SEC);
		ts.tv_nsec = (long)(deadline % NSEC_PER_SEC);
		if (sem_clockwait(&wake, CLOCK_MONOTONIC, &ts) == 0 ||
		    errno != ETIMEDOUT)
			continue;	/* signal or finished worker: re-check */

		now = now_ns();
		cur = read_totals(w);
		print_sample(r, &last, &cur, now - last_ns);
		last = cur;
		last_ns = now;
		if (opt.runtime && !opt.verify &&
		    now - start >= (uint64_t)opt.runtime * NSEC_PER_SEC)
			request_stop();
		/* After a stall (SIGSTOP...) skip missed ticks, no short samples. */
		while (deadline <= now)
			deadline += NSEC_PER_SEC;
	}
}

static void collect(struct worker *w, struct result *r, uint64_t start,
		    const struct cpu_usage *cpu0)
{
	struct cpu_usage cpu1;
	long i;

	for (i = 0; i < opt.nthreads; i++)
		pthread_join(w[i].thread, NULL);
	r->runtime_s = (double)(now_ns() - start) / 1e9;
	cpu_usage_read(&cpu1);
	r->usr_s = tv_s(&cpu1.self.ru_utime) - tv_s(&cpu0->self.ru_utime);
	r->sys_s = tv_s(&cpu1.self.ru_stime) - tv_s(&cpu0->self.ru_stime);
	r->busy_s = cpu0->busy_s < 0 || cpu1.busy_s < 0 ? -1 :
		    cpu1.busy_s - cpu0->busy_s;
	r->t = read_totals(w);
	r->iops = r->runtime_s > 0 ?
		  (unsigned long)((double)r->t.ios / r->runtime_s) : 0;
	if (opt.track_lat) {
		r->lat = xcalloc(1, sizeof(*r->lat));
		for (i = 0; i < opt.nthreads; i++) {
			lat_merge(r->lat, w[i].lat);
			free(w[i].lat);
		}
	}
}

static double per_call(unsigned long n, unsigned long calls)
{
	return calls ? (double)n / (double)calls : 0.0;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void write_json(FILE *f, const struct worker *w, const struct result *r)
{
	uint64_t bw = opt.nop ? 0 : (uint64_t)r->iops * (uint64_t)opt.bs;
	char names[160];
	size_t i;

	fputs("{\n  \"device\": [", f);
	for (i = 0; i < ndevs && !opt.nop; i++) {
		fputs(i ? ", " : "", f);
		json_string(f, devs[i].path);
	}
	fputs("],\n  \"options\": {", f);
	for (i = 0; i < ARRAY_SIZE(opt_table); i++)
		fprintf(f, "%s\"%s\": %ld", i ? ", " : "", opt_table[i].key,
			*opt_field(&opt_table[i]));
	fputs("},\n", f);
	if (opt.copy)
		fprintf(f, "  \"engine\": \"%s\",\n", opt.copy == COPY_RW ?
			"pread+pwrite" : "copy_file_range");
	else if (opt.sync)
		fputs("  \"engine\": \"preadv2\",\n", f);
	else
		fprintf(f, "  \"engine\": \"io_uring\",\n"
			"  \"ring\": {\"sq_entries\": %u, \"cq_entries\": %u, \"flags\": \"%s\", \"register_ring\": %d},\n",
			w[0].ring.sq.ring_entries, w[0].ring.cq.ring_entries,
			ring_flags_str(w[0].ring_flags, names, sizeof(names)),
			w[0].reg_ring);
	fprintf(f, "  \"runtime_s\": %.3f,\n", r->runtime_s);
	fprintf(f, "  \"ios\": %lu,\n", r->t.ios);
	fprintf(f, "  \"iops\": %lu,\n", r->iops);
	fprintf(f, "  \"iops_max\": %lu,\n", r->iops_max);
	fprintf(f, "  \"bw_bytes\": %" PRIu64 ",\n", bw);
	/* fio's names and units: percent of the runtime */
	fprintf(f, "  \"usr_cpu\": %.2f,\n  \"sys_cpu\": %.2f,\n",
		r->runtime_s > 0 ? 100.0 * r->usr_s / r->runtime_s : 0.0,
		r->runtime_s > 0 ? 100.0 * r->sys_s / r->runtime_s : 0.0);
	if (r->busy_s >= 0)
		fprintf(f, "  \"system_cpu_busy_s\": %.3f,\n", r->busy_s);
	fprintf(f, "  \"calls\": %lu,\n", r->t.calls);
	fprintf(f, "  \"sqpoll_wakeups\": %lu,\n", r->t.wakeups);
	fprintf(f, "  \"ios_per_submit_call\": %.2f,\n",
		per_call(r->t.submitted, r->t.calls));
	fprintf(f, "  \"ios_per_reap_call\": %.2f,\n",
		per_call(r->t.ios, r->t.calls));
	if (r->lat)
		fprintf(f, "  \"lat_ns\": {\"mean\": %.0f, \"p50\": %" PRIu64
			", \"p99\": %" PRIu64 ", \"max\": %" PRIu64 "},\n",
			lat_mean(r->lat), lat_percentile(r->lat, 50),
			lat_percentile(r->lat, 99), r->lat->max);
	fputs("  \"samples\": [", f);
	for (i = 0; i < r->nsamples; i++)
		fprintf(f, "%s%lu", i ? ", " : "", r->samples[i]);
	fputs("]\n}\n", f);
}

static void print_summary(const struct result *r)
{
	printf("Maximum IOPS=%lu\n", r->iops_max);
	if (opt.copy)
		printf("Copied=%.1f MiB/s, CPU (system, all CPUs)=%.2f s per GiB\n",
		       (double)r->iops * (double)opt.bs / (1 << 20),
		       r->busy_s >= 0 && r->t.ios ?
		       r->busy_s / ((double)r->t.ios * (double)opt.bs / (1 << 30)) : -1.0);
	if (r->lat)
		printf("Latency (usec): mean=%.1f p50=%.1f p99=%.1f max=%.1f\n",
		       lat_mean(r->lat) / 1e3,
		       (double)lat_percentile(r->lat, 50) / 1e3,
		       (double)lat_percentile(r->lat, 99) / 1e3,
		       (double)r->lat->max / 1e3);
}

/* With -v the worker ran to completion unless a signal cut it short. */
static void report_verify(const struct worker *w)
{
	if (w->vphase != VERIFY_READ || w->vcursor != verify_total(w))
		die("Verify interrupted before all blocks were read back");
	printf("Verify OK: %ld blocks of %ld bytes on %u device(s)\n",
	       opt.nverify, opt.bs, ndevs);
}

/* ------------------------------------------------------------------ */
/* Command line                                                       */
/* ------------------------------------------------------------------ */

static void usage(FILE *f, const char *prog)
{
	const struct opt_desc *d;
	char flag[32];
	size_t i;

	fprintf(f, "Usage: %s [options] <device|file> [<device|file>...]\n",
		prog);
	for (i = 0; i < ARRAY_SIZE(opt_table); i++) {
		const char *arg;

		d = &opt_table[i];
		arg = d->is_switch ? "" : d->min == 0 && d->max == 1 ?
		      " <bool>" : " <int>";
		if (d->letter && d->name)
			snprintf(flag, sizeof(flag), "-%c, --%s%s", d->letter,
				 d->name, arg);
		else if (d->letter)
			snprintf(flag, sizeof(flag), "-%c%s", d->letter, arg);
		else
			snprintf(flag, sizeof(flag), "    --%s%s", d->name, arg);
		fprintf(f, "  %-28s : %s, default %ld\n", flag, d->help,
			*opt_field(d));
	}
	fprintf(f, "  %-28s : write a JSON summary to <file>, default %s\n",
		"-j, --json <file>", opt.json ? opt.json : "none");
	fprintf(f, "  %-28s : this text\n", "-h, --help");
}

static const struct opt_desc *find_opt(int c)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opt_table); i++)
		if (opt_table[i].letter ? opt_table[i].letter == c :
		    c == OPT_LONG_BASE + (int)i)
			return &opt_table[i];
	return NULL;
}

static const char *build_optstring(void)
{
	static char s[2 * ARRAY_SIZE(opt_table) + sizeof("j:h")];
	char *p = s;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opt_table); i++) {
		if (!opt_table[i].letter)
			continue;
		*p++ = opt_table[i].letter;
		if (!opt_table[i].is_switch)
			*p++ = ':';
	}
	strcpy(p, "j:h");
	return s;
}

static const struct option *build_longopts(void)
{
	static struct option lo[ARRAY_SIZE(opt_table) + 3];
	size_t i, n = 0;

	for (i = 0; i < ARRAY_SIZE(opt_table); i++) {
		const struct opt_desc *d = &opt_table[i];

		if (!d->name)
			continue;
		lo[n].name = d->name;
		lo[n].has_arg = d->is_switch ? no_argument : required_argument;
		lo[n].val = d->letter ? d->letter : OPT_LONG_BASE + (int)i;
		n++;
	}
	lo[n++] = (struct option){ "json", required_argument, NULL, 'j' };
	lo[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n] = (struct option){ NULL, 0, NULL, 0 };
	return lo;
}

static long parse_value(const struct opt_desc *d, const char *arg)
{
	char name[40];
	char *end;
	long v;

	if (d->letter)
		snprintf(name, sizeof(name), "-%c", d->letter);
	else
		snprintf(name, sizeof(name), "--%s", d->name);
	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < d->min || v > d->max)
		die("%s: invalid value '%s' (%s: %ld..%ld)", name, arg,
		    d->help, d->min, d->max);
	return v;
}

/*
 * Combinations that cannot work; exit before touching any device. ndev is
 * the number of devices named on the command line.
 */
static void check_options(unsigned int ndev)
{
	opt.sbatch = MIN(opt.sbatch, opt.depth);
	opt.cbatch = MIN(opt.cbatch, opt.depth);

	/* Before -N1 and -S1 turn -p off: name what -k1 really lacks. */
	if (opt.userq) {
		if (opt.nop || opt.sync || opt.copy)
			die("-k1 cannot be combined with -N1, -S1 or --copy: a user queue carries a ring's NVMe passthrough commands");
		if (!opt.passthru)
			die("-k1 (user queue) needs -u1: only NVMe passthrough commands on /dev/ngXnY go on a user queue");
		if (!opt.polled)
			die("-k1 (user queue) needs -p1: a user queue has no interrupt, only an IOPOLL ring reaps it");
		if ((long)ndev > opt.nthreads)
			die("-k1 needs -n%u or more: a ring holds one user queue, so each thread drives one device",
			    ndev);
	}

	/* No vectored IO on registered buffers: -V1 turns the default off. */
	if (opt.vectored && opt.fixedbufs) {
		if (given(&opt.fixedbufs))
			die("-V1 cannot be combined with -B1: no vectored IO on registered buffers, use -B0");
		opt.fixedbufs = 0;
	}
	if (opt.nop) {
		if (opt.verify)
			die("-v cannot be combined with -N1: no-op requests move no data");
		if (opt.sync)
			die("-S1 cannot be combined with -N1: no-op requests need a ring");
		/* As t/io_uring: NOPs are not polled and use no buffer or file. */
		opt.polled = opt.fixedbufs = opt.regfiles = 0;
	}
	if (opt.copy) {
		if (opt.nop || opt.passthru)
			die("--copy cannot be combined with -N1 or -u1: it copies within a block device");
		if (opt.verify || opt.wpct)
			die("--copy cannot be combined with -v or -w: the copy tests (tests/copy) check copied data");
		if (given(&opt.depth) && opt.depth > 1)
			die("--copy: copy_file_range has no io_uring opcode, copies are synchronous; use -n N for N copies at once, not -d");
		if (given(&opt.sync) && !opt.sync)
			die("--copy needs -S1: copies are synchronous");
		opt.sync = 1;
		opt.polled = 0;
	}
	if (opt.sync) {
		if (opt.sqpoll)
			die("-Q1 (SQPOLL) cannot be combined with -S1: sync IO uses no ring");
		/* One IO at a time in each thread; no ring to register with. */
		opt.depth = opt.sbatch = opt.cbatch = 1;
		opt.fixedbufs = opt.regfiles = opt.regring = 0;
	}
	if (opt.polled && !opt.odirect && !opt.passthru)
		die("-p1 (polled IO) needs -O1: polling (IOPOLL, RWF_HIPRI) only works with O_DIRECT");
	if (opt.sqpoll_cpu >= 0 && !opt.sqpoll)
		die("-C %ld (SQPOLL CPU) needs -Q1", opt.sqpoll_cpu);
	if (opt.verify && opt.nthreads > 1)
		die("-v needs -n1: one ring orders the write pass before the read pass");
}

static void parse_options(int argc, char **argv)
{
	const struct option *longopts = build_longopts();
	const char *optstring = build_optstring();
	const struct opt_desc *d;
	int c;

	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout, argv[0]);
			exit(0);
		case 'j':
			opt.json = optarg;
			break;
		default:
			d = find_opt(c);
			if (!d) {	/* getopt already said what was wrong */
				fprintf(stderr, "Try '%s --help'.\n", argv[0]);
				exit(2);
			}
			*opt_field(d) = d->is_switch ? 1 : parse_value(d, optarg);
			opt_given[d - opt_table] = true;
		}
	}
	/* As t/io_uring: -N1 needs no device. */
	if (optind == argc && !opt.nop) {
		fprintf(stderr, "%s: no device or file given\nTry '%s --help'.\n",
			argv[0], argv[0]);
		exit(2);
	}
	check_options((unsigned int)(argc - optind));
}

int main(int argc, char **argv)
{
	struct cpu_usage cpu0;
	struct result res;
	struct worker *w;
	FILE *json = NULL;
	uint64_t start;

	parse_options(argc, argv);
	/* Open the JSON file first: fail before the run, not after it. */
	if (opt.json) {
		json = fopen(opt.json, "w");
		if (!json)
			die("%s: %s", opt.json, strerror(errno));
	}
	open_devices(argv + optind, (unsigned int)(argc - optind));
	setvbuf(stdout, NULL, _IOLBF, 0);

	memset(&res, 0, sizeof(res));
	w = start_workers();
	start = now_ns();
	cpu_usage_read(&cpu0);
	sample_loop(w, &res, start);
	request_stop();
	collect(w, &res, start, &cpu0);

	print_summary(&res);
	if (json) {
		write_json(json, w, &res);
		if (ferror(json) | fclose(json))
			die("%s: write failed", opt.json);
	}
	if (opt.verify)
		report_verify(w);
	return 0;
}
