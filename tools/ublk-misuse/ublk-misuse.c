// SPDX-License-Identifier: GPL-2.0
/*
 * ublk-misuse - a ublk server that breaks the protocol on purpose, one
 * case at a time, and checks that the driver refuses each breach and that
 * the application reading or writing the disk never sees stale data.
 *
 *   ublk-misuse [-c CASE] [-l] [-k]
 *
 * Each case adds its own device (1 queue, depth 4, a 1 MiB memory store),
 * serves it correctly except for one request, where it issues the bad
 * command and checks its result; a client process meanwhile writes and
 * reads the disk with O_DIRECT and checks its data and errors. -l lists
 * the cases. One line per case, "CASE: ok" or "CASE: FAIL: why".
 *
 * Two cases find bugs of the 6.12 driver and run only with -k (known
 * bugs): a READ committed with more bytes than asked trips a WARN_ON_ONCE
 * in ublk_unmap_io(), and a USER_COPY pread across the request's end
 * reports the whole length while copying only the request's tail.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (no ublk driver), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <liburing.h>
#include <linux/ublk_cmd.h>

#include "tool.h"

#define DEPTH		4
#define MAX_IO		(64 << 10)
#define DEV_SIZE	(1 << 20)
#define IO_OFF		(64 << 10)	/* where the client's I/O goes */
#define IO_LEN		8192

/* What the bad request is, and how the case misbehaves on it. */
enum trigger { ON_WRITE, ON_READ, ON_NEED_GET_DATA };

struct mcase;
struct srv;
typedef int (*misuse_fn)(struct srv *s, int tag);

struct mcase {
	const char *name;
	const char *what;
	uint64_t flags;
	enum trigger trigger;
	misuse_fn fn;
	/* the client's expectation: 0, or the errno its I/O must fail with */
	int client_write_err;
	int client_read_err;
	/* set when 6.12 gets it wrong: run only with -k */
	const char *known_bug;
};

struct srv {
	const struct mcase *c;
	int ctrl_fd, cdev_fd, dev_id;
	struct io_uring ring;
	struct ublksrv_io_desc *iods;
	size_t iods_len;
	char *store;
	char *bufs[DEPTH];
	bool got_data[DEPTH];
	bool fired;		/* the bad command was issued */
	bool failed;
	char why[256];
	volatile bool stop;
};

static void fail(struct srv *s, const char *fmt, ...)
{
	va_list ap;

	if (s->failed)
		return;
	s->failed = true;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
}

/* ---- control ---- */

static int ctrl_cmd(int fd, unsigned int op, int dev_id, void *buf,
		    unsigned int len, uint64_t data0)
{
	struct ublksrv_ctrl_cmd cmd = {
		.dev_id = dev_id, .queue_id = (__u16)-1,
		.addr = (uintptr_t)buf, .len = len, .data = { data0 },
	};
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	int ret;

	ret = io_uring_queue_init(2, &ring, IORING_SETUP_SQE128);
	if (ret)
		return ret;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
	sqe->cmd_op = op;
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, addr3), &cmd,
	       sizeof(cmd));
	io_uring_submit(&ring);
	ret = io_uring_wait_cqe(&ring, &cqe);
	if (!ret)
		ret = cqe->res;
	io_uring_queue_exit(&ring);
	return ret;
}

/* ---- the I/O commands ---- */

static int io_cmd_on(struct io_uring *ring, int fd, unsigned int op,
		     int tag, int result, uint64_t addr)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct ublksrv_io_cmd *cmd;

	if (!sqe)
		return -EBUSY;
	cmd = (struct ublksrv_io_cmd *)sqe->cmd;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	cmd->q_id = 0;
	cmd->tag = tag;
	cmd->result = result;
	cmd->addr = addr;
	sqe->user_data = tag | (uint64_t)_IOC_NR(op) << 16;
	return io_uring_submit(ring);
}

static void io_cmd(struct srv *s, unsigned int op, int tag, int result,
		   uint64_t addr)
{
	io_cmd_on(&s->ring, s->cdev_fd, op, tag, result, addr);
}

/*
 * Issue a command that the driver must refuse at once; wait for its own
 * CQE (others are kept for the main loop by peeking by user_data).
 */
static int refused(struct srv *s, unsigned int op, int tag, int result,
		   uint64_t addr)
{
	struct io_uring_cqe *cqe;
	uint64_t want = 0xffff | (uint64_t)_IOC_NR(op) << 16 | 1ULL << 40;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
	struct ublksrv_io_cmd *cmd;
	int ret;

	if (!sqe)
		return -EBUSY;
	cmd = (struct ublksrv_io_cmd *)sqe->cmd;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = s->cdev_fd;
	sqe->cmd_op = op;
	cmd->q_id = 0;
	cmd->tag = tag;
	cmd->result = result;
	cmd->addr = addr;
	sqe->user_data = want;
	io_uring_submit(&s->ring);
	/* A refused command completes inline, so its CQE is already there. */
	for (;;) {
		unsigned int head;
		bool found = false;

		ret = -EAGAIN;
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			if (cqe->user_data == want) {
				ret = cqe->res;
				found = true;
				break;
			}
		}
		if (found) {
			/* mark consumed: swap the found one to be reaped as a no-op */
			cqe->user_data = ~0ULL;
			return ret;
		}
		io_uring_submit_and_wait(&s->ring, 1);
	}
}

/* Another task (a thread with its own ring) sends NEED_GET_DATA. */
struct other_arg {
	struct srv *s;
	int tag;
	int res;
};

static void *other_task(void *p)
{
	struct other_arg *a = p;
	struct io_uring ring;
	struct io_uring_cqe *cqe;

	a->res = -ENOMEM;
	if (io_uring_queue_init(2, &ring, 0))
		return NULL;
	io_cmd_on(&ring, a->s->cdev_fd, UBLK_U_IO_NEED_GET_DATA, a->tag, 0,
		  (uintptr_t)a->s->bufs[a->tag]);
	if (!io_uring_wait_cqe(&ring, &cqe))
		a->res = cqe->res;
	io_uring_queue_exit(&ring);
	return NULL;
}

/* ---- the misuses ---- */

static int m_get_data_without_flag(struct srv *s, int tag)
{
	int ret = refused(s, UBLK_U_IO_NEED_GET_DATA, tag, 0,
			  (uintptr_t)s->bufs[tag]);

	if (ret != -EINVAL)
		fail(s, "NEED_GET_DATA on a device without the flag: %d, want -EINVAL", ret);
	return 0;	/* then serve the request normally */
}

static int m_get_data_other_task(struct srv *s, int tag)
{
	struct other_arg a = { .s = s, .tag = tag };
	pthread_t t;

	pthread_create(&t, NULL, other_task, &a);
	pthread_join(t, NULL);
	if (a.res != -EINVAL)
		fail(s, "NEED_GET_DATA from another task: %d, want -EINVAL", a.res);
	return 0;
}

static int m_commit_instead_of_get_data(struct srv *s, int tag)
{
	int ret = refused(s, UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, IO_LEN,
			  (uintptr_t)s->bufs[tag]);

	if (ret != -EINVAL)
		fail(s, "COMMIT while the driver waits for NEED_GET_DATA: %d, want -EINVAL", ret);
	return 0;
}

/* addr 0: the driver cannot copy, so it must ask again, never complete. */
static int m_get_data_addr0(struct srv *s, int tag)
{
	io_cmd(s, UBLK_U_IO_NEED_GET_DATA, tag, 0, 0);
	return 1;	/* the main loop sees the driver's answer */
}

static int m_get_data_twice(struct srv *s, int tag)
{
	int ret;

	io_cmd(s, UBLK_U_IO_NEED_GET_DATA, tag, 0, (uintptr_t)s->bufs[tag]);
	ret = refused(s, UBLK_U_IO_NEED_GET_DATA, tag, 0, (uintptr_t)s->bufs[tag]);
	if (ret != -EBUSY && ret != -EINVAL)
		fail(s, "a second NEED_GET_DATA in flight: %d, want -EBUSY", ret);
	return 1;	/* the first one is in flight; the loop goes on */
}

static int m_double_commit(struct srv *s, int tag)
{
	const struct ublksrv_io_desc *iod = &s->iods[tag];
	uint32_t len = iod->nr_sectors << 9;
	int ret;

	memcpy(s->bufs[tag], s->store + (iod->start_sector << 9), len);
	io_cmd(s, UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, len, (uintptr_t)s->bufs[tag]);
	ret = refused(s, UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, len,
		      (uintptr_t)s->bufs[tag]);
	if (ret != -EBUSY)
		fail(s, "a second COMMIT of one request: %d, want -EBUSY", ret);
	return 1;
}

static int m_fetch_again(struct srv *s, int tag)
{
	int ret = refused(s, UBLK_U_IO_FETCH_REQ, tag, -1, (uintptr_t)s->bufs[tag]);

	if (ret != -EBUSY && ret != -EINVAL)
		fail(s, "FETCH of a tag the server holds: %d, want -EBUSY/-EINVAL", ret);
	return 0;
}

static int m_read_negative(struct srv *s, int tag)
{
	io_cmd(s, UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, -123456789,
	       (uintptr_t)s->bufs[tag]);
	return 1;
}

static int m_read_too_large(struct srv *s, int tag)
{
	const struct ublksrv_io_desc *iod = &s->iods[tag];
	uint32_t len = iod->nr_sectors << 9;

	memcpy(s->bufs[tag], s->store + (iod->start_sector << 9), len);
	io_cmd(s, UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, len + 4096,
	       (uintptr_t)s->bufs[tag]);
	return 1;
}

static int m_read_zero(struct srv *s, int tag)
{
	io_cmd(s, UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, 0, (uintptr_t)s->bufs[tag]);
	return 1;
}

static off_t uc_pos(int tag)
{
	/* Added, not or-ed: tags from 64 up overlap the offset's bit. */
	return UBLKSRV_IO_BUF_OFFSET + ((off_t)tag << UBLK_TAG_OFF);
}

/* USER_COPY: reads and writes outside the request are refused or short. */
static int m_user_copy_bounds(struct srv *s, int tag)
{
	const struct ublksrv_io_desc *iod = &s->iods[tag];
	uint32_t len = iod->nr_sectors << 9;
	char *tmp = s->bufs[tag];
	ssize_t n;

	n = pread(s->cdev_fd, tmp, 4096, uc_pos(tag) + len + 512);
	if (n >= 0 || errno != EINVAL)
		fail(s, "pread past the request: %zd (%s), want EINVAL", n, strerror(errno));
	n = pwrite(s->cdev_fd, tmp, 512, uc_pos(tag));
	if (n >= 0 || errno != EACCES)
		fail(s, "pwrite into a WRITE request: %zd (%s), want EACCES", n, strerror(errno));
	n = pread(s->cdev_fd, tmp, 512, uc_pos((tag + 1) % DEPTH));
	if (n >= 0 || errno != EINVAL)
		fail(s, "pread of an idle tag: %zd (%s), want EINVAL", n, strerror(errno));
	n = pread(s->cdev_fd, tmp, 512, UBLKSRV_IO_BUF_OFFSET + (5ULL << UBLK_QID_OFF));
	if (n >= 0 || errno != EINVAL)
		fail(s, "pread of a queue that does not exist: %zd (%s), want EINVAL", n, strerror(errno));
	return 0;
}

/* A pread across the request's end must copy, and report, only its tail. */
static int m_user_copy_across_end(struct srv *s, int tag)
{
	const struct ublksrv_io_desc *iod = &s->iods[tag];
	uint32_t len = iod->nr_sectors << 9;
	ssize_t n;

	n = pread(s->cdev_fd, s->bufs[tag], 4096, uc_pos(tag) + len - 512);
	if (n != 512)
		fail(s, "pread of 4096 bytes 512 before the request's end: %zd, want 512 (the rest of the buffer is stale)", n);
	return 0;
}

static const struct mcase cases[] = {
	{ "get-data-without-flag", "NEED_GET_DATA on a device without UBLK_F_NEED_GET_DATA",
	  0, ON_WRITE, m_get_data_without_flag, 0, 0, NULL },
	{ "get-data-other-task", "NEED_GET_DATA from a task that did not fetch the tag",
	  UBLK_F_NEED_GET_DATA, ON_NEED_GET_DATA, m_get_data_other_task, 0, 0, NULL },
	{ "commit-instead-of-get-data", "COMMIT while the driver waits for NEED_GET_DATA",
	  UBLK_F_NEED_GET_DATA, ON_NEED_GET_DATA, m_commit_instead_of_get_data, 0, 0, NULL },
	{ "get-data-addr0", "NEED_GET_DATA with addr 0",
	  UBLK_F_NEED_GET_DATA, ON_NEED_GET_DATA, m_get_data_addr0, 0, 0, NULL },
	{ "get-data-twice", "two NEED_GET_DATA for one request",
	  UBLK_F_NEED_GET_DATA, ON_NEED_GET_DATA, m_get_data_twice, 0, 0, NULL },
	{ "double-commit", "two COMMIT_AND_FETCH for one request",
	  0, ON_READ, m_double_commit, 0, 0, NULL },
	{ "fetch-again", "FETCH_REQ for a tag the server holds",
	  0, ON_WRITE, m_fetch_again, 0, 0, NULL },
	{ "read-negative", "READ committed with a garbage negative result",
	  0, ON_READ, m_read_negative, 0, EIO, NULL },
	{ "read-zero", "READ committed with result 0",
	  0, ON_READ, m_read_zero, 0, EIO, NULL },
	{ "user-copy-bounds", "USER_COPY pread/pwrite outside the request",
	  UBLK_F_USER_COPY, ON_WRITE, m_user_copy_bounds, 0, 0, NULL },
	{ "read-too-large", "READ committed with a result larger than the request",
	  0, ON_READ, m_read_too_large, 0, 0,
	  "ublk_unmap_io() WARN_ON_ONCE(io->res > rq_bytes): a server's bad result splats" },
	{ "user-copy-across-end", "USER_COPY pread across the end of the request",
	  UBLK_F_USER_COPY, ON_WRITE, m_user_copy_across_end, 0, 0,
	  "ublk_copy_user_pages() returns the pinned length, not the bytes copied" },
};

/* ---- a correct server around the one misuse ---- */

static void serve(struct srv *s, int tag, bool after_get_data)
{
	const struct ublksrv_io_desc *iod = &s->iods[tag];
	unsigned int op = ublksrv_get_op(iod);
	uint32_t len = iod->nr_sectors << 9;
	char *at = s->store + (iod->start_sector << 9);
	bool uc = s->c->flags & UBLK_F_USER_COPY;
	int res = 0;

	(void)after_get_data;
	if ((iod->start_sector << 9) + len > DEV_SIZE) {
		res = -EIO;
	} else if (op == UBLK_IO_OP_WRITE) {
		if (uc) {
			if (pread(s->cdev_fd, at, len, uc_pos(tag)) != len)
				fail(s, "user copy of a WRITE: %s", strerror(errno));
		} else {
			memcpy(at, s->bufs[tag], len);
		}
		res = len;
	} else if (op == UBLK_IO_OP_READ) {
		if (uc) {
			if (pwrite(s->cdev_fd, at, len, uc_pos(tag)) != len)
				fail(s, "user copy of a READ: %s", strerror(errno));
		} else {
			memcpy(s->bufs[tag], at, len);
		}
		res = len;
	}
	io_cmd(s, UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, res,
	       uc ? 0 : (uintptr_t)s->bufs[tag]);
}

static bool is_trigger(struct srv *s, int tag, int res)
{
	const struct ublksrv_io_desc *iod = &s->iods[tag];
	unsigned int op = ublksrv_get_op(iod);

	/* Only the client's I/O (at IO_OFF), never the partition scan. */
	if (s->fired || (iod->start_sector << 9) != IO_OFF)
		return false;
	switch (s->c->trigger) {
	case ON_WRITE:
		return op == UBLK_IO_OP_WRITE && res == UBLK_IO_RES_OK;
	case ON_READ:
		return op == UBLK_IO_OP_READ && res == UBLK_IO_RES_OK;
	case ON_NEED_GET_DATA:
		return res == UBLK_IO_RES_NEED_GET_DATA;
	}
	return false;
}

static void *server(void *p)
{
	struct srv *s = p;
	struct io_uring_cqe *cqe;
	int nr_abort = 0, addr0_asks = 0, i;

	for (i = 0; i < DEPTH; i++)
		io_cmd(s, UBLK_U_IO_FETCH_REQ, i, -1,
		       s->c->flags & UBLK_F_USER_COPY ? 0 : (uintptr_t)s->bufs[i]);

	while (nr_abort < DEPTH) {
		unsigned int head, n = 0;
		struct __kernel_timespec ts = { .tv_sec = 1 };

		io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, &ts, NULL);
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			uint64_t ud = cqe->user_data;
			int tag = ud & 0xffff, res = cqe->res;

			n++;
			if (ud == ~0ULL || (ud >> 40))	/* consumed by refused() */
				continue;
			if (res == UBLK_IO_RES_ABORT) {
				nr_abort++;
				continue;
			}
			if (res < 0) {
				fail(s, "tag %d: command %u refused: %s", tag,
				     (unsigned int)(ud >> 16) & 0xff, strerror(-res));
				s->stop = true;
				continue;
			}
			if (is_trigger(s, tag, res)) {
				s->fired = true;
				if (s->c->fn(s, tag))
					continue;
			} else if (s->c->fn == m_get_data_addr0 && s->fired &&
				   res == UBLK_IO_RES_NEED_GET_DATA && !addr0_asks++) {
				/* the driver asked again after addr 0: good */
			} else if (s->c->fn == m_get_data_addr0 && s->fired &&
				   res == UBLK_IO_RES_OK && !addr0_asks &&
				   ublksrv_get_op(&s->iods[tag]) == UBLK_IO_OP_WRITE) {
				fail(s, "NEED_GET_DATA with addr 0 completed as if data were copied");
			}
			if (res == UBLK_IO_RES_NEED_GET_DATA) {
				io_cmd(s, UBLK_U_IO_NEED_GET_DATA, tag, 0,
				       (uintptr_t)s->bufs[tag]);
				continue;
			}
			serve(s, tag, false);
		}
		io_uring_cq_advance(&s->ring, n);
	}
	return NULL;
}

/* ---- the client: write a pattern, read it back ---- */

static int client(int dev_id, const struct mcase *c)
{
	char path[64];
	void *wbuf, *rbuf;
	ssize_t n;
	int fd, i, ret = 0;

	snprintf(path, sizeof(path), "/dev/ublkb%d", dev_id);
	for (i = 0; i < 100; i++) {
		fd = open(path, O_RDWR | O_DIRECT);
		if (fd >= 0 || errno != ENOENT)
			break;
		usleep(20000);
	}
	if (fd < 0) {
		printf("%s: FAIL: client: open %s: %s\n", c->name, path, strerror(errno));
		return 1;
	}
	if (posix_memalign(&wbuf, 4096, IO_LEN) || posix_memalign(&rbuf, 4096, IO_LEN))
		return 1;
	for (i = 0; i < IO_LEN; i++)
		((char *)wbuf)[i] = (char)(i * 7 + 13);
	n = pwrite(fd, wbuf, IO_LEN, IO_OFF);
	if (c->client_write_err ? (n >= 0 || errno != c->client_write_err) : n != IO_LEN) {
		printf("%s: FAIL: client write: %zd (%s)\n", c->name, n,
		       n < 0 ? strerror(errno) : "short");
		ret = 1;
	}
	memset(rbuf, 0x5a, IO_LEN);	/* poison: stale data would show */
	n = pread(fd, rbuf, IO_LEN, IO_OFF);
	if (c->client_read_err) {
		if (n >= 0 || errno != c->client_read_err) {
			printf("%s: FAIL: client read: %zd, want %s\n", c->name, n,
			       strerror(c->client_read_err));
			ret = 1;
		}
	} else if (n != IO_LEN) {
		printf("%s: FAIL: client read: %zd (%s)\n", c->name, n,
		       n < 0 ? strerror(errno) : "short");
		ret = 1;
	} else if (memcmp(wbuf, rbuf, IO_LEN)) {
		printf("%s: FAIL: client read back other data than it wrote\n", c->name);
		ret = 1;
	}
	close(fd);
	return ret;
}

static int run_case(const struct mcase *c)
{
	struct ublksrv_ctrl_dev_info info = {
		.nr_hw_queues = 1, .queue_depth = DEPTH, .max_io_buf_bytes = MAX_IO,
		.dev_id = -1, .flags = c->flags | UBLK_F_CMD_IOCTL_ENCODE,
	};
	struct ublk_params p = {
		.len = sizeof(p), .types = UBLK_PARAM_TYPE_BASIC,
		.basic = {
			.logical_bs_shift = 9, .physical_bs_shift = 12,
			.io_opt_shift = 12, .io_min_shift = 9,
			.max_sectors = MAX_IO >> 9, .dev_sectors = DEV_SIZE >> 9,
		},
	};
	struct srv s = { .c = c };
	char path[64];
	pthread_t th;
	int i, ret, status;
	pid_t pid;

	info.ublksrv_pid = getpid();
	s.ctrl_fd = open("/dev/ublk-control", O_RDWR);
	if (s.ctrl_fd < 0)
		return EXIT_SKIP;
	ret = ctrl_cmd(s.ctrl_fd, UBLK_U_CMD_ADD_DEV, -1, &info, sizeof(info), 0);
	if (ret) {
		printf("%s: FAIL: ADD_DEV: %s\n", c->name, strerror(-ret));
		return EXIT_FAIL;
	}
	s.dev_id = info.dev_id;
	snprintf(path, sizeof(path), "/dev/ublkc%d", s.dev_id);
	for (i = 0; i < 100; i++) {
		s.cdev_fd = open(path, O_RDWR);
		if (s.cdev_fd >= 0 || errno != ENOENT)
			break;
		usleep(20000);
	}
	s.iods_len = 4096;
	s.iods = mmap(NULL, s.iods_len, PROT_READ, MAP_SHARED, s.cdev_fd,
		      UBLKSRV_CMD_BUF_OFFSET);
	s.store = calloc(1, DEV_SIZE);
	if (s.cdev_fd < 0 || s.iods == MAP_FAILED || !s.store ||
	    io_uring_queue_init(32, &s.ring, 0)) {
		printf("%s: FAIL: server setup: %s\n", c->name, strerror(errno));
		return EXIT_FAIL;
	}
	for (i = 0; i < DEPTH; i++)
		if (posix_memalign((void **)&s.bufs[i], 4096, MAX_IO))
			return EXIT_FAIL;
	/* The server thread fetches: the driver binds a queue to that task. */
	pthread_create(&th, NULL, server, &s);
	ret = ctrl_cmd(s.ctrl_fd, UBLK_U_CMD_SET_PARAMS, s.dev_id, &p, sizeof(p), 0);
	if (!ret)
		ret = ctrl_cmd(s.ctrl_fd, UBLK_U_CMD_START_DEV, s.dev_id, NULL, 0, getpid());
	if (ret) {
		printf("%s: FAIL: starting the device: %s\n", c->name, strerror(-ret));
		return EXIT_FAIL;
	}
	pid = fork();
	if (pid == 0)
		_exit(client(s.dev_id, c));
	waitpid(pid, &status, 0);
	ctrl_cmd(s.ctrl_fd, UBLK_U_CMD_STOP_DEV, s.dev_id, NULL, 0, 0);
	pthread_join(th, NULL);
	io_uring_queue_exit(&s.ring);
	munmap(s.iods, s.iods_len);
	close(s.cdev_fd);
	ret = ctrl_cmd(s.ctrl_fd, UBLK_U_CMD_DEL_DEV, s.dev_id, NULL, 0, 0);
	if (ret)
		fail(&s, "DEL_DEV: %s", strerror(-ret));
	if (!s.fired)
		fail(&s, "the misuse was never triggered");
	if (s.failed) {
		printf("%s: FAIL: %s\n", c->name, s.why);
		return EXIT_FAIL;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return EXIT_FAIL;
	printf("%s: ok\n", c->name);
	return EXIT_PASS;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	bool known = false;
	unsigned int i;
	int opt, ret = EXIT_PASS, r;

	while ((opt = getopt(argc, argv, "c:lkh")) != -1) {
		switch (opt) {
		case 'k':
			known = true;
			break;
		case 'c':
			only = optarg;
			break;
		case 'l':
			for (i = 0; i < ARRAY_SIZE(cases); i++)
				printf("%-28s %s%s%s\n", cases[i].name, cases[i].what,
				       cases[i].known_bug ? "; known 6.12 bug: " : "",
				       cases[i].known_bug ? cases[i].known_bug : "");
			return EXIT_PASS;
		default:
			fprintf(stderr, "usage: %s [-c CASE] [-l] [-k]\n", argv[0]);
			return EXIT_USAGE;
		}
	}
	if (access("/dev/ublk-control", F_OK)) {
		fprintf(stderr, "no /dev/ublk-control (modprobe ublk_drv)\n");
		return EXIT_SKIP;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		if (only ? strcmp(only, cases[i].name) : known != !!cases[i].known_bug)
			continue;
		r = run_case(&cases[i]);
		if (r == EXIT_SKIP)
			return EXIT_SKIP;
		if (r)
			ret = EXIT_FAIL;
	}
	return ret;
}
