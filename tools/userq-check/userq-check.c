// SPDX-License-Identifier: GPL-2.0
/*
 * userq-check - NVMe user queues (nvme.user_queues=N) seen from an io_uring
 * application: data through an attached queue against the block device,
 * every misuse refused with its errno, and I/O that survives controller
 * resets and removal.
 *
 *   userq-check -l                          list the cases
 *   userq-check [-c CASE]... NG BLOCKDEV    run the cases (default: all)
 *   userq-check storm SECONDS NG            verified I/O on an attached
 *                                           queue for SECONDS, while the
 *                                           caller resets or removes the
 *                                           controller
 *   userq-check stall NG BLOCKDEV FAST_NG   commands that time out on a
 *                                           throttled namespace (vm/run's
 *                                           nsid 2)
 *   userq-check hold SECONDS NG             one read on an attached queue,
 *                                           left unpolled for SECONDS (a
 *                                           freeze meanwhile must wait for
 *                                           it, and the driver reap it past
 *                                           its timeout); then its result
 *   userq-check format NG BLOCKDEV          Format NVM to the other LBA
 *                                           size and back with a queue
 *                                           attached (erases the namespace)
 *   userq-check pin NG                      attach a queue, read a block on
 *                                           it, close NG: only the ring's
 *                                           attachment still refers to the
 *                                           driver; then wait for a signal
 *   userq-check stale NG                    keep a ring's queue and NG open
 *                                           while the namespace is removed
 *                                           and created again; probe it on
 *                                           each "probe" line of stdin
 *   userq-check steps NG FILE               writes from FILE and Flushes on
 *                                           an attached queue, one per line
 *                                           of stdin, so that the caller can
 *                                           look at the device between them
 *   userq-check head NG BLOCKDEV            a multipath head's char device:
 *                                           attach refused (EOPNOTSUPP),
 *                                           NVME_URING_CMD_IO_UQ commands
 *                                           take the normal path
 *
 * NG is the namespace's generic char device (/dev/ngXnY), BLOCKDEV its
 * block device. One line per case: "CASE: ok" or "CASE: FAIL: why". The
 * cases overwrite the first 8 MiB of the namespace.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (the controller has no user queues),
 * 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <liburing.h>
#include <linux/fs.h>
#include <linux/nvme_ioctl.h>

#include "tool.h"

#ifndef NVME_URING_CMD_UQ_ATTACH
#define NVME_URING_CMD_UQ_ATTACH	_IO('N', 0x90)
#define NVME_URING_CMD_UQ_DETACH	_IO('N', 0x91)
#endif
#ifndef NVME_URING_CMD_IO_UQ
#define NVME_URING_CMD_IO_UQ	_IOWR('N', 0x92, struct nvme_uring_cmd)
#endif

#define NVME_CMD_FLUSH	0x00
#define NVME_CMD_WRITE	0x01
#define NVME_CMD_READ	0x02
#define MAX_XFER	(512 << 10)
/* the ring's fdinfo line counting commands that asked for the queue in vain */
#define FALLBACKS	"  Fallbacks:\t"
#define DEPTH		64

static const char *ng_path, *blk_path;
static int ng_fd, blk_fd;
static unsigned int nsid;
static unsigned int lba;		/* the namespace's LBA size: 512 or 4096 */
static char sysdir[128];	/* /sys/class/nvme/nvmeX */
static char why[256];

static bool fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return false;
}

static long sysfs_read_num(const char *path)
{
	long v = -1;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static bool write_attr(const char *dir, const char *attr, const char *val)
{
	char path[256];
	bool ok;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, attr);
	f = fopen(path, "w");
	if (!f)
		return false;
	ok = fputs(val, f) >= 0;
	return !fclose(f) && ok;
}

/* A number attribute of the controller, -1 when it cannot be read. */
static long sysfs_num(const char *attr)
{
	char path[192];

	snprintf(path, sizeof(path), "%s/%s", sysdir, attr);
	return sysfs_read_num(path);
}

/*
 * The largest command the namespace takes, up to MAX_XFER: the controller's
 * MDTS, cut by the DMA layer's optimal mapping size (128 KiB behind an
 * IOMMU, where nvme-pci lowers max_hw_sectors to what the IOVA cache keeps).
 */
static uint32_t max_xfer(void)
{
	const char *base = strrchr(blk_path, '/');
	char path[192];
	long kb;

	snprintf(path, sizeof(path), "/sys/class/block/%s/queue/max_hw_sectors_kb",
		 base ? base + 1 : blk_path);
	kb = sysfs_read_num(path);
	if (kb <= 0 || kb > MAX_XFER >> 10)
		return MAX_XFER;
	return (uint32_t)kb << 10;
}

/* Until @attr reads @want, for at most @secs seconds. */
static bool sysfs_wait(const char *attr, long want, int secs)
{
	int i;

	for (i = 0; i < secs * 10; i++) {
		if (sysfs_num(attr) == want)
			return true;
		usleep(100000);
	}
	return false;
}

static int ring_setup(struct io_uring *ring, bool iopoll)
{
	unsigned int flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;

	if (iopoll)
		flags |= IORING_SETUP_IOPOLL;
	return io_uring_queue_init(DEPTH, ring, flags);
}

static struct io_uring_sqe *uring_cmd_sqe(struct io_uring *ring, int fd,
					  unsigned int cmd_op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe) {
		fprintf(stderr, "userq-check: submission queue full\n");
		exit(EXIT_FAIL);
	}
	/* The command runs into the second half of the 128-byte SQE. */
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	return sqe;
}

/* Submit what is queued, wait for one CQE: its res (user_data in *ud). */
static int wait_one(struct io_uring *ring, uint64_t *ud)
{
	struct io_uring_cqe *cqe;
	int ret;

	ret = io_uring_submit_and_wait(ring, 1);
	if (ret < 0)
		return ret;
	ret = io_uring_wait_cqe(ring, &cqe);
	if (ret < 0)
		return ret;
	ret = cqe->res;
	if (ud)
		*ud = cqe->user_data;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

/* Attach (or detach) on @ring: the CQE's res. */
static int uq_op(struct io_uring *ring, int fd, unsigned int op, bool fixed)
{
	struct io_uring_sqe *sqe = uring_cmd_sqe(ring, fd, op);

	if (fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	return wait_one(ring, NULL);
}

/*
 * An IOPOLL ring with a queue of ng_fd's controller attached: 0, or -1
 * after a message naming @who.
 */
static int attach_ring(struct io_uring *ring, const char *who)
{
	if (ring_setup(ring, true) ||
	    uq_op(ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		fprintf(stderr, "%s: setup or attach failed\n", who);
		return -1;
	}
	return 0;
}

/*
 * Queue one NVMe Read or Write of @len bytes at byte @off: for the ring's
 * user queue (NVME_URING_CMD_IO_UQ) if @uq, a registered buffer if
 * @buf_index >= 0.
 */
static struct io_uring_sqe *queue_io(struct io_uring *ring, bool write,
				     uint64_t off, void *buf, uint32_t len,
				     bool uq, int buf_index, uint64_t ud)
{
	struct io_uring_sqe *sqe = uring_cmd_sqe(ring, ng_fd, uq ?
						 NVME_URING_CMD_IO_UQ :
						 NVME_URING_CMD_IO);
	struct nvme_uring_cmd *cmd = (struct nvme_uring_cmd *)sqe->cmd;
	uint64_t slba = off / lba;

	cmd->opcode = write ? NVME_CMD_WRITE : NVME_CMD_READ;
	cmd->nsid = nsid;
	cmd->cdw10 = (uint32_t)slba;
	cmd->cdw11 = (uint32_t)(slba >> 32);
	cmd->cdw12 = len / lba - 1;
	cmd->addr = (uintptr_t)buf;
	cmd->data_len = len;
	if (buf_index >= 0) {
		sqe->uring_cmd_flags |= IORING_URING_CMD_FIXED;
		sqe->buf_index = buf_index;
	}
	sqe->user_data = ud;
	return sqe;
}

static int do_io(struct io_uring *ring, bool write, uint64_t off, void *buf,
		 uint32_t len, bool uq, int buf_index)
{
	queue_io(ring, write, off, buf, len, uq, buf_index, 1);
	return wait_one(ring, NULL);
}

static void *xalloc(size_t len)
{
	void *p;

	if (posix_memalign(&p, 4096, len))
		abort();
	return p;
}

static void fill(void *buf, size_t len, uint32_t seed)
{
	uint32_t *p = buf;
	size_t i;

	for (i = 0; i < len / 4; i++)
		p[i] = seed * 2654435761u + (uint32_t)i;
}

/* ---- the cases ---------------------------------------------------- */

/*
 * The ring's fdinfo: the attachment's line and its controller ("nvmeX",
 * the last component of sysdir) when @want, no attachment line otherwise.
 * Returns NULL when it says what it should, else what is wrong.
 */
static FILE *ring_fdinfo(struct io_uring *ring)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ring->ring_fd);
	return fopen(path, "r");
}

static const char *fdinfo_check(struct io_uring *ring, bool want)
{
	char line[256], want_ctrl[64];
	bool att = false, ctrl = false, live = false;
	FILE *f;

	snprintf(want_ctrl, sizeof(want_ctrl), "  Controller:\t%s\n",
		 strrchr(sysdir, '/') + 1);
	f = ring_fdinfo(ring);
	if (!f)
		return "no fdinfo for the ring";
	while (fgets(line, sizeof(line), f)) {
		att |= !strcmp(line, "CmdAttachment:\tnvme-user-queue\n");
		ctrl |= !strcmp(line, want_ctrl);
		live |= !strcmp(line, "  Live:\t1\n");
	}
	fclose(f);
	if (!want)
		return att ? "fdinfo shows an attachment after the detach" : NULL;
	if (!att)
		return "fdinfo has no \"CmdAttachment:\tnvme-user-queue\" line";
	if (!ctrl || !live)
		return "fdinfo does not name the live queue's controller";
	return NULL;
}

static bool case_attach(void)
{
	long base = sysfs_num("user_queues_attached");
	const char *why_fdinfo;
	struct io_uring ring;
	bool ok = false;
	int ret;

	if (ring_setup(&ring, true))
		return fail("ring setup failed");
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	if (ret) {
		fail("attach: %s", strerror(-ret));
		goto out;
	}
	if (sysfs_num("user_queues_attached") != base + 1) {
		fail("user_queues_attached did not count the attach");
		goto out;
	}
	why_fdinfo = fdinfo_check(&ring, true);
	if (why_fdinfo) {
		fail("%s", why_fdinfo);
		goto out;
	}
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	if (ret != -EEXIST) {
		fail("second attach on the same ring: %d, want -EEXIST", ret);
		goto out;
	}
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH, false);
	if (ret) {
		fail("detach: %s", strerror(-ret));
		goto out;
	}
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH, false);
	if (ret != -ENOENT) {
		fail("second detach: %d, want -ENOENT", ret);
		goto out;
	}
	why_fdinfo = fdinfo_check(&ring, false);
	if (why_fdinfo) {
		fail("%s", why_fdinfo);
		goto out;
	}
	ok = sysfs_num("user_queues_attached") == base ||
	     fail("user_queues_attached did not drop after the detach");
out:
	io_uring_queue_exit(&ring);
	return ok;
}

static bool case_not_iopoll(void)
{
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	int ret, ret2;

	if (ring_setup(&ring, false))
		return fail("ring setup failed");
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	io_uring_queue_exit(&ring);
	/* Polling, but 64-byte SQEs and 16-byte CQEs: no NVMe passthrough. */
	if (io_uring_queue_init(DEPTH, &ring, IORING_SETUP_IOPOLL))
		return fail("ring setup failed");
	sqe = io_uring_get_sqe(&ring);
	if (!sqe) {
		io_uring_queue_exit(&ring);
		return fail("no SQE");
	}
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = ng_fd;
	sqe->cmd_op = NVME_URING_CMD_UQ_ATTACH;
	ret2 = wait_one(&ring, NULL);
	io_uring_queue_exit(&ring);
	if (ret != -EINVAL)
		return fail("attach on a ring without IOPOLL: %d, want -EINVAL", ret);
	return ret2 == -EINVAL ||
	       fail("attach on a ring without SQE128/CQE32: %d, want -EINVAL", ret2);
}

static bool case_not_nvme(void)
{
	long base = sysfs_num("user_queues_attached");
	struct io_uring ring;
	int fd, ret, ret2;

	fd = open("/dev/null", O_RDWR);
	if (fd < 0 || ring_setup(&ring, true))
		return fail("setup failed");
	ret = uq_op(&ring, fd, NVME_URING_CMD_UQ_ATTACH, false);
	ret2 = uq_op(&ring, blk_fd, NVME_URING_CMD_UQ_ATTACH, false);
	io_uring_queue_exit(&ring);
	close(fd);
	if (ret != -EOPNOTSUPP)
		return fail("attach on /dev/null: %d, want -EOPNOTSUPP", ret);
	if (ret2 >= 0)
		return fail("attach on the block device %s succeeded", blk_path);
	return sysfs_num("user_queues_attached") == base ||
	       fail("a failed attach took a queue");
}

static bool case_bad_index(void)
{
	struct io_uring ring;
	int ret, ok_ret;

	if (ring_setup(&ring, true) || io_uring_register_files(&ring, &ng_fd, 1))
		return fail("setup failed");
	ret = uq_op(&ring, 5, NVME_URING_CMD_UQ_ATTACH, true);
	ok_ret = uq_op(&ring, 0, NVME_URING_CMD_UQ_ATTACH, true);
	io_uring_queue_exit(&ring);
	if (ret != -EBADF)
		return fail("fixed file index 5 of 1: %d, want -EBADF", ret);
	return !ok_ret || fail("fixed file index 0: %s", strerror(-ok_ret));
}

/* The SQE fields an attach or detach must leave zero, one per try. */
static const char *const reserved_fields[] = {
	"cdw10", "the command area's last byte", "a uring_cmd flag", "addr",
	"len", "buf_index", "file_index",
};

static bool case_reserved(void)
{
	static char fixed_buf[4096] __attribute__((aligned(4096)));
	struct iovec fixed_iov = { fixed_buf, sizeof(fixed_buf) };
	bool ok = true, detach;
	unsigned int i;
	int ret;

	for (i = 0; i < 2 * ARRAY_SIZE(reserved_fields); i++) {
		unsigned int f = i % ARRAY_SIZE(reserved_fields);
		struct io_uring_sqe *sqe;
		struct io_uring ring;

		/* the detaches on a ring that has a queue, or they say -ENOENT */
		detach = i >= ARRAY_SIZE(reserved_fields);
		if (ring_setup(&ring, true))
			return fail("ring setup failed");
		ret = detach ? uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false) : 0;
		if (ret) {
			io_uring_queue_exit(&ring);
			return fail("attach: %s", strerror(-ret));
		}
		sqe = uring_cmd_sqe(&ring, ng_fd, detach ? NVME_URING_CMD_UQ_DETACH :
						       NVME_URING_CMD_UQ_ATTACH);
		switch (f) {
		case 0: ((struct nvme_uring_cmd *)sqe->cmd)->cdw10 = 1; break;
		/* past struct nvme_uring_cmd: the command area is 80 bytes */
		case 1: sqe->cmd[80 - 1] = 1; break;
		/*
		 * IORING_URING_CMD_FIXED is the one uring_cmd flag io_uring
		 * passes on (it refuses the others itself), and only with a
		 * registered buffer at buf_index (-EFAULT otherwise).
		 */
		case 2:
			if (io_uring_register_buffers(&ring, &fixed_iov, 1)) {
				io_uring_queue_exit(&ring);
				return fail("buffer registration failed");
			}
			sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
			break;
		case 3: sqe->addr = 4096; break;
		case 4: sqe->len = 1; break;
		case 5: sqe->buf_index = 1; break;
		case 6: sqe->file_index = 1; break;
		}
		ret = wait_one(&ring, NULL);
		if (ret != -EINVAL)
			ok = fail("%s with %s set: %d, want -EINVAL",
				  detach ? "detach" : "attach", reserved_fields[f], ret);
		/*
		 * Give the queue back now: freeing the ring releases it only
		 * from a work item, and the next attach would find the pool
		 * empty.
		 */
		if (detach || !ret)
			uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH, false);
		io_uring_queue_exit(&ring);
	}
	return ok;
}

static bool case_unprivileged(void)
{
	int status, pipefd[2], ret = 0;
	pid_t pid;

	if (pipe(pipefd))
		return fail("pipe failed");
	pid = fork();
	if (pid == 0) {
		struct io_uring ring;

		/* The fd stays open; only the capability goes. */
		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			ret = -1000;
		else if (ring_setup(&ring, true))
			ret = -1001;
		else
			ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
		if (write(pipefd[1], &ret, sizeof(ret)) != sizeof(ret))
			_exit(1);
		_exit(0);
	}
	close(pipefd[1]);
	if (read(pipefd[0], &ret, sizeof(ret)) != sizeof(ret))
		ret = -1002;
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	return ret == -EPERM ||
	       fail("attach without CAP_SYS_ADMIN: %d, want -EPERM", ret);
}

/*
 * What the child of case_handed_on() got, in the order it tried: a Read on
 * the queue, a Write through a read-only fd as NVME_URING_CMD_IO_UQ and as NVME_URING_CMD_IO, a
 * detach.
 */
struct handed_on {
	int setup, read, write_uq, write, detach;
};

/*
 * The cover letter's security model: root attaches a queue and hands the
 * ring on (here by fork) to a process without privileges, which then uses
 * the queue, but only for what its files allow. Its Read through the
 * read-write fd goes on the user queue; its Write through a read-only fd is
 * refused with -EACCES on both paths, and reaches neither the queue nor the
 * disk; its detach succeeds (it only gives the queue back).
 */
static bool case_handed_on(void)
{
	struct handed_on got = { -1, -1, -1, -1, -1 };
	void *buf = xalloc(4096), *chk = xalloc(4096);
	int status, pipefd[2], ret, ro_fd;
	long cmds, attached = sysfs_num("user_queues_attached");
	struct io_uring ring;
	bool ok = false;
	pid_t pid;

	ro_fd = open(ng_path, O_RDONLY);
	if (ro_fd < 0) {
		fail("open %s read-only: %s", ng_path, strerror(errno));
		goto out;
	}
	if (ring_setup(&ring, true)) {
		fail("ring setup failed");
		goto close_ro;
	}
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	if (ret) {
		fail("attach: %d", ret);
		goto exit_ring;
	}
	/* what the refused write would put there if it went through */
	memset(chk, 0x5a, 4096);
	if (pwrite(blk_fd, chk, 4096, 0) != 4096) {
		fail("pwrite on %s: %s", blk_path, strerror(errno));
		goto detach;
	}
	cmds = sysfs_num("user_queue_cmds");
	if (pipe(pipefd)) {
		fail("pipe failed");
		goto detach;
	}
	pid = fork();
	if (pid == 0) {
		struct io_uring_sqe *sqe;

		got.setup = setresgid(65534, 65534, 65534) ||
			    setresuid(65534, 65534, 65534);
		if (!got.setup) {
			got.read = do_io(&ring, false, 0, buf, 4096, true, -1);
			memset(buf, 0xc3, 4096);
			sqe = queue_io(&ring, true, 0, buf, 4096, true, -1, 1);
			sqe->fd = ro_fd;
			got.write_uq = wait_one(&ring, NULL);
			sqe = queue_io(&ring, true, 0, buf, 4096, false, -1, 1);
			sqe->fd = ro_fd;
			got.write = wait_one(&ring, NULL);
			got.detach = uq_op(&ring, ng_fd,
					   NVME_URING_CMD_UQ_DETACH, false);
		}
		if (write(pipefd[1], &got, sizeof(got)) != sizeof(got))
			_exit(1);
		_exit(0);
	}
	close(pipefd[1]);
	if (read(pipefd[0], &got, sizeof(got)) != sizeof(got))
		got.setup = -1;
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	if (got.setup)
		fail("the child could not drop its privileges");
	else if (got.read)
		fail("unprivileged Read on a handed-on ring: %d, want 0", got.read);
	else if (got.write_uq != -EACCES || got.write != -EACCES)
		fail("unprivileged Write through a read-only fd: %d as IO_UQ, %d as IO, want -EACCES",
		     got.write_uq, got.write);
	else if (got.detach)
		fail("unprivileged detach of a handed-on queue: %d, want 0",
		     got.detach);
	else if (sysfs_num("user_queue_cmds") != cmds + 1)
		fail("%ld commands went on the user queue, want 1 (the Read)",
		     sysfs_num("user_queue_cmds") - cmds);
	else if (pread(blk_fd, buf, 4096, 0) != 4096 || memcmp(buf, chk, 4096))
		fail("a refused Write changed the disk");
	else
		ok = true;
	/*
	 * Not a detach here: the child moved the ring's SQ on, and this
	 * process's liburing state no longer matches it. If the child did not
	 * detach, freeing the ring gives the queue back, from a work item.
	 */
	io_uring_queue_exit(&ring);
	if (!sysfs_wait("user_queues_attached", attached, 5) && ok)
		ok = fail("the handed-on ring's queue was not given back");
	goto close_ro;
detach:
	uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH, false);
exit_ring:
	io_uring_queue_exit(&ring);
close_ro:
	close(ro_fd);
out:
	free(buf);
	free(chk);
	return ok;
}

static bool case_exhaust(void)
{
	long n = sysfs_num("user_queues"), base = sysfs_num("user_queues_attached");
	struct io_uring rings[65];
	bool ok = true;
	long i, made = 0;
	int ret;

	if (n <= 0 || n > 64)
		return fail("user_queues is %ld", n);
	for (i = 0; i < n + 1 - base && ok; i++) {
		if (ring_setup(&rings[i], true)) {
			ok = fail("ring setup failed");
			break;
		}
		made++;
		ret = uq_op(&rings[i], ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
		if (i < n - base && ret)
			ok = fail("attach %ld of %ld: %s", i + 1, n, strerror(-ret));
		else if (i == n - base && ret != -EBUSY)
			ok = fail("attach with every queue taken: %d, want -EBUSY", ret);
	}
	/* A ring that owns a queue is told so, pool empty or not. */
	if (ok && made > 1) {
		ret = uq_op(&rings[0], ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
		if (ret != -EEXIST)
			ok = fail("second attach of a ring, every queue taken: %d, want -EEXIST",
				  ret);
	}
	for (i = 0; i < made; i++)
		io_uring_queue_exit(&rings[i]);
	/* Ring teardown runs in a workqueue: give it a moment. */
	if (ok && !sysfs_wait("user_queues_attached", base, 10))
		ok = fail("queues still attached 10 s after their rings closed");
	return ok;
}

static bool case_no_queue(void)
{
	long cmds = sysfs_num("user_queue_cmds");
	void *w = xalloc(65536), *r = xalloc(65536);
	struct io_uring ring;
	bool ok = false;
	int ret;

	fill(w, 65536, 11);
	if (ring_setup(&ring, true)) {
		fail("ring setup failed");
		goto out;
	}
	ret = do_io(&ring, true, 1 << 20, w, 65536, true, -1);
	if (!ret)
		ret = do_io(&ring, false, 1 << 20, r, 65536, true, -1);
	io_uring_queue_exit(&ring);
	if (ret)
		fail("NVME_URING_CMD_IO_UQ with no queue attached: %d", ret);
	else if (memcmp(w, r, 65536))
		fail("data read back differs");
	else if (sysfs_num("user_queue_cmds") != cmds)
		fail("commands of a ring without a queue went on a user queue");
	else
		ok = true;
out:
	free(w);
	free(r);
	return ok;
}

/*
 * Free a ring whose queue mapped registered buffers, and wait for the queue
 * to be back in the pool (user_queues_attached at @attached): the ring goes
 * after io_uring_queue_exit() returns, and its buffers stay mapped for the
 * controller until then. A later case mapping the same memory again (for a
 * read, on the normal path) would overlap that mapping, which DMA API
 * debugging reports; the buffers' memory is freed only after this.
 */
static bool ring_exit_wait(struct io_uring *ring, long attached)
{
	io_uring_queue_exit(ring);
	return sysfs_wait("user_queues_attached", attached, 20) ||
	       fail("queue still attached 20 s after the ring's exit");
}

/* A transfer of @len bytes from @boff bytes into the buffer. */
struct xfer_shape {
	uint32_t len, boff;
};

/* Data both ways between the user queue and the block device. */
static bool xfer_one(struct io_uring *ring, uint32_t len, int buf_index,
		     void *buf, uint64_t off, uint32_t seed)
{
	void *chk = xalloc(len);
	bool ok = false;
	int ret;

	fill(buf, len, seed);
	ret = do_io(ring, true, off, buf, len, true, buf_index);
	if (ret) {
		fail("%u-byte write on the user queue: %d", len, ret);
		goto out;
	}
	if (pread(blk_fd, chk, len, off) != (ssize_t)len ||
	    memcmp(chk, buf, len)) {
		fail("%u bytes written on the user queue read back wrong through %s",
		     len, blk_path);
		goto out;
	}
	fill(chk, len, seed + 1);
	if (pwrite(blk_fd, chk, len, off) != (ssize_t)len) {
		fail("pwrite on %s: %s", blk_path, strerror(errno));
		goto out;
	}
	memset(buf, 0xa5, len);
	ret = do_io(ring, false, off, buf, len, true, buf_index);
	if (ret)
		fail("%u-byte read on the user queue: %d", len, ret);
	else if (memcmp(chk, buf, len))
		fail("%u bytes written through %s read back wrong on the user queue",
		     len, blk_path);
	else
		ok = true;
out:
	free(chk);
	return ok;
}

/*
 * xfer_one() for each shape whose length is whole LBAs, shape i at
 * (@first_mib + i) MiB on the disk: how many ran, or -1 on a failure.
 */
static int xfer_shapes(struct io_uring *ring, const struct xfer_shape *x,
		       unsigned int n, int buf_index, char *buf,
		       unsigned int first_mib, uint32_t seed)
{
	unsigned int i;
	int done = 0;

	for (i = 0; i < n; i++) {
		/* 8.5 KiB is no whole number of 4 KiB LBAs */
		if (x[i].len % lba)
			continue;
		if (!xfer_one(ring, x[i].len, buf_index, buf + x[i].boff,
			      (uint64_t)(first_mib + i) << 20, seed + i * 4))
			return -1;
		done++;
	}
	return done;
}

static bool case_xfer(void)
{
	/*
	 * One page (PRP1), two (PRP2: 8 KiB, or 4 KiB across a page
	 * boundary), a PRP list (64 KiB, 8.5 KiB) and the largest the queue
	 * takes.
	 */
	const uint32_t max = max_xfer();
	const struct xfer_shape sizes[] = {
		{ 4096, 0 }, { 8192, 0 }, { 4096, 512 }, { 65536, 0 },
		{ 8192 + 512, 0 }, { max - 4096, 2048 }, { max, 0 },
	};
	long cmds = sysfs_num("user_queue_cmds"), n = 0;
	long base = sysfs_num("user_queues_attached");
	struct io_uring ring;
	struct iovec iov;
	unsigned int fixed;
	bool ok = true;
	int ret;

	iov.iov_len = max;
	iov.iov_base = xalloc(max);	/* every size above fits */
	if (ring_setup(&ring, true) || io_uring_register_buffers(&ring, &iov, 1))
		return fail("ring setup failed");
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	if (ret) {
		ok = fail("attach: %s", strerror(-ret));
		goto out;
	}
	for (fixed = 0; fixed < 2 && ok; fixed++) {
		int done = xfer_shapes(&ring, sizes, ARRAY_SIZE(sizes),
				       fixed ? 0 : -1, iov.iov_base, 2,
				       fixed * 2);

		ok = done >= 0;
		n += done;
	}
	if (ok && sysfs_num("user_queue_cmds") < cmds + 2 * n)
		ok = fail("the commands did not go on the user queue");
out:
	if (!ring_exit_wait(&ring, base))
		ok = false;
	free(iov.iov_base);
	return ok;
}

/* A number line of the ring's fdinfo ("  MappedBufs:\t2"), or -1. */
static long fdinfo_num(struct io_uring *ring, const char *key)
{
	FILE *f = ring_fdinfo(ring);
	size_t klen = strlen(key);
	char line[256];
	long n = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen))
			n = strtol(line + klen, NULL, 10);
	fclose(f);
	return n;
}

#define MAPPED_BUF_LEN	(64 * 1024)

/* Transfers at offsets of a registered buffer that cross its pages. */
static bool mapped_xfers(struct io_uring *ring, int buf_index, char *buf,
			 uint32_t seed)
{
	/* within a page, across one, two pages, a PRP list, the whole */
	static const struct xfer_shape x[] = {
		{ 4096, 0 }, { 4096, 2048 }, { 8192, 4096 }, { 12288, 512 },
		{ 32768, 8192 + 1024 }, { MAPPED_BUF_LEN, 0 },
	};

	return xfer_shapes(ring, x, ARRAY_SIZE(x), buf_index, buf, 12,
			   seed) >= 0;
}

static bool mapped_bufs_are(struct io_uring *ring, long want,
			    const char *when)
{
	long n = fdinfo_num(ring, "  MappedBufs:\t");

	return n == want ||
	       fail("%s: fdinfo says %ld mapped buffers, want %ld", when, n,
		    want);
}

#define NVME_PARAMS	"/sys/module/nvme/parameters"
#define MAP_ONCE_PARAM	NVME_PARAMS "/uq_map_once"

/* Set nvme's uq_map_once; returns the value it had, or -1. */
static long set_map_once(long mode)
{
	long old = sysfs_read_num(MAP_ONCE_PARAM);
	char v[24];

	snprintf(v, sizeof(v), "%ld", mode);
	return old >= 0 && write_attr(NVME_PARAMS, "uq_map_once", v) ? old : -1;
}

static bool mapped_bufs_run(void)
{
	struct iovec iov[2] = {
		{ xalloc(MAPPED_BUF_LEN), MAPPED_BUF_LEN },
		{ xalloc(4096), 4096 },
	};
	struct iovec upd = { xalloc(MAPPED_BUF_LEN), MAPPED_BUF_LEN };
	__u64 tags[2] = { 0, 0 };
	long cmds = sysfs_num("user_queue_cmds");
	long base = sysfs_num("user_queues_attached");
	struct io_uring ring;
	bool ok = false;
	int ret;

	if (ring_setup(&ring, true) ||
	    io_uring_register_buffers_tags(&ring, iov, tags, 2) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		fail("setup, registration or attach failed");
		goto out;
	}
	if (!mapped_bufs_are(&ring, 0, "after the attach") ||
	    !mapped_xfers(&ring, 0, iov[0].iov_base, 100) ||
	    !xfer_one(&ring, 4096, 1, iov[1].iov_base, 20 << 20, 130) ||
	    !mapped_bufs_are(&ring, 2, "after I/O on two buffers"))
		goto out;
	/*
	 * A new buffer at index 0; the old one keeps other data, which a
	 * stale mapping would write.
	 */
	memset(iov[0].iov_base, 0x5a, MAPPED_BUF_LEN);
	ret = io_uring_register_buffers_update_tag(&ring, 0, &upd, tags, 1);
	if (ret != 1) {
		fail("buffer update: %d", ret);
		goto out;
	}
	if (!mapped_xfers(&ring, 0, upd.iov_base, 200) ||
	    !mapped_bufs_are(&ring, 2, "after the update and I/O on the new buffer"))
		goto out;
	ret = io_uring_unregister_buffers(&ring);
	if (ret) {
		fail("unregister: %d", ret);
		goto out;
	}
	if (!mapped_bufs_are(&ring, 0, "after the unregister"))
		goto out;
	if (io_uring_register_buffers(&ring, iov, 1) ||
	    !mapped_xfers(&ring, 0, iov[0].iov_base, 300) ||
	    !mapped_bufs_are(&ring, 1, "after registering again"))
		goto out;
	/* detach and attach again: the queue comes back with nothing mapped */
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH, false);
	if (ret) {
		fail("detach: %s", strerror(-ret));
		goto out;
	}
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	if (ret) {
		fail("attach again: %s", strerror(-ret));
		goto out;
	}
	if (!mapped_bufs_are(&ring, 0, "after detach and attach") ||
	    !mapped_xfers(&ring, 0, iov[0].iov_base, 400))
		goto out;
	ok = sysfs_num("user_queue_cmds") >= cmds + 2 * 4 * 6 ||
	     fail("the commands did not go on the user queue");
out:
	if (!ring_exit_wait(&ring, base))
		ok = false;
	free(iov[0].iov_base);
	free(iov[1].iov_base);
	free(upd.iov_base);
	return ok;
}

/*
 * Registered buffers mapped once for the controller: data right at every
 * offset, and the mapping follows the buffer: an update of its index,
 * an unregister, a detach. A mapping kept past its buffer would show in
 * the count, or, when the new buffer's io_uring object reuses the old
 * one's address, as the old buffer's data on the disk. Run with
 * uq_map_once=2, so that the test kernel, with its IOMMU and DMA API
 * debugging, maps them once too (it would not at the default, 1): the
 * case has no command that falls back to the normal path, which is what
 * makes mode 2 unfit for such a kernel otherwise.
 */
static bool case_mapped_bufs(void)
{
	long mode = set_map_once(2);
	bool ok;

	if (mode < 0)
		return fail("cannot set " MAP_ONCE_PARAM);
	ok = mapped_bufs_run();
	if (set_map_once(mode) < 0)
		ok = fail("cannot set " MAP_ONCE_PARAM " back to %ld", mode);
	return ok;
}

/* Shapes the queue does not take still work, on the normal path. */
static bool case_fallback(void)
{
	long cmds;
	char *buf = xalloc(65536 + 4096), *chk = xalloc(65536);
	struct io_uring_sqe *sqe;
	struct nvme_uring_cmd *cmd;
	struct io_uring ring;
	struct iovec iov;
	bool ok = false;
	int ret;

	if (ring_setup(&ring, true) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		fail("setup or attach failed");
		goto out;
	}
	cmds = sysfs_num("user_queue_cmds");
	/* vectored */
	fill(buf, 65536, 21);
	iov.iov_base = buf;
	iov.iov_len = 65536;
	sqe = queue_io(&ring, true, 6 << 20, buf, 65536, true, -1, 1);
	sqe->cmd_op = NVME_URING_CMD_IO_VEC;
	cmd = (struct nvme_uring_cmd *)sqe->cmd;
	cmd->addr = (uintptr_t)&iov;
	cmd->data_len = 1;
	ret = wait_one(&ring, NULL);
	if (ret) {
		fail("vectored write on a ring holding a queue: %d", ret);
		goto out;
	}
	/* a buffer 2 bytes past a dword boundary */
	ret = do_io(&ring, false, 6 << 20, buf + 4098, 65536, true, -1);
	if (ret) {
		fail("NVME_URING_CMD_IO_UQ read into a misaligned buffer: %d", ret);
		goto out;
	}
	if (pread(blk_fd, chk, 65536, 6 << 20) != 65536 ||
	    memcmp(chk, buf + 4098, 65536)) {
		fail("data of the fallback commands differs");
		goto out;
	}
	ok = sysfs_num("user_queue_cmds") == cmds ||
	     fail("a vectored or misaligned command went on the user queue");
out:
	io_uring_queue_exit(&ring);
	free(buf);
	free(chk);
	return ok;
}

/*
 * NVME_URING_CMD_IO_UQ never changes a command's outcome: each command
 * below is sent once with it and once as NVME_URING_CMD_IO, on a ring with
 * a queue attached, and both must end alike. Those the queue does not take
 * (the documentation's list) must leave user_queue_cmds as it was; a Flush
 * goes on the queue, and so do a Read and a Write issued from io-wq (the
 * driver takes the ring's lock for them).
 */
struct same_cmd {
	const char *what;
	uint8_t opcode;
	bool on_queue;		/* the user queue takes it */
	bool bad_nsid;
	bool async;		/* IOSQE_ASYNC: issued from io-wq */
	uint32_t data_lbas;	/* data_len: this many LBAs */
	uint32_t data_bytes;	/* plus this many bytes */
	uint32_t cdw12;
};

static const struct same_cmd same_cmds[] = {
	{ "Read with a wrong NSID", NVME_CMD_READ, false, true, false, 1, 0, 0 },
	{ "Read with data_len != (NLB + 1) blocks", NVME_CMD_READ, false, false, false, 2, 0, 0 },
	{ "Read from io-wq (IOSQE_ASYNC)", NVME_CMD_READ, true, false, true, 1, 0, 0 },
	{ "Write from io-wq (IOSQE_ASYNC)", NVME_CMD_WRITE, true, false, true, 1, 0, 0 },
	{ "Write Zeroes", 0x08, false, false, false, 0, 0, 7 },
	{ "Compare", 0x05, false, false, false, 1, 0, 0 },
	{ "Dataset Management", 0x09, false, false, false, 0, 16, 0 },
	{ "Flush", 0x00, true, false, false, 0, 0, 0 },
};

static int same_one(struct io_uring *ring, const struct same_cmd *c, void *buf,
		    bool uq)
{
	struct io_uring_sqe *sqe = uring_cmd_sqe(ring, ng_fd, NVME_URING_CMD_IO);
	struct nvme_uring_cmd *cmd = (struct nvme_uring_cmd *)sqe->cmd;
	/* 7 MiB in: past what the other cases use */
	uint64_t slba = (7 << 20) / lba;
	uint32_t data_len = c->data_lbas * lba + c->data_bytes;

	cmd->opcode = c->opcode;
	cmd->nsid = c->bad_nsid ? nsid + 100 : nsid;
	if (c->opcode != 0x00 && c->opcode != 0x09) {
		cmd->cdw10 = (uint32_t)slba;
		cmd->cdw11 = (uint32_t)(slba >> 32);
		cmd->cdw12 = c->cdw12;
	}
	if (c->opcode == 0x09) {
		/* one range of 8 blocks at slba, deallocate (AD) */
		uint32_t *range = buf;

		memset(range, 0, 16);
		range[1] = 8;
		range[2] = (uint32_t)slba;
		range[3] = (uint32_t)(slba >> 32);
		cmd->cdw11 = 1 << 2;
	}
	if (data_len) {
		cmd->addr = (uintptr_t)buf;
		cmd->data_len = data_len;
	}
	if (c->async)
		sqe->flags |= IOSQE_ASYNC;
	if (uq)
		sqe->cmd_op = NVME_URING_CMD_IO_UQ;
	return wait_one(ring, NULL);
}

static bool case_same_result(void)
{
	void *buf = xalloc(2 * 4096);	/* two LBAs of 4 KiB at most */
	struct io_uring ring;
	bool ok = true;
	unsigned int i;

	memset(buf, 0, 2 * 4096);
	if (ring_setup(&ring, true) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		free(buf);
		return fail("setup or attach failed");
	}
	for (i = 0; i < ARRAY_SIZE(same_cmds); i++) {
		const struct same_cmd *c = &same_cmds[i];
		long cmds = sysfs_num("user_queue_cmds");
		long fallbacks = fdinfo_num(&ring, FALLBACKS);
		/* refused before the queue is looked at, as on the normal path */
		long want_fb = !c->on_queue && !c->bad_nsid;
		int with, without;

		without = same_one(&ring, c, buf, false);
		with = same_one(&ring, c, buf, true);
		if (with != without)
			ok = fail("%s: %d as IO_UQ, %d as IO", c->what, with, without);
		if (sysfs_num("user_queue_cmds") - cmds != (c->on_queue ? 1 : 0))
			ok = fail("%s: %ld commands on the user queue, want %d", c->what,
				  sysfs_num("user_queue_cmds") - cmds, c->on_queue ? 1 : 0);
		if (fdinfo_num(&ring, FALLBACKS) - fallbacks != want_fb)
			ok = fail("%s: fdinfo counts %ld fallbacks, want %ld", c->what,
				  fdinfo_num(&ring, FALLBACKS) - fallbacks, want_fb);
		fprintf(stderr, "  %s: %d both ways\n", c->what, with);
	}
	io_uring_queue_exit(&ring);
	free(buf);
	return ok;
}

/*
 * More reads in flight than the queue has slots (io_queue_depth - 1, as the
 * controller's other I/O queues): those past the last slot take the normal
 * path, as NVME_URING_CMD_IO_UQ is advisory, and every read returns its own block.
 */
static bool case_full_queue(void)
{
	long cmds, on_uq, depth, fallbacks;
	struct io_uring ring;
	char *bufs, *chk;
	bool ok = false;
	unsigned int i, n;
	int ret;

	depth = sysfs_read_num("/sys/module/nvme/parameters/io_queue_depth");
	if (depth < 2 || depth > 4000)
		return fail("nvme.io_queue_depth is %ld, this case needs 2 to 4000",
			    depth);
	n = depth + 64;
	bufs = xalloc((size_t)n * lba);
	chk = xalloc((size_t)n * lba);
	for (i = 0; i < n; i++)
		fill(chk + (size_t)i * lba, lba, 7000 + i);
	if (pwrite(blk_fd, chk, (size_t)n * lba, 0) != (ssize_t)n * lba) {
		fail("pwrite on %s: %s", blk_path, strerror(errno));
		goto out;
	}
	memset(bufs, 0, (size_t)n * lba);
	ret = io_uring_queue_init(n, &ring, IORING_SETUP_SQE128 |
				  IORING_SETUP_CQE32 | IORING_SETUP_IOPOLL);
	if (ret) {
		fail("a ring of %u entries: %d", n, ret);
		goto out;
	}
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	if (ret) {
		fail("attach: %d", ret);
		goto exit_ring;
	}
	cmds = sysfs_num("user_queue_cmds");
	for (i = 0; i < n; i++)
		queue_io(&ring, false, (uint64_t)i * lba, bufs + (size_t)i * lba,
			 lba, true, -1, i + 1);
	ret = io_uring_submit(&ring);
	if (ret != (int)n) {
		fail("submitted %d of %u reads", ret, n);
		goto detach;
	}
	for (i = 0; i < n; i++) {
		struct io_uring_cqe *cqe;

		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret) {
			fail("waiting for read %u of %u: %d", i + 1, n, ret);
			goto detach;
		}
		ret = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		if (ret) {
			fail("a read with the queue full: %d, want 0", ret);
			goto detach;
		}
	}
	on_uq = sysfs_num("user_queue_cmds") - cmds;
	fallbacks = fdinfo_num(&ring, FALLBACKS);
	fprintf(stderr, "  full-queue: %ld of %u reads on the user queue, %ld fallbacks\n",
		on_uq, n, fallbacks);
	if (on_uq <= 0 || on_uq >= n)
		fail("%ld of %u reads went on the user queue, want some but not all",
		     on_uq, n);
	/* (more if a retry from io-wq found the queue full again) */
	else if (fallbacks < n - on_uq)
		fail("fdinfo counts %ld fallbacks, want the %ld reads off the queue",
		     fallbacks, n - on_uq);
	else if (memcmp(bufs, chk, (size_t)n * lba))
		fail("reads with the queue full returned wrong data");
	else
		ok = true;
detach:
	uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH, false);
exit_ring:
	io_uring_queue_exit(&ring);
out:
	free(bufs);
	free(chk);
	return ok;
}

/* An error status from the controller reaches the CQE. */
static bool case_device_error(void)
{
	uint64_t size;
	void *buf = xalloc(4096);
	struct io_uring ring;
	bool ok = false;
	int ret;

	if (ioctl(blk_fd, BLKGETSIZE64, &size) ||
	    ring_setup(&ring, true) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		free(buf);
		return fail("setup or attach failed");
	}
	/* Past the end: LBA Out of Range (SCT 0, SC 0x80). */
	ret = do_io(&ring, false, size, buf, 4096, true, -1);
	if ((ret & 0x7ff) == 0x80)
		ok = true;
	else
		fail("read past the end: %d, want NVMe status 0x80", ret);
	io_uring_queue_exit(&ring);
	free(buf);
	return ok;
}

/* A batch of 32 in one submission, reaped in one go, data verified. */
static bool case_batch(void)
{
	char *buf = xalloc(32 * 4096), *chk = xalloc(32 * 4096);
	long cmds;
	struct io_uring ring;
	bool ok = false;
	int i, ret = 0;

	if (ring_setup(&ring, true) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		fail("setup or attach failed");
		goto out;
	}
	cmds = sysfs_num("user_queue_cmds");
	fill(buf, 32 * 4096, 31);
	for (i = 0; i < 32; i++)
		queue_io(&ring, true, (7 << 20) + i * 4096, buf + i * 4096,
			 4096, true, -1, i);
	for (i = 0; i < 32 && !ret; i++)
		ret = wait_one(&ring, NULL);
	if (ret) {
		fail("batched write: %d", ret);
		goto out;
	}
	if (pread(blk_fd, chk, 32 * 4096, 7 << 20) != 32 * 4096 ||
	    memcmp(chk, buf, 32 * 4096)) {
		fail("batched writes read back wrong");
		goto out;
	}
	ok = sysfs_num("user_queue_cmds") >= cmds + 32 ||
	     fail("the batch did not go on the user queue");
out:
	io_uring_queue_exit(&ring);
	free(buf);
	free(chk);
	return ok;
}

/*
 * Threads sharing a ring: one submits, three others only poll
 * (io_uring_enter() with GETEVENTS, concurrently), so that the commands
 * one task put on the queue are reaped by the polls of others, while more
 * are submitted. Every command completes once, without error, on the
 * queue, and the data reads back right.
 */
#define THREADS_POLLERS	3
#define THREADS_ROUNDS	48
#define THREADS_BATCH	16

static volatile int threads_stop;

static void *poller(void *arg)
{
	struct io_uring *ring = arg;
	long ret = 0;

	while (!threads_stop) {
		ret = io_uring_enter(ring->ring_fd, 0, 1,
				     IORING_ENTER_GETEVENTS, NULL);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN)
			break;
		ret = 0;
	}
	return (void *)ret;
}

static bool case_threads(void)
{
	size_t len = THREADS_BATCH * 4096;
	char *buf = xalloc(len), *chk = xalloc(len);
	bool seen[THREADS_BATCH], ok = false;
	pthread_t tid[THREADS_POLLERS];
	int i, r = 0, started = 0, bad = 0;
	struct io_uring ring;
	time_t deadline;
	void *res;
	long cmds;

	threads_stop = 0;
	if (ring_setup(&ring, true) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		fail("setup or attach failed");
		goto out;
	}
	cmds = sysfs_num("user_queue_cmds");
	for (i = 0; i < THREADS_POLLERS; i++) {
		if (pthread_create(&tid[i], NULL, poller, &ring))
			break;
		started++;
	}
	if (started < THREADS_POLLERS) {
		fail("pthread_create failed");
		goto stop;
	}
	for (r = 0; r < THREADS_ROUNDS && !bad; r++) {
		int got = 0;

		fill(buf, len, 1000 + r);
		memset(seen, 0, sizeof(seen));
		for (i = 0; i < THREADS_BATCH; i++)
			queue_io(&ring, true, (6 << 20) + i * 4096,
				 buf + i * 4096, 4096, true, -1, i);
		if (io_uring_submit(&ring) != THREADS_BATCH) {
			fail("round %d: submit failed", r);
			goto stop;
		}
		/*
		 * Only the pollers enter the kernel for completions (but
		 * for the one pass io_uring_submit() makes on an IOPOLL
		 * ring): the CQ ring is read directly, as io_uring_peek_cqe()
		 * would enter to poll when it is empty. 30 s without a CQE
		 * is a command lost, or polls that reap only for the task
		 * that submitted.
		 */
		deadline = time(NULL) + 30;
		while (got < THREADS_BATCH && !bad) {
			struct io_uring_cqe *cqe;

			if (!io_uring_cq_ready(&ring) ||
			    io_uring_peek_cqe(&ring, &cqe)) {
				if (time(NULL) > deadline) {
					fail("round %d: %d of %d writes not completed in 30 s",
					     r, THREADS_BATCH - got, THREADS_BATCH);
					bad = 1;
				}
				sched_yield();
				continue;
			}
			if (cqe->user_data >= THREADS_BATCH ||
			    seen[cqe->user_data]) {
				fail("round %d: CQE %llu unknown or seen twice",
				     r, (unsigned long long)cqe->user_data);
				bad = 1;
			} else if (cqe->res) {
				fail("round %d: write %llu: %d", r,
				     (unsigned long long)cqe->user_data,
				     cqe->res);
				bad = 1;
			} else {
				seen[cqe->user_data] = true;
			}
			io_uring_cqe_seen(&ring, cqe);
			got++;
		}
	}
stop:
	threads_stop = 1;
	for (i = 0; i < started; i++) {
		pthread_join(tid[i], &res);
		if (res && !bad) {
			fail("a poller's io_uring_enter(): %ld", (long)res);
			bad = 1;
		}
	}
	if (bad || started < THREADS_POLLERS || r < THREADS_ROUNDS)
		goto out;
	if (pread(blk_fd, chk, len, 6 << 20) != (ssize_t)len ||
	    memcmp(chk, buf, len)) {
		fail("the last round reads back wrong");
		goto out;
	}
	ok = sysfs_num("user_queue_cmds") >=
		cmds + THREADS_ROUNDS * THREADS_BATCH ||
	     fail("the writes did not go on the user queue");
out:
	io_uring_queue_exit(&ring);
	free(buf);
	free(chk);
	return ok;
}

/* Detach with commands in flight: they complete, then the queue frees. */
static bool case_detach_inflight(void)
{
	long base = sysfs_num("user_queues_attached"), cmds;
	char *buf = xalloc(32 * 65536);
	struct io_uring ring;
	uint64_t ud;
	bool ok = false, detached = false;
	int i, ret, seen = 0;

	if (ring_setup(&ring, true) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false)) {
		fail("setup or attach failed");
		goto out;
	}
	cmds = sysfs_num("user_queue_cmds");
	for (i = 0; i < 32; i++)
		queue_io(&ring, false, (uint64_t)i * 65536, buf + i * 65536,
			 65536, true, -1, i);
	uring_cmd_sqe(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH)->user_data = 100;
	if (io_uring_submit(&ring) != 33) {
		fail("submit failed");
		goto out;
	}
	while (seen < 33) {
		ret = wait_one(&ring, &ud);
		seen++;
		if (ud == 100) {
			if (ret) {
				fail("detach with reads in flight: %d", ret);
				goto out;
			}
			detached = true;
		} else if (ret) {
			fail("read %lu after the detach: %d", (unsigned long)ud, ret);
			goto out;
		}
	}
	if (!detached || sysfs_num("user_queue_cmds") < cmds + 32) {
		fail("the reads did not go on the user queue");
		goto out;
	}
	if (!sysfs_wait("user_queues_attached", base, 5)) {
		fail("queue still attached after its commands completed");
		goto out;
	}
	/* Detached: NVME_URING_CMD_IO_UQ no longer finds a queue. */
	cmds = sysfs_num("user_queue_cmds");
	ret = do_io(&ring, false, 0, buf, 4096, true, -1);
	ok = (!ret && sysfs_num("user_queue_cmds") == cmds) ||
	     fail("I/O after the detach: %d, or it used the queue", ret);
out:
	io_uring_queue_exit(&ring);
	free(buf);
	return ok;
}

/* The ring's task exits with commands in flight. */
static bool case_exit_inflight(void)
{
	long base = sysfs_num("user_queues_attached");
	int status;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		char *buf = xalloc(64 * 65536);
		struct io_uring ring;
		int i;

		if (ring_setup(&ring, true) ||
		    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false))
			_exit(3);
		for (i = 0; i < 63; i++)
			queue_io(&ring, false, (uint64_t)i * 65536,
				 buf + i * 65536, 65536, true, -1, i);
		io_uring_submit(&ring);
		_exit(0);	/* no reaping, no ring exit of its own */
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return fail("child failed to attach or submit");
	return sysfs_wait("user_queues_attached", base, 20) ||
	       fail("queue still attached 20 s after its ring's task exited");
}

/* Write @val to @attr of the debugfs directory @dir. */

/* The namespace's fault_inject attributes back to their defaults. */
static void inject_off(const char *dir)
{
	write_attr(dir, "probability", "0");
	write_attr(dir, "times", "1");
	write_attr(dir, "status", "0x1");
	write_attr(dir, "dont_retry", "0");
	write_attr(dir, "verbose", "2");
}

/*
 * The namespace's injected status reaches the CQE on the user queue, as it
 * does on the normal path, and stops when its count is used up.
 * Unrecovered Read Error (SCT 2, SC 0x81) with DNR.
 */
#define INJECTED	(0x4000 | 0x281)
static bool case_inject(void)
{
	const char *base = strrchr(blk_path, '/');
	void *w = xalloc(4096), *r = xalloc(4096);
	struct io_uring ring;
	char dir[128];
	long cmds;
	bool ok = false;
	int uq_ret, normal_ret, after_ret;

	snprintf(dir, sizeof(dir), "/sys/kernel/debug/%s/fault_inject",
		 base ? base + 1 : blk_path);
	if (access(dir, W_OK)) {
		free(w);
		free(r);
		return fail("no %s: needs debugfs and CONFIG_FAULT_INJECTION_DEBUG_FS",
			    dir);
	}
	fill(w, 4096, 41);
	if (ring_setup(&ring, true) ||
	    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false) ||
	    do_io(&ring, true, 6 << 20, w, 4096, true, -1)) {
		fail("setup, attach or the first write failed");
		goto out;
	}
	/* Two failures: one on the user queue, one on the normal path. */
	if (!write_attr(dir, "status", "0x281") ||
	    !write_attr(dir, "dont_retry", "1") ||
	    !write_attr(dir, "verbose", "0") ||
	    !write_attr(dir, "interval", "1") ||
	    !write_attr(dir, "times", "2") ||
	    !write_attr(dir, "probability", "100")) {
		fail("cannot configure %s", dir);
		goto out;
	}
	cmds = sysfs_num("user_queue_cmds");
	uq_ret = do_io(&ring, false, 6 << 20, r, 4096, true, -1);
	if (sysfs_num("user_queue_cmds") != cmds + 1) {
		fail("the IO_UQ read did not go on the user queue");
		goto out;
	}
	normal_ret = do_io(&ring, false, 6 << 20, r, 4096, false, -1);
	memset(r, 0, 4096);
	after_ret = do_io(&ring, false, 6 << 20, r, 4096, true, -1);
	if (uq_ret != INJECTED)
		fail("user queue read: %#x, want the injected %#x", uq_ret, INJECTED);
	else if (normal_ret != INJECTED)
		fail("normal path read: %#x, want the injected %#x", normal_ret,
		     INJECTED);
	else if (after_ret || memcmp(w, r, 4096))
		fail("read after the injections: %d, or wrong data", after_ret);
	else
		ok = true;
out:
	inject_off(dir);
	io_uring_queue_exit(&ring);
	free(w);
	free(r);
	return ok;
}

/*
 * Attach on a fresh ring, retrying while closed rings still give their
 * queues back from a workqueue.
 */
static int attach_retry(struct io_uring *ring, int fd, bool fixed)
{
	int i, ret = -EBUSY;

	for (i = 0; i < 100 && ret == -EBUSY; i++) {
		ret = uq_op(ring, fd, NVME_URING_CMD_UQ_ATTACH, fixed);
		if (ret == -EBUSY)
			usleep(50000);
	}
	return ret;
}

#define LOOPS	64
/*
 * Open, attach, I/O, detach (or not) and close, over and over, in every
 * order a ring can end: explicit detach, ring exit with the queue
 * attached, ring exit with a read in flight; plain and registered files
 * and buffers, in sizes that take the inline page array, an allocated
 * one and a PRP list; and attach/detach on one ring. Run under kmemleak,
 * a leak of any of them shows.
 */
static bool case_loop(void)
{
	static const uint32_t sizes[] = { 4096, 12288, 65536 };
	long base = sysfs_num("user_queues_attached");
	long cmds = sysfs_num("user_queue_cmds");
	char *buf = xalloc(2 * 65536);
	struct iovec iov = { buf, 2 * 65536 };
	struct io_uring ring;
	bool ok = false;
	int i, fd, ret;

	for (i = 0; i < LOOPS; i++) {
		bool fixed = i & 1;
		uint32_t len = sizes[i % ARRAY_SIZE(sizes)];

		fd = open(ng_path, O_RDWR);
		if (fd < 0 || ring_setup(&ring, true)) {
			fail("open or ring setup %d failed", i);
			goto out;
		}
		if (fixed && (io_uring_register_files(&ring, &fd, 1) ||
			      io_uring_register_buffers(&ring, &iov, 1))) {
			fail("file or buffer registration %d failed", i);
			goto out_ring;
		}
		ret = attach_retry(&ring, fixed ? 0 : fd, fixed);
		if (ret) {
			fail("attach %d: %s", i, strerror(-ret));
			goto out_ring;
		}
		/* through ng_fd: the attach's file may be another open */
		ret = do_io(&ring, i & 2, 5 << 20, buf, len, true,
			    fixed ? 0 : -1);
		if (ret) {
			fail("I/O %d: %d", i, ret);
			goto out_ring;
		}
		switch (i % 3) {
		case 0:
			ret = uq_op(&ring, fixed ? 0 : fd, NVME_URING_CMD_UQ_DETACH,
				    fixed);
			if (ret) {
				fail("detach %d: %s", i, strerror(-ret));
				goto out_ring;
			}
			break;
		case 1:
			/* exit with a read in flight */
			queue_io(&ring, false, 5 << 20, buf + 65536, len, true,
				 fixed ? 0 : -1, 2);
			io_uring_submit(&ring);
			break;
		}
		io_uring_queue_exit(&ring);
		close(fd);
	}
	if (ring_setup(&ring, true)) {
		fail("ring setup failed");
		goto out;
	}
	for (i = 0; i < LOOPS; i++) {
		ret = attach_retry(&ring, ng_fd, false);
		if (!ret)
			ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_DETACH, false);
		if (ret) {
			fail("attach/detach %d on one ring: %s", i, strerror(-ret));
			io_uring_queue_exit(&ring);
			goto out;
		}
	}
	io_uring_queue_exit(&ring);
	if (!sysfs_wait("user_queues_attached", base, 20))
		fail("queues still attached 20 s after the last ring closed");
	else if (sysfs_num("user_queue_cmds") < cmds + LOOPS)
		fail("the loop's I/O did not go on user queues");
	else
		ok = true;
	goto out;
out_ring:
	io_uring_queue_exit(&ring);
	close(fd);
out:
	free(buf);
	return ok;
}

struct ucase {
	const char *name;
	bool (*fn)(void);
	const char *what;
};

static const struct ucase cases[] = {
	{ "attach", case_attach, "attach (shown in the ring's fdinfo), attach again (-EEXIST), detach, detach again (-ENOENT)" },
	{ "not-iopoll", case_not_iopoll, "attach on a ring without IOPOLL, or without SQE128/CQE32 (-EINVAL)" },
	{ "not-nvme", case_not_nvme, "attach on /dev/null and on the block device" },
	{ "bad-index", case_bad_index, "attach with a fixed-file index out of range (-EBADF)" },
	{ "reserved", case_reserved, "attach and detach with any SQE field they do not use set (-EINVAL)" },
	{ "unprivileged", case_unprivileged, "attach without CAP_SYS_ADMIN (-EPERM)" },
	{ "handed-on", case_handed_on, "a ring root attached, used without privileges: Read on the queue, Write through a read-only fd -EACCES, detach" },
	{ "exhaust", case_exhaust, "one ring more than there are queues (-EBUSY), one attaching twice then (-EEXIST)" },
	{ "no-queue", case_no_queue, "NVME_URING_CMD_IO_UQ on a ring with no queue: normal path" },
	{ "xfer", case_xfer, "data both ways vs the block device, plain and registered buffers" },
	{ "mapped-bufs", case_mapped_bufs, "registered buffers mapped once: data at offsets across pages, through an update, an unregister, a detach (fdinfo MappedBufs)" },
	{ "fallback", case_fallback, "vectored (NVME_URING_CMD_IO_VEC) and misaligned commands: normal path" },
	{ "same-result", case_same_result, "wrong NSID, data_len mismatch, IOSQE_ASYNC, Write Zeroes, Compare, DSM, Flush: the same result with the flag and without, IOSQE_ASYNC and Flush on the queue" },
	{ "full-queue", case_full_queue, "io_queue_depth + 64 reads in flight at once: the ones past the last slot take the normal path, data right" },
	{ "device-error", case_device_error, "an NVMe error status comes back in the CQE" },
	{ "batch", case_batch, "32 writes in one submission, verified" },
	{ "threads", case_threads, "one thread submits, three others poll the same ring: each write completes once, on the queue, data right" },
	{ "detach-inflight", case_detach_inflight, "detach with 32 reads in flight" },
	{ "exit-inflight", case_exit_inflight, "the ring's task exits with 63 reads in flight" },
	{ "inject", case_inject, "an injected NVMe status (fault_inject) on both paths" },
	{ "loop", case_loop, "open/attach/I/O/detach/close loops, every way a ring ends" },
};

/* ---- storm: verified I/O while the controller is reset or removed ---- */

#define STORM_BATCH	16
#define STORM_BS	4096

static volatile sig_atomic_t stop;

static void on_alarm(int sig)
{
	(void)sig;
	stop = 1;
}

static int storm(int secs)
{
	char *buf = xalloc(STORM_BATCH * STORM_BS), *rd = xalloc(STORM_BATCH * STORM_BS);
	unsigned long ok_ios = 0, failed = 0, mismatches = 0, dups = 0, lost = 0;
	unsigned long attaches = 0, gen = 0;
	bool good[STORM_BATCH], done[STORM_BATCH];
	struct io_uring ring;
	int i, ret, phase;
	uint64_t ud;

	struct iovec iov[2] = {
		{ buf, STORM_BATCH * STORM_BS }, { rd, STORM_BATCH * STORM_BS },
	};

	signal(SIGALRM, on_alarm);
	alarm(secs);
	/*
	 * Registered buffers, which the queue maps once and must unmap before
	 * a removal is over, in every other round; plain ones in the others.
	 * A quarter of the commands are issued from io-wq (IOSQE_ASYNC),
	 * where the driver takes the ring's lock to submit them.
	 */
	if (ring_setup(&ring, true) || io_uring_register_buffers(&ring, iov, 2)) {
		fprintf(stderr, "storm: ring setup failed\n");
		return EXIT_FAIL;
	}
	while (!stop) {
		if (!attaches || gen % 64 == 0) {
			/* After a removal the queue is gone; try again. */
			ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
			if (!ret)
				attaches++;
		}
		gen++;
		/* writes, then reads of the same blocks */
		for (phase = 0; phase < 2 && !stop; phase++) {
			char *b = phase ? rd : buf;

			if (!phase)
				fill(buf, STORM_BATCH * STORM_BS, gen);
			memset(done, 0, sizeof(done));
			for (i = 0; i < STORM_BATCH; i++) {
				struct io_uring_sqe *sqe;

				sqe = queue_io(&ring, !phase,
					       (uint64_t)i * STORM_BS,
					       b + i * STORM_BS, STORM_BS, true,
					       gen & 1 ? phase : -1, i);
				/* a quarter from io-wq, racing the ring's own */
				if (i % 4 == 3)
					sqe->flags |= IOSQE_ASYNC;
			}
			if (io_uring_submit(&ring) != STORM_BATCH) {
				fprintf(stderr, "storm: submit failed\n");
				return EXIT_FAIL;
			}
			for (i = 0; i < STORM_BATCH; i++) {
				struct io_uring_cqe *cqe;

				do {
					ret = io_uring_wait_cqe(&ring, &cqe);
				} while (ret == -EINTR || ret == -EAGAIN);
				if (ret) {
					fprintf(stderr, "storm: waiting: %s\n",
						strerror(-ret));
					lost++;
					break;
				}
				ud = cqe->user_data;
				ret = cqe->res;
				io_uring_cqe_seen(&ring, cqe);
				if (ud >= STORM_BATCH || done[ud]) {
					dups++;
					continue;
				}
				done[ud] = true;
				if (ret) {
					failed++;
					if (!phase)
						good[ud] = false;
					continue;
				}
				ok_ios++;
				if (!phase)
					good[ud] = true;
				else if (good[ud] &&
					 memcmp(rd + ud * STORM_BS,
						buf + ud * STORM_BS, STORM_BS))
					mismatches++;
			}
		}
	}
	io_uring_queue_exit(&ring);
	printf("storm: %lu I/Os ok, %lu failed, %lu attaches, %lu mismatches, %lu duplicate completions, %lu lost\n",
	       ok_ios, failed, attaches, mismatches, dups, lost);
	return mismatches || dups || lost || !ok_ios ? EXIT_FAIL : EXIT_PASS;
}

/*
 * A command that times out, on NG, a namespace whose reads the device
 * model throttles to 4 KiB/s (vm/run's nsid 2): a direct read of
 * STALL_PRIME bytes passes at once and fills the throttle's bucket, so the
 * next read waits about STALL_PRIME / 4 KiB seconds in the device, far
 * past its 100 ms timeout_ms. The queue's timeout work must reset the
 * controller, and the reset ends the command (QEMU lifts the throttle to
 * drain it): once, with -EINTR or with what the controller posted, and
 * within STALL_LIMIT s, long before the device would have finished it. The
 * caller checks the kernel log for the timeouts.
 *  1. The ring's task exits with such a command in flight: the ring must
 *     still be freed and its queue go back.
 *  2. A ring waits for such a command; then it still owns its queue
 *     after the reset and reads on it (on FAST_NG, the unthrottled
 *     namespace 1, not to wait for the bucket again).
 */
#define STALL_TIMEOUT_MS	100	/* below the driver's minimum: */
#define STALL_MIN_TIMEOUT	1	/* seconds */
#define STALL_PRIME		32768	/* 8 s at 4 KiB/s */
#define STALL_LIMIT		5

/* One 4 KiB read on the user queue that waits behind a full bucket. */
static void queue_stalled_read(struct io_uring *ring, void *buf, uint64_t ud)
{
	struct io_uring_sqe *sqe;

	/* Waits for the bucket to empty, passes, and leaves it full. */
	if (pread(blk_fd, buf, STALL_PRIME, 0) != STALL_PRIME) {
		fprintf(stderr, "stall: priming read of %s: %s\n", blk_path,
			strerror(errno));
		exit(EXIT_FAIL);
	}
	sqe = queue_io(ring, false, 1 << 20, buf, 4096, true, -1, ud);
	((struct nvme_uring_cmd *)sqe->cmd)->timeout_ms = STALL_TIMEOUT_MS;
}

/*
 * A read of @len bytes at 1 MiB, on ng_fd, that completes on the user
 * queue. A reset's rescan freezes the namespace for a moment, which sends
 * commands to the normal path: try again for up to 10 s.
 */
static bool read_on_uq(struct io_uring *ring, void *buf, uint32_t len)
{
	long cmds;
	int i;

	for (i = 0; i < 40; i++) {
		cmds = sysfs_num("user_queue_cmds");
		if (!do_io(ring, false, 1 << 20, buf, len, true, -1) &&
		    sysfs_num("user_queue_cmds") == cmds + 1)
			return true;
		usleep(250000);
	}
	return false;
}

static int stall(const char *fast_ng)
{
	long base = sysfs_num("user_queues_attached"), cmds;
	void *buf = xalloc(STALL_PRIME);
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	int status, ret, fast_fd;
	double t0, took;
	pid_t pid;

	/* 1. The task exits with a stalled command: its ring must still go. */
	pid = fork();
	if (pid == 0) {
		if (ring_setup(&ring, true) ||
		    uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false))
			_exit(3);
		queue_stalled_read(&ring, buf, 1);
		io_uring_submit(&ring);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		printf("stall: FAIL: the child failed to attach or submit\n");
		return EXIT_FAIL;
	}
	t0 = now();
	if (!sysfs_wait("user_queues_attached", base, 60)) {
		printf("stall: FAIL: the ring of an exited task kept its queue for 60 s\n");
		return EXIT_FAIL;
	}
	took = now() - t0;
	printf("stall: the exited task's ring let go of its queue after %.1f s\n",
	       took);
	if (took > STALL_LIMIT) {
		printf("stall: FAIL: after %.1f s: its command was not ended by a reset\n",
		       took);
		return EXIT_FAIL;
	}

	/* 2. A ring waits for a stalled command, then reads again. */
	if (attach_ring(&ring, "stall"))
		return EXIT_FAIL;
	/* (each probe costs the throttle an eighth of a second) */
	if (!read_on_uq(&ring, buf, 512)) {
		printf("stall: FAIL: no read took the user queue for 10 s after the reset\n");
		return EXIT_FAIL;
	}
	cmds = sysfs_num("user_queue_cmds");
	queue_stalled_read(&ring, buf, 1);
	t0 = now();
	/* A hang here is a failure: the caller's timeout ends it. */
	ret = wait_one(&ring, NULL);
	took = now() - t0;
	printf("stall: the read ended with %d (%s) after %.1f s\n", ret,
	       ret < 0 ? strerror(-ret) : ret ? "NVMe status" :
	       "posted by the controller as the reset drained it", took);
	/* The driver bounds timeout_ms from below (NVME_UQ_MIN_TIMEOUT). */
	if (took < STALL_MIN_TIMEOUT) {
		printf("stall: FAIL: it ended after %.1f s, before the %d s minimum timeout (or is %s not throttled?)\n",
		       took, STALL_MIN_TIMEOUT, ng_path);
		return EXIT_FAIL;
	}
	if (took > STALL_LIMIT) {
		printf("stall: FAIL: it ended after %.1f s, as the device finished it: no reset ended it\n",
		       took);
		return EXIT_FAIL;
	}
	if (sysfs_num("user_queue_cmds") != cmds + 1) {
		printf("stall: FAIL: the read was not on the user queue\n");
		return EXIT_FAIL;
	}
	/* Exactly one CQE: nothing more may come for it. */
	usleep(500000);
	if (!io_uring_peek_cqe(&ring, &cqe)) {
		printf("stall: FAIL: a second completion (res %d) came\n",
		       cqe->res);
		return EXIT_FAIL;
	}
	/* The queue came back with the controller, still this ring's. */
	if (!sysfs_wait("user_queues_attached", base + 1, 30)) {
		printf("stall: FAIL: the ring lost its queue across the reset\n");
		return EXIT_FAIL;
	}
	fast_fd = open(fast_ng, O_RDWR);
	if (fast_fd < 0) {
		fprintf(stderr, "stall: %s: %s\n", fast_ng, strerror(errno));
		return EXIT_FAIL;
	}
	/* queue_io() issues on ng_fd and nsid: namespace 1's for this one */
	ng_fd = fast_fd;
	nsid = ioctl(fast_fd, NVME_IOCTL_ID);
	if (!read_on_uq(&ring, buf, 4096)) {
		printf("stall: FAIL: no read after the reset took the user queue for 10 s\n");
		return EXIT_FAIL;
	}
	io_uring_queue_exit(&ring);
	if (!sysfs_wait("user_queues_attached", base, 20)) {
		printf("stall: FAIL: queue still attached after its ring closed\n");
		return EXIT_FAIL;
	}
	close(fast_fd);
	free(buf);
	printf("stall: ok\n");
	return EXIT_PASS;
}

/*
 * One 4 KiB read on the attached queue with a HOLD_TIMEOUT_MS timeout,
 * then no poll for @secs seconds: only the driver's timeout work can reap
 * it meanwhile. "hold: submitted" tells the caller when to act. Then the
 * ring polls: exactly one CQE, res 0, counted on the user queue.
 */
#define HOLD_TIMEOUT_MS	4000

static int hold(int secs)
{
	void *buf = xalloc(4096);
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	long cmds;
	int ret;

	if (attach_ring(&ring, "hold"))
		return EXIT_FAIL;
	cmds = sysfs_num("user_queue_cmds");
	sqe = queue_io(&ring, false, 0, buf, 4096, true, -1, 7);
	((struct nvme_uring_cmd *)sqe->cmd)->timeout_ms = HOLD_TIMEOUT_MS;
	/*
	 * Not io_uring_submit(): on an IOPOLL ring it enters with
	 * IORING_ENTER_GETEVENTS, which polls once. Publish the SQ tail and
	 * enter to submit only.
	 */
	io_uring_smp_store_release(ring.sq.ktail, ring.sq.sqe_tail);
	if (io_uring_enter(ring.ring_fd, 1, 0, 0, NULL) != 1) {
		fprintf(stderr, "hold: submit failed\n");
		return EXIT_FAIL;
	}
	printf("hold: submitted\n");
	fflush(stdout);
	sleep(secs);
	ret = wait_one(&ring, NULL);
	printf("hold: the read ended with %d\n", ret);
	if (ret)
		return EXIT_FAIL;
	if (sysfs_num("user_queue_cmds") != cmds + 1) {
		printf("hold: FAIL: the read was not on the user queue\n");
		return EXIT_FAIL;
	}
	io_uring_queue_exit(&ring);
	free(buf);
	printf("hold: ok\n");
	return EXIT_PASS;
}

/*
 * userq-check format NG BLOCKDEV: Format NVM of the namespace between its
 * 4 KiB and 512-byte LBA formats (without metadata) and back, with a ring
 * attached to a user queue all along. The first Format finds a read held
 * on the queue (unpolled, HOLD_TIMEOUT_MS): nvme_passthru_start() must
 * wait for it, as it waits for a request, until the driver reaps it. After
 * each Format the ring's commands must be checked against the new LBA
 * size: a command of the new shape (NLB counted in the new LBAs) goes on
 * the queue and reads the zeroes the Format left, then writes what the
 * block device reads back; one of the old shape does not go on the queue.
 * Ends in the namespace's first format; the caller restores it if not.
 */
#define NVME_ADMIN_FORMAT_NVM	0x80

/* The namespace's format index of 2^@lbads-byte LBAs without metadata. */
static int find_lbaf(const uint8_t *idns, unsigned int lbads)
{
	unsigned int i, nlbaf = idns[25] + 1;

	for (i = 0; i < nlbaf && i < 64; i++) {
		const uint8_t *f = idns + 128 + 4 * i;

		if (!f[0] && !f[1] && f[2] == lbads)
			return i;
	}
	return -1;
}

static int identify_ns(uint8_t *idns)
{
	struct nvme_passthru_cmd id = {
		.opcode = 0x06,		/* Identify, CNS 0 */
		.nsid = nsid,
		.addr = (uintptr_t)idns,
		.data_len = 4096,
	};

	return ioctl(ng_fd, NVME_IOCTL_ADMIN_CMD, &id);
}

/* Format NVM of the namespace into format @lbaf: ioctl result, time in *secs. */
static int format_ns(unsigned int lbaf, double *secs)
{
	struct nvme_passthru_cmd cmd = {
		.opcode = NVME_ADMIN_FORMAT_NVM,
		.nsid = nsid,
		/* LBAF bits 3:0 and 13:12; no secure erase, no PI */
		.cdw10 = (lbaf & 0xf) | (lbaf >> 4) << 12,
		.timeout_ms = 60000,
	};
	struct timespec t0, t1;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = ioctl(ng_fd, NVME_IOCTL_ADMIN_CMD, &cmd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*secs = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	return ret;
}

/* What the ring's commands must see after a Format from @old_lba to lba. */
static bool after_format(struct io_uring *ring, unsigned int old_lba)
{
	const uint32_t len = 8192;
	const uint64_t off = 1 << 20;
	char *buf = xalloc(len), *zero = xalloc(len), *old = xalloc(4096);
	struct io_uring_sqe *sqe;
	uint32_t cmd_len;
	long cmds;
	bool ok = false;
	int bs, ret;

	if (ioctl(blk_fd, BLKSSZGET, &bs) || (unsigned int)bs != lba) {
		fail("%s has %d-byte LBAs after the Format, want %u", blk_path,
		     bs, lba);
		goto out;
	}
	cmds = sysfs_num("user_queue_cmds");
	memset(zero, 0, len);
	memset(buf, 0xa5, len);
	ret = do_io(ring, false, off, buf, len, true, -1);
	if (ret) {
		fail("%u-byte read after the Format: %d", len, ret);
		goto out;
	}
	if (sysfs_num("user_queue_cmds") != cmds + 1) {
		fail("a read counted in %u-byte LBAs did not go on the user queue after the Format",
		     lba);
		goto out;
	}
	if (memcmp(buf, zero, len)) {
		fail("the user queue read data the Format should have erased");
		goto out;
	}
	if (!xfer_one(ring, len, -1, buf, off, 0xf0a7))
		goto out;
	/*
	 * The old shape: one old LBA (or one page of them), NLB counted in
	 * the old LBAs. Its transfer in the new LBAs (512 bytes, or 4 KiB for
	 * a 512-byte buffer) fits the page either way, should the normal path
	 * send it.
	 */
	cmds = sysfs_num("user_queue_cmds");
	cmd_len = old_lba < lba ? old_lba : 4096;
	sqe = queue_io(ring, false, off, old, cmd_len, true, -1, 1);
	((struct nvme_uring_cmd *)sqe->cmd)->cdw12 = cmd_len / old_lba - 1;
	ret = wait_one(ring, NULL);
	if (ret)
		fail("a read of the old LBA size's shape: %d, want the normal path's 0",
		     ret);
	else if (sysfs_num("user_queue_cmds") != cmds)
		fail("a read counted in the old %u-byte LBAs went on the user queue",
		     old_lba);
	else
		ok = true;
out:
	free(buf);
	free(zero);
	free(old);
	return ok;
}

static int format(void)
{
	static uint8_t idns[4096] __attribute__((aligned(4096)));
	int lbaf[2], first, ret, status = EXIT_FAIL;
	unsigned int i, lbas[2] = { lba, lba == 512 ? 4096 : 512 };
	void *held = xalloc(4096);
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	long attached = sysfs_num("user_queues_attached");
	double secs;

	if (identify_ns(idns)) {
		fprintf(stderr, "format: Identify Namespace failed\n");
		return EXIT_FAIL;
	}
	first = (idns[26] & 0xf) | ((idns[26] >> 5) & 3) << 4;
	lbaf[0] = find_lbaf(idns, lbas[0] == 512 ? 9 : 12);
	lbaf[1] = find_lbaf(idns, lbas[1] == 512 ? 9 : 12);
	if (lbaf[0] != first || lbaf[1] < 0) {
		printf("format: SKIP: no metadata-less %u-byte LBA format to go to\n",
		       lbas[1]);
		return EXIT_SKIP;
	}
	if (attach_ring(&ring, "format"))
		return EXIT_FAIL;
	why[0] = 0;
	/* Held: submitted, not polled, until the Format has returned. */
	sqe = queue_io(&ring, false, 0, held, 4096, true, -1, 7);
	((struct nvme_uring_cmd *)sqe->cmd)->timeout_ms = HOLD_TIMEOUT_MS;
	io_uring_smp_store_release(ring.sq.ktail, ring.sq.sqe_tail);
	if (io_uring_enter(ring.ring_fd, 1, 0, 0, NULL) != 1) {
		fprintf(stderr, "format: submit failed\n");
		return EXIT_FAIL;
	}
	for (i = 1; i <= 2; i++) {
		unsigned int to = i & 1;

		ret = format_ns(lbaf[to], &secs);
		printf("format: to %u-byte LBAs (format %d) in %.1f s: %d\n",
		       lbas[to], lbaf[to], secs, ret);
		if (ret) {
			fail("Format NVM: %d (%s)", ret,
			     ret < 0 ? strerror(errno) : "NVMe status");
			goto out;
		}
		if (i == 1) {
			/* the held read ended only when the driver reaped it */
			if (secs < HOLD_TIMEOUT_MS / 2000.0) {
				fail("the Format did not wait for the read held on the user queue");
				goto out;
			}
			ret = wait_one(&ring, NULL);
			if (ret) {
				fail("the held read ended with %d", ret);
				goto out;
			}
		}
		lba = lbas[to];
		if (!after_format(&ring, lbas[!to]))
			goto out;
	}
	status = EXIT_PASS;
out:
	if (!ring_exit_wait(&ring, attached))
		status = EXIT_FAIL;
	free(held);
	printf("format: %s%s\n", status ? "FAIL: " : "ok", status ? why : "");
	return status;
}

/*
 * try-attach NG: one attach on a fresh ring, whatever the controller's
 * user queue count, and its result ("attach: -95"); then the ring ends.
 */
static int try_attach(const char *path)
{
	struct io_uring ring;
	int ret;

	ng_fd = open(path, O_RDWR);
	if (ng_fd < 0) {
		fprintf(stderr, "userq-check: %s: %s\n", path, strerror(errno));
		return EXIT_FAIL;
	}
	if (ring_setup(&ring, true))
		return EXIT_FAIL;
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	printf("attach: %d\n", ret);
	io_uring_queue_exit(&ring);
	close(ng_fd);
	return EXIT_PASS;
}

/* ---- main ----------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: userq-check [-c CASE]... /dev/ngXnY /dev/nvmeXnY\n"
		"       userq-check storm SECONDS /dev/ngXnY\n"
		"       userq-check stall /dev/ngXnY /dev/nvmeXnY /dev/ngXnZ\n"
		"       userq-check head /dev/ngXnY /dev/nvmeXnY   (a multipath head)\n"
		"       userq-check cross /dev/ngAnY /dev/ngBnZ /dev/nvmeBnZ   (two controllers)\n"
		"       userq-check hold SECONDS /dev/ngXnY\n"
		"       userq-check pin /dev/ngXnY   (waits for a signal)\n"
		"       userq-check stale /dev/ngXnY   (probes on each \"probe\" line of stdin)\n"
		"       userq-check steps /dev/ngXnY FILE   (\"write OFF LEN\" or \"flush\" on each line of stdin)\n"
		"       userq-check format /dev/ngXnY /dev/nvmeXnY   (erases the namespace)\n"
		"       userq-check try-attach /dev/ngXnY   (prints the attach's result)\n"
		"       userq-check -l\n");
	exit(EXIT_USAGE);
}

/* Open the namespace's block device as blk_path and blk_fd. */
static int open_blk(const char *path, int flags)
{
	blk_path = path;
	blk_fd = open(path, flags | O_DIRECT);
	if (blk_fd < 0) {
		fprintf(stderr, "userq-check: %s: %s\n", path, strerror(errno));
		return EXIT_FAIL;
	}
	return 0;
}

/* nsid, controller sysfs dir; 77 if the controller has no user queues. */
static int open_ng(const char *path)
{
	unsigned int inst, ns;
	const char *base = strrchr(path, '/');
	struct nvme_passthru_cmd id;
	uint8_t idns[4096];
	unsigned int fmt, lbads;

	ng_fd = open(path, O_RDWR);
	if (ng_fd < 0) {
		fprintf(stderr, "userq-check: %s: %s\n", path, strerror(errno));
		return EXIT_FAIL;
	}
	if (sscanf(base ? base + 1 : path, "ng%un%u", &inst, &ns) != 2) {
		fprintf(stderr, "userq-check: %s is not /dev/ngXnY\n", path);
		return EXIT_USAGE;
	}
	snprintf(sysdir, sizeof(sysdir), "/sys/class/nvme/nvme%u", inst);
	nsid = ioctl(ng_fd, NVME_IOCTL_ID);
	if ((int)nsid <= 0) {
		fprintf(stderr, "userq-check: %s: NVME_IOCTL_ID: %s\n", path,
			strerror(errno));
		return EXIT_FAIL;
	}
	if (sysfs_num("user_queues") <= 0) {
		printf("userq-check: %s has no user queues (write N to its user_queues_wanted and reset it, or boot with nvme.user_queues=N)\n",
		       sysdir);
		return EXIT_SKIP;
	}
	/* the namespace's LBA size, from Identify Namespace (main() checks
	 * it against the block device again) */
	memset(&id, 0, sizeof(id));
	id.opcode = 0x06;	/* Identify, CNS 0: the namespace */
	id.nsid = nsid;
	id.addr = (uintptr_t)idns;
	id.data_len = sizeof(idns);
	if (ioctl(ng_fd, NVME_IOCTL_ADMIN_CMD, &id)) {
		fprintf(stderr, "userq-check: %s: Identify Namespace failed\n", path);
		return EXIT_FAIL;
	}
	/* FLBAS: format index bits 3:0 and 6:5; LBADS: byte 2 of its LBAF */
	fmt = (idns[26] & 0xf) | ((idns[26] >> 5) & 3) << 4;
	lbads = idns[128 + 4 * fmt + 2];
	if (lbads != 9 && lbads != 12) {
		fprintf(stderr, "userq-check: %s: LBA size 2^%u, want 512 or 4096\n",
			path, lbads);
		return EXIT_FAIL;
	}
	lba = 1U << lbads;
	return EXIT_PASS;
}

/*
 * A multipath head (NG is its /dev/ngXnY, BLOCKDEV its disk): no user
 * queue can be attached through it, and a write and a read that ask for
 * the user queue still move the right data on the normal path.
 */
static int head(const char *ng, const char *blk)
{
	const uint32_t len = 64 << 10;
	char *wbuf = xalloc(len), *rbuf = xalloc(len), *bbuf = xalloc(len);
	struct io_uring ring;
	int ret, fd, bs;

	ng_fd = open(ng, O_RDWR);
	fd = open(blk, O_RDONLY | O_DIRECT);
	if (ng_fd < 0 || fd < 0) {
		fprintf(stderr, "userq-check: %s: %s\n", ng_fd < 0 ? ng : blk,
			strerror(errno));
		return EXIT_FAIL;
	}
	nsid = ioctl(ng_fd, NVME_IOCTL_ID);
	if ((int)nsid <= 0 || ioctl(fd, BLKSSZGET, &bs) ||
	    ring_setup(&ring, true)) {
		fprintf(stderr, "userq-check: %s: no nsid, LBA size or ring\n", ng);
		return EXIT_FAIL;
	}
	lba = bs;
	ret = uq_op(&ring, ng_fd, NVME_URING_CMD_UQ_ATTACH, false);
	printf("head attach: %s\n", ret ? strerror(-ret) : "attached");
	fill(wbuf, len, 0x5eed);
	ret = do_io(&ring, true, 1 << 20, wbuf, len, true, -1);
	if (!ret)
		ret = do_io(&ring, false, 1 << 20, rbuf, len, true, -1);
	if (ret) {
		printf("head write/read as NVME_URING_CMD_IO_UQ: %d\n", ret);
		return EXIT_FAIL;
	}
	if (pread(fd, bbuf, len, 1 << 20) != (ssize_t)len) {
		fprintf(stderr, "userq-check: %s: read failed\n", blk);
		return EXIT_FAIL;
	}
	printf("head write/read as NVME_URING_CMD_IO_UQ: %s\n",
	       memcmp(wbuf, rbuf, len) || memcmp(wbuf, bbuf, len) ?
	       "data differs" : "ok");
	io_uring_queue_exit(&ring);
	return EXIT_PASS;
}

/*
 * userq-check cross NG_A NG_B BLK_B: a ring holds a user queue of
 * controller A; its NVME_URING_CMD_IO_UQ commands on a namespace of controller B (B's
 * own queues are in its own pool) take the normal path: neither
 * controller's user_queue_cmds moves, and the data lands on B.
 */
static int cross(const char *ng_a, const char *ng_b, const char *blk_b)
{
	char sys_b[192], *buf = xalloc(2 * 4096), *chk = xalloc(4096);
	unsigned int nsid_b, lba_b;
	long cmds_a, cmds_b;
	struct io_uring ring;
	int ret, fd_b, fd_a, bs;
	bool ok;

	ret = open_ng(ng_b);
	if (ret)
		return ret;
	fd_b = ng_fd;
	nsid_b = nsid;
	lba_b = lba;
	snprintf(sys_b, sizeof(sys_b), "%s/user_queue_cmds", sysdir);
	ret = open_ng(ng_a);
	if (ret)
		return ret;
	fd_a = ng_fd;
	blk_path = blk_b;
	blk_fd = open(blk_b, O_RDWR | O_DIRECT);
	if (blk_fd < 0 || ioctl(blk_fd, BLKSSZGET, &bs) || (unsigned int)bs != lba_b) {
		fprintf(stderr, "userq-check: %s: not the block device of %s\n",
			blk_b, ng_b);
		return EXIT_FAIL;
	}
	lba = lba_b;
	if (ring_setup(&ring, true) ||
	    uq_op(&ring, fd_a, NVME_URING_CMD_UQ_ATTACH, false)) {
		fprintf(stderr, "userq-check: cross: attach on %s failed\n", ng_a);
		return EXIT_FAIL;
	}
	cmds_a = sysfs_num("user_queue_cmds");
	cmds_b = sysfs_read_num(sys_b);
	/* the commands go to B: its fd, its namespace id */
	ng_fd = fd_b;
	nsid = nsid_b;
	fill(chk, 4096, 91);
	memcpy(buf, chk, 4096);
	ret = do_io(&ring, true, 5 << 20, buf, 4096, true, -1);
	if (!ret) {
		memset(buf, 0, 4096);
		ret = do_io(&ring, false, 5 << 20, buf, 4096, true, -1);
	}
	ok = false;
	if (ret)
		fail("IO_UQ I/O on %s with a queue of %s: %d", ng_b, ng_a, ret);
	else if (memcmp(buf, chk, 4096))
		fail("an IO_UQ read on %s returned wrong data", ng_b);
	else if (pread(blk_fd, buf, 4096, 5 << 20) != 4096 ||
		 memcmp(buf, chk, 4096))
		fail("an IO_UQ write on %s did not land there", ng_b);
	else if (sysfs_num("user_queue_cmds") != cmds_a)
		fail("a command on %s went on a user queue of %s", ng_b, ng_a);
	else if (sysfs_read_num(sys_b) != cmds_b)
		fail("a command on %s went on one of its own user queues, which the ring does not hold",
		     ng_b);
	else if (fdinfo_num(&ring, FALLBACKS) != 2)
		fail("fdinfo counts %ld fallbacks, want the 2 commands on %s",
		     fdinfo_num(&ring, FALLBACKS), ng_b);
	else
		ok = true;
	io_uring_queue_exit(&ring);
	free(buf);
	free(chk);
	printf("cross: %s%s\n", ok ? "ok" : "FAIL: ", ok ? "" : why);
	return ok ? EXIT_PASS : EXIT_FAIL;
}

/*
 * Attach a queue, read one block on it, then close the namespace's file:
 * the ring's attachment is then the only thing that refers to the driver
 * (no open file, no registered file, nothing in flight). "pin: closed"
 * tells the caller when; then wait until a signal ends the process, and
 * with it the ring. tests/userq/014 tries to unload nvme meanwhile: the
 * attachment's reference to its module must refuse that, or the ring's
 * release would run in an unloaded module.
 */
static int pin(void)
{
	void *buf = xalloc(4096);
	struct io_uring ring;
	long cmds;
	int ret;

	if (attach_ring(&ring, "pin"))
		return EXIT_FAIL;
	cmds = sysfs_num("user_queue_cmds");
	ret = do_io(&ring, false, 0, buf, 4096, true, -1);
	if (ret) {
		printf("pin: FAIL: the read ended with %d\n", ret);
		return EXIT_FAIL;
	}
	if (sysfs_num("user_queue_cmds") != cmds + 1) {
		printf("pin: FAIL: the read was not on the user queue\n");
		return EXIT_FAIL;
	}
	close(ng_fd);
	ng_fd = -1;
	printf("pin: closed\n");
	fflush(stdout);
	for (;;)
		pause();
}

/*
 * A ring that holds a queue and the namespace's fd while the namespace is
 * detached from the controller and attached again under the same NSID
 * (tests/userq/015). It attaches, writes a block of seed 1 at STALE_OFF on
 * the queue and says "stale: ready"; then for each "probe" line on stdin
 * it sends, through the fd it kept, a Write of seed 2 at STALE_OFF and a
 * Read asking for the queue, and a Write on the normal path, and prints
 * their results on one line: "probe: uq-write R uq-read R write R". The
 * caller compares them with what the namespace's state allows (-ENODEV
 * once it is removed, also after a new one took its NSID: the old fd must
 * never reach it) and reads STALE_OFF of the new namespace itself. At
 * the end of stdin the ring ends.
 */
#define STALE_OFF	(1 << 20)

static int stale(void)
{
	void *buf = xalloc(4096);
	struct io_uring ring;
	char line[64];
	int w, r, n;

	if (attach_ring(&ring, "stale"))
		return EXIT_FAIL;
	fill(buf, 4096, 1);
	w = do_io(&ring, true, STALE_OFF, buf, 4096, true, -1);
	if (w) {
		printf("stale: FAIL: the first write ended with %d\n", w);
		return EXIT_FAIL;
	}
	printf("stale: ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strcmp(line, "probe\n"))
			continue;
		fill(buf, 4096, 2);
		w = do_io(&ring, true, STALE_OFF, buf, 4096, true, -1);
		r = do_io(&ring, false, STALE_OFF, buf, 4096, true, -1);
		fill(buf, 4096, 2);
		n = do_io(&ring, true, STALE_OFF, buf, 4096, false, -1);
		printf("probe: uq-write %d uq-read %d write %d\n", w, r, n);
		fflush(stdout);
	}
	io_uring_queue_exit(&ring);
	free(buf);
	printf("stale: done\n");
	return EXIT_PASS;
}

/*
 * Writes and Flushes on an attached queue, one step per line of stdin, for
 * a caller that looks at the device between them (tests/userq/016 reads
 * QEMU's log of the namespace's writes after each):
 *   "write OFF LEN"  puts bytes [OFF, OFF + LEN) of FILE at the same place
 *                    of the namespace as Writes of 64 KiB, all in flight at
 *                    once, and returns when every one has completed;
 *   "flush"          sends one Flush of the namespace.
 * Each command is NVME_URING_CMD_IO_UQ; the line printed for a step says
 * its first non-zero result, or 0 and whether every command of it went on
 * the queue: user_queue_cmds must grow by their number and the ring's
 * Fallbacks not at all ("write OFF LEN: 0, on the queue"; "flush: 0, 1
 * fell back"). A bad line ends it (exit 2); the end of stdin ends the ring.
 */
#define STEP_CHUNK	(64 << 10)

static int steps(const char *file)
{
	char *buf = xalloc((size_t)DEPTH * STEP_CHUNK), line[128], what[64];
	unsigned long long off, len;
	struct io_uring ring;
	long cmds, falls;
	unsigned int n, i;
	int ffd, res, ret, sent;

	ffd = open(file, O_RDONLY);
	if (ffd < 0) {
		fprintf(stderr, "userq-check: %s: %s\n", file, strerror(errno));
		return EXIT_FAIL;
	}
	if (attach_ring(&ring, "steps"))
		return EXIT_FAIL;
	while (fgets(line, sizeof(line), stdin)) {
		cmds = sysfs_num("user_queue_cmds");
		falls = fdinfo_num(&ring, FALLBACKS);
		if (!strcmp(line, "flush\n")) {
			struct io_uring_sqe *sqe = uring_cmd_sqe(&ring, ng_fd,
								 NVME_URING_CMD_IO_UQ);
			struct nvme_uring_cmd *cmd = (struct nvme_uring_cmd *)sqe->cmd;

			cmd->opcode = NVME_CMD_FLUSH;
			cmd->nsid = nsid;
			snprintf(what, sizeof(what), "flush");
			n = 1;
		} else if (sscanf(line, "write %llu %llu", &off, &len) == 2 &&
			   len && len % STEP_CHUNK == 0 && off % lba == 0 &&
			   len <= (unsigned long long)DEPTH * STEP_CHUNK &&
			   pread(ffd, buf, len, (off_t)off) == (ssize_t)len) {
			n = len / STEP_CHUNK;
			for (i = 0; i < n; i++)
				queue_io(&ring, true, off + (uint64_t)i * STEP_CHUNK,
					 buf + (size_t)i * STEP_CHUNK, STEP_CHUNK,
					 true, -1, i);
			snprintf(what, sizeof(what), "write %llu %llu", off, len);
		} else {
			fprintf(stderr, "userq-check: steps: not \"flush\" nor \"write OFF LEN\" (64 KiB multiples of FILE, at most %u): %s",
				DEPTH * STEP_CHUNK, line);
			return EXIT_USAGE;
		}
		/* every command in flight together; reaped only then */
		res = 0;
		sent = io_uring_submit(&ring);
		if (sent != (int)n)
			res = sent < 0 ? sent : -EAGAIN;
		for (i = 0; (int)i < sent; i++) {
			ret = wait_one(&ring, NULL);
			if (ret && !res)
				res = ret;
		}
		if (res) {
			printf("%s: %d\n", what, res);
		} else {
			cmds = sysfs_num("user_queue_cmds") - cmds;
			falls = fdinfo_num(&ring, FALLBACKS) - falls;
			if (cmds == n && !falls)
				printf("%s: 0, on the queue\n", what);
			else
				printf("%s: 0, %ld fell back, %ld of %u on user queues\n",
				       what, falls, cmds, n);
		}
		fflush(stdout);
	}
	io_uring_queue_exit(&ring);
	close(ffd);
	free(buf);
	return EXIT_PASS;
}

int main(int argc, char **argv)
{
	const char *only[ARRAY_SIZE(cases)];
	unsigned int nonly = 0, i, j;
	int opt, ret, bs, status = EXIT_PASS;

	if (argc == 3 && !strcmp(argv[1], "try-attach"))
		return try_attach(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "head"))
		return head(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "cross"))
		return cross(argv[2], argv[3], argv[4]);
	if (argc == 4 && !strcmp(argv[1], "hold")) {
		ret = open_ng(argv[3]);
		return ret ? ret : hold(atoi(argv[2]));
	}
	if (argc == 3 && !strcmp(argv[1], "stale")) {
		ret = open_ng(argv[2]);
		return ret ? ret : stale();
	}
	if (argc == 4 && !strcmp(argv[1], "steps")) {
		ret = open_ng(argv[2]);
		return ret ? ret : steps(argv[3]);
	}
	if (argc == 3 && !strcmp(argv[1], "pin")) {
		ret = open_ng(argv[2]);
		return ret ? ret : pin();
	}
	if (argc == 4 && !strcmp(argv[1], "format")) {
		ret = open_ng(argv[2]);
		if (!ret)
			ret = open_blk(argv[3], O_RDWR);
		return ret ? ret : format();
	}
	if (argc == 4 && !strcmp(argv[1], "storm")) {
		ret = open_ng(argv[3]);
		return ret ? ret : storm(atoi(argv[2]));
	}
	if (argc == 5 && !strcmp(argv[1], "stall")) {
		ng_path = argv[2];
		ret = open_ng(ng_path);
		if (!ret)
			ret = open_blk(argv[3], O_RDONLY);
		return ret ? ret : stall(argv[4]);
	}
	while ((opt = getopt(argc, argv, "c:l")) != -1) {
		switch (opt) {
		case 'c':
			if (nonly == ARRAY_SIZE(only))
				usage();
			only[nonly++] = optarg;
			break;
		case 'l':
			for (i = 0; i < ARRAY_SIZE(cases); i++)
				printf("%-16s %s\n", cases[i].name, cases[i].what);
			return EXIT_PASS;
		default:
			usage();
		}
	}
	if (argc - optind != 2)
		usage();
	for (j = 0; j < nonly; j++) {
		for (i = 0; i < ARRAY_SIZE(cases); i++)
			if (!strcmp(only[j], cases[i].name))
				break;
		if (i == ARRAY_SIZE(cases)) {
			fprintf(stderr, "userq-check: no case %s (-l lists them)\n",
				only[j]);
			return EXIT_USAGE;
		}
	}
	ng_path = argv[optind];
	ret = open_ng(ng_path);
	if (!ret)
		ret = open_blk(argv[optind + 1], O_RDWR);
	if (ret)
		return ret;
	if (ioctl(blk_fd, BLKSSZGET, &bs) || (unsigned int)bs != lba) {
		fprintf(stderr, "userq-check: %s: its LBA size is not %s's (%u)\n",
			blk_path, ng_path, lba);
		return EXIT_FAIL;
	}

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		bool run = !nonly;

		for (j = 0; j < nonly; j++)
			run |= !strcmp(only[j], cases[i].name);
		if (!run)
			continue;
		why[0] = 0;
		/*
		 * A closed ring gives its queue back from a workqueue: let
		 * the previous case's rings go before counting queues.
		 */
		if (!sysfs_wait("user_queues_attached", 0, 10)) {
			printf("%s: FAIL: queues still attached before it\n",
			       cases[i].name);
			status = EXIT_FAIL;
			continue;
		}
		if (cases[i].fn()) {
			printf("%s: ok\n", cases[i].name);
		} else {
			printf("%s: FAIL: %s\n", cases[i].name, why);
			status = EXIT_FAIL;
		}
		fflush(stdout);
	}
	return status;
}
