/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ublkd - a ublk server: one daemon per device, one thread per queue, the
 * targets behind one ops table (null.c, loop.c, nbd.c), three data modes.
 */
#ifndef UBLKD_H
#define UBLKD_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <getopt.h>
#include <liburing.h>
#include <linux/ublk_cmd.h>

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#define SECTOR_SHIFT		9
#define UBLKD_RUN_DIR		"/run/ublkd"
#define UBLKD_MAX_QUEUES	32
#define UBLKD_MAX_DEPTH		1024
#define UBLKD_DEF_IO_BYTES	(1U << 20)

/*
 * How request data travels between the driver and the server:
 *  DEFAULT   the driver copies to/from a buffer given with every FETCH and
 *            COMMIT_AND_FETCH, allocated before the request is seen;
 *  GET_DATA  UBLK_F_NEED_GET_DATA: a WRITE's fetch completes with
 *            UBLK_IO_RES_NEED_GET_DATA, the target picks a buffer and the
 *            driver copies into it on UBLK_IO_NEED_GET_DATA; a READ's data
 *            is copied from the address given with its COMMIT;
 *  USER_COPY UBLK_F_USER_COPY: the server preads / pwrites the request's
 *            data on /dev/ublkcN whenever it wants; addr is always 0.
 */
enum ublkd_mode {
	MODE_DEFAULT,
	MODE_GET_DATA,
	MODE_USER_COPY,
};

/* Per-device counters, in a file under UBLKD_RUN_DIR shared with "list". */
enum ublkd_stat {
	ST_READ, ST_WRITE, ST_FLUSH, ST_FUA, ST_DISCARD, ST_WRITE_ZEROES,
	ST_GET_DATA, ST_ERRORS, ST_DROPPED, ST_NR
};

struct ublkd_stats {
	uint64_t q[UBLKD_MAX_QUEUES][ST_NR];
	int32_t tid[UBLKD_MAX_QUEUES];	/* each queue's thread, for list */
};

/*
 * user_data of a CQE: bits 0-15 tag, 16-23 ublk command or target op,
 * 24-55 target data, bit 63 set for a target's own operation.
 */
#define UD_TGT		(1ULL << 63)

static inline uint64_t ud_build(unsigned int tag, unsigned int op,
				uint32_t data, bool tgt)
{
	return tag | (uint64_t)(op & 0xff) << 16 | (uint64_t)data << 24 |
		(tgt ? UD_TGT : 0);
}

static inline unsigned int ud_tag(uint64_t ud) { return ud & 0xffff; }
static inline unsigned int ud_op(uint64_t ud) { return (ud >> 16) & 0xff; }
static inline uint32_t ud_data(uint64_t ud) { return (ud >> 24) & 0xffffffff; }
static inline bool ud_is_tgt(uint64_t ud) { return ud & UD_TGT; }

/* A slot: one tag of one queue. */
struct ublkd_io {
	void *iobuf;		/* pre-allocated, max_io_bytes */
	void *buf;		/* where this request's data is */
	unsigned int flags;
	int tgt_inflight;	/* the target's SQEs for this request */
	int result;		/* what the target reported */
};

#define IO_CMD_INFLIGHT	(1U << 0)	/* a ublk command is with the driver */
#define IO_GOT_DATA	(1U << 1)	/* NEED_GET_DATA done, buf is set */
#define IO_ABORTED	(1U << 2)	/* the driver answered UBLK_IO_RES_ABORT */

struct ublkd_dev;

struct ublkd_queue {
	struct ublkd_dev *dev;
	int q_id;
	int depth;
	struct io_uring ring;
	const struct ublksrv_io_desc *iods;
	size_t iods_len;
	struct ublkd_io *ios;
	uint64_t *stats;
	int cmd_inflight;	/* ublk commands with the driver */
	int tgt_inflight;	/* target SQEs not yet reaped */
	int nr_aborted;		/* slots the driver answered with ABORT */
	int err;		/* setup error, reported by the main thread */
	pthread_t thread;
	void *tgt;		/* the target's per-queue data */
};

/* A target: one file, one of these. */
struct ublkd_tgt_ops {
	const char *name;
	const char *usage;
	/* The target's long options (val >= 256) and their handler. */
	const struct option *opts;
	int (*opt)(struct ublkd_dev *dev, int val, const char *arg);
	/*
	 * The options (vals, 0-terminated) whose argument is a path: add
	 * makes it absolute before opt sees it, and saves it so for recover.
	 */
	const int *path_opts;
	/*
	 * Open the backend, set dev->size, dev->params (attrs, discard) and
	 * anything it needs; runs in the daemon before ADD_DEV. 0 or -errno
	 * after printing what failed.
	 */
	int (*init)(struct ublkd_dev *dev);
	int (*init_queue)(struct ublkd_queue *q);
	/*
	 * At teardown, before the queue's ring closes: end every target SQE
	 * still armed (a socket receive), so that none can write into the
	 * buffers deinit_queue frees. The ring is then drained.
	 */
	void (*stop_queue)(struct ublkd_queue *q);
	void (*deinit_queue)(struct ublkd_queue *q);
	/*
	 * The buffer the target wants the data of request @tag in (its own
	 * pool), or NULL for the slot's pre-allocated buffer. Called in the
	 * GET_DATA and USER_COPY modes only; the buffer must stay valid until
	 * the request is committed.
	 */
	void *(*get_buf)(struct ublkd_queue *q, int tag,
			 const struct ublksrv_io_desc *iod);
	/*
	 * Handle request @tag, whose data is at q->ios[tag].buf: return the
	 * result (bytes, or -errno) to complete it now, or UBLKD_QUEUED when
	 * it completes later through ublkd_complete().
	 */
	int (*queue_io)(struct ublkd_queue *q, int tag,
			const struct ublksrv_io_desc *iod);
	/* A CQE of the target's own SQE (user_data with UD_TGT). */
	void (*io_done)(struct ublkd_queue *q, const struct io_uring_cqe *cqe);
	/* Called about once a second by every queue thread (timeouts). */
	void (*tick)(struct ublkd_queue *q);
	void (*deinit)(struct ublkd_dev *dev);
};

#define UBLKD_QUEUED	0x7fffffff

struct ublkd_dev {
	int dev_id;			/* -1: let the driver choose */
	int nr_queues;
	int depth;
	unsigned int max_io_bytes;
	enum ublkd_mode mode;
	bool recovery;
	bool no_reissue;		/* --no-reissue: USER_RECOVERY alone */
	bool read_only;			/* --read-only: UBLK_ATTR_READ_ONLY */
	bool foreground;		/* --foreground: add serves, no daemon */
	bool unprivileged;		/* --unprivileged: UBLK_F_UNPRIVILEGED_DEV */
	bool recovering;		/* ublkd recover: never create or resize */
	uint64_t recover_size;		/* recover: the device's size, bytes */
	struct ublk_param_basic recover_basic;	/* recover: the device's */
	uint64_t size;			/* bytes, set by the target */
	/*
	 * Block sizes. lbs and pbs are what --logical-block-size and
	 * --physical-block-size asked for (0: none), and after init what
	 * the device reports. The target's init sets backend_lbs, the
	 * alignment its backend needs (loop with O_DIRECT: the backing
	 * device's logical block; 0: any), and backend_pbs, the backend's
	 * physical block (0: unknown).
	 */
	unsigned int lbs, pbs;
	unsigned int backend_lbs, backend_pbs;
	uint64_t flags;			/* UBLK_F_* asked for */
	struct ublk_params params;
	const struct ublkd_tgt_ops *ops;
	void *tgt;
	int ctrl_fd;
	struct io_uring ctrl_ring;
	int cdev_fd;
	struct ublksrv_ctrl_dev_info info;
	struct ublkd_queue *queues;
	/*
	 * Per queue: the CPUs whose requests it serves
	 * (UBLK_CMD_GET_QUEUE_AFFINITY), which its thread is pinned to; NULL
	 * when the driver could not say (the threads run anywhere).
	 */
	cpu_set_t *affinity;
	struct ublkd_stats *stats;
	char tgt_desc[256];		/* shown by list */
};

extern const struct ublkd_tgt_ops tgt_null, tgt_loop, tgt_nbd;

/* queue.c */
struct io_uring_sqe *ublkd_get_sqe(struct ublkd_queue *q);
void ublkd_complete(struct ublkd_queue *q, int tag, int res);
int ublkd_start_queues(struct ublkd_dev *dev);
void ublkd_join_queues(struct ublkd_dev *dev);
void ublkd_queue_done(struct ublkd_dev *dev);

/* main.c */
void ublkd_cpu_list(const cpu_set_t *set, char *buf, size_t len);
void ublkd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ublkd_parse_size(const char *s, uint64_t *val);
int ublkd_parse_uint(const char *s, unsigned long min, unsigned long max,
		     unsigned long *val);
/* The logical block the device will report, once init set backend_lbs. */
unsigned int ublkd_logical_block_size(const struct ublkd_dev *dev);

static inline unsigned int iod_op(const struct ublksrv_io_desc *iod)
{
	return ublksrv_get_op(iod);
}

static inline unsigned int iod_flags(const struct ublksrv_io_desc *iod)
{
	return ublksrv_get_flags(iod);
}

static inline uint64_t iod_off(const struct ublksrv_io_desc *iod)
{
	return iod->start_sector << SECTOR_SHIFT;
}

static inline uint32_t iod_len(const struct ublksrv_io_desc *iod)
{
	return iod->nr_sectors << SECTOR_SHIFT;
}

#endif
