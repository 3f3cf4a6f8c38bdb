// SPDX-License-Identifier: GPL-2.0
/*
 * null target: completes every request at once.
 *
 *   --size SIZE   capacity (default 1G, or 256M with --store)
 *   --memcpy      copy data into (and out of) buffers of the target's own
 *                 pool, one per tag: the backend NEED_GET_DATA was made for.
 *                 In the GET_DATA and USER_COPY modes the driver copies
 *                 straight into that pool; in the default mode the server
 *                 copies a second time, from the slot's buffer.
 *   --store       --memcpy into a memory store of the whole capacity
 *                 instead of a scratch pool, so data reads back (verify).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ublkd.h"

enum { OPT_SIZE = 256, OPT_MEMCPY, OPT_STORE };

struct null_tgt {
	bool memcpy;
	char *store;
	uint64_t size;
};

static const struct option null_opts[] = {
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "memcpy", no_argument, NULL, OPT_MEMCPY },
	{ "store", no_argument, NULL, OPT_STORE },
	{ NULL, 0, NULL, 0 },
};

static struct null_tgt *null_of(struct ublkd_dev *dev)
{
	if (!dev->tgt)
		dev->tgt = calloc(1, sizeof(struct null_tgt));
	if (!dev->tgt) {
		ublkd_log("null: out of memory\n");
		exit(1);
	}
	return dev->tgt;
}

static int null_opt(struct ublkd_dev *dev, int val, const char *arg)
{
	struct null_tgt *t = null_of(dev);

	switch (val) {
	case OPT_SIZE: {
		int ret = ublkd_parse_size(arg, &t->size);

		if (!ret && (!t->size || (t->size & 511))) {
			ublkd_log("null: --size must be a non-zero multiple of 512\n");
			ret = -EINVAL;
		}
		return ret;
	}
	case OPT_STORE:
		t->store = (char *)1;	/* allocated by init */
		/* fall through */
	case OPT_MEMCPY:
		t->memcpy = true;
		return 0;
	}
	return -EINVAL;
}

static int null_init(struct ublkd_dev *dev)
{
	struct null_tgt *t = null_of(dev);

	/* A new server would bring back a disk of zeros, silently. */
	if (t->store && dev->recovery) {
		ublkd_log("null: --store keeps the data in the server's memory, which dies with it: no --recovery\n");
		return -EINVAL;
	}
	if (!t->size)
		t->size = t->store ? 256ULL << 20 : 1ULL << 30;
	dev->size = t->size;
	if (t->store) {
		t->store = mmap(NULL, t->size, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (t->store == MAP_FAILED) {
			ublkd_log("null: a %llu-byte memory store: %s\n",
				  (unsigned long long)t->size, strerror(errno));
			return -ENOMEM;
		}
		dev->params.types |= UBLK_PARAM_TYPE_DISCARD;
		dev->params.discard.discard_granularity = 4096;
		dev->params.discard.max_discard_sectors = UINT32_MAX >> 9;
		dev->params.discard.max_write_zeroes_sectors = UINT32_MAX >> 9;
		dev->params.discard.max_discard_segments = 1;
	}
	return 0;
}

static int null_init_queue(struct ublkd_queue *q)
{
	struct null_tgt *t = q->dev->tgt;
	void **pool;
	int i;

	if (!t->memcpy || t->store)
		return 0;
	pool = calloc(q->depth, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	/* set first: null_deinit_queue() frees what was allocated */
	q->tgt = pool;
	for (i = 0; i < q->depth; i++)
		if (posix_memalign(&pool[i], 4096, q->dev->max_io_bytes))
			return -ENOMEM;
	return 0;
}

static void null_deinit_queue(struct ublkd_queue *q)
{
	void **pool = q->tgt;
	int i;

	if (!pool)
		return;
	for (i = 0; i < q->depth; i++)
		free(pool[i]);
	free(pool);
}

/*
 * The target's own place for the data of @iod; NULL (the slot's buffer)
 * for a range outside the store, which null_queue_io() then fails: in
 * the GET_DATA mode the driver copies into what this returns first.
 */
static void *null_own(struct ublkd_queue *q, int tag,
		      const struct ublksrv_io_desc *iod)
{
	struct null_tgt *t = q->dev->tgt;

	if (!t->memcpy)
		return NULL;
	if (t->store)
		return iod_off(iod) + iod_len(iod) > t->size ? NULL :
			t->store + iod_off(iod);
	return ((void **)q->tgt)[tag];
}

static int null_queue_io(struct ublkd_queue *q, int tag,
			 const struct ublksrv_io_desc *iod)
{
	struct null_tgt *t = q->dev->tgt;
	void *buf = q->ios[tag].buf, *own = null_own(q, tag, iod);
	uint32_t len = iod_len(iod);

	if (iod_off(iod) + len > t->size)
		return -EIO;
	switch (iod_op(iod)) {
	case UBLK_IO_OP_READ:
		if (own && own != buf)
			memcpy(buf, own, len);
		return len;
	case UBLK_IO_OP_WRITE:
		if (own && own != buf)
			memcpy(own, buf, len);
		return len;
	case UBLK_IO_OP_FLUSH:
		return 0;
	case UBLK_IO_OP_DISCARD:
	case UBLK_IO_OP_WRITE_ZEROES:
		if (!t->store)
			return -EOPNOTSUPP;
		memset(t->store + iod_off(iod), 0, len);
		return 0;
	}
	return -EOPNOTSUPP;
}

static void null_io_done(struct ublkd_queue *q, const struct io_uring_cqe *cqe)
{
	(void)q;
	(void)cqe;
}

const struct ublkd_tgt_ops tgt_null = {
	.name = "null",
	.usage = "[--size SIZE (1G)] [--memcpy] [--store]",
	.opts = null_opts,
	.opt = null_opt,
	.init = null_init,
	.init_queue = null_init_queue,
	.deinit_queue = null_deinit_queue,
	.get_buf = null_own,
	.queue_io = null_queue_io,
	.io_done = null_io_done,
};
