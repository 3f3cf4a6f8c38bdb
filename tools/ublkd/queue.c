// SPDX-License-Identifier: GPL-2.0
/*
 * The queue threads: one io_uring per queue carries the ublk I/O commands
 * (FETCH_REQ, COMMIT_AND_FETCH_REQ, NEED_GET_DATA) and the target's own
 * operations. Every command for a queue comes from its thread, as the
 * driver requires.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ublkd.h"

static size_t iods_size(int depth)
{
	size_t sz = depth * sizeof(struct ublksrv_io_desc);
	long pg = sysconf(_SC_PAGESIZE);

	return (sz + pg - 1) & ~(pg - 1);
}

/* The mmap offset of queue @q_id's descriptors: the driver's stride. */
static off_t iods_offset(int q_id)
{
	return UBLKSRV_CMD_BUF_OFFSET +
		(off_t)q_id * iods_size(UBLK_MAX_QUEUE_DEPTH);
}

/*
 * The pread/pwrite position of a request's data on /dev/ublkcN. The driver
 * subtracts UBLKSRV_IO_BUF_OFFSET (bit 31) before decoding, and the tag
 * field starts at bit 25, so from tag 64 up the tag overlaps that bit:
 * the offset must be added, not or-ed in.
 */
static off_t user_copy_pos(int q_id, int tag)
{
	return UBLKSRV_IO_BUF_OFFSET +
		((off_t)q_id << UBLK_QID_OFF | (off_t)tag << UBLK_TAG_OFF);
}

/*
 * An SQE, never NULL: every caller fills it at once. When the SQ ring is
 * full its entries are submitted; a submit that takes none (-EAGAIN,
 * -EBUSY, -EINTR: the kernel could not allocate, or has completions to
 * hand back first) is retried for up to a second, and after that the
 * daemon exits, saying so, as when the ring itself fails: the driver ends
 * the device's I/O (or quiesces it, with recovery). Callers used to
 * dereference the NULL that the second io_uring_get_sqe() could return.
 */
struct io_uring_sqe *ublkd_get_sqe(struct ublkd_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	int ret = 0, i;

	for (i = 0; !sqe && i < 1000; i++) {
		ret = io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe && ret < 0 && ret != -EAGAIN && ret != -EBUSY &&
		    ret != -EINTR)
			break;
		if (!sqe)
			usleep(1000);
	}
	if (!sqe) {
		ublkd_log("queue %d: no free SQE (submit: %s)\n", q->q_id,
			  ret < 0 ? strerror(-ret) : "took none");
		exit(1);
	}
	return sqe;
}

static bool op_has_data(unsigned int op)
{
	return op == UBLK_IO_OP_READ || op == UBLK_IO_OP_WRITE;
}

/*
 * Issue the next ublk command for @tag. Precedence: NEED_GET_DATA for a
 * WRITE whose fetch asked for it, else COMMIT_AND_FETCH once a request
 * was handled, else FETCH (only at start).
 */
static void queue_cmd(struct ublkd_queue *q, int tag, unsigned int cmd_op,
		      int result)
{
	struct ublkd_dev *dev = q->dev;
	struct ublkd_io *io = &q->ios[tag];
	const struct ublksrv_io_desc *iod = &q->iods[tag];
	struct io_uring_sqe *sqe = ublkd_get_sqe(q);
	struct ublksrv_io_cmd *cmd = (struct ublksrv_io_cmd *)sqe->cmd;
	uint64_t addr = 0;

	switch (dev->mode) {
	case MODE_DEFAULT:
		addr = (uintptr_t)io->iobuf;
		break;
	case MODE_GET_DATA:
		/* NEED_GET_DATA: where the WRITE's data goes; COMMIT: where
		 * a READ's data comes from. FETCH and other commits need none. */
		if (cmd_op == UBLK_U_IO_NEED_GET_DATA ||
		    (cmd_op == UBLK_U_IO_COMMIT_AND_FETCH_REQ &&
		     iod_op(iod) == UBLK_IO_OP_READ))
			addr = (uintptr_t)io->buf;
		break;
	case MODE_USER_COPY:
		break;
	}

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = 0;			/* registered /dev/ublkcN */
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->cmd_op = cmd_op;
	cmd->q_id = q->q_id;
	cmd->tag = tag;
	cmd->result = result;
	cmd->addr = addr;
	sqe->user_data = ud_build(tag, _IOC_NR(cmd_op), 0, false);
	io->flags |= IO_CMD_INFLIGHT;
	q->cmd_inflight++;
}

void ublkd_complete(struct ublkd_queue *q, int tag, int res)
{
	struct ublkd_io *io = &q->ios[tag];
	const struct ublksrv_io_desc *iod = &q->iods[tag];

	if (q->dev->mode == MODE_USER_COPY && iod_op(iod) == UBLK_IO_OP_READ &&
	    res > 0) {
		ssize_t n = pwrite(q->dev->cdev_fd, io->buf, res,
				   user_copy_pos(q->q_id, tag));

		if (n != res) {
			ublkd_log("queue %d tag %d: user copy of %d read bytes: %s\n",
				  q->q_id, tag, res, n < 0 ? strerror(errno) : "short");
			res = -EIO;
		}
	}
	if (res < 0)
		q->stats[ST_ERRORS]++;
	io->flags &= ~IO_GOT_DATA;
	queue_cmd(q, tag, UBLK_U_IO_COMMIT_AND_FETCH_REQ, res);
}

static void count(struct ublkd_queue *q, const struct ublksrv_io_desc *iod)
{
	static const int stat_of[] = {
		[UBLK_IO_OP_READ] = ST_READ,
		[UBLK_IO_OP_WRITE] = ST_WRITE,
		[UBLK_IO_OP_FLUSH] = ST_FLUSH,
		[UBLK_IO_OP_DISCARD] = ST_DISCARD,
		[UBLK_IO_OP_WRITE_SAME] = ST_ERRORS,
		[UBLK_IO_OP_WRITE_ZEROES] = ST_WRITE_ZEROES,
	};
	unsigned int op = iod_op(iod);

	if (op < ARRAY_SIZE(stat_of) && op != UBLK_IO_OP_WRITE_SAME)
		q->stats[stat_of[op]]++;
	if (iod->op_flags & UBLK_IO_F_FUA)
		q->stats[ST_FUA]++;
}

/*
 * The error a request gets before the target sees it, or 0: longer than
 * the buffers (the driver never sends one), or a change to a read-only
 * disk (the block layer refuses those; this is for anything that gets
 * past it).
 */
static int refused(struct ublkd_queue *q, const struct ublksrv_io_desc *iod)
{
	unsigned int op = iod_op(iod);

	if (op_has_data(op) && iod_len(iod) > q->dev->max_io_bytes)
		return -EINVAL;
	if (q->dev->read_only && op != UBLK_IO_OP_READ && op != UBLK_IO_OP_FLUSH)
		return -EROFS;
	return 0;
}

/*
 * The slot's buffer, or the target's own in the modes that allow it. A
 * request that will be refused gets the slot's: in the GET_DATA mode the
 * driver copies a WRITE into the buffer picked here before the request is
 * handled, so the target's (null --store: the store itself) would hold
 * the data of a write that then fails with EROFS.
 */
static void *pick_buf(struct ublkd_queue *q, int tag)
{
	const struct ublksrv_io_desc *iod = &q->iods[tag];
	void *buf = NULL;

	if (q->dev->mode != MODE_DEFAULT && q->dev->ops->get_buf &&
	    !refused(q, iod))
		buf = q->dev->ops->get_buf(q, tag, iod);
	return buf ? buf : q->ios[tag].iobuf;
}

/* A request arrived (the fetch completed with UBLK_IO_RES_OK). */
static void handle_request(struct ublkd_queue *q, int tag)
{
	struct ublkd_dev *dev = q->dev;
	struct ublkd_io *io = &q->ios[tag];
	const struct ublksrv_io_desc *iod = &q->iods[tag];
	unsigned int op = iod_op(iod);
	int res;

	count(q, iod);
	if (dev->mode == MODE_DEFAULT)
		io->buf = io->iobuf;
	else if (!(io->flags & IO_GOT_DATA))
		io->buf = op_has_data(op) ? pick_buf(q, tag) : io->iobuf;

	res = refused(q, iod);
	if (res) {
		ublkd_complete(q, tag, res);
		return;
	}
	if (dev->mode == MODE_USER_COPY && op == UBLK_IO_OP_WRITE) {
		ssize_t n = pread(dev->cdev_fd, io->buf, iod_len(iod),
				  user_copy_pos(q->q_id, tag));

		if (n != (ssize_t)iod_len(iod)) {
			ublkd_log("queue %d tag %d: user copy of %u write bytes: %s\n",
				  q->q_id, tag, iod_len(iod),
				  n < 0 ? strerror(errno) : "short");
			ublkd_complete(q, tag, -EIO);
			return;
		}
	}
	res = dev->ops->queue_io(q, tag, iod);
	if (res != UBLKD_QUEUED)
		ublkd_complete(q, tag, res);
}

static void handle_cmd_cqe(struct ublkd_queue *q, const struct io_uring_cqe *cqe)
{
	int tag = ud_tag(cqe->user_data);
	struct ublkd_io *io = &q->ios[tag];

	io->flags &= ~IO_CMD_INFLIGHT;
	q->cmd_inflight--;

	switch (cqe->res) {
	case UBLK_IO_RES_OK:
		handle_request(q, tag);
		break;
	case UBLK_IO_RES_NEED_GET_DATA:
		/* A WRITE: give the driver the target's buffer for its data. */
		io->buf = pick_buf(q, tag);
		io->flags |= IO_GOT_DATA;
		q->stats[ST_GET_DATA]++;
		queue_cmd(q, tag, UBLK_U_IO_NEED_GET_DATA, 0);
		break;
	case UBLK_IO_RES_ABORT:
		/* The device is stopping: this tag gets no more requests. */
		io->flags |= IO_ABORTED;
		q->nr_aborted++;
		break;
	default:
		/* The driver refused a command: this slot is lost, and so is
		 * the device's consistency. Exit; the driver cleans up. */
		ublkd_log("queue %d tag %d: ublk command %u failed: %s\n",
			  q->q_id, tag, ud_op(cqe->user_data), strerror(-cqe->res));
		exit(1);
	}
}

static int queue_setup(struct ublkd_queue *q)
{
	struct ublkd_dev *dev = q->dev;
	struct io_uring_params p = { 0 };
	unsigned int entries = 2 * q->depth + 32;
	int i, ret;

	q->iods_len = iods_size(q->depth);
	q->iods = mmap(NULL, q->iods_len, PROT_READ, MAP_SHARED | MAP_POPULATE,
		       dev->cdev_fd, iods_offset(q->q_id));
	if (q->iods == MAP_FAILED) {
		q->iods = NULL;
		ublkd_log("queue %d: mmap of the I/O descriptors: %s\n",
			  q->q_id, strerror(errno));
		return -errno;
	}
	/*
	 * COOP_TASKRUN: the driver hands each request to this thread as task
	 * work; the thread runs it when it next enters the kernel, which it
	 * does for every batch anyway, so no IPI is needed to interrupt it.
	 */
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN;
	p.cq_entries = entries * 2;
	ret = io_uring_queue_init_params(entries, &q->ring, &p);
	if (ret) {
		ublkd_log("queue %d: io_uring setup: %s\n", q->q_id, strerror(-ret));
		return ret;
	}
	ret = io_uring_register_files(&q->ring, &dev->cdev_fd, 1);
	if (ret) {
		ublkd_log("queue %d: registering /dev/ublkc%d: %s\n", q->q_id,
			  dev->info.dev_id, strerror(-ret));
		return ret;
	}
	q->ios = calloc(q->depth, sizeof(*q->ios));
	if (!q->ios)
		return -ENOMEM;
	for (i = 0; i < q->depth; i++) {
		if (posix_memalign(&q->ios[i].iobuf, 4096, dev->max_io_bytes))
			return -ENOMEM;
	}
	q->stats = dev->stats->q[q->q_id];
	dev->stats->tid[q->q_id] = syscall(SYS_gettid);
	if (dev->ops->init_queue) {
		ret = dev->ops->init_queue(q);
		if (ret)
			return ret;
	}
	for (i = 0; i < q->depth; i++) {
		q->ios[i].buf = q->ios[i].iobuf;
		queue_cmd(q, i, UBLK_U_IO_FETCH_REQ, -1);
	}
	ret = io_uring_submit(&q->ring);
	if (ret < 0) {
		ublkd_log("queue %d: submitting FETCH_REQ: %s\n", q->q_id,
			  strerror(-ret));
		return ret;
	}
	return 0;
}

/*
 * Reap the target's CQEs until none of its SQEs is left (a receive that
 * stop_queue shut down ends with 0), for at most 5 s: only then may the
 * buffers they point into be freed.
 */
static void drain_tgt(struct ublkd_queue *q)
{
	struct __kernel_timespec ts = { .tv_sec = 1 };
	struct io_uring_cqe *cqe;
	unsigned int head, n;
	int waits = 0;

	while (q->tgt_inflight > 0 && waits < 5) {
		int ret = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1,
							   &ts, NULL);

		if (ret == -ETIME)
			waits++;
		else if (ret < 0 && ret != -EINTR)
			break;
		n = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			if (ud_is_tgt(cqe->user_data))
				q->tgt_inflight--;
			n++;
		}
		io_uring_cq_advance(&q->ring, n);
	}
	if (q->tgt_inflight > 0)
		ublkd_log("queue %d: %d target operations still armed at exit\n",
			  q->q_id, q->tgt_inflight);
}

/*
 * The ring goes first: while it is open, a receive armed on it may still
 * write into the target's buffers, so those are freed only after it is
 * closed (and drained, when the target can end what it armed).
 */
static void queue_teardown(struct ublkd_queue *q)
{
	int i;

	if (q->ring.ring_fd > 0) {
		if (q->dev->ops->stop_queue && q->tgt) {
			q->dev->ops->stop_queue(q);
			drain_tgt(q);
		}
		io_uring_queue_exit(&q->ring);
	}
	if (q->dev->ops->deinit_queue)
		q->dev->ops->deinit_queue(q);
	if (q->ios) {
		for (i = 0; i < q->depth; i++)
			free(q->ios[i].iobuf);
		free(q->ios);
	}
	if (q->iods)
		munmap((void *)q->iods, q->iods_len);
}

/*
 * Pin the calling queue thread to the CPUs whose requests its queue
 * serves, before it allocates anything (its memory then comes from their
 * node): the driver hands each request to this thread as task work, so
 * the thread and the submitter share a CPU's caches (as ublksrv and rublk
 * do). A failure (a cpuset that excludes those CPUs) costs only that, so
 * it is a warning. A queue no CPU maps to stays unpinned (the driver
 * makes at most one queue per possible CPU, so only offline CPUs could
 * leave one without).
 */
static void queue_pin(struct ublkd_queue *q)
{
	const cpu_set_t *set;
	char cpus[256];
	int ret;

	snprintf(cpus, sizeof(cpus), "ublkd-q%d", q->q_id);
	pthread_setname_np(pthread_self(), cpus);
	if (!q->dev->affinity)
		return;
	set = &q->dev->affinity[q->q_id];
	if (!CPU_COUNT(set)) {
		ublkd_log("queue %d: no CPU maps to it; its thread is not pinned\n",
			  q->q_id);
		return;
	}
	ret = pthread_setaffinity_np(pthread_self(), sizeof(*set), set);
	if (ret) {
		ublkd_cpu_list(set, cpus, sizeof(cpus));
		ublkd_log("warning: queue %d: pinning its thread to CPUs %s: %s; it runs unpinned\n",
			  q->q_id, cpus, strerror(ret));
	}
}

static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int nr_ready;

static void *queue_thread(void *arg)
{
	struct ublkd_queue *q = arg;
	struct __kernel_timespec ts = { .tv_sec = 1 };
	struct io_uring_cqe *cqe;
	struct timespec now;
	time_t last_tick = 0;
	unsigned int head, n;

	queue_pin(q);
	q->err = queue_setup(q);
	pthread_mutex_lock(&ready_lock);
	nr_ready++;
	pthread_cond_broadcast(&ready_cond);
	pthread_mutex_unlock(&ready_lock);
	if (q->err)
		goto out;

	/* Until the driver aborts every slot's command (the device stops). */
	while (q->nr_aborted < q->depth) {
		int ret = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1,
							   &ts, NULL);

		if (ret < 0 && ret != -ETIME && ret != -EINTR) {
			ublkd_log("queue %d: io_uring_enter: %s\n", q->q_id,
				  strerror(-ret));
			exit(1);
		}
		n = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			if (ud_is_tgt(cqe->user_data)) {
				q->tgt_inflight--;
				q->dev->ops->io_done(q, cqe);
			} else {
				handle_cmd_cqe(q, cqe);
			}
			n++;
		}
		io_uring_cq_advance(&q->ring, n);
		clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
		if (now.tv_sec != last_tick && q->dev->ops->tick) {
			last_tick = now.tv_sec;
			q->dev->ops->tick(q);
		}
	}
out:
	queue_teardown(q);
	ublkd_queue_done(q->dev);
	return NULL;
}

/* Start the queue threads; 0 once each has sent all its FETCH_REQs. */
int ublkd_start_queues(struct ublkd_dev *dev)
{
	int i, ret = 0;

	dev->queues = calloc(dev->nr_queues, sizeof(*dev->queues));
	if (!dev->queues)
		return -ENOMEM;
	for (i = 0; i < dev->nr_queues; i++) {
		struct ublkd_queue *q = &dev->queues[i];

		q->dev = dev;
		q->q_id = i;
		q->depth = dev->depth;
		ret = pthread_create(&q->thread, NULL, queue_thread, q);
		if (ret) {
			ublkd_log("creating queue thread %d: %s\n", i, strerror(ret));
			exit(1);
		}
	}
	pthread_mutex_lock(&ready_lock);
	while (nr_ready < dev->nr_queues)
		pthread_cond_wait(&ready_cond, &ready_lock);
	pthread_mutex_unlock(&ready_lock);
	for (i = 0; i < dev->nr_queues; i++)
		if (dev->queues[i].err)
			ret = dev->queues[i].err;
	return ret;
}

void ublkd_join_queues(struct ublkd_dev *dev)
{
	int i;

	for (i = 0; i < dev->nr_queues; i++)
		pthread_join(dev->queues[i].thread, NULL);
}
