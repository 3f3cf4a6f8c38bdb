// SPDX-License-Identifier: GPL-2.0
/*
 * blkcopy - copy ranges of block devices with copy_file_range(2).
 *
 *   blkcopy --src DEV[:OFF[:LEN]] [--src ...] --dst DEV[:OFF] [--len N]
 *           [--no-fallback] [--progress] [-h]
 *
 * Every source range is copied, back to back, to the destination, which
 * starts at OFF of the destination device.  A source without its own LEN
 * copies --len bytes.  Offsets and lengths take dd's units: c (1), w (2),
 * b (512), K or KiB (1024), KB (1000), M, MiB, MB, G, GiB, GB, T, TiB, TB;
 * decimal or 0x hexadecimal.
 *
 * Within one disk (the whole disk or its partitions) the kernel copies:
 * the device itself when it supports copy offload, the kernel through
 * memory otherwise.  --no-fallback passes COPY_FILE_OFFLOAD_ONLY, so the
 * copy fails instead of being emulated.  Between two disks the kernel
 * refuses (EXDEV) and blkcopy reads and writes the data itself, unless
 * --no-fallback is given.
 *
 * The arguments are checked before anything is copied, and every error
 * names the check that failed.  --progress (or a copy that runs longer than
 * a second with stderr on a terminal) prints a progress line every second
 * and the throughput at the end.
 *
 * Exit status: 0 copied, 1 error, 2 usage.
 */
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
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>

#include "tool.h"

/*
 * From include/uapi/linux/fs.h of the copy-offload topic; defined here too so
 * that blkcopy builds against older headers (such a kernel then fails the
 * flag with EINVAL, which blkcopy explains).
 */
#ifndef COPY_FILE_OFFLOAD_ONLY
#define COPY_FILE_OFFLOAD_ONLY	0x00000001
#endif

#define MAX_SRCS	64
/* bytes per copy_file_range() call, so that progress is seen */
#define CALL_BYTES	(64ULL << 20)
/* buffer of the read/write copy between two disks */
#define RW_BYTES	(1U << 20)

struct bdev {
	const char	*path;
	int		fd;
	dev_t		rdev;
	dev_t		disk;		/* the whole disk it belongs to */
	uint64_t	start;		/* its first byte on that disk */
	uint64_t	size;
	unsigned int	lbs;
	bool		ro;
};

struct range {
	struct bdev	dev;
	uint64_t	off;
	uint64_t	len;
	bool		has_len;
	uint64_t	dst_off;	/* where this source goes */
};

static const char *prog = "blkcopy";
static bool show_progress;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s --src DEV[:OFF[:LEN]] [--src ...] --dst DEV[:OFF] [--len N]\n"
		"               [--no-fallback] [--progress]\n"
		"  -s, --src DEV[:OFF[:LEN]]  a source range (OFF default 0, LEN default --len);\n"
		"                             several are copied back to back (at most %d)\n"
		"  -d, --dst DEV[:OFF]        where the copy goes (OFF default 0)\n"
		"  -l, --len N                bytes per source range without its own LEN\n"
		"  -n, --no-fallback          offload or fail: COPY_FILE_OFFLOAD_ONLY, and no\n"
		"                             read/write copy between two disks\n"
		"  -p, --progress             a progress line every second, throughput at the end\n"
		"  -h, --help                 this text\n"
		"sizes: bytes, or with c w b K KiB KB M MiB MB G GiB GB T TiB TB (as dd)\n"
		"exit status: 0 copied, 1 error, 2 usage\n",
		prog, MAX_SRCS);
}

/* "blkcopy: <message>", a hint for usage errors, and exit with @code. */
static void __attribute__((noreturn, format(printf, 2, 0)))
vdie(int code, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	if (code == 2)
		fprintf(stderr, "\nTry '%s --help'.\n", prog);
	else
		fputc('\n', stderr);
	exit(code);
}

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdie(1, fmt, ap);
}

static void __attribute__((noreturn, format(printf, 1, 2))) bad_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdie(2, fmt, ap);
}

/* A size with dd's units; false if it is not one. */
static bool parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
		{ "", 1 }, { "c", 1 }, { "w", 2 }, { "b", 512 },
		{ "k", 1ULL << 10 }, { "K", 1ULL << 10 }, { "KiB", 1ULL << 10 },
		{ "kB", 1000 }, { "KB", 1000 },
		{ "M", 1ULL << 20 }, { "MiB", 1ULL << 20 }, { "MB", 1000000 },
		{ "G", 1ULL << 30 }, { "GiB", 1ULL << 30 }, { "GB", 1000000000 },
		{ "T", 1ULL << 40 }, { "TiB", 1ULL << 40 },
		{ "TB", 1000000000000ULL },
	};
	unsigned long long v;
	char *end;
	size_t i;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		v = strtoull(s, &end, 16);
	else
		v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix))
			continue;
		if (v > UINT64_MAX / units[i].mult)
			return false;
		*out = v * units[i].mult;
		return true;
	}
	return false;
}

static bool path_exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

/*
 * DEV[:OFF[:LEN]]: device paths may hold ':' themselves (by-path names), so
 * the longest prefix that names an existing file is the device.  The
 * argument is split in place; error messages quote a copy of it.
 */
static void parse_range(char *s, const char *opt, bool allow_len,
			struct range *r)
{
	char arg[PATH_MAX + 64], *c1, *c2;

	snprintf(arg, sizeof(arg), "%s", s);
	memset(r, 0, sizeof(*r));
	if (path_exists(s)) {
		r->dev.path = s;
		return;
	}
	c2 = strrchr(s, ':');
	if (!c2)
		bad_usage("%s %s: no such device", opt, arg);
	*c2 = '\0';
	if (path_exists(s)) {
		r->dev.path = s;
		if (!parse_size(c2 + 1, &r->off))
			bad_usage("%s %s: bad offset '%s'", opt, arg, c2 + 1);
		return;
	}
	c1 = strrchr(s, ':');
	if (!allow_len || !c1)
		bad_usage("%s %s: no such device", opt, arg);
	*c1 = '\0';
	if (!path_exists(s))
		bad_usage("%s %s: no such device '%s'", opt, arg, s);
	r->dev.path = s;
	if (!parse_size(c1 + 1, &r->off))
		bad_usage("%s %s: bad offset '%s'", opt, arg, c1 + 1);
	if (!parse_size(c2 + 1, &r->len))
		bad_usage("%s %s: bad length '%s'", opt, arg, c2 + 1);
	r->has_len = true;
}

static unsigned long long sysfs_ull(dev_t dev, const char *attr, bool *found)
{
	char path[128];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%s",
		 major(dev), minor(dev), attr);
	f = fopen(path, "r");
	*found = f != NULL;
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		*found = false;
	fclose(f);
	return v;
}

/* The whole disk a block device belongs to, and where it starts there. */
static void find_disk(struct bdev *b)
{
	bool part, found;
	char path[128];
	unsigned int maj, min;
	FILE *f;

	b->disk = b->rdev;
	b->start = 0;
	sysfs_ull(b->rdev, "partition", &part);
	if (!part)
		return;
	b->start = sysfs_ull(b->rdev, "start", &found) * 512;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../dev",
		 major(b->rdev), minor(b->rdev));
	f = fopen(path, "r");
	if (!f)
		return;
	if (fscanf(f, "%u:%u", &maj, &min) == 2)
		b->disk = makedev(maj, min);
	fclose(f);
}

static void open_bdev(struct bdev *b, int flags)
{
	struct stat st;
	int ro = 0;

	b->fd = open(b->path, flags | O_CLOEXEC);
	if (b->fd < 0)
		fail("%s: cannot open for %s: %s", b->path,
		     flags == O_RDONLY ? "reading" : "writing",
		     strerror(errno));
	if (fstat(b->fd, &st))
		fail("%s: fstat: %s", b->path, strerror(errno));
	if (!S_ISBLK(st.st_mode))
		fail("%s: not a block device", b->path);
	b->rdev = st.st_rdev;
	if (ioctl(b->fd, BLKGETSIZE64, &b->size))
		fail("%s: BLKGETSIZE64: %s", b->path, strerror(errno));
	if (ioctl(b->fd, BLKSSZGET, &b->lbs))
		fail("%s: BLKSSZGET: %s", b->path, strerror(errno));
	if (ioctl(b->fd, BLKROGET, &ro))
		fail("%s: BLKROGET: %s", b->path, strerror(errno));
	b->ro = ro;
	find_disk(b);
}

static void check_range(const struct bdev *b, const char *what, uint64_t off,
			uint64_t len, unsigned int lbs)
{
	if (off % lbs)
		fail("%s: %s offset %" PRIu64 " is not a multiple of the logical block size %u",
		     b->path, what, off, lbs);
	if (len % lbs)
		fail("%s: %s length %" PRIu64 " is not a multiple of the logical block size %u",
		     b->path, what, len, lbs);
	if (off > b->size || len > b->size - off)
		fail("%s: %s range %" PRIu64 "+%" PRIu64 " extends past the end of the device (%" PRIu64 " bytes)",
		     b->path, what, off, len, b->size);
}

struct progress {
	uint64_t	total;
	uint64_t	done;
	double		start;
	double		last;
	bool		shown;
};

static void progress_update(struct progress *p, bool final)
{
	double t = now(), el = t - p->start;
	bool tty = isatty(STDERR_FILENO);

	if (!final) {
		if (t - p->last < 1.0)
			return;
		if (!show_progress && !(tty && el > 1.0))
			return;
	} else if (!p->shown && !show_progress) {
		return;
	}
	p->last = t;
	p->shown = true;
	if (final)
		fprintf(stderr, "%scopied %" PRIu64 " bytes in %.3f s, %.1f MiB/s\n",
			tty ? "\r" : "", p->done, el,
			el > 0 ? p->done / el / (1 << 20) : 0.0);
	else
		fprintf(stderr, "%scopied %" PRIu64 " of %" PRIu64 " MiB (%.0f%%), %.1f MiB/s%s",
			tty ? "\r" : "", p->done >> 20, p->total >> 20,
			p->total ? 100.0 * p->done / p->total : 100.0,
			el > 0 ? p->done / el / (1 << 20) : 0.0,
			tty ? "" : "\n");
}

static void explain_cfr_error(int err, const struct range *src,
			      const struct bdev *dst, bool offload_only)
{
	switch (err) {
	case EOPNOTSUPP:
		fail("%s: the device cannot copy the data itself (no copy offload, or copy_max_bytes is 0) and --no-fallback was given",
		     dst->path);
		break;
	case EXDEV:
		fail("%s and %s are different disks: the kernel copies only within one disk",
		     src->dev.path, dst->path);
		break;
	case EINVAL:
		if (offload_only)
			fail("copy_file_range from %s to %s: EINVAL: the kernel does not support COPY_FILE_OFFLOAD_ONLY",
			     src->dev.path, dst->path);
		fail("copy_file_range from %s to %s: EINVAL: the kernel does not support copy_file_range on block devices",
		     src->dev.path, dst->path);
		break;
	case EPERM:
		fail("%s: the destination is read-only", dst->path);
		break;
	case ETXTBSY:
		fail("%s: the destination is an active swap device", dst->path);
		break;
	case ENOSPC:
		fail("%s: the destination ends before the copy does", dst->path);
		break;
	case EBADF:
		fail("%s or %s: not open for reading and writing respectively",
		     src->dev.path, dst->path);
		break;
	default:
		fail("copy_file_range from %s to %s: %s", src->dev.path,
		     dst->path, strerror(err));
	}
}

/* Copy with copy_file_range(); false if the kernel refused two disks. */
static bool copy_kernel(const struct range *src, struct bdev *dst,
			uint64_t dst_off, bool offload_only,
			struct progress *p)
{
	unsigned int flags = offload_only ? COPY_FILE_OFFLOAD_ONLY : 0;
	loff_t in = src->off, out = dst_off;
	uint64_t left = src->len;

	while (left) {
		size_t n = left < CALL_BYTES ? left : CALL_BYTES;
		ssize_t ret;

		ret = copy_file_range(src->dev.fd, &in, dst->fd, &out, n,
				      flags);
		if (ret < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EXDEV && !offload_only &&
			    left == src->len)
				return false;
			explain_cfr_error(errno, src, dst, offload_only);
		}
		if (ret == 0)
			fail("%s: copy_file_range copied nothing at offset %lld (end of the device?)",
			     src->dev.path, (long long)in);
		left -= ret;
		p->done += ret;
		progress_update(p, false);
	}
	return true;
}

/* Between two disks: read and write through a buffer. */
static void copy_rw(const struct range *src, struct bdev *dst,
		    uint64_t dst_off, struct progress *p)
{
	uint64_t left = src->len, in = src->off, out = dst_off;
	char *buf = malloc(RW_BYTES);

	if (!buf)
		fail("out of memory");
	while (left) {
		size_t n = left < RW_BYTES ? left : RW_BYTES;
		ssize_t r = pread(src->dev.fd, buf, n, in);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail("%s: read at offset %" PRIu64 ": %s",
			     src->dev.path, in, strerror(errno));
		if ((size_t)r != n)
			fail("%s: short read at offset %" PRIu64 ": %zd of %zu bytes",
			     src->dev.path, in, r, n);
		r = pwrite(dst->fd, buf, n, out);
		if (r < 0)
			fail("%s: write at offset %" PRIu64 ": %s", dst->path,
			     out, strerror(errno));
		if ((size_t)r != n)
			fail("%s: short write at offset %" PRIu64 ": %zd of %zu bytes",
			     dst->path, out, r, n);
		in += n;
		out += n;
		left -= n;
		p->done += n;
		progress_update(p, false);
	}
	free(buf);
	if (fsync(dst->fd))
		fail("%s: fsync: %s", dst->path, strerror(errno));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "src", required_argument, NULL, 's' },
		{ "dst", required_argument, NULL, 'd' },
		{ "len", required_argument, NULL, 'l' },
		{ "no-fallback", no_argument, NULL, 'n' },
		{ "progress", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct range srcs[MAX_SRCS], dst;
	struct progress p = { 0 };
	bool have_dst = false, have_len = false, offload_only = false;
	uint64_t len = 0, dst_off;
	int nr_srcs = 0, c, i, j;

	while ((c = getopt_long(argc, argv, "s:d:l:nph", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (nr_srcs == MAX_SRCS)
				bad_usage("at most %d --src ranges", MAX_SRCS);
			parse_range(optarg, "--src", true, &srcs[nr_srcs++]);
			break;
		case 'd':
			if (have_dst)
				bad_usage("only one --dst");
			parse_range(optarg, "--dst", false, &dst);
			have_dst = true;
			break;
		case 'l':
			if (!parse_size(optarg, &len))
				bad_usage("--len %s: not a size", optarg);
			have_len = true;
			break;
		case 'n':
			offload_only = true;
			break;
		case 'p':
			show_progress = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (!nr_srcs)
		bad_usage("no --src");
	if (!have_dst)
		bad_usage("no --dst");
	for (i = 0; i < nr_srcs; i++) {
		if (srcs[i].has_len)
			continue;
		if (!have_len)
			bad_usage("--src %s: no length (give --len or DEV:OFF:LEN)",
				  srcs[i].dev.path);
		srcs[i].len = len;
	}

	open_bdev(&dst.dev, O_WRONLY);
	if (dst.dev.ro)
		fail("%s: the destination is read-only", dst.dev.path);
	dst_off = dst.off;
	for (i = 0; i < nr_srcs; i++) {
		struct range *s = &srcs[i];
		unsigned int lbs;

		open_bdev(&s->dev, O_RDONLY);
		if (!s->len)
			fail("%s: source range %d has length 0", s->dev.path,
			     i + 1);
		lbs = s->dev.lbs > dst.dev.lbs ? s->dev.lbs : dst.dev.lbs;
		check_range(&s->dev, "source", s->off, s->len, lbs);
		check_range(&dst.dev, "destination", dst_off, s->len, lbs);
		if (s->dev.disk != dst.dev.disk) {
			if (offload_only)
				fail("%s and %s are different disks: nothing can be offloaded between them (--no-fallback)",
				     s->dev.path, dst.dev.path);
		} else {
			uint64_t a = s->dev.start + s->off;
			uint64_t b = dst.dev.start + dst_off;

			if (a < b + s->len && b < a + s->len)
				fail("%s: source range %" PRIu64 "+%" PRIu64 " overlaps the destination %s range %" PRIu64 "+%" PRIu64 " on the same disk",
				     s->dev.path, s->off, s->len, dst.dev.path,
				     dst_off, s->len);
		}
		if (dst_off + s->len < dst_off)
			fail("%s: destination offset overflows", dst.dev.path);
		s->dst_off = dst_off;
		dst_off += s->len;
		p.total += s->len;
	}
	/* copying a range must not overwrite a source still to be copied */
	for (i = 0; i < nr_srcs; i++) {
		uint64_t b = dst.dev.start + srcs[i].dst_off;

		for (j = i + 1; j < nr_srcs; j++) {
			struct range *e = &srcs[j];
			uint64_t a = e->dev.start + e->off;

			if (e->dev.disk == dst.dev.disk &&
			    a < b + srcs[i].len && b < a + e->len)
				fail("%s: destination range %" PRIu64 "+%" PRIu64 " of source %d overwrites source %d before it is copied",
				     dst.dev.path, srcs[i].dst_off, srcs[i].len,
				     i + 1, j + 1);
		}
	}

	p.start = now();
	p.last = p.start;
	for (i = 0; i < nr_srcs; i++) {
		struct range *s = &srcs[i];

		if (!copy_kernel(s, &dst.dev, s->dst_off, offload_only, &p))
			copy_rw(s, &dst.dev, s->dst_off, &p);
	}
	progress_update(&p, true);
	return 0;
}
