// SPDX-License-Identifier: GPL-2.0
/*
 * iobench - drive block devices, files or passthrough char devices with
 * io_uring and report IOPS, in the spirit of fio's t/io_uring.
 *
 * Flag letters and defaults follow t/io_uring where both have them, so
 * "iobench -d128 -b4096 -p1 -B1 -F1 -n1 /dev/nvme0n1" reads the same way.
 * Run with -h for the list; the defaults shown are the current values.
 *
 * Structure:
 *  - every thread ("worker") owns one ring, depth IO slots and one buffer
 *    per slot; a slot's index is its user_data, its fixed-buffer index and
 *    its iovec;
 *  - each worker round-robins its IOs over all devices;
 *  - block devices and files use plain read/write opcodes; char devices
 *    (-u1) use IORING_OP_URING_CMD, with the command built by a per device
 *    type table (pt_types[]);
 *  - the main thread only samples counters once a second and prints them.
 *
 * -v is a data integrity check rather than a benchmark: one thread writes a
 * pattern to the first -N blocks of every device, waits for all writes, then
 * reads them back and compares; -R, -w and -r do not apply to it.
 *
 * Exit status: 0 on success, 1 on any error (bad value, unusable device,
 * failed IO, verify mismatch), 2 on command line syntax errors.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
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
#include <sys/ioctl.h>
/* BLKGETSIZE64, BLKSSZGET: newer <linux/fs.h> redefine <sys/uio.h>'s RWF_* */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <linux/nvme_ioctl.h>
#include <linux/virtio_blk.h>
#include <liburing.h>

#include "rng.h"

/* Older liburing copies of io_uring.h predate registered-buffer uring_cmd. */
#ifndef IORING_URING_CMD_FIXED
#define IORING_URING_CMD_FIXED	(1U << 0)
#endif

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define MIN(a, b)	((a) < (b) ? (a) : (b))
#define NSEC_PER_SEC	1000000000ULL

/* ------------------------------------------------------------------ */
/* Options                                                            */
/* ------------------------------------------------------------------ */

/* Every flag is a long so that one table can parse, print and dump them. */
struct options {
	long depth;
	long sbatch;
	long cbatch;
	long bs;
	long polled;
	long fixedbufs;
	long regfiles;
	long odirect;
	long nthreads;
	long runtime;
	long random;
	long passthru;
	long vectored;
	long wpct;
	long track_lat;
	long sqpoll;
	long sqpoll_cpu;
	long verify;
	long nverify;
	const char *json;
};

static struct options opt = {
	.depth		= 128,
	.sbatch		= 32,
	.cbatch		= 32,
	.bs		= 4096,
	.polled		= 1,
	.fixedbufs	= 1,
	.regfiles	= 1,
	.odirect	= 1,
	.nthreads	= 1,
	.runtime	= 0,
	.random		= 1,
	.passthru	= 0,
	.vectored	= 0,
	.wpct		= 0,
	.track_lat	= 0,
	.sqpoll		= 0,
	.sqpoll_cpu	= -1,
	.verify		= 0,
	.nverify	= 256,
};

struct opt_desc {
	char letter;
	bool is_switch;		/* takes no value, e.g. -v */
	long min, max;
	size_t off;		/* of the long in struct options */
	const char *key;	/* name in the JSON "options" object */
	const char *help;
};

#define OPT(l, field, lo, hi, key, help) \
	{ l, false, lo, hi, offsetof(struct options, field), key, help }

static const struct opt_desc opt_table[] = {
	OPT('d', depth, 1, 32768, "depth", "IO depth"),
	OPT('s', sbatch, 1, 32768, "batch_submit", "Batch submit (capped at -d)"),
	OPT('c', cbatch, 1, 32768, "batch_complete", "Batch complete (capped at -d)"),
	OPT('b', bs, 1, 1L << 30, "bs", "Block size in bytes"),
	OPT('p', polled, 0, 1, "polled", "Polled IO (IORING_SETUP_IOPOLL)"),
	OPT('B', fixedbufs, 0, 1, "fixedbufs", "Fixed (registered) buffers"),
	OPT('F', regfiles, 0, 1, "register_files", "Registered files"),
	OPT('O', odirect, 0, 1, "o_direct", "Use O_DIRECT (no effect with -u1)"),
	OPT('n', nthreads, 1, 1024, "threads", "Number of threads, one ring each"),
	OPT('r', runtime, 0, INT_MAX, "runtime", "Runtime in seconds, 0 = until SIGINT"),
	OPT('R', random, 0, 1, "random_io", "Random IO, 0 = sequential"),
	OPT('u', passthru, 0, 1, "passthrough", "Passthrough (URING_CMD) on a char device"),
	OPT('V', vectored, 0, 1, "vectored", "Vectored IO (readv/writev, vectored passthrough)"),
	OPT('w', wpct, 0, 100, "write_pct", "Write percentage (overwrites data!)"),
	OPT('t', track_lat, 0, 1, "track_latency", "Track per-IO latency"),
	OPT('S', sqpoll, 0, 1, "sqpoll", "SQPOLL (IORING_SETUP_SQPOLL)"),
	OPT('X', sqpoll_cpu, -1, INT_MAX, "sqpoll_cpu", "SQPOLL thread CPU, -1 = not bound"),
	OPT('N', nverify, 1, INT_MAX, "verify_blocks", "Blocks per device covered by -v"),
	{ 'v', true, 0, 1, offsetof(struct options, verify), "verify",
	  "Verify the first -N blocks: write, read back, compare (overwrites data!)" },
};

static long *opt_field(const struct opt_desc *d)
{
	return (long *)((char *)&opt + d->off);
}

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
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

/* ------------------------------------------------------------------ */
/* Devices                                                            */
/* ------------------------------------------------------------------ */

struct dev;

/* One passthrough IO as handed to a device type's prep_read/prep_write. */
struct pt_io {
	uint64_t off;			/* bytes */
	uint32_t len;			/* bytes */
	const void *buf;
	const struct iovec *iov;	/* non-NULL for -V1: a single iovec */
};

/*
 * Everything the passthrough path needs to know about one kind of char
 * device. Supporting a new kind means adding one entry to pt_types[].
 */
struct pt_ops {
	const char *name;
	/* Is the char device with this sysfs name and class of this type? */
	bool (*probe)(const char *sysname, const char *class);
	/* Fill d->size and d->lba_shift (and d->u); die with a message if not. */
	void (*setup)(struct dev *d);
	/*
	 * Fill sqe->cmd_op and the command in the cmd[] area of a 128-byte
	 * SQE. The caller has zeroed the SQE and set opcode, fd and flags.
	 */
	void (*prep_read)(const struct dev *d, struct io_uring_sqe *sqe,
			  const struct pt_io *io);
	void (*prep_write)(const struct dev *d, struct io_uring_sqe *sqe,
			   const struct pt_io *io);
	/* NULL if the CQE reports success, else what went wrong. */
	const char *(*cqe_error)(const struct io_uring_cqe *cqe, char *buf,
				 size_t len);
};

struct dev {
	const char *path;
	int fd;
	uint64_t size;			/* bytes available for IO */
	uint64_t nblocks;		/* size / bs */
	unsigned int lba_shift;		/* passthrough: log2(LBA size) */
	const struct pt_ops *pt;	/* NULL: block device or file */
	union {
		struct {
			__u32 nsid;
		} nvme;
	} u;
};

static struct dev *devs;
static unsigned int ndevs;

/* --- NVMe generic char device (/dev/ngXnY) ---------------------------- */

#define NVME_CMD_WRITE		0x01
#define NVME_CMD_READ		0x02
#define NVME_ADMIN_IDENTIFY	0x06
#define NVME_ID_CNS_NS		0x00
#define NVME_ID_LEN		4096
/* Byte offsets in the Identify Namespace data structure. */
#define NVME_ID_NS_NSZE		0
#define NVME_ID_NS_NLBAF	25
#define NVME_ID_NS_FLBAS	26
#define NVME_ID_NS_LBAF		128	/* 4 bytes each: MS(16) LBADS(8) RP(8) */
/* struct nvme_uring_cmd only uses 72 of the 80 bytes a big SQE offers. */
#define SQE_CMD_BYTES		80

_Static_assert(sizeof(struct nvme_uring_cmd) <= SQE_CMD_BYTES,
	       "nvme_uring_cmd does not fit a 128-byte SQE");

static bool nvme_probe(const char *sysname, const char *class)
{
	return !strcmp(class, "nvme-generic") && !strncmp(sysname, "ng", 2);
}

/* Identify Namespace on the namespace's own char device. */
static void nvme_identify_ns(const struct dev *d, __u32 nsid, uint8_t *id)
{
	struct nvme_passthru_cmd cmd;
	int ret;

	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = NVME_ADMIN_IDENTIFY;
	cmd.nsid = nsid;
	cmd.addr = (uintptr_t)id;
	cmd.data_len = NVME_ID_LEN;
	cmd.cdw10 = NVME_ID_CNS_NS;
	ret = ioctl(d->fd, NVME_IOCTL_ADMIN_CMD, &cmd);
	if (ret < 0)
		die("%s: Identify Namespace: %s", d->path, strerror(errno));
	if (ret > 0)
		die("%s: Identify Namespace: NVMe status %#x", d->path, ret);
}

static void nvme_setup(struct dev *d)
{
	uint8_t id[NVME_ID_LEN];
	const uint8_t *lbaf;
	unsigned int fmt, lbads;
	uint64_t nsze;
	uint16_t ms;
	int nsid;

	nsid = ioctl(d->fd, NVME_IOCTL_ID);
	if (nsid < 0)
		die("%s: NVME_IOCTL_ID: %s", d->path, strerror(errno));
	nvme_identify_ns(d, (__u32)nsid, id);

	memcpy(&nsze, id + NVME_ID_NS_NSZE, sizeof(nsze));
	nsze = le64toh(nsze);
	/* FLBAS bits 3:0 are the format index, bits 6:5 its high bits. */
	fmt = (id[NVME_ID_NS_FLBAS] & 0xf) | ((id[NVME_ID_NS_FLBAS] >> 1) & 0x30);
	if (fmt > id[NVME_ID_NS_NLBAF])
		die("%s: LBA format %u out of range", d->path, fmt);
	lbaf = id + NVME_ID_NS_LBAF + 4 * fmt;
	memcpy(&ms, lbaf, sizeof(ms));
	ms = le16toh(ms);
	lbads = lbaf[2];

	/*
	 * With metadata the device would also transfer to or from a metadata
	 * pointer we never set up; refuse instead of corrupting memory.
	 */
	if (ms)
		die("%s: LBA format %u carries %u bytes of metadata, not supported",
		    d->path, fmt, ms);
	if (lbads < 9 || lbads > 24)
		die("%s: unsupported LBA size 2^%u", d->path, lbads);
	if (nsze > UINT64_MAX >> lbads)
		die("%s: bogus namespace size %" PRIu64, d->path, nsze);
	/* NLB is a 16-bit 0's based count. */
	if ((uint64_t)opt.bs >> lbads > 65536)
		die("%s: -b %ld exceeds 65536 LBAs", d->path, opt.bs);

	d->u.nvme.nsid = (__u32)nsid;
	d->lba_shift = lbads;
	d->size = nsze << lbads;
}

static void nvme_prep(const struct dev *d, struct io_uring_sqe *sqe,
		      const struct pt_io *io, __u8 opcode)
{
	struct nvme_uring_cmd *cmd = (struct nvme_uring_cmd *)sqe->cmd;
	uint64_t slba = io->off >> d->lba_shift;

	cmd->opcode = opcode;
	cmd->nsid = d->u.nvme.nsid;
	cmd->cdw10 = (__u32)slba;
	cmd->cdw11 = (__u32)(slba >> 32);
	cmd->cdw12 = (io->len >> d->lba_shift) - 1;	/* NLB, 0's based */
	if (io->iov) {
		sqe->cmd_op = NVME_URING_CMD_IO_VEC;
		cmd->addr = (uintptr_t)io->iov;
		cmd->data_len = 1;	/* vectored: number of iovecs */
	} else {
		sqe->cmd_op = NVME_URING_CMD_IO;
		cmd->addr = (uintptr_t)io->buf;
		cmd->data_len = io->len;
	}
}

static void nvme_prep_read(const struct dev *d, struct io_uring_sqe *sqe,
			   const struct pt_io *io)
{
	nvme_prep(d, sqe, io, NVME_CMD_READ);
}

static void nvme_prep_write(const struct dev *d, struct io_uring_sqe *sqe,
			    const struct pt_io *io)
{
	nvme_prep(d, sqe, io, NVME_CMD_WRITE);
}

/* res is 0, a negative errno, or the NVMe status field (SCT 10:8, SC 7:0). */
static const char *nvme_cqe_error(const struct io_uring_cqe *cqe, char *buf,
				  size_t len)
{
	if (!cqe->res)
		return NULL;
	if (cqe->res < 0)
		return strerror(-cqe->res);
	snprintf(buf, len, "NVMe status %#x (SCT %#x SC %#x)", cqe->res,
		 (cqe->res >> 8) & 0x7, cqe->res & 0xff);
	return buf;
}

/* --- virtio-blk char device (/dev/vdXc0) ------------------------------ */

static bool virtio_blk_probe(const char *sysname, const char *class)
{
	(void)class;
	return !fnmatch("vd*c0", sysname, 0);
}

#ifdef VIRTIO_BLK_URING_CMD_IO
_Static_assert(sizeof(struct virtio_blk_uring_cmd) <= SQE_CMD_BYTES,
	       "virtio_blk_uring_cmd does not fit a 128-byte SQE");

/* One unsigned number from a sysfs attribute; false if unreadable. */
static bool sysfs_read_u64(const char *path, uint64_t *val)
{
	unsigned long long v;
	FILE *f = fopen(path, "r");
	int n;

	if (!f)
		return false;
	n = fscanf(f, "%llu", &v);
	fclose(f);
	if (n != 1)
		return false;
	*val = v;
	return true;
}

/*
 * The char device has no BLKGETSIZE64, so the capacity comes from the disk's
 * sysfs directory. The char device's parent is the virtio device, and that
 * device's block/ directory holds exactly the one disk the char device was
 * made for: /sys/dev/char/MAJ:MIN/device/block/vdX. Going through the device
 * link rather than stripping "c0" from the name keeps working whatever the
 * disks are called, and never picks another disk's size. Both the size
 * (always in 512-byte sectors) and the logical block size are read at the
 * same place, so they describe the same disk.
 */
static void virtio_blk_setup(struct dev *d)
{
	char dir[128], path[PATH_MAX], disk[NAME_MAX + 1] = "";
	uint64_t sectors, lbs;
	struct dirent *de;
	struct stat st;
	unsigned int n = 0;
	DIR *dp;

	if (fstat(d->fd, &st))
		die("%s: %s", d->path, strerror(errno));
	snprintf(dir, sizeof(dir), "/sys/dev/char/%u:%u/device/block",
		 major(st.st_rdev), minor(st.st_rdev));
	dp = opendir(dir);
	if (!dp)
		die("%s: cannot find its disk in %s: %s", d->path, dir,
		    strerror(errno));
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(disk, sizeof(disk), "%s", de->d_name);
		n++;
	}
	closedir(dp);
	if (n != 1)
		die("%s: expected one disk in %s, found %u", d->path, dir, n);

	snprintf(path, sizeof(path), "%s/%s/size", dir, disk);
	if (!sysfs_read_u64(path, &sectors))
		die("%s: cannot read %s", d->path, path);
	snprintf(path, sizeof(path), "%s/%s/queue/logical_block_size", dir, disk);
	if (!sysfs_read_u64(path, &lbs))
		die("%s: cannot read %s", d->path, path);
	if (lbs < 512 || lbs > (1U << 24) || (lbs & (lbs - 1)))
		die("%s: unsupported logical block size %" PRIu64, d->path, lbs);
	if (sectors > UINT64_MAX >> 9)
		die("%s: bogus capacity %" PRIu64 " sectors", d->path, sectors);

	d->lba_shift = (unsigned int)__builtin_ctzll(lbs);
	d->size = sectors << 9;
}

static void virtio_blk_prep(const struct dev *d, struct io_uring_sqe *sqe,
			    const struct pt_io *io, __u32 type)
{
	struct virtio_blk_uring_cmd *cmd = (struct virtio_blk_uring_cmd *)sqe->cmd;

	(void)d;
	cmd->type = type;
	cmd->sector = io->off >> 9;	/* always 512-byte units */
	if (io->iov) {
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		cmd->data = (uintptr_t)io->iov;
		cmd->data_len = 1;	/* vectored: number of iovecs */
	} else {
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO;
		cmd->data = (uintptr_t)io->buf;
		cmd->data_len = io->len;
	}
}

static void virtio_blk_prep_read(const struct dev *d, struct io_uring_sqe *sqe,
				 const struct pt_io *io)
{
	virtio_blk_prep(d, sqe, io, VIRTIO_BLK_T_IN);
}

static void virtio_blk_prep_write(const struct dev *d, struct io_uring_sqe *sqe,
				  const struct pt_io *io)
{
	virtio_blk_prep(d, sqe, io, VIRTIO_BLK_T_OUT);
}

/* res is 0 or a negative errno (the device status is mapped to one). */
static const char *virtio_blk_cqe_error(const struct io_uring_cqe *cqe,
					char *buf, size_t len)
{
	if (!cqe->res)
		return NULL;
	if (cqe->res < 0)
		return strerror(-cqe->res);
	snprintf(buf, len, "unexpected result %d", cqe->res);
	return buf;
}
#endif /* VIRTIO_BLK_URING_CMD_IO */

static const struct pt_ops pt_types[] = {
	{
		.name		= "nvme-generic",
		.probe		= nvme_probe,
		.setup		= nvme_setup,
		.prep_read	= nvme_prep_read,
		.prep_write	= nvme_prep_write,
		.cqe_error	= nvme_cqe_error,
	},
	{
		.name		= "virtio-blk",
		.probe		= virtio_blk_probe,
#ifdef VIRTIO_BLK_URING_CMD_IO
		/* Kernel headers without virtio-blk passthrough leave these NULL */
		.setup		= virtio_blk_setup,
		.prep_read	= virtio_blk_prep_read,
		.prep_write	= virtio_blk_prep_write,
		.cqe_error	= virtio_blk_cqe_error,
#endif
	},
};

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

static void open_passthru(struct dev *d, dev_t rdev)
{
	char name[NAME_MAX + 1], class[NAME_MAX + 1];
	unsigned int i;

	if (!sysfs_char_name(rdev, "", name, sizeof(name)))
		die("%s: char device %u:%u not found in /sys/dev/char", d->path,
		    major(rdev), minor(rdev));
	if (!sysfs_char_name(rdev, "/subsystem", class, sizeof(class)))
		class[0] = '\0';

	for (i = 0; i < ARRAY_SIZE(pt_types) && !d->pt; i++)
		if (pt_types[i].probe(name, class))
			d->pt = &pt_types[i];
	if (!d->pt)
		die("%s: %s (class '%s') is not a known passthrough device",
		    d->path, name, class);
	if (!d->pt->setup)
		die("%s: %s passthrough not supported by this build", d->path,
		    d->pt->name);
	d->pt->setup(d);
	if (opt.bs & ((1L << d->lba_shift) - 1))
		die("%s: -b %ld is not a multiple of the %u byte LBA size",
		    d->path, opt.bs, 1U << d->lba_shift);
}

static void open_blockdev(struct dev *d)
{
	int lbs;

	if (ioctl(d->fd, BLKGETSIZE64, &d->size))
		die("%s: BLKGETSIZE64: %s", d->path, strerror(errno));
	/* O_DIRECT needs logical-block sized IO; catch it before the run. */
	if (opt.odirect) {
		if (ioctl(d->fd, BLKSSZGET, &lbs))
			die("%s: BLKSSZGET: %s", d->path, strerror(errno));
		if (opt.bs % lbs)
			die("%s: -b %ld is not a multiple of the %d byte logical block size",
			    d->path, opt.bs, lbs);
	}
}

static void open_dev(struct dev *d, const char *path)
{
	int flags = (opt.wpct || opt.verify) ? O_RDWR : O_RDONLY;
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
	if (S_ISCHR(st.st_mode))
		open_passthru(d, st.st_rdev);
	else if (S_ISBLK(st.st_mode))
		open_blockdev(d);
	else
		d->size = (uint64_t)st.st_size;

	d->nblocks = d->size / (uint64_t)opt.bs;
	if (!d->nblocks)
		die("%s: smaller than one %ld byte block", path, opt.bs);
	if (opt.verify && (uint64_t)opt.nverify > d->nblocks)
		die("%s: -N %ld exceeds its %" PRIu64 " blocks", path,
		    opt.nverify, d->nblocks);
}

static void open_devices(char **paths, unsigned int n)
{
	unsigned int i;

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
	unsigned int dev;
	bool write;
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
	_Atomic unsigned long submitted;	/* SQEs queued */
	_Atomic unsigned long calls;	/* submit (io_uring_enter) calls */

	unsigned int id;
	pthread_t thread;
	struct io_uring ring;
	void *bufs;
	struct iovec *iov;	/* slot i's buffer, fixed buffer index i */
	struct io_slot *slots;
	unsigned int *free_slots;
	unsigned int nfree;
	unsigned int busy;	/* slots queued or in flight */
	uint64_t rng;
	unsigned int next_dev;
	uint64_t *seq_blk;	/* -R0: next block, per device */
	enum verify_phase vphase;
	uint64_t vcursor;	/* -v: IOs issued in this phase */
	struct lat_hist *lat;	/* -t1 only */
} __attribute__((aligned(64)));	/* no false sharing between workers */

static atomic_bool stop;
static atomic_uint running;	/* workers not finished yet */
static sem_t wake;		/* kicks the sampling loop early */
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

static uint64_t verify_total(void)
{
	return (uint64_t)opt.nverify * ndevs;
}

static void worker_init_ring(struct worker *w)
{
	struct io_uring_params p;
	int ret;

	memset(&p, 0, sizeof(p));
	if (opt.polled)
		p.flags |= IORING_SETUP_IOPOLL;
	if (opt.passthru)
		p.flags |= IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
	if (opt.sqpoll)
		p.flags |= IORING_SETUP_SQPOLL;
	if (opt.sqpoll_cpu >= 0) {
		p.flags |= IORING_SETUP_SQ_AFF;
		p.sq_thread_cpu = (__u32)opt.sqpoll_cpu;
	}
	ret = io_uring_queue_init_params((unsigned int)opt.depth, &w->ring, &p);
	if (ret < 0)
		die("io_uring_queue_init (flags %#x): %s", p.flags, strerror(-ret));
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
		fds = xcalloc(ndevs, sizeof(*fds));
		for (i = 0; i < ndevs; i++)
			fds[i] = devs[i].fd;
		ret = io_uring_register_files(&w->ring, fds, ndevs);
		if (ret < 0)
			die("io_uring_register_files: %s", strerror(-ret));
		free(fds);
	}
}

static void worker_setup(struct worker *w)
{
	size_t bs = (size_t)opt.bs;
	unsigned int i, depth = (unsigned int)opt.depth;

	worker_init_ring(w);
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
	worker_register(w);

	w->rng = (now_ns() ^ ((uint64_t)(w->id + 1) * 0x9e3779b97f4a7c15ULL)) | 1;
	/* Start threads at different places so -R0 runs don't overlap. */
	w->seq_blk = xcalloc(ndevs, sizeof(*w->seq_blk));
	for (i = 0; i < ndevs; i++)
		w->seq_blk[i] = devs[i].nblocks / (uint64_t)opt.nthreads * w->id;
	if (opt.track_lat)
		w->lat = xcalloc(1, sizeof(*w->lat));
}

static void worker_teardown(struct worker *w)
{
	io_uring_queue_exit(&w->ring);
	free(w->seq_blk);
	free(w->free_slots);
	free(w->slots);
	free(w->iov);
	free(w->bufs);
}

static enum src_state source_state(struct worker *w)
{
	if (stop_requested())
		return SRC_DONE;
	if (!opt.verify || w->vcursor < verify_total())
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
	uint64_t blk;

	if (opt.verify) {
		s->dev = (unsigned int)(w->vcursor % ndevs);
		s->off = w->vcursor / ndevs * (uint64_t)opt.bs;
		s->write = w->vphase == VERIFY_WRITE;
		w->vcursor++;
		return;
	}

	s->dev = w->next_dev;
	w->next_dev = (w->next_dev + 1) % ndevs;
	d = &devs[s->dev];
	if (opt.random) {
		blk = rng_below(&w->rng, d->nblocks);
	} else {
		blk = w->seq_blk[s->dev];
		w->seq_blk[s->dev] = blk + 1 == d->nblocks ? 0 : blk + 1;
	}
	s->off = blk * (uint64_t)opt.bs;
	s->write = opt.wpct && rng_below(&w->rng, 100) < (uint64_t)opt.wpct;
}

static void prep_block(struct worker *w, struct io_uring_sqe *sqe, int fd,
		       unsigned int idx)
{
	const struct io_slot *s = &w->slots[idx];
	const void *addr = w->iov[idx].iov_base;
	unsigned int len = (unsigned int)opt.bs;
	int op;

	if (opt.vectored) {
		op = s->write ? IORING_OP_WRITEV : IORING_OP_READV;
		addr = &w->iov[idx];
		len = 1;
	} else if (opt.fixedbufs) {
		op = s->write ? IORING_OP_WRITE_FIXED : IORING_OP_READ_FIXED;
	} else {
		op = s->write ? IORING_OP_WRITE : IORING_OP_READ;
	}
	io_uring_prep_rw(op, sqe, fd, addr, len, s->off);
	if (opt.fixedbufs)
		sqe->buf_index = (__u16)idx;
}

static void prep_passthru(struct worker *w, struct io_uring_sqe *sqe,
			  const struct dev *d, int fd, unsigned int idx)
{
	const struct io_slot *s = &w->slots[idx];
	struct pt_io io = {
		.off = s->off,
		.len = (uint32_t)opt.bs,
		.buf = w->iov[idx].iov_base,
		.iov = opt.vectored ? &w->iov[idx] : NULL,
	};

	/* The command runs into the second half of the 128-byte SQE. */
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	if (opt.fixedbufs) {
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = (__u16)idx;
	}
	if (s->write)
		d->pt->prep_write(d, sqe, &io);
	else
		d->pt->prep_read(d, sqe, &io);
}

static void prep_io(struct worker *w, struct io_uring_sqe *sqe,
		    unsigned int idx)
{
	struct io_slot *s = &w->slots[idx];
	const struct dev *d = &devs[s->dev];
	int fd = opt.regfiles ? (int)s->dev : d->fd;

	if (s->write)
		fill_pattern(w->iov[idx].iov_base, (size_t)opt.bs, s->off);
	if (d->pt)
		prep_passthru(w, sqe, d, fd, idx);
	else
		prep_block(w, sqe, fd, idx);
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
	stat_add(&w->submitted, n);
	return st;
}

static const char *block_cqe_error(const struct io_uring_cqe *cqe, char *buf,
				   size_t len)
{
	if (cqe->res < 0)
		return strerror(-cqe->res);
	if (cqe->res != opt.bs) {
		snprintf(buf, len, "short transfer (%d of %ld bytes)", cqe->res,
			 opt.bs);
		return buf;
	}
	return NULL;
}

static void complete_io(struct worker *w, const struct io_uring_cqe *cqe)
{
	unsigned int idx = (unsigned int)cqe->user_data;
	const struct io_slot *s;
	const struct dev *d;
	const char *err;
	char buf[80];
	size_t bad;

	if (cqe->user_data >= (uint64_t)opt.depth)
		die("BUG: CQE with unknown user_data %llu",
		    (unsigned long long)cqe->user_data);
	s = &w->slots[idx];
	d = &devs[s->dev];

	err = d->pt ? d->pt->cqe_error(cqe, buf, sizeof(buf)) :
		      block_cqe_error(cqe, buf, sizeof(buf));
	if (err)
		die("IO error: %s at offset %" PRIu64 " (%s %s)%s", err, s->off,
		    s->write ? "write" : "read", d->path,
		    opt.polled && cqe->res == -EOPNOTSUPP ?
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
	w->free_slots[w->nfree++] = idx;
}

static void reap(struct worker *w)
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
}

/*
 * io_uring_enter() refused new work: -EAGAIN (out of request memory) or
 * -EBUSY (CQ overflow backlog). Only completions make room, so wait for
 * one without submitting; with IOPOLL this is also what polls.
 */
static void wait_for_room(struct worker *w)
{
	unsigned int inflight = w->busy - io_uring_sq_ready(&w->ring);
	struct io_uring_cqe *cqe;
	int ret;

	if (io_uring_cq_ready(&w->ring))
		return;
	if (!inflight) {
		sched_yield();
		return;
	}
	ret = io_uring_wait_cqe(&w->ring, &cqe);
	if (ret < 0 && ret != -EINTR)
		die("io_uring_wait_cqe: %s", strerror(-ret));
}

/*
 * Submit what is queued and, if asked, wait for wait_nr completions, then
 * reap whatever completed. SQEs the kernel did not consume stay in the SQ
 * ring and go out with the next call.
 */
static void submit_and_reap(struct worker *w, unsigned int wait_nr)
{
	int ret = io_uring_submit_and_wait(&w->ring, wait_nr);

	stat_add(&w->calls, 1);
	if (ret == -EAGAIN || ret == -EBUSY)
		wait_for_room(w);
	else if (ret < 0 && ret != -EINTR)
		die("io_uring_enter: %s", strerror(-ret));
	reap(w);
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

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	worker_setup(w);
	pthread_barrier_wait(&start_barrier);
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
	unsigned long ios, submitted, calls;
};

struct result {
	double runtime_s;
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

	/* Rings and buffers are set up: start the clock. */
	pthread_barrier_wait(&start_barrier);
	return w;
}

static struct totals read_totals(struct worker *w)
{
	struct totals t = { 0, 0, 0 };
	long i;

	for (i = 0; i < opt.nthreads; i++) {
		t.ios += atomic_load_explicit(&w[i].ios, memory_order_relaxed);
		t.submitted += atomic_load_explicit(&w[i].submitted,
						    memory_order_relaxed);
		t.calls += atomic_load_explicit(&w[i].calls, memory_order_relaxed);
	}
	return t;
}

static void add_sample(struct result *r, unsigned long iops)
{
	if (r->nsamples == r->samples_cap) {
		r->samples_cap = r->samples_cap ? 2 * r->samples_cap : 64;
		r->samples = realloc(r->samples,
				     r->samples_cap * sizeof(*r->samples));
		if (!r->samples)
			die("out of memory");
	}
	r->samples[r->nsamples++] = iops;
	if (iops > r->iops_max)
		r->iops_max = iops;
}

static void print_sample(struct result *r, const struct totals *prev,
			 const struct totals *cur, uint64_t elapsed_ns)
{
	unsigned long ios = cur->ios - prev->ios;
	unsigned long calls = cur->calls - prev->calls;
	unsigned long iops = (unsigned long)(ios * NSEC_PER_SEC / elapsed_ns);
	long spc = 0, rpc = 0;

	if (calls) {
		spc = (long)((cur->submitted - prev->submitted) / calls);
		rpc = (long)(ios / calls);
	}
	printf("IOPS=%lu, BW=%luMiB/s, IOS/call=%ld/%ld\n", iops,
	       (unsigned long)(iops * (uint64_t)opt.bs >> 20), spc, rpc);
	add_sample(r, iops);
}

/* One line per second until stopped, runtime is up, or workers are done. */
static void sample_loop(struct worker *w, struct result *r, uint64_t start)
{
	uint64_t deadline = start + NSEC_PER_SEC, last_ns = start, now;
	struct totals last = { 0, 0, 0 }, cur;
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

static void collect(struct worker *w, struct result *r, uint64_t start)
{
	long i;

	for (i = 0; i < opt.nthreads; i++)
		pthread_join(w[i].thread, NULL);
	r->runtime_s = (double)(now_ns() - start) / 1e9;
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

static void write_json(FILE *f, const struct result *r)
{
	size_t i;

	fputs("{\n  \"device\": [", f);
	for (i = 0; i < ndevs; i++) {
		fputs(i ? ", " : "", f);
		json_string(f, devs[i].path);
	}
	fputs("],\n  \"options\": {", f);
	for (i = 0; i < ARRAY_SIZE(opt_table); i++)
		fprintf(f, "%s\"%s\": %ld", i ? ", " : "", opt_table[i].key,
			*opt_field(&opt_table[i]));
	fprintf(f, "},\n  \"runtime_s\": %.3f,\n", r->runtime_s);
	fprintf(f, "  \"ios\": %lu,\n", r->t.ios);
	fprintf(f, "  \"iops\": %lu,\n", r->iops);
	fprintf(f, "  \"iops_max\": %lu,\n", r->iops_max);
	fprintf(f, "  \"bw_bytes\": %" PRIu64 ",\n", (uint64_t)r->iops * (uint64_t)opt.bs);
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
	if (w->vphase != VERIFY_READ || w->vcursor != verify_total())
		die("Verify interrupted before all blocks were read back");
	printf("Verify OK: %ld blocks of %ld bytes on %u device(s)\n",
	       opt.nverify, opt.bs, ndevs);
}

/* ------------------------------------------------------------------ */
/* Command line                                                       */
/* ------------------------------------------------------------------ */

static void usage(FILE *f, const char *prog)
{
	size_t i;

	fprintf(f, "Usage: %s [options] <device|file> [<device|file>...]\n",
		prog);
	for (i = 0; i < ARRAY_SIZE(opt_table); i++) {
		const struct opt_desc *d = &opt_table[i];
		const char *arg = d->is_switch ? "      " :
				  d->min == 0 && d->max == 1 ? "<bool>" :
				  "<int> ";

		fprintf(f, "  -%c %s : %s, default %ld\n", d->letter, arg,
			d->help, *opt_field(d));
	}
	fprintf(f, "  -j, --json <file> : write a JSON summary to <file>, default %s\n",
		opt.json ? opt.json : "none");
	fprintf(f, "  -h, --help : this text\n");
}

static const struct opt_desc *find_opt(int letter)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opt_table); i++)
		if (opt_table[i].letter == letter)
			return &opt_table[i];
	return NULL;
}

static const char *build_optstring(void)
{
	static char s[2 * ARRAY_SIZE(opt_table) + sizeof("j:h")];
	char *p = s;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opt_table); i++) {
		*p++ = opt_table[i].letter;
		if (!opt_table[i].is_switch)
			*p++ = ':';
	}
	strcpy(p, "j:h");
	return s;
}

static long parse_value(const struct opt_desc *d, const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < d->min || v > d->max)
		die("-%c: invalid value '%s' (%s: %ld..%ld)", d->letter, arg,
		    d->help, d->min, d->max);
	return v;
}

/* Combinations that cannot work; exit before touching any device. */
static void check_options(void)
{
	opt.sbatch = MIN(opt.sbatch, opt.depth);
	opt.cbatch = MIN(opt.cbatch, opt.depth);

	if (opt.polled && !opt.odirect && !opt.passthru)
		die("-p1 (polled IO) needs -O1: IOPOLL only works with O_DIRECT");
	if (opt.vectored && opt.fixedbufs)
		die("-V1 cannot be combined with -B1: no vectored IO on registered buffers, use -B0");
	if (opt.sqpoll_cpu >= 0 && !opt.sqpoll)
		die("-X %ld needs -S1", opt.sqpoll_cpu);
	if (opt.verify && opt.nthreads > 1)
		die("-v needs -n1: one ring orders the write pass before the read pass");
}

static void parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
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
		}
	}
	if (optind == argc) {
		fprintf(stderr, "%s: no device or file given\nTry '%s --help'.\n",
			argv[0], argv[0]);
		exit(2);
	}
	check_options();
}

int main(int argc, char **argv)
{
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
	sample_loop(w, &res, start);
	request_stop();
	collect(w, &res, start);

	print_summary(&res);
	if (json) {
		write_json(json, &res);
		if (ferror(json) | fclose(json))
			die("%s: write failed", opt.json);
	}
	if (opt.verify)
		report_verify(w);
	return 0;
}
