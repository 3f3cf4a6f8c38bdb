// SPDX-License-Identifier: GPL-2.0
/*
 * loop target: a file or block device through io_uring, on the queue's
 * own ring.
 *
 *   -f|--file PATH  the backing file or block device (required)
 *   --offset BYTES  the device's data starts that far into the backing
 *                   (default 0); a multiple of the device's logical block
 *   --size SIZE     the device is SIZE of the backing behind the offset;
 *                   a regular file shorter than the offset plus SIZE is
 *                   created or grown to it first (add only: recover opens
 *                   the file as it is, and refuses one that is missing or
 *                   too short), never shrunk; a block device must hold
 *                   it. Default: all of the backing after the offset
 *   --buffered      no O_DIRECT (it is used whenever the backing allows)
 *
 * FLUSH is fdatasync, FUA a RWF_DSYNC write. On a regular file DISCARD
 * punches a hole and WRITE_ZEROES zeroes the range (a hole where
 * ZERO_RANGE is unsupported). On a block device they are BLKDISCARD and
 * BLKZEROOUT, synchronous in the queue's thread (fallocate on a block
 * device would turn a discard into a write of zeroes, which a device
 * without WRITE_ZEROES refuses); discard is offered only when the backing
 * device has it, with its granularity. The device advertises a volatile
 * cache and FUA, as both are implemented.
 *
 * Block sizes: with O_DIRECT the device's logical block is the smallest
 * the backing takes (as the kernel's loop does): BLKSSZGET of a block
 * device; for a file, statx's DIO alignment, else its filesystem's
 * device's logical block in sysfs, else 512. Buffered, 512. The physical
 * block: BLKPBSZGET, or the filesystem's device's. --logical-block-size
 * and --physical-block-size (main.c) override both; a logical block below
 * what O_DIRECT needs is refused.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>

#include "ublkd.h"

enum { OPT_FILE = 256, OPT_SIZE, OPT_BUFFERED, OPT_OFFSET };

struct loop_tgt {
	const char *path;
	uint64_t size;
	uint64_t offset;	/* --offset: where the device's data starts */
	bool buffered;
	bool direct;
	bool bdev;		/* the backing is a block device */
	int fd;
};

/* Per queue: how far each tag's request got (short reads and writes). */
struct loop_queue {
	uint32_t *done;
};

static const struct option loop_opts[] = {
	{ "file", required_argument, NULL, OPT_FILE },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "buffered", no_argument, NULL, OPT_BUFFERED },
	{ "offset", required_argument, NULL, OPT_OFFSET },
	{ NULL, 0, NULL, 0 },
};

static struct loop_tgt *loop_of(struct ublkd_dev *dev)
{
	if (!dev->tgt)
		dev->tgt = calloc(1, sizeof(struct loop_tgt));
	if (!dev->tgt) {
		ublkd_log("loop: out of memory\n");
		exit(1);
	}
	return dev->tgt;
}

static int loop_opt(struct ublkd_dev *dev, int val, const char *arg)
{
	struct loop_tgt *t = loop_of(dev);

	switch (val) {
	case 'f':
	case OPT_FILE:
		t->path = arg;
		return 0;
	case OPT_SIZE: {
		int ret = ublkd_parse_size(arg, &t->size);

		return ret ? ret : t->size ? 0 : -EINVAL;
	}
	case OPT_BUFFERED:
		t->buffered = true;
		return 0;
	case OPT_OFFSET:
		return ublkd_parse_size(arg, &t->offset);
	}
	return -EINVAL;
}

/*
 * queue/NAME of block device @devt from sysfs: a partition has no queue/
 * of its own, its disk's is one level up. For a file, @devt is the
 * st_dev of its filesystem. 0 when there is none (tmpfs, 9p, NFS: no
 * block device).
 */
static uint64_t queue_attr(dev_t devt, const char *name)
{
	static const char *const fmts[] = {
		"/sys/dev/block/%u:%u/queue/%s",
		"/sys/dev/block/%u:%u/../queue/%s",
	};
	unsigned long long v = 0;
	unsigned int i;
	char path[128];
	FILE *f;

	for (i = 0; i < ARRAY_SIZE(fmts) && !v; i++) {
		snprintf(path, sizeof(path), fmts[i], major(devt),
			 minor(devt), name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* The backing's logical and physical block sizes (see the top). */
static int loop_block_sizes(struct ublkd_dev *dev, const struct stat *st)
{
	struct loop_tgt *t = dev->tgt;
	unsigned int lbs = 0, pbs = 0;
	struct statx stx;

	if (S_ISBLK(st->st_mode)) {
		int v;

		if (ioctl(t->fd, BLKSSZGET, &v) || ioctl(t->fd, BLKPBSZGET, &pbs)) {
			ublkd_log("loop: block sizes of %s: %s\n", t->path,
				  strerror(errno));
			return -errno;
		}
		lbs = v;
	} else {
		if (!statx(t->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
		    (stx.stx_mask & STATX_DIOALIGN))
			lbs = stx.stx_dio_offset_align;
		if (!lbs)
			lbs = queue_attr(st->st_dev, "logical_block_size");
		pbs = queue_attr(st->st_dev, "physical_block_size");
	}
	dev->backend_lbs = t->direct ? lbs : 0;
	dev->backend_pbs = pbs;
	return 0;
}

static int loop_init(struct ublkd_dev *dev)
{
	struct loop_tgt *t = loop_of(dev);
	struct ublk_param_discard *d = &dev->params.discard;
	int flags = (dev->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	uint64_t backing;
	unsigned int lbs;
	struct stat st;

	if (!t->path) {
		ublkd_log("loop: needs --file PATH\n");
		return -EINVAL;
	}
	if (t->size && dev->read_only) {
		ublkd_log("loop: --size creates or resizes %s: not with --read-only\n",
			  t->path);
		return -EINVAL;
	}
	/* recover opens what add made: it never creates or resizes. */
	if (t->size && !dev->recovering)
		flags |= O_CREAT;
	t->fd = -1;
	if (!t->buffered) {
		t->fd = open(t->path, flags | O_DIRECT, 0644);
		t->direct = t->fd >= 0;
	}
	if (t->fd < 0)
		t->fd = open(t->path, flags, 0644);
	if (t->fd < 0 && errno == ENOENT && dev->recovering) {
		ublkd_log("loop: the backing file %s is missing; recover never creates one\n",
			  t->path);
		return -ENOENT;
	}
	if (t->fd < 0) {
		ublkd_log("loop: opening %s: %s\n", t->path, strerror(errno));
		return -errno;
	}
	if (fstat(t->fd, &st)) {
		ublkd_log("loop: stat %s: %s\n", t->path, strerror(errno));
		return -errno;
	}
	if (S_ISBLK(st.st_mode)) {
		t->bdev = true;
		if (ioctl(t->fd, BLKGETSIZE64, &backing)) {
			ublkd_log("loop: size of %s: %s\n", t->path, strerror(errno));
			return -errno;
		}
	} else if (S_ISREG(st.st_mode)) {
		backing = st.st_size;
		if (t->size && !dev->recovering) {
			if (t->size > UINT64_MAX - t->offset) {
				ublkd_log("loop: --offset %llu plus --size %llu overflows\n",
					  (unsigned long long)t->offset,
					  (unsigned long long)t->size);
				return -EINVAL;
			}
			/*
			 * Grow or create, never shrink: a larger file keeps
			 * what lies past offset + SIZE (an image exposed in
			 * part, or grown since), also when the add fails
			 * after this (init runs before ADD_DEV).
			 */
			if (backing < t->offset + t->size) {
				backing = t->offset + t->size;
				if (ftruncate(t->fd, backing)) {
					ublkd_log("loop: growing %s: %s\n", t->path,
						  strerror(errno));
					return -errno;
				}
			}
		}
	} else {
		ublkd_log("loop: %s is neither a regular file nor a block device\n",
			  t->path);
		return -EINVAL;
	}
	if (loop_block_sizes(dev, &st))
		return -EINVAL;
	if (!backing) {
		ublkd_log("loop: %s is empty (give --size)\n", t->path);
		return -EINVAL;
	}
	/*
	 * Every request is a whole number of logical blocks at a multiple of
	 * one: so is its place in the backing only when the offset is (and
	 * O_DIRECT needs that alignment).
	 */
	lbs = ublkd_logical_block_size(dev);
	if (t->offset % lbs) {
		ublkd_log("loop: --offset %llu is not a multiple of the device's logical block size (%u bytes)\n",
			  (unsigned long long)t->offset, lbs);
		return -EINVAL;
	}
	if (t->offset >= backing) {
		ublkd_log("loop: --offset %llu is not inside %s (%llu bytes)\n",
			  (unsigned long long)t->offset, t->path,
			  (unsigned long long)backing);
		return -EINVAL;
	}
	dev->size = backing - t->offset;
	/*
	 * On recover a backing now too short for SIZE is left at its size:
	 * the core compares it with the device's and refuses the recover
	 * as onto a resized backend, which says what happened.
	 */
	if (t->size && !(dev->recovering && t->size > dev->size)) {
		if (t->size > dev->size) {
			ublkd_log("loop: --size %llu does not fit in %s after --offset %llu (%llu bytes there)\n",
				  (unsigned long long)t->size, t->path,
				  (unsigned long long)t->offset,
				  (unsigned long long)dev->size);
			return -EINVAL;
		}
		dev->size = t->size;
	}
	dev->size &= ~511ULL;
	dev->params.basic.attrs = UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA;
	dev->params.types |= UBLK_PARAM_TYPE_DISCARD;
	d->discard_granularity = 4096;
	d->max_discard_sectors = UINT32_MAX >> 9;
	d->max_write_zeroes_sectors = UINT32_MAX >> 9;
	d->max_discard_segments = 1;
	if (t->bdev) {
		/* BLKZEROOUT writes zeroes where the device cannot: always. */
		uint64_t max = queue_attr(st.st_rdev, "discard_max_bytes") >> 9;
		uint64_t gran = queue_attr(st.st_rdev, "discard_granularity");

		d->max_discard_sectors = max > UINT32_MAX >> 9 ? UINT32_MAX >> 9 : max;
		if (gran && gran <= UINT32_MAX)
			d->discard_granularity = gran;
	}
	snprintf(dev->tgt_desc, sizeof(dev->tgt_desc), "%s", t->path);
	return 0;
}

static int loop_init_queue(struct ublkd_queue *q)
{
	struct loop_queue *lq = calloc(1, sizeof(*lq));

	if (!lq)
		return -ENOMEM;
	/* set first: loop_deinit_queue() frees it when the next fails */
	q->tgt = lq;
	lq->done = calloc(q->depth, sizeof(*lq->done));
	if (!lq->done)
		return -ENOMEM;
	return 0;
}

static void loop_deinit_queue(struct ublkd_queue *q)
{
	struct loop_queue *lq = q->tgt;

	if (lq)
		free(lq->done);
	free(lq);
}

enum { LOOP_RW, LOOP_FSYNC, LOOP_PUNCH, LOOP_ZERO };

/* Submit (the rest of) request @tag. */
static void loop_submit(struct ublkd_queue *q, int tag, int kind)
{
	struct loop_tgt *t = q->dev->tgt;
	struct loop_queue *lq = q->tgt;
	const struct ublksrv_io_desc *iod = &q->iods[tag];
	struct io_uring_sqe *sqe = ublkd_get_sqe(q);
	uint32_t done = lq->done[tag], len = iod_len(iod);
	uint64_t off = iod_off(iod) + t->offset;
	char *buf = q->ios[tag].buf;

	switch (kind) {
	case LOOP_RW:
		if (iod_op(iod) == UBLK_IO_OP_READ) {
			io_uring_prep_read(sqe, t->fd, buf + done, len - done,
					   off + done);
		} else {
			io_uring_prep_write(sqe, t->fd, buf + done, len - done,
					    off + done);
			if (iod->op_flags & UBLK_IO_F_FUA)
				sqe->rw_flags = RWF_DSYNC;
		}
		break;
	case LOOP_FSYNC:
		io_uring_prep_fsync(sqe, t->fd, IORING_FSYNC_DATASYNC);
		break;
	case LOOP_PUNCH:
		io_uring_prep_fallocate(sqe, t->fd,
					FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					off, len);
		break;
	case LOOP_ZERO:
		io_uring_prep_fallocate(sqe, t->fd,
					FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
					off, len);
		break;
	}
	sqe->user_data = ud_build(tag, kind, 0, true);
	q->tgt_inflight++;
	q->ios[tag].tgt_inflight++;
}

/*
 * DISCARD (BLKDISCARD) or WRITE_ZEROES (BLKZEROOUT) on a block device,
 * synchronously: the result.
 */
static int loop_bdev_range(struct loop_tgt *t, unsigned long req,
			   const struct ublksrv_io_desc *iod)
{
	uint64_t range[2] = { iod_off(iod) + t->offset, iod_len(iod) };

	return ioctl(t->fd, req, range) ? -errno : 0;
}

static int loop_queue_io(struct ublkd_queue *q, int tag,
			 const struct ublksrv_io_desc *iod)
{
	struct loop_tgt *t = q->dev->tgt;
	struct loop_queue *lq = q->tgt;

	lq->done[tag] = 0;
	switch (iod_op(iod)) {
	case UBLK_IO_OP_READ:
	case UBLK_IO_OP_WRITE:
		loop_submit(q, tag, LOOP_RW);
		break;
	case UBLK_IO_OP_FLUSH:
		loop_submit(q, tag, LOOP_FSYNC);
		break;
	case UBLK_IO_OP_DISCARD:
		if (t->bdev)
			return loop_bdev_range(t, BLKDISCARD, iod);
		loop_submit(q, tag, LOOP_PUNCH);
		break;
	case UBLK_IO_OP_WRITE_ZEROES:
		if (t->bdev)
			return loop_bdev_range(t, BLKZEROOUT, iod);
		loop_submit(q, tag, LOOP_ZERO);
		break;
	default:
		return -EOPNOTSUPP;
	}
	return UBLKD_QUEUED;
}

static void loop_io_done(struct ublkd_queue *q, const struct io_uring_cqe *cqe)
{
	struct loop_queue *lq = q->tgt;
	int tag = ud_tag(cqe->user_data), kind = ud_op(cqe->user_data);
	const struct ublksrv_io_desc *iod = &q->iods[tag];
	uint32_t len = iod_len(iod);
	int res = cqe->res;

	q->ios[tag].tgt_inflight--;
	switch (kind) {
	case LOOP_RW:
		if (res < 0)
			break;
		if (res == 0 && iod_op(iod) == UBLK_IO_OP_READ) {
			/* Past the end of a shrunk file: zeroes, as loop does. */
			memset((char *)q->ios[tag].buf + lq->done[tag], 0,
			       len - lq->done[tag]);
			res = len - lq->done[tag];
		}
		if (res == 0) {
			res = -EIO;
			break;
		}
		lq->done[tag] += res;
		if (lq->done[tag] < len) {
			loop_submit(q, tag, LOOP_RW);
			return;
		}
		res = len;
		break;
	case LOOP_ZERO:
		if (res == -EOPNOTSUPP || res == -EINVAL) {
			loop_submit(q, tag, LOOP_PUNCH);
			return;
		}
		break;
	}
	ublkd_complete(q, tag, res);
}

static void loop_deinit(struct ublkd_dev *dev)
{
	struct loop_tgt *t = dev->tgt;

	close(t->fd);
}

static const int loop_path_opts[] = { 'f', OPT_FILE, 0 };

const struct ublkd_tgt_ops tgt_loop = {
	.name = "loop",
	.path_opts = loop_path_opts,
	.usage = "-f|--file PATH [--offset BYTES (0)] [--size SIZE] [--buffered]",
	.opts = loop_opts,
	.opt = loop_opt,
	.init = loop_init,
	.init_queue = loop_init_queue,
	.deinit_queue = loop_deinit_queue,
	.queue_io = loop_queue_io,
	.io_done = loop_io_done,
	.deinit = loop_deinit,
};
