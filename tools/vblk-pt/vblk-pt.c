// SPDX-License-Identifier: GPL-2.0
/*
 * vblk-pt - exercise virtio-blk io_uring passthrough on /dev/vdXc0.
 *
 * One binary, one subcommand per test:
 *
 *   rw CHAR BLK [--mode M] [--bs B] [--count N] [--offset O]
 *	Cross-path data integrity: a pattern written through the char device
 *	reads back through the block device (O_DIRECT), and the reverse, in
 *	every submission mode (or only M): plain, vec, fixed, polled,
 *	polled-vec, polled-fixed, sqpoll, sqpoll-fixed.  The N buffers of B
 *	bytes lie back to back from a page boundary, so a B below 4096 puts
 *	buffers at offsets inside a page and across pages; B is a multiple
 *	of 512 (and of the disk's logical block size), 2048 or more for the
 *	vectored modes.
 *   flush CHAR [-n N] [--polled]
 *	N FLUSH commands, one at a time, each must complete with 0.
 *   discard|wzeroes CHAR BLK [--offset O] [--len L] [--unmap]
 *	Fill a range and its neighbours through BLK, DISCARD or WRITE_ZEROES
 *	the range through CHAR, and check it reads back as zeroes while the
 *	neighbours keep their data.
 *   getid CHAR
 *	GET_ID returns the disk's serial, as the block device's sysfs shows.
 *   perm CHAR --op OP --open r|w|rw --expect ERR [--offset O]
 *	One command of type OP (read, write, flush, discard, wzeroes, getid)
 *	on a file opened as given; its result must be ERR (0, EACCES, ...).
 *	A failing open counts as the result too.
 *   fuzz CHAR [-n N] [--seed S]
 *	N malformed (and some valid) commands; each must get exactly the
 *	error the UAPI documents for its one defect, valid ones 0.
 *   stress CHAR [--polled] [--seconds S] [--qd Q] [--write] [--offset O]
 *	Keep Q commands in flight until S seconds pass or a command fails,
 *	then stop submitting and wait for all in-flight ones (hot removal).
 *   pollshare CHAR [-n PROCS] [--seconds S] [--qd Q] [--offset O]
 *	PROCS processes spread over the CPUs, each with two IOPOLL rings on
 *	the same poll queue, read back their own pattern (and, bounced,
 *	GET_ID) for S seconds: every completion must reach the ring and the
 *	buffer that issued it, with the issuer's data, whoever's poll loop
 *	reaped it.
 *   put CHAR FILE [--offset O] [--len L] [--mode M]
 *	Copy bytes [O, O + L) of FILE to the same place on the disk through
 *	the char device, so that data another tool generated (fio's verify
 *	headers) can be checked through the block device afterwards.
 *   openclose CHAR [-n N]
 *	Open/close loops, half of them with a read still in flight at close.
 *
 * Exit status: 0 pass, 1 fail (the failing combination is named on stderr),
 * 77 skip (no passthrough support), 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sched.h>
#include <linux/virtio_blk.h>
#if __has_include(<linux/virtio_blk_uring.h>)
#include <linux/virtio_blk_uring.h>
#endif
#include <liburing.h>

#include "rng.h"
#include "tool.h"

#ifndef IORING_URING_CMD_FIXED
#define IORING_URING_CMD_FIXED	(1U << 0)
#endif

#define SECTOR		512ULL
#define WAIT_MS		20000	/* longest a command may take, TCG included */

#ifndef VIRTIO_BLK_URING_CMD_IO
int main(void)
{
	fprintf(stderr, "vblk-pt: built without virtio-blk passthrough UAPI headers\n");
	return EXIT_SKIP;
}
#else

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static const char *prog_cmd = "vblk-pt";

static void __attribute__((noreturn, format(printf, 2, 3)))
bail(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog_cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

#define fail(...)	bail(EXIT_FAIL, __VA_ARGS__)

static void *xalloc(size_t size)
{
	void *p;

	if (posix_memalign(&p, 4096, size))
		fail("out of memory (%zu bytes)", size);
	memset(p, 0, size);
	return p;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "0", 0 }, { "EINVAL", EINVAL }, { "EOPNOTSUPP", EOPNOTSUPP },
	{ "ENOTTY", ENOTTY }, { "EACCES", EACCES }, { "EROFS", EROFS },
	{ "EPERM", EPERM }, { "EFAULT", EFAULT }, { "ENOMEM", ENOMEM },
	{ "ENODEV", ENODEV }, { "EIO", EIO }, { "ENXIO", ENXIO },
	{ "EAGAIN", EAGAIN }, { "ETIME", ETIME },
};

/* A name for a result; two may be used in one printf. */
static const char *errname(int res)
{
	static char buf[2][16];
	static unsigned int which;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(errnames); i++)
		if (errnames[i].err == (res < 0 ? -res : res))
			return errnames[i].name;
	which ^= 1;
	snprintf(buf[which], sizeof(buf[which]), "%d", res);
	return buf[which];
}

static int parse_errname(const char *s)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(errnames); i++)
		if (!strcmp(errnames[i].name, s))
			return errnames[i].err;
	bail(EXIT_USAGE, "unknown errno name '%s'", s);
}

static uint64_t parse_num(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		bail(EXIT_USAGE, "bad number '%s'", s);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end)
		bail(EXIT_USAGE, "bad number '%s'", s);
	return v;
}

/* Pattern word for byte offset @off of the disk under @seed. */
static uint64_t pat_word(uint64_t seed, uint64_t off)
{
	uint64_t x = (off ^ (seed << 40)) * 0x9e3779b97f4a7c15ULL;

	return x ^ (x >> 29) ^ 0x76626c6b2d707421ULL;
}

static void pat_fill(void *buf, size_t len, uint64_t seed, uint64_t off)
{
	uint64_t *p = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		p[i] = pat_word(seed, off + i * 8);
}

/* Byte index of the first bad word, or -1. */
static long pat_check(const void *buf, size_t len, uint64_t seed, uint64_t off)
{
	const uint64_t *p = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (p[i] != pat_word(seed, off + i * 8))
			return (long)(i * 8);
	return -1;
}

static long zero_check(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return (long)i;
	return -1;
}

static int open_or_die(const char *path, int flags)
{
	int fd = open(path, flags);

	if (fd < 0)
		fail("%s: %s", path, strerror(errno));
	return fd;
}

static void pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	if (n != (ssize_t)len)
		fail("block read at %" PRIu64 ": %s", off,
		     n < 0 ? strerror(errno) : "short read");
}

static void pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	ssize_t n = pwrite(fd, buf, len, (off_t)off);

	if (n != (ssize_t)len)
		fail("block write at %" PRIu64 ": %s", off,
		     n < 0 ? strerror(errno) : "short write");
	if (fdatasync(fd))
		fail("block fdatasync: %s", strerror(errno));
}

/*
 * A sysfs attribute of the disk behind char device @fd: the char device's
 * parent is the virtio device, whose block/ directory holds its one disk
 * (the way iobench finds the capacity).
 */
static bool disk_attr(int fd, const char *attr, char *out, size_t len)
{
	char dir[96], path[PATH_MAX], disk[NAME_MAX + 1] = "";
	struct dirent *de;
	struct stat st;
	FILE *f;
	DIR *dp;
	bool ok;

	if (fstat(fd, &st))
		return false;
	snprintf(dir, sizeof(dir), "/sys/dev/char/%u:%u/device/block",
		 major(st.st_rdev), minor(st.st_rdev));
	dp = opendir(dir);
	if (!dp)
		return false;
	while ((de = readdir(dp)))
		if (de->d_name[0] != '.')
			snprintf(disk, sizeof(disk), "%s", de->d_name);
	closedir(dp);
	if (!disk[0])
		return false;
	snprintf(path, sizeof(path), "%s/%s/%s", dir, disk, attr);
	f = fopen(path, "r");
	if (!f)
		return false;
	/* An empty attribute (no serial) is a valid, empty answer. */
	out[0] = '\0';
	ok = fgets(out, (int)len, f) != NULL || !ferror(f);
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return ok;
}

static uint64_t disk_u64(int fd, const char *attr)
{
	char buf[256];

	if (!disk_attr(fd, attr, buf, sizeof(buf)))
		fail("cannot read the disk's %s from sysfs", attr);
	return strtoull(buf, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* Rings and commands                                                 */
/* ------------------------------------------------------------------ */

struct vring {
	struct io_uring ring;
	unsigned int flags;
};

static int vring_init(struct vring *r, unsigned int entries, unsigned int flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	if (flags & IORING_SETUP_SQPOLL)
		p.sq_thread_idle = 1000;
	r->flags = flags;
	return io_uring_queue_init_params(entries, &r->ring, &p);
}

static void vring_init_or_die(struct vring *r, unsigned int entries,
			      unsigned int flags)
{
	int ret = vring_init(r, entries, flags);

	if (ret == -EINVAL && (flags & IORING_SETUP_SQE128))
		bail(EXIT_SKIP, "kernel has no SQE128 rings");
	if (ret < 0)
		fail("io_uring setup (flags %#x): %s", flags, strerror(-ret));
}

/* A zeroed SQE (both halves on a SQE128 ring) for a uring_cmd on @fd. */
static struct io_uring_sqe *cmd_sqe(struct vring *r, int fd, __u32 cmd_op,
				    uint64_t user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	if (!sqe) {
		io_uring_submit(&r->ring);
		sqe = io_uring_get_sqe(&r->ring);
	}
	if (!sqe)
		fail("no free SQE");
	memset(sqe, 0, (r->flags & IORING_SETUP_SQE128) ? 128 : 64);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	sqe->user_data = user_data;
	return sqe;
}

static struct virtio_blk_uring_cmd *sqe_cmd(struct io_uring_sqe *sqe)
{
	return (struct virtio_blk_uring_cmd *)sqe->cmd;
}

/*
 * Next CQE within @ms milliseconds: 0 and *@cqe set, or -ETIME. IOPOLL
 * rings do not honour a wait timeout, so they are polled in a loop.
 */
static int vring_wait(struct vring *r, struct io_uring_cqe **cqe, unsigned int ms)
{
	uint64_t deadline = now_ms() + ms;
	int ret;

	if (!(r->flags & IORING_SETUP_IOPOLL)) {
		struct __kernel_timespec ts = {
			.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L,
		};

		do {
			ret = io_uring_wait_cqe_timeout(&r->ring, cqe, &ts);
		} while (ret == -EINTR);
		return ret == -ETIME ? -ETIME : ret;
	}
	for (;;) {
		ret = io_uring_peek_cqe(&r->ring, cqe);
		if (!ret)
			return 0;
		if (now_ms() > deadline)
			return -ETIME;
		ret = io_uring_get_events(&r->ring);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN)
			return ret;
	}
}

/* Submit what is queued and collect @n results into res[user_data]. */
static void vring_run(struct vring *r, unsigned int n, int *res,
		      const char *what)
{
	struct io_uring_cqe *cqe;
	unsigned int i;
	int ret;

	ret = io_uring_submit(&r->ring);
	if (ret < 0)
		fail("%s: io_uring_submit: %s", what, strerror(-ret));
	for (i = 0; i < n; i++) {
		ret = vring_wait(r, &cqe, WAIT_MS);
		if (ret)
			fail("%s: %u of %u commands never completed (%s)", what,
			     n - i, n, strerror(-ret));
		if (cqe->user_data >= n)
			fail("%s: CQE with unknown user_data %llu", what,
			     (unsigned long long)cqe->user_data);
		res[cqe->user_data] = cqe->res;
		io_uring_cqe_seen(&r->ring, cqe);
	}
}

/* One command, waited for; the CQE result. */
static int run_one(struct vring *r, int fd, __u32 op, const struct virtio_blk_uring_cmd *c)
{
	struct io_uring_sqe *sqe = cmd_sqe(r, fd, op, 0);
	int res;

	*sqe_cmd(sqe) = *c;
	vring_run(r, 1, &res, "command");
	return res;
}

static bool passthru_supported(const char *chr)
{
	struct virtio_blk_uring_cmd c = { .type = VIRTIO_BLK_T_GET_ID };
	char id[VIRTIO_BLK_ID_BYTES];
	struct vring r;
	int fd, res;

	fd = open(chr, O_RDONLY);
	if (fd < 0)
		return false;
	if (vring_init(&r, 4, IORING_SETUP_SQE128)) {
		close(fd);
		return false;
	}
	c.data = (uintptr_t)id;
	c.data_len = sizeof(id);
	res = run_one(&r, fd, VIRTIO_BLK_URING_CMD_IO, &c);
	io_uring_queue_exit(&r.ring);
	close(fd);
	return res != -EINVAL && res != -EOPNOTSUPP;
}

/* ------------------------------------------------------------------ */
/* rw: cross-path integrity                                           */
/* ------------------------------------------------------------------ */

struct mode {
	const char *name;
	unsigned int ring_flags;
	bool vec;
	bool fixed;
};

static const struct mode modes[] = {
	{ "plain", 0, false, false },
	{ "vec", 0, true, false },
	{ "fixed", 0, false, true },
	{ "polled", IORING_SETUP_IOPOLL, false, false },
	{ "polled-vec", IORING_SETUP_IOPOLL, true, false },
	{ "polled-fixed", IORING_SETUP_IOPOLL, false, true },
	{ "sqpoll", IORING_SETUP_SQPOLL, false, false },
	{ "sqpoll-fixed", IORING_SETUP_SQPOLL, false, true },
};

#define RW_IOVS	4	/* vectored commands split each buffer this many ways */

/*
 * @count commands of @bs bytes at @off through the char device, all in
 * flight together. Vectored buffers are cut into unequal pieces so that
 * the kernel has to walk the iovec array correctly.
 */
static void pt_rw(const struct mode *m, struct vring *r, int fd, bool write,
		  char *buf, struct iovec *iovs, size_t bs, unsigned int count,
		  uint64_t off)
{
	int *res = calloc(count, sizeof(*res));
	unsigned int i;

	if (!res)
		fail("out of memory");
	for (i = 0; i < count; i++) {
		__u32 op = m->vec ? VIRTIO_BLK_URING_CMD_IO_VEC : VIRTIO_BLK_URING_CMD_IO;
		struct io_uring_sqe *sqe = cmd_sqe(r, fd, op, i);
		struct virtio_blk_uring_cmd *c = sqe_cmd(sqe);
		char *b = buf + i * bs;

		c->type = write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;
		c->sector = (off + i * bs) / SECTOR;
		if (m->vec) {
			struct iovec *v = &iovs[i * RW_IOVS];
			size_t first = SECTOR, rest = (bs - SECTOR) / (RW_IOVS - 1);

			rest -= rest % SECTOR;
			v[0] = (struct iovec){ b, first };
			v[1] = (struct iovec){ b + first, rest };
			v[2] = (struct iovec){ b + first + rest, rest };
			v[3] = (struct iovec){ b + first + 2 * rest,
					       bs - first - 2 * rest };
			c->data = (uintptr_t)v;
			c->data_len = RW_IOVS;
		} else {
			c->data = (uintptr_t)b;
			c->data_len = (__u32)bs;
		}
		if (m->fixed) {
			sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
			sqe->buf_index = (__u16)i;
		}
	}
	vring_run(r, count, res, m->name);
	for (i = 0; i < count; i++)
		if (res[i])
			fail("rw %s: passthrough %s at %" PRIu64 ": %s", m->name,
			     write ? "write" : "read", off + i * bs, errname(res[i]));
	free(res);
}

static int rw_mode(const struct mode *m, const char *chr, int bfd, size_t bs,
		   unsigned int count, uint64_t off, uint64_t seed)
{
	size_t total = bs * count;
	char *buf = xalloc(total), *cmp = xalloc(total);
	struct iovec *iovs = calloc(count * RW_IOVS, sizeof(*iovs));
	struct iovec *reg = calloc(count, sizeof(*reg));
	unsigned int i;
	struct vring r;
	int fd, ret;
	long bad;

	if (!iovs || !reg)
		fail("out of memory");
	fd = open_or_die(chr, O_RDWR);
	ret = vring_init(&r, count < 8 ? 8 : count, IORING_SETUP_SQE128 | m->ring_flags);
	if (ret)
		fail("rw %s: io_uring setup: %s", m->name, strerror(-ret));
	if (m->fixed) {
		for (i = 0; i < count; i++)
			reg[i] = (struct iovec){ buf + i * bs, bs };
		ret = io_uring_register_buffers(&r.ring, reg, count);
		if (ret)
			fail("rw %s: register buffers: %s", m->name, strerror(-ret));
	}

	/* char device -> block device */
	pat_fill(buf, total, seed, off);
	pt_rw(m, &r, fd, true, buf, iovs, bs, count, off);
	memset(cmp, 0x5a, total);
	pread_all(bfd, cmp, total, off);
	bad = pat_check(cmp, total, seed, off);
	if (bad >= 0)
		fail("rw %s: char write -> block read: mismatch at byte %" PRIu64,
		     m->name, off + (uint64_t)bad);

	/* block device -> char device, on the area just written */
	pat_fill(cmp, total, seed + 1, off);
	pwrite_all(bfd, cmp, total, off);
	memset(buf, 0xa5, total);
	pt_rw(m, &r, fd, false, buf, iovs, bs, count, off);
	bad = pat_check(buf, total, seed + 1, off);
	if (bad >= 0)
		fail("rw %s: block write -> char read: mismatch at byte %" PRIu64,
		     m->name, off + (uint64_t)bad);

	io_uring_queue_exit(&r.ring);
	close(fd);
	free(buf);
	free(cmp);
	free(iovs);
	free(reg);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Single commands: flush, discard, write zeroes, get id, permissions */
/* ------------------------------------------------------------------ */

static int cmd_flush(const char *chr, unsigned int n, bool polled)
{
	struct virtio_blk_uring_cmd c = { .type = VIRTIO_BLK_T_FLUSH };
	unsigned int i;
	struct vring r;
	int fd, res;

	fd = open_or_die(chr, O_WRONLY);
	vring_init_or_die(&r, 4, IORING_SETUP_SQE128 |
			  (polled ? IORING_SETUP_IOPOLL : 0));
	for (i = 0; i < n; i++) {
		res = run_one(&r, fd, VIRTIO_BLK_URING_CMD_IO, &c);
		if (res)
			fail("flush %u of %u%s: %s", i + 1, n,
			     polled ? " (polled)" : "", errname(res));
	}
	io_uring_queue_exit(&r.ring);
	close(fd);
	return 0;
}

/* DISCARD or WRITE_ZEROES of [off, off + len), neighbours must survive. */
static int cmd_zero_range(const char *chr, const char *blk, __u32 type,
			  uint64_t off, uint64_t len, bool unmap)
{
	const char *name = type == VIRTIO_BLK_T_DISCARD ? "discard" : "wzeroes";
	const uint64_t guard = 64 << 10, seed = 0xd15c;
	uint64_t start = off - guard, total = len + 2 * guard;
	struct virtio_blk_uring_cmd c = {
		.type = type, .sector = off / SECTOR, .data_len = (__u32)len,
		.flags = unmap ? VIRTIO_BLK_URING_CMD_F_UNMAP : 0,
	};
	char *buf = xalloc(total);
	struct vring r;
	int fd, bfd, res;
	long bad;

	if (off < guard || len > UINT32_MAX)
		bail(EXIT_USAGE, "%s: --offset must be >= 64k, --len < 4G", name);
	bfd = open_or_die(blk, O_RDWR | O_DIRECT);
	fd = open_or_die(chr, O_RDWR);
	vring_init_or_die(&r, 4, IORING_SETUP_SQE128);

	pat_fill(buf, total, seed, start);
	pwrite_all(bfd, buf, total, start);
	res = run_one(&r, fd, VIRTIO_BLK_URING_CMD_IO, &c);
	if (res == -EOPNOTSUPP)
		bail(EXIT_SKIP, "%s: the device does not offer it", name);
	if (res)
		fail("%s%s of %" PRIu64 "+%" PRIu64 ": %s", name,
		     unmap ? " (unmap)" : "", off, len, errname(res));

	memset(buf, 0x5a, total);
	pread_all(bfd, buf, total, start);
	bad = pat_check(buf, guard, seed, start);
	if (bad >= 0)
		fail("%s: data before the range changed at byte %" PRIu64, name,
		     start + (uint64_t)bad);
	bad = zero_check(buf + guard, len);
	if (bad >= 0)
		fail("%s%s: range not zero at byte %" PRIu64, name,
		     unmap ? " (unmap)" : "", off + (uint64_t)bad);
	bad = pat_check(buf + guard + len, guard, seed, off + len);
	if (bad >= 0)
		fail("%s: data after the range changed at byte %" PRIu64, name,
		     off + len + (uint64_t)bad);
	io_uring_queue_exit(&r.ring);
	close(fd);
	close(bfd);
	free(buf);
	return 0;
}

static int cmd_getid(const char *chr)
{
	char id[VIRTIO_BLK_ID_BYTES + 1], serial[256];
	struct virtio_blk_uring_cmd c = {
		.type = VIRTIO_BLK_T_GET_ID, .data_len = VIRTIO_BLK_ID_BYTES,
	};
	struct vring r;
	int fd, res;

	fd = open_or_die(chr, O_RDONLY);
	vring_init_or_die(&r, 4, IORING_SETUP_SQE128);
	memset(id, 0x5a, sizeof(id));
	c.data = (uintptr_t)id;
	res = run_one(&r, fd, VIRTIO_BLK_URING_CMD_IO, &c);
	if (res)
		fail("getid: %s", errname(res));
	id[VIRTIO_BLK_ID_BYTES] = '\0';
	if (!disk_attr(fd, "serial", serial, sizeof(serial)))
		fail("getid: cannot read the disk's serial attribute");
	if (strcmp(id, serial))
		fail("getid: '%s' but sysfs serial is '%s'", id, serial);
	io_uring_queue_exit(&r.ring);
	close(fd);
	return 0;
}

static const struct {
	const char *name;
	__u32 type;
} perm_ops[] = {
	{ "read", VIRTIO_BLK_T_IN }, { "write", VIRTIO_BLK_T_OUT },
	{ "flush", VIRTIO_BLK_T_FLUSH }, { "discard", VIRTIO_BLK_T_DISCARD },
	{ "wzeroes", VIRTIO_BLK_T_WRITE_ZEROES }, { "getid", VIRTIO_BLK_T_GET_ID },
};

static int cmd_perm(const char *chr, const char *op, const char *mode,
		    int expect, uint64_t off, bool polled)
{
	struct virtio_blk_uring_cmd c = { 0 };
	int flags, fd, res = 1;
	unsigned int i;
	struct vring r;
	char *buf = xalloc(4096);

	for (i = 0; i < ARRAY_SIZE(perm_ops); i++)
		if (!strcmp(perm_ops[i].name, op))
			res = 0;
	if (res)
		bail(EXIT_USAGE, "perm: unknown --op %s", op);
	if (!strcmp(mode, "r"))
		flags = O_RDONLY;
	else if (!strcmp(mode, "w"))
		flags = O_WRONLY;
	else if (!strcmp(mode, "rw"))
		flags = O_RDWR;
	else
		bail(EXIT_USAGE, "perm: --open r|w|rw");

	fd = open(chr, flags);
	if (fd < 0) {
		res = -errno;
		if (res != -expect)
			fail("perm %s open=%s: open failed with %s, expected %s",
			     op, mode, errname(res), errname(expect));
		return 0;
	}
	for (i = 0; strcmp(perm_ops[i].name, op); i++)
		;
	c.type = perm_ops[i].type;
	switch (c.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		pat_fill(buf, 4096, 0x9e, off);
		c.data = (uintptr_t)buf;
		c.data_len = 4096;
		c.sector = off / SECTOR;
		break;
	case VIRTIO_BLK_T_GET_ID:
		c.data = (uintptr_t)buf;
		c.data_len = VIRTIO_BLK_ID_BYTES;
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		c.data_len = 1 << 20;
		c.sector = off / SECTOR;
		break;
	}
	vring_init_or_die(&r, 4, IORING_SETUP_SQE128 |
			  (polled ? IORING_SETUP_IOPOLL : 0));
	res = run_one(&r, fd, VIRTIO_BLK_URING_CMD_IO, &c);
	io_uring_queue_exit(&r.ring);
	close(fd);
	free(buf);
	if (res != -expect)
		fail("perm %s open=%s%s uid=%u: got %s, expected %s", op, mode,
		     polled ? " polled" : "", getuid(), errname(res),
		     errname(expect));
	return 0;
}

/* ------------------------------------------------------------------ */
/* fuzz: malformed commands                                           */
/* ------------------------------------------------------------------ */

/*
 * Every generated command starts valid and gets at most one defect, so the
 * expected result is exact: the errno the UAPI documentation gives for that
 * defect (a small set where two checks could legitimately catch it first).
 */
struct fuzz_env {
	int fd;
	uint64_t cap;		/* sectors */
	uint64_t max_io;	/* bytes, max_hw_sectors_kb */
	uint64_t max_discard;	/* bytes, 0 if not offered */
	uint64_t max_wz;	/* bytes, 0 if not offered */
	uint64_t huge;		/* shortest length that can never be valid */
	char *buf;		/* data buffers, FUZZ_BATCH * FUZZ_BUF */
	struct iovec *iovs;	/* per slot iovec arrays, FUZZ_IOVS each */
	char *guard;		/* a page followed by an inaccessible page */
};

#define FUZZ_BATCH	32
#define FUZZ_BUF	(128 << 10)
#define FUZZ_IOVS	8
#define FUZZ_AREA	(512ULL << 20)	/* valid writes go below the disk's middle */

struct fuzz_case {
	const char *what;
	int expect[3];		/* acceptable results, negated errnos or 0 */
	struct virtio_blk_uring_cmd cmd;	/* as submitted, for reports */
	__u32 cmd_op;
	bool fixed;
	bool done;
};

static void expect_set(struct fuzz_case *fc, const char *what, int a, int b, int c)
{
	fc->what = what;
	fc->expect[0] = a;
	fc->expect[1] = b;
	fc->expect[2] = c;
}

/* A random sector for @bytes that fits the disk (and, for writes, the area). */
static uint64_t fuzz_sector(uint64_t *rng, const struct fuzz_env *e, uint64_t bytes)
{
	uint64_t lim = FUZZ_AREA / SECTOR < e->cap ? FUZZ_AREA / SECTOR : e->cap;

	return rng_below(rng, lim - bytes / SECTOR) & ~7ULL;
}

static uint64_t fuzz_len(uint64_t *rng)
{
	return (rng_below(rng, FUZZ_BUF / 4096) + 1) * 4096;
}

/*
 * Build slot @slot's command into @sqe: a valid one, then one defect chosen
 * by @kind. Returns what is expected in @fc.
 */
static void fuzz_build(struct io_uring_sqe *sqe, struct fuzz_env *e,
		       unsigned int slot, uint64_t *rng, struct fuzz_case *fc,
		       unsigned int nbufs)
{
	struct virtio_blk_uring_cmd *c = sqe_cmd(sqe);
	char *buf = e->buf + (size_t)slot * FUZZ_BUF;
	struct iovec *iov = e->iovs + slot * FUZZ_IOVS;
	uint64_t len = fuzz_len(rng), r;
	bool write = rng_next(rng) & 1;
	unsigned int kind = (unsigned int)rng_below(rng, 30), i;
	const __u32 valid_types[] = {
		VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_FLUSH,
		VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_DISCARD,
		VIRTIO_BLK_T_WRITE_ZEROES,
	};

	/* The valid base: a read or write of len bytes. */
	sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO;
	c->type = write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;
	c->sector = fuzz_sector(rng, e, len);
	c->data = (uintptr_t)buf;
	c->data_len = (__u32)len;
	expect_set(fc, write ? "valid write" : "valid read", 0, 0, 0);

	switch (kind) {
	case 0:		/* unknown cmd_op */
		do {
			sqe->cmd_op = (__u32)rng_next(rng);
			if (rng_next(rng) & 1)	/* near misses of the encoding */
				sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO +
					      (__u32)rng_below(rng, 8) + 2;
		} while (sqe->cmd_op == VIRTIO_BLK_URING_CMD_IO ||
			 sqe->cmd_op == VIRTIO_BLK_URING_CMD_IO_VEC);
		expect_set(fc, "bad cmd_op", -ENOTTY, -ENOTTY, -ENOTTY);
		break;
	case 1:		/* type outside the allow-list */
		for (;;) {
			r = rng_next(rng) & 3 ? rng_below(rng, 40) : (__u32)rng_next(rng);
			for (i = 0; i < ARRAY_SIZE(valid_types); i++)
				if (r == valid_types[i])
					break;
			if (i == ARRAY_SIZE(valid_types))
				break;
		}
		c->type = (__u32)r;
		expect_set(fc, "bad type", -EOPNOTSUPP, -EOPNOTSUPP, -EOPNOTSUPP);
		break;
	case 2:		/* unknown flags */
		c->flags = (__u32)rng_next(rng) | 1U << rng_below(rng, 32);
		expect_set(fc, "bad flags", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 3:		/* reserved fields */
		if (rng_below(rng, 2))
			c->rsvd1 = (__u32)rng_next(rng) | 1;
		else
			c->rsvd2 = rng_next(rng) | 1;
		expect_set(fc, "reserved bits", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 4:		/* zero length, or a 64-bit length whose low half is valid */
		if (rng_next(rng) & 1) {
			c->data_len = 0;
			expect_set(fc, "zero length", -EINVAL, -EINVAL, -EINVAL);
		} else {
			c->data_len |= (__u64)(1 + rng_below(rng, 0xffff)) << 32;
			expect_set(fc, "length above 4 GiB", -EINVAL, -EFAULT, -EINVAL);
		}
		break;
	case 5:		/* longer than the disk or max_hw_sectors, up to 4 GiB - 1 */
		c->data_len = UINT32_MAX;
		if (e->huge < UINT32_MAX && (rng_next(rng) & 1))
			c->data_len = (__u32)(e->huge +
				      rng_below(rng, UINT32_MAX - e->huge));
		expect_set(fc, "huge length", -EINVAL, -EFAULT, -EINVAL);
		break;
	case 6:		/* not whole logical blocks */
		c->data_len = (__u32)(len - 1 - rng_below(rng, SECTOR - 1));
		expect_set(fc, "partial block length", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 7:		/* NULL buffer */
		c->data = 0;
		expect_set(fc, "NULL buffer", -EFAULT, -EFAULT, -EFAULT);
		break;
	case 8:		/* misaligned buffer */
		c->data += 1 + rng_below(rng, SECTOR - 1);
		c->data_len -= 4096;
		if (!c->data_len)
			c->data_len = 4096 - SECTOR;
		expect_set(fc, "unaligned buffer", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 9:		/* crosses the end of the disk */
		c->sector = e->cap - len / SECTOR + 1 + rng_below(rng, len / SECTOR + 64);
		expect_set(fc, "past capacity", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 10:	/* sector >= 2^32 (and near 2^64, where it would wrap) */
		c->sector = (1ULL << 32) + (rng_next(rng) >> (rng_below(rng, 33)));
		if (rng_next(rng) & 1)
			c->sector = ~0ULL - rng_below(rng, 1 << 20);
		expect_set(fc, "sector >= 2^32", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 11:	/* starts inside the disk, ends past it */
		c->sector = e->cap - (len / SECTOR) / 2;
		expect_set(fc, "tail past capacity", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 12:	/* vectored, iovec count 0 */
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		c->data = (uintptr_t)iov;
		c->data_len = 0;
		expect_set(fc, "iovec count 0", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 13:	/* vectored, more than UIO_MAXIOV iovecs */
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		c->data = (uintptr_t)iov;
		c->data_len = 1025 + (__u32)rng_below(rng, UINT32_MAX - 1025);
		expect_set(fc, "iovec count > UIO_MAXIOV", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 14:	/* vectored, array runs into an unmapped page */
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		i = 1 + (unsigned int)rng_below(rng, 4);
		c->data = (uintptr_t)(e->guard + 4096 - i * sizeof(struct iovec));
		for (r = 0; r < i; r++)
			((struct iovec *)(uintptr_t)c->data)[r] =
				(struct iovec){ buf + r * 4096, 4096 };
		c->data_len = i + 1 + (__u32)rng_below(rng, 64);
		expect_set(fc, "short iovec array", -EFAULT, -EFAULT, -EFAULT);
		break;
	case 15:	/* vectored, NULL iovec array */
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		c->data = 0;
		c->data_len = 1 + (__u32)rng_below(rng, FUZZ_IOVS);
		expect_set(fc, "NULL iovec array", -EFAULT, -EFAULT, -EFAULT);
		break;
	case 16:	/* vectored, an iovec with a NULL or misaligned base */
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		for (i = 0; i < FUZZ_IOVS; i++)
			iov[i] = (struct iovec){ buf + i * 4096, 4096 };
		c->data = (uintptr_t)iov;
		c->data_len = FUZZ_IOVS;
		i = (unsigned int)rng_below(rng, FUZZ_IOVS);
		if (rng_next(rng) & 1) {
			iov[i].iov_base = NULL;
			expect_set(fc, "NULL iov_base", -EFAULT, -EFAULT, -EFAULT);
		} else {
			iov[i].iov_base = (char *)iov[i].iov_base + 1 + rng_below(rng, 511);
			expect_set(fc, "unaligned iov_base", -EINVAL, -EINVAL, -EINVAL);
		}
		c->sector = fuzz_sector(rng, e, FUZZ_IOVS * 4096);
		break;
	case 17:	/* vectored, lengths not whole blocks */
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		for (i = 0; i < FUZZ_IOVS; i++)
			iov[i] = (struct iovec){ buf + i * 4096, 4096 };
		r = 1 + rng_below(rng, 4095);
		iov[rng_below(rng, FUZZ_IOVS)].iov_len = r % SECTOR ? r : r - 1;
		c->data = (uintptr_t)iov;
		c->data_len = FUZZ_IOVS;
		c->sector = fuzz_sector(rng, e, FUZZ_IOVS * 4096);
		expect_set(fc, "short iov_len", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 18:	/* FLUSH with data, sector or length, or vectored */
		c->type = VIRTIO_BLK_T_FLUSH;
		c->data = 0;
		c->sector = 0;
		c->data_len = 0;
		switch (rng_below(rng, 4)) {
		case 0: c->data = (uintptr_t)buf; break;
		case 1: c->sector = 1 + rng_below(rng, e->cap); break;
		case 2: c->data_len = 1 + (__u32)rng_next(rng); break;
		case 3: sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC; break;
		}
		expect_set(fc, "FLUSH with payload", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 19:	/* GET_ID with the wrong length or a sector */
		c->type = VIRTIO_BLK_T_GET_ID;
		c->sector = 0;
		c->data_len = VIRTIO_BLK_ID_BYTES;
		if (rng_next(rng) & 1)
			c->sector = 1 + rng_below(rng, 1 << 20);
		else
			while (c->data_len == VIRTIO_BLK_ID_BYTES)
				c->data_len = 1 + (__u32)rng_below(rng, FUZZ_BUF);
		expect_set(fc, "GET_ID misshapen", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 20:	/* DISCARD / WRITE_ZEROES misshapen */
	case 21: {
		bool dis = kind == 20;
		uint64_t max = dis ? e->max_discard : e->max_wz;

		c->type = dis ? VIRTIO_BLK_T_DISCARD : VIRTIO_BLK_T_WRITE_ZEROES;
		c->data = 0;
		c->data_len = 4096;
		if (!max) {
			expect_set(fc, "range op not offered", -EOPNOTSUPP,
				   -EOPNOTSUPP, -EOPNOTSUPP);
			break;
		}
		expect_set(fc, dis ? "DISCARD misshapen" : "WRITE_ZEROES misshapen",
			   -EINVAL, -EINVAL, -EINVAL);
		switch (rng_below(rng, 7)) {
		case 0: c->data = (uintptr_t)buf; break;
		case 1: sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC; break;
		case 2: c->data_len = 0; break;
		case 3: c->data_len = 1 + (__u32)rng_below(rng, SECTOR - 1); break;
		case 4:
			c->sector = e->cap - rng_below(rng, 8);
			break;
		case 5:
			if (max + SECTOR <= UINT32_MAX) {
				c->data_len = (__u32)(max + SECTOR);
				break;
			}
			/* fall through */
		case 6:
			c->flags = dis ? VIRTIO_BLK_URING_CMD_F_UNMAP :
				   (__u32)rng_next(rng) | 2;
			break;
		}
		break;
	}
	case 22:	/* fixed: bad index, or an address outside the buffer */
		if (nbufs == 0)
			break;
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (__u16)slot;
		if (rng_next(rng) & 1) {
			sqe->buf_index = (__u16)(nbufs + rng_below(rng, 1000));
			expect_set(fc, "fixed: bad buf_index", -EFAULT, -EFAULT, -EFAULT);
		} else {
			c->data = (uintptr_t)buf + FUZZ_BUF - 4096 + 4096 *
				  (1 + rng_below(rng, 16));
			c->data_len = 8192;
			expect_set(fc, "fixed: outside the buffer", -EFAULT, -EFAULT, -EFAULT);
		}
		break;
	case 23:	/* fixed with the vectored op */
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (__u16)slot;
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		iov[0] = (struct iovec){ buf, 4096 };
		c->data = (uintptr_t)iov;
		c->data_len = 1;
		/*
		 * The documented precedence: without registered buffers
		 * io_uring refuses the index (-EFAULT) before the driver
		 * sees the shape error (-EINVAL).
		 */
		if (nbufs == 0)
			expect_set(fc, "fixed + vectored, no buffers", -EFAULT, -EFAULT, -EFAULT);
		else
			expect_set(fc, "fixed + vectored", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 24:	/* invalid ioprio */
		r = rng_below(rng, 3);
		if (r == 0)
			c->ioprio = 0x10000 | (__u32)rng_next(rng);
		else if (r == 1)	/* classes 4..7 */
			c->ioprio = (__u32)(4 + rng_below(rng, 4)) << 13;
		else			/* IOPRIO_CLASS_NONE with a level */
			c->ioprio = 1 + (__u32)rng_below(rng, 7);
		expect_set(fc, "bad ioprio", -EINVAL, -EINVAL, -EINVAL);
		break;
	case 25:	/* valid: vectored */
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		r = 1 + rng_below(rng, FUZZ_IOVS);
		for (i = 0; i < r; i++)
			iov[i] = (struct iovec){ buf + i * 4096,
						 (1 + rng_below(rng, 8)) * SECTOR };
		c->data = (uintptr_t)iov;
		c->data_len = (__u32)r;
		c->sector = fuzz_sector(rng, e, FUZZ_IOVS * 4096);
		expect_set(fc, "valid vectored", 0, 0, 0);
		break;
	case 26:	/* valid: fixed buffer */
		if (nbufs == 0)
			break;
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (__u16)slot;
		expect_set(fc, "valid fixed", 0, 0, 0);
		break;
	case 27:	/* valid: FLUSH */
		c->type = VIRTIO_BLK_T_FLUSH;
		c->data = 0;
		c->sector = 0;
		c->data_len = 0;
		expect_set(fc, "valid flush", 0, 0, 0);
		break;
	default:	/* valid read or write as built */
		break;
	}
}

static void fuzz_report(const struct fuzz_case *fc, unsigned long nr,
			unsigned int ring, const char *verdict)
{
	const struct virtio_blk_uring_cmd *c = &fc->cmd;

	fprintf(stderr, "fuzz: command %lu (%s, ring %u): %s; cmd_op %#x%s type %u"
		" ioprio %#x sector %#llx data %#llx data_len %#llx flags %#x\n",
		nr, fc->what, ring, verdict, fc->cmd_op, fc->fixed ? " fixed" : "",
		c->type, c->ioprio, (unsigned long long)c->sector,
		(unsigned long long)c->data, (unsigned long long)c->data_len,
		c->flags);
}

/* vring_run(), but a command that never completes is named. */
static void fuzz_run(struct vring *r, unsigned int n, int *res,
		     struct fuzz_case *fc, unsigned long first, unsigned int ring)
{
	struct io_uring_cqe *cqe;
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++)
		fc[i].done = false;
	ret = io_uring_submit(&r->ring);
	if (ret < 0)
		fail("fuzz: io_uring_submit: %s", strerror(-ret));
	for (i = 0; i < n; i++) {
		ret = vring_wait(r, &cqe, WAIT_MS);
		if (ret) {
			for (i = 0; i < n; i++)
				if (!fc[i].done)
					fuzz_report(&fc[i], first + i, ring,
						    "never completed");
			fail("fuzz: commands never completed (%s)", strerror(-ret));
		}
		if (cqe->user_data >= n || fc[cqe->user_data].done)
			fail("fuzz: unexpected CQE, user_data %llu",
			     (unsigned long long)cqe->user_data);
		res[cqe->user_data] = cqe->res;
		fc[cqe->user_data].done = true;
		io_uring_cqe_seen(&r->ring, cqe);
	}
}

static int cmd_fuzz(const char *chr, unsigned long n, uint64_t seed)
{
	struct fuzz_env e;
	struct fuzz_case fc[FUZZ_BATCH];
	unsigned long done = 0, bad = 0, valid = 0;
	uint64_t rng = seed * 0x9e3779b97f4a7c15ULL | 1;
	struct iovec reg[FUZZ_BATCH];
	int res[FUZZ_BATCH], ret;
	unsigned int i, round = 0;
	struct vring rings[3];
	/*
	 * Interrupt ring with fixed buffers, polled ring, no-SQE128 ring.
	 * SUBMIT_ALL: io_uring's own prep rejects some defects (a bad
	 * buf_index) and would otherwise stop submitting the batch there.
	 */
	const unsigned int rflags[3] = {
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SQE128,
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SQE128 | IORING_SETUP_IOPOLL,
		IORING_SETUP_SUBMIT_ALL,
	};

	memset(&e, 0, sizeof(e));
	e.fd = open_or_die(chr, O_RDWR);
	e.cap = disk_u64(e.fd, "size");
	e.max_io = disk_u64(e.fd, "queue/max_hw_sectors_kb") << 10;
	e.max_discard = disk_u64(e.fd, "queue/discard_max_hw_bytes");
	e.max_wz = disk_u64(e.fd, "queue/write_zeroes_max_bytes");
	e.buf = xalloc((size_t)FUZZ_BATCH * FUZZ_BUF);
	e.iovs = xalloc(FUZZ_BATCH * FUZZ_IOVS * sizeof(struct iovec));
	e.guard = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e.guard == MAP_FAILED || mprotect(e.guard + 4096, 4096, PROT_NONE))
		fail("fuzz: guard page: %s", strerror(errno));
	/*
	 * virtio-blk without size_max/seg_max has an all but unlimited
	 * max_hw_sectors, so the capacity is what makes a length too long.
	 */
	e.huge = (e.max_io < e.cap * SECTOR ? e.max_io : e.cap * SECTOR) + SECTOR;
	if (e.cap < 2 * FUZZ_AREA / SECTOR)
		fail("fuzz: the disk must have at least %llu MiB", 2 * FUZZ_AREA >> 20);
	for (i = 0; i < 3; i++)
		vring_init_or_die(&rings[i], FUZZ_BATCH, rflags[i]);
	for (i = 0; i < FUZZ_BATCH; i++)
		reg[i] = (struct iovec){ e.buf + (size_t)i * FUZZ_BUF, FUZZ_BUF };
	ret = io_uring_register_buffers(&rings[0].ring, reg, FUZZ_BATCH);
	if (ret)
		fail("fuzz: register buffers: %s", strerror(-ret));
	fprintf(stderr, "fuzz: seed %" PRIu64 ", capacity %" PRIu64
		" sectors, max io %" PRIu64 ", discard %" PRIu64 ", wzeroes %"
		PRIu64 "\n", seed, e.cap, e.max_io, e.max_discard, e.max_wz);

	while (done < n) {
		/* Mostly the interrupt ring; every 4th batch polled, 1/16 small SQEs */
		unsigned int which = round % 16 == 15 ? 2 : round % 4 == 3 ? 1 : 0;
		struct vring *r = &rings[which];
		unsigned int batch = (unsigned int)(n - done < FUZZ_BATCH ? n - done : FUZZ_BATCH);
		char what[96];

		for (i = 0; i < batch; i++) {
			struct io_uring_sqe *sqe = cmd_sqe(r, e.fd, 0, i);

			if (which == 2) {
				/*
				 * A 64-byte SQE has 16 bytes of cmd, too small
				 * for any command: -EINVAL whatever it holds.
				 */
				sqe->cmd_op = rng_next(&rng) & 1 ?
					VIRTIO_BLK_URING_CMD_IO :
					VIRTIO_BLK_URING_CMD_IO_VEC;
				expect_set(&fc[i], "no SQE128", -EINVAL, -EINVAL, -EINVAL);
				continue;
			}
			fuzz_build(sqe, &e, i, &rng, &fc[i], which == 0 ? FUZZ_BATCH : 0);
			fc[i].cmd = *sqe_cmd(sqe);
			fc[i].cmd_op = sqe->cmd_op;
			fc[i].fixed = sqe->uring_cmd_flags & IORING_URING_CMD_FIXED;
		}
		snprintf(what, sizeof(what), "fuzz batch %u (ring %u)", round, which);
		fuzz_run(r, batch, res, fc, done, which);
		for (i = 0; i < batch; i++) {
			if (res[i] == fc[i].expect[0] || res[i] == fc[i].expect[1] ||
			    res[i] == fc[i].expect[2]) {
				valid += !fc[i].expect[0];
				continue;
			}
			bad++;
			snprintf(what, sizeof(what), "got %s, expected %s",
				 errname(res[i]), errname(fc[i].expect[0]));
			fuzz_report(&fc[i], done + i, which, what);
		}
		done += batch;
		round++;
	}
	for (i = 0; i < 3; i++)
		io_uring_queue_exit(&rings[i].ring);
	close(e.fd);
	fprintf(stderr, "fuzz: %lu commands, %lu valid, %lu unexpected results\n",
		done, valid, bad);
	if (bad)
		fail("fuzz: %lu of %lu commands got an unexpected result", bad, done);
	return 0;
}

/* ------------------------------------------------------------------ */
/* stress: I/O until told to stop or the device goes away             */
/* ------------------------------------------------------------------ */

static int cmd_stress(const char *chr, bool polled, unsigned int seconds,
		      unsigned int qd, bool write, uint64_t off)
{
	unsigned long ok = 0, nodev = 0, eio = 0, other = 0, submitted = 0;
	uint64_t deadline = now_ms() + seconds * 1000ULL, rng = 1;
	unsigned int inflight = 0;
	bool stopping = false, announced = false;
	struct io_uring_cqe *cqe;
	unsigned int *free_slot, nr_free = qd, i;
	char *buf;
	struct vring r;
	int fd, ret, first_err = 0;

	fd = open_or_die(chr, O_RDWR);
	vring_init_or_die(&r, qd, IORING_SETUP_SQE128 |
			  (polled ? IORING_SETUP_IOPOLL : 0));
	/*
	 * A 4 KiB slot of its own for each command in flight: two reads DMAing
	 * into the same buffer at once race (DMA API debugging reports the
	 * overlapping mappings), and no application should do that.
	 */
	buf = xalloc((size_t)qd * 4096);
	free_slot = xalloc(qd * sizeof(*free_slot));
	for (i = 0; i < qd; i++)
		free_slot[i] = i;

	for (;;) {
		if (!stopping && now_ms() > deadline)
			stopping = true;
		while (!stopping && inflight < qd) {
			unsigned int slot = free_slot[--nr_free];
			struct io_uring_sqe *sqe = cmd_sqe(&r, fd, VIRTIO_BLK_URING_CMD_IO,
							   slot);
			struct virtio_blk_uring_cmd *c = sqe_cmd(sqe);

			c->type = write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;
			c->sector = (off >> 9) + rng_below(&rng, 16384) * 8;
			/* contents do not matter */
			c->data = (uintptr_t)(buf + (size_t)slot * 4096);
			c->data_len = 4096;
			inflight++;
			submitted++;
		}
		ret = io_uring_submit(&r.ring);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN)
			fail("stress: io_uring_submit: %s", strerror(-ret));
		if (!announced) {
			/* The caller may now pull the device from under us */
			printf("stress: running\n");
			fflush(stdout);
			announced = true;
		}
		if (!inflight)
			break;
		ret = vring_wait(&r, &cqe, WAIT_MS);
		if (ret)
			fail("stress: %u commands never completed (%s); %lu ok, %lu ENODEV, %lu EIO",
			     inflight, strerror(-ret), ok, nodev, eio);
		switch (cqe->res) {
		case 0: ok++; break;
		case -ENODEV: nodev++; break;
		case -EIO: eio++; break;
		default: other++; break;
		}
		if (cqe->res && !first_err)
			first_err = cqe->res;
		if (cqe->res)
			stopping = true;
		if (cqe->user_data >= qd || nr_free >= qd)
			fail("stress: a completion for slot %llu, which is not in flight",
			     (unsigned long long)cqe->user_data);
		free_slot[nr_free++] = (unsigned int)cqe->user_data;
		io_uring_cqe_seen(&r.ring, cqe);
		inflight--;
	}
	/* The ring and file are closed with the device possibly gone. */
	io_uring_queue_exit(&r.ring);
	close(fd);
	free(free_slot);
	free(buf);
	printf("stress: %lu submitted, %lu ok, %lu ENODEV, %lu EIO, %lu other (first error %s)\n",
	       submitted, ok, nodev, eio, other, errname(first_err));
	if (other)
		fail("stress: %lu commands ended with an undocumented result", other);
	return 0;
}

/* ------------------------------------------------------------------ */
/* pollshare: polled completions reaped by other rings and tasks      */
/* ------------------------------------------------------------------ */

#define PS_REGION	(16ULL << 20)	/* each process's own disk region */
#define PS_BS		4096
#define PS_FILL_BS	(64 << 10)
#define PS_GET_ID	UINT64_MAX	/* ps_slot.blk of a GET_ID command */

/* One process of pollshare and its commands in flight. */
struct ps_proc {
	unsigned int idx, qd;		/* slots [ring * qd, (ring + 1) * qd) */
	int fd;
	uint64_t base, seed, rng;
	char *buf;			/* PS_BS bytes per slot */
	struct ps_slot {
		bool busy;
		uint64_t blk;		/* block of the region, or PS_GET_ID */
	} *slot;
	unsigned int inflight;
	unsigned long verified;
	char id_ref[VIRTIO_BLK_ID_BYTES];
};

/* Fill the idle slots of @ring with polled reads, one in 8 a GET_ID. */
static void ps_submit(struct ps_proc *p, struct vring *r, unsigned int ring)
{
	unsigned int i;
	int res;

	for (i = ring * p->qd; i < (ring + 1) * p->qd; i++) {
		struct ps_slot *slot = &p->slot[i];
		struct virtio_blk_uring_cmd *c;

		if (slot->busy)
			continue;
		memset(p->buf + (size_t)i * PS_BS, 0, PS_BS);
		c = sqe_cmd(cmd_sqe(r, p->fd, VIRTIO_BLK_URING_CMD_IO, i));
		c->data = (uintptr_t)(p->buf + (size_t)i * PS_BS);
		if (!rng_below(&p->rng, 8)) {
			slot->blk = PS_GET_ID;
			c->type = VIRTIO_BLK_T_GET_ID;
			c->data_len = VIRTIO_BLK_ID_BYTES;
		} else {
			slot->blk = rng_below(&p->rng, PS_REGION / PS_BS);
			c->type = VIRTIO_BLK_T_IN;
			c->sector = (p->base + slot->blk * PS_BS) / SECTOR;
			c->data_len = PS_BS;
		}
		slot->busy = true;
		p->inflight++;
	}
	res = io_uring_submit(&r->ring);
	if (res < 0)
		fail("process %u: io_uring_submit: %s", p->idx, strerror(-res));
}

/*
 * Poll @ring and check what it completed: the slot is one of its own in
 * flight, the result 0, the buffer the block's pattern or the disk's ID.
 * Returns how many completed.
 */
static unsigned int ps_reap(struct ps_proc *p, struct vring *r, unsigned int ring)
{
	struct io_uring_cqe *cqe;
	unsigned int got = 0;
	int res;

	res = io_uring_get_events(&r->ring);
	if (res < 0 && res != -EINTR && res != -EAGAIN)
		fail("process %u: io_uring_enter: %s", p->idx, strerror(-res));
	while (!io_uring_peek_cqe(&r->ring, &cqe)) {
		uint64_t i = cqe->user_data, off;
		const char *data = p->buf + i * PS_BS;
		long bad;

		if (i < ring * p->qd || i >= (ring + 1) * p->qd || !p->slot[i].busy)
			fail("process %u: ring %u got a CQE for slot %" PRIu64
			     ", not one of its commands in flight", p->idx, ring, i);
		if (cqe->res)
			fail("process %u: polled read: %s", p->idx, errname(cqe->res));
		if (p->slot[i].blk == PS_GET_ID) {
			if (memcmp(data, p->id_ref, VIRTIO_BLK_ID_BYTES))
				fail("process %u: polled GET_ID did not return the disk's ID",
				     p->idx);
		} else {
			off = p->base + p->slot[i].blk * PS_BS;
			bad = pat_check(data, PS_BS, p->seed, off);
			if (bad >= 0)
				fail("process %u: block at %" PRIu64 " has wrong data at byte %ld",
				     p->idx, off, bad);
		}
		p->slot[i].busy = false;
		p->inflight--;
		p->verified++;
		got++;
		io_uring_cqe_seen(&r->ring, cqe);
	}
	return got;
}

/*
 * One process of pollshare: write a pattern over its region and read the
 * disk's ID through an interrupt ring, then keep @qd commands in flight on
 * each of two IOPOLL rings for @seconds, checking every completion.  The
 * other rings polling the same queue (the second ring here, the other
 * processes) reap these commands as often as their owner does.
 */
static void pollshare_child(const char *chr, unsigned int idx, unsigned int seconds,
			    unsigned int qd, uint64_t base)
{
	struct ps_proc p = {
		.idx = idx, .qd = qd, .base = base,
		.seed = 0x5000 + idx, .rng = idx + 1,
		.fd = open_or_die(chr, O_RDWR),
		.buf = xalloc((size_t)2 * qd * PS_BS),
		.slot = xalloc(2 * qd * sizeof(struct ps_slot)),
	};
	struct virtio_blk_uring_cmd c = { .type = VIRTIO_BLK_T_OUT, .data_len = PS_FILL_BS };
	uint64_t deadline = now_ms() + seconds * 1000ULL, idle_since;
	char *fill = xalloc(PS_FILL_BS);
	struct vring w, r[2];
	unsigned int i, ring;
	int res;

	vring_init_or_die(&w, 4, IORING_SETUP_SQE128);
	c.data = (uintptr_t)fill;
	for (i = 0; i < PS_REGION / PS_FILL_BS; i++) {
		c.sector = (base + (uint64_t)i * PS_FILL_BS) / SECTOR;
		pat_fill(fill, PS_FILL_BS, p.seed, base + (uint64_t)i * PS_FILL_BS);
		res = run_one(&w, p.fd, VIRTIO_BLK_URING_CMD_IO, &c);
		if (res)
			fail("process %u: filling the region: %s", idx, errname(res));
	}
	/* GET_ID is bounced: its copy-back must happen in this process's mm */
	c = (struct virtio_blk_uring_cmd){
		.type = VIRTIO_BLK_T_GET_ID,
		.data = (uintptr_t)p.id_ref,
		.data_len = VIRTIO_BLK_ID_BYTES,
	};
	res = run_one(&w, p.fd, VIRTIO_BLK_URING_CMD_IO, &c);
	if (res)
		fail("process %u: GET_ID: %s", idx, errname(res));
	if (zero_check(p.id_ref, VIRTIO_BLK_ID_BYTES) < 0)
		bail(EXIT_SKIP, "the disk has no serial for GET_ID to return");
	io_uring_queue_exit(&w.ring);

	for (ring = 0; ring < 2; ring++)
		vring_init_or_die(&r[ring], qd, IORING_SETUP_SQE128 | IORING_SETUP_IOPOLL);
	for (;;) {
		if (now_ms() <= deadline)
			for (ring = 0; ring < 2; ring++)
				ps_submit(&p, &r[ring], ring);
		if (!p.inflight)
			break;
		/* Reap from both rings until something completed. */
		idle_since = now_ms();
		while (!(ps_reap(&p, &r[0], 0) + ps_reap(&p, &r[1], 1))) {
			if (now_ms() - idle_since > WAIT_MS)
				fail("process %u: %u polled reads never completed",
				     idx, p.inflight);
		}
	}
	for (ring = 0; ring < 2; ring++)
		io_uring_queue_exit(&r[ring].ring);
	close(p.fd);
	printf("pollshare: process %u: %lu polled reads verified\n", idx, p.verified);
	if (!p.verified)
		fail("process %u: no read completed", idx);
	exit(0);
}

static int cmd_pollshare(const char *chr, unsigned int procs, unsigned int seconds,
			 unsigned int qd, uint64_t off)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int i, failed = 0, skipped = 0;
	int status;
	pid_t pid;

	if (ncpu < 1)
		ncpu = 1;
	fflush(stdout);
	for (i = 0; i < procs; i++) {
		pid = fork();
		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (!pid) {
			cpu_set_t set;

			/* Spread the pollers so they share the queue from every CPU */
			CPU_ZERO(&set);
			CPU_SET(i % ncpu, &set);
			sched_setaffinity(0, sizeof(set), &set);
			pollshare_child(chr, i, seconds, qd, off + i * PS_REGION);
		}
	}
	while ((pid = wait(&status)) > 0) {
		if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIP)
			skipped++;
		else if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	}
	if (skipped && !failed)
		bail(EXIT_SKIP, "%s cannot be checked", chr);
	if (failed)
		fail("%u of %u processes failed", failed, procs);
	return 0;
}

/* ------------------------------------------------------------------ */
/* put: a file's bytes onto the disk through the char device          */
/* ------------------------------------------------------------------ */

static int cmd_put(const char *chr, const char *file, const char *mode,
		   uint64_t off, uint64_t len)
{
	const size_t chunk = 128 << 10;
	const unsigned int per_round = 16;
	const struct mode *m = NULL;
	struct iovec *iovs = calloc(per_round * RW_IOVS, sizeof(*iovs));
	char *buf = xalloc(chunk * per_round);
	uint64_t done = 0;
	unsigned int i;
	struct vring r;
	int fd, ffd;

	for (i = 0; i < ARRAY_SIZE(modes); i++)
		if (!strcmp(modes[i].name, mode))
			m = &modes[i];
	if (!m || m->fixed || !iovs)
		bail(EXIT_USAGE, "put: --mode plain|vec|polled|polled-vec|sqpoll");
	if (off % 4096 || len % chunk)
		bail(EXIT_USAGE, "put: --offset 4k aligned, --len a multiple of 128k");
	ffd = open_or_die(file, O_RDONLY);
	fd = open_or_die(chr, O_WRONLY);
	vring_init_or_die(&r, per_round, IORING_SETUP_SQE128 | m->ring_flags);
	while (done < len) {
		uint64_t n = (len - done) / chunk;
		ssize_t got;

		n = n < per_round ? n : per_round;
		got = pread(ffd, buf, n * chunk, (off_t)(off + done));
		if (got != (ssize_t)(n * chunk))
			fail("put: %s: short read at %" PRIu64, file, off + done);
		pt_rw(m, &r, fd, true, buf, iovs, chunk, (unsigned int)n, off + done);
		done += n * chunk;
	}
	io_uring_queue_exit(&r.ring);
	close(fd);
	close(ffd);
	free(buf);
	free(iovs);
	return 0;
}

static int cmd_openclose(const char *chr, unsigned long n)
{
	/*
	 * Each read gets a 4 KiB buffer of its own: one closed with its ring
	 * may still be in flight when the next is submitted, and two reads
	 * DMAing into one buffer are overlapping mappings, which DMA API
	 * debugging reports (and no application should do).
	 */
	char *bufs = xalloc((n / 2 + 1) * 4096);
	unsigned long i;

	for (i = 0; i < n; i++) {
		struct virtio_blk_uring_cmd c = {
			.type = VIRTIO_BLK_T_IN, .data_len = 4096,
			.sector = (i % 1024) * 8,
		};
		struct io_uring_sqe *sqe;
		struct vring r;
		int fd = open_or_die(chr, O_RDONLY);

		if (i % 2) {
			close(fd);
			continue;
		}
		vring_init_or_die(&r, 4, IORING_SETUP_SQE128 |
				  (i % 4 == 2 ? IORING_SETUP_IOPOLL : 0));
		c.data = (uintptr_t)(bufs + (i / 2) * 4096);
		sqe = cmd_sqe(&r, fd, VIRTIO_BLK_URING_CMD_IO, 0);
		*sqe_cmd(sqe) = c;
		io_uring_submit(&r.ring);
		/* Close with the read possibly still in flight. */
		close(fd);
		io_uring_queue_exit(&r.ring);
	}
	/* a read still in flight holds its pages pinned, not this mapping */
	free(bufs);
	return 0;
}

/* ------------------------------------------------------------------ */
/* main                                                               */
/* ------------------------------------------------------------------ */

/* io-wq workers of this process right now (threads named iou-wrk-*). */
static unsigned int iowq_workers(void)
{
	unsigned int n = 0;
	struct dirent *de;
	DIR *d = opendir("/proc/self/task");
	char path[300], comm[32];

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "iou-wrk", 7))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/*
 * sqreuse: a batch of @qd reads, each of its own block into its own
 * buffer, on a disk whose queue takes far fewer (the caller lowers
 * queue/nr_requests).  The driver refuses the commands it has no tag for
 * with -EAGAIN, and io_uring issues them again from io-wq.  As soon as
 * io_uring_enter() returns, every SQ slot is rewritten with a read of
 * another block into a scratch buffer, as an application reusing its
 * slots may do.  A retry that read the ring's slot rather than io_uring's
 * copy of the SQE would carry out the rewritten command, and its own
 * buffer would keep the poison.  The blocks are written first, through
 * the block device @blk, with a pattern of their offsets.
 */
static int cmd_sqreuse(const char *chr, const char *blk, unsigned int qd,
		       unsigned int rounds, uint64_t base)
{
	const size_t bs = 4096;
	const uint64_t seed = 0x73717275ULL, decoy_seed = 0x6465636fULL;
	uint64_t decoy = base + (uint64_t)rounds * qd * bs;
	unsigned char *bufs = xalloc(qd * bs), *scratch = xalloc(qd * bs);
	unsigned int round, i, bad = 0, workers = 0, w;
	int *res = calloc(qd, sizeof(*res));
	struct io_uring_sqe *sqes;
	int fd, bfd, ret;
	struct vring r;

	if (!res)
		fail("out of memory");
	bfd = open_or_die(blk, O_RDWR | O_DIRECT);
	for (round = 0; round <= rounds; round++) {
		uint64_t off = base + (uint64_t)round * qd * bs;

		pat_fill(bufs, qd * bs, round < rounds ? seed : decoy_seed, off);
		pwrite_all(bfd, bufs, qd * bs, off);
	}
	close(bfd);

	fd = open_or_die(chr, O_RDONLY);
	vring_init_or_die(&r, qd, IORING_SETUP_SQE128);
	sqes = r.ring.sq.sqes;
	for (round = 0; round < rounds; round++) {
		uint64_t off = base + (uint64_t)round * qd * bs;

		memset(bufs, 0xa5, qd * bs);
		for (i = 0; i < qd; i++) {
			struct io_uring_sqe *sqe = cmd_sqe(&r, fd, VIRTIO_BLK_URING_CMD_IO, i);
			struct virtio_blk_uring_cmd *c = sqe_cmd(sqe);

			c->type = VIRTIO_BLK_T_IN;
			c->sector = (off + i * bs) / SECTOR;
			c->data = (uintptr_t)(bufs + i * bs);
			c->data_len = bs;
		}
		ret = io_uring_submit(&r.ring);
		if (ret != (int)qd)
			fail("sqreuse: io_uring_submit: %s",
			     ret < 0 ? strerror(-ret) : "short submit");
		/* The slots are the application's again: reuse them. */
		for (i = 0; i < qd; i++) {
			struct virtio_blk_uring_cmd *c = sqe_cmd(&sqes[i << 1]);

			c->sector = (decoy + i * bs) / SECTOR;
			c->data = (uintptr_t)(scratch + i * bs);
		}
		w = iowq_workers();
		workers = w > workers ? w : workers;
		for (i = 0; i < qd; i++) {
			struct io_uring_cqe *cqe;

			ret = vring_wait(&r, &cqe, WAIT_MS);
			if (ret)
				fail("sqreuse: round %u: %u of %u commands never completed",
				     round, qd - i, qd);
			if (cqe->user_data < qd)
				res[cqe->user_data] = cqe->res;
			io_uring_cqe_seen(&r.ring, cqe);
		}
		for (i = 0; i < qd; i++) {
			if (res[i])
				fail("sqreuse: round %u command %u: %s", round, i,
				     errname(res[i]));
			if (pat_check(bufs + i * bs, bs, seed, off + i * bs) < 0)
				continue;
			if (bad++ < 5)
				fprintf(stderr, "sqreuse: round %u command %u (offset %" PRIu64
					"): its buffer does not hold its block%s\n", round, i,
					off + i * bs,
					pat_check(scratch + i * bs, bs, seed, off + i * bs) < 0 ?
					" (the scratch buffer does: the retry ran the rewritten command"
					" with the original address, or the reverse)" : "");
		}
		w = iowq_workers();
		workers = w > workers ? w : workers;
	}
	io_uring_queue_exit(&r.ring);
	close(fd);
	fprintf(stderr, "sqreuse: %u rounds of %u commands, %u io-wq workers seen, %u wrong buffers\n",
		rounds, qd, workers, bad);
	if (!workers)
		fail("sqreuse: no command was retried from io-wq: is queue/nr_requests well below --qd?");
	free(res);
	free(bufs);
	free(scratch);
	return bad ? EXIT_FAIL : EXIT_PASS;
}

/*
 * badbuf: @n passthrough reads of 64 KiB (16 pages, more than the 8 a
 * mapping keeps on the stack, so the kernel allocates a page array) into
 * a buffer whose first page is unmapped.  Pinning fails at once; each
 * read must end with -EFAULT, and under kmemleak no page array may be
 * left behind.
 */
static int cmd_badbuf(const char *chr, unsigned long n, uint64_t off)
{
	const size_t len = 64 << 10, pg = 4096;
	struct virtio_blk_uring_cmd c = {
		.type = VIRTIO_BLK_T_IN, .sector = off / SECTOR, .data_len = len,
	};
	unsigned char *map;
	unsigned long i;
	struct vring r;
	int fd, res;

	map = mmap(NULL, len + pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		fail("badbuf: mmap: %s", strerror(errno));
	if (munmap(map, pg))
		fail("badbuf: munmap: %s", strerror(errno));
	c.data = (uintptr_t)map;
	fd = open_or_die(chr, O_RDONLY);
	vring_init_or_die(&r, 8, IORING_SETUP_SQE128);
	for (i = 0; i < n; i++) {
		res = run_one(&r, fd, VIRTIO_BLK_URING_CMD_IO, &c);
		if (res != -EFAULT)
			fail("badbuf: read %lu into a buffer with an unmapped first page: %s, expected EFAULT",
			     i, errname(res));
	}
	io_uring_queue_exit(&r.ring);
	close(fd);
	munmap(map + pg, len);
	fprintf(stderr, "badbuf: %lu reads, each EFAULT\n", n);
	return EXIT_PASS;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: vblk-pt rw CHAR BLK [--mode M] [--bs B] [--count N] [--offset O]\n"
		"       vblk-pt flush CHAR [-n N] [--polled]\n"
		"       vblk-pt discard|wzeroes CHAR BLK [--offset O] [--len L] [--unmap]\n"
		"       vblk-pt getid CHAR\n"
		"       vblk-pt perm CHAR --op OP --open r|w|rw --expect ERR [--offset O] [--polled]\n"
		"       vblk-pt fuzz CHAR [-n N] [--seed S]\n"
		"       vblk-pt stress CHAR [--polled] [--seconds S] [--qd Q] [--write] [--offset O]\n"
		"       vblk-pt pollshare CHAR [-n PROCS] [--seconds S] [--qd Q] [--offset O]\n"
		"       vblk-pt put CHAR FILE [--offset O] [--len L] [--mode M]\n"
		"       vblk-pt openclose CHAR [-n N]\n"
		"       vblk-pt sqreuse CHAR BLK [--qd Q] [--count ROUNDS] [--offset O]\n"
		"       vblk-pt badbuf CHAR [-n N] [--offset O]\n");
	exit(EXIT_USAGE);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "bs", required_argument, NULL, 'b' },
		{ "count", required_argument, NULL, 'c' },
		{ "offset", required_argument, NULL, 'o' },
		{ "len", required_argument, NULL, 'l' },
		{ "unmap", no_argument, NULL, 'U' },
		{ "polled", no_argument, NULL, 'p' },
		{ "op", required_argument, NULL, 'O' },
		{ "open", required_argument, NULL, 'M' },
		{ "expect", required_argument, NULL, 'e' },
		{ "seed", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "qd", required_argument, NULL, 'q' },
		{ "write", no_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	const char *mode = "all", *op = NULL, *open_mode = NULL, *sub, *chr, *blk;
	uint64_t bs = 64 << 10, count = 16, off = 256ULL << 20, len = 1 << 20;
	uint64_t n = 0, seed = 1, seconds = 10, qd = 8;
	bool unmap = false, polled = false, write = false;
	int expect = -1, c, ret = 0;
	unsigned int i;

	if (argc < 3)
		usage();
	sub = argv[1];
	chr = argv[2];
	prog_cmd = sub;
	optind = 3;
	while ((c = getopt_long(argc, argv, "n:", lopts, NULL)) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'b': bs = parse_num(optarg); break;
		case 'c': count = parse_num(optarg); break;
		case 'o': off = parse_num(optarg); break;
		case 'l': len = parse_num(optarg); break;
		case 'U': unmap = true; break;
		case 'p': polled = true; break;
		case 'O': op = optarg; break;
		case 'M': open_mode = optarg; break;
		case 'e': expect = parse_errname(optarg); break;
		case 's': seed = parse_num(optarg); break;
		case 'S': seconds = parse_num(optarg); break;
		case 'q': qd = parse_num(optarg); break;
		case 'w': write = true; break;
		case 'n': n = parse_num(optarg); break;
		default: usage();
		}
	}
	blk = optind < argc ? argv[optind] : NULL;

	if (strcmp(sub, "perm") && !passthru_supported(chr))
		bail(EXIT_SKIP, "%s: no virtio-blk passthrough here", chr);

	if (!strcmp(sub, "rw")) {
		int bfd;
		bool any = false;

		if (!blk)
			usage();
		if (!bs || bs % SECTOR || !count || count > 256)
			bail(EXIT_USAGE, "rw: --bs a multiple of 512, --count 1..256");
		bfd = open_or_die(blk, O_RDWR | O_DIRECT);
		for (i = 0; i < ARRAY_SIZE(modes); i++) {
			if (strcmp(mode, "all") && strcmp(mode, modes[i].name))
				continue;
			any = true;
			/* A vectored command cuts each buffer in RW_IOVS pieces */
			if (modes[i].vec && bs < RW_IOVS * SECTOR) {
				if (strcmp(mode, "all"))
					bail(EXIT_USAGE, "rw: --mode %s needs --bs %llu or more",
					     mode, RW_IOVS * SECTOR);
				fprintf(stderr, "rw %s: not run, --bs below %llu\n",
					modes[i].name, RW_IOVS * SECTOR);
				continue;
			}
			rw_mode(&modes[i], chr, bfd, (size_t)bs, (unsigned int)count,
				off + i * bs * count, seed + 2 * i);
			fprintf(stderr, "rw %s: ok\n", modes[i].name);
		}
		if (!any)
			bail(EXIT_USAGE, "rw: unknown --mode %s", mode);
		close(bfd);
	} else if (!strcmp(sub, "flush")) {
		ret = cmd_flush(chr, n ? (unsigned int)n : 1, polled);
	} else if (!strcmp(sub, "discard") || !strcmp(sub, "wzeroes")) {
		if (!blk)
			usage();
		ret = cmd_zero_range(chr, blk, !strcmp(sub, "discard") ?
				     VIRTIO_BLK_T_DISCARD : VIRTIO_BLK_T_WRITE_ZEROES,
				     off, len, unmap);
	} else if (!strcmp(sub, "getid")) {
		ret = cmd_getid(chr);
	} else if (!strcmp(sub, "perm")) {
		if (!op || !open_mode || expect < 0)
			usage();
		ret = cmd_perm(chr, op, open_mode, expect, off, polled);
	} else if (!strcmp(sub, "fuzz")) {
		ret = cmd_fuzz(chr, n ? n : 10000, seed);
	} else if (!strcmp(sub, "stress")) {
		if (!qd || qd > 256)
			bail(EXIT_USAGE, "stress: --qd 1..256");
		ret = cmd_stress(chr, polled, (unsigned int)seconds, (unsigned int)qd,
				 write, off);
	} else if (!strcmp(sub, "pollshare")) {
		if (!qd || qd > 64 || n > 16)
			bail(EXIT_USAGE, "pollshare: --qd 1..64, -n 1..16");
		ret = cmd_pollshare(chr, n ? (unsigned int)n : 4, (unsigned int)seconds,
				    (unsigned int)qd, off);
	} else if (!strcmp(sub, "put")) {
		if (!blk)
			usage();
		ret = cmd_put(chr, blk, strcmp(mode, "all") ? mode : "plain", off, len);
	} else if (!strcmp(sub, "openclose")) {
		ret = cmd_openclose(chr, n ? n : 1000);
	} else if (!strcmp(sub, "badbuf")) {
		ret = cmd_badbuf(chr, n ? n : 64, off);
	} else if (!strcmp(sub, "sqreuse")) {
		if (!blk || !qd || qd > 256 || !count || count > 64 || off % 4096)
			bail(EXIT_USAGE, "sqreuse: CHAR BLK, --qd 1..256, --count 1..64, --offset 4k aligned");
		ret = cmd_sqreuse(chr, blk, (unsigned int)qd, (unsigned int)count, off);
	} else {
		usage();
	}
	return ret;
}
#endif /* VIRTIO_BLK_URING_CMD_IO */
