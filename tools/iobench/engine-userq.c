// SPDX-License-Identifier: GPL-2.0
/*
 * iobench engine: -k1, NVMe passthrough on a user queue.
 *
 * A user queue is an interrupt-less NVMe queue pair that the PCI driver
 * reserves (sysfs user_queues_wanted, or nvme.user_queues=N at boot) and
 * lends to one IOPOLL io_uring ring at a time. ring_init attaches one to
 * every ring with NVME_URING_CMD_UQ_ATTACH; every Read and Write then asks
 * for it by going as NVME_URING_CMD_IO_UQ instead of NVME_URING_CMD_IO.
 * Everything else (Identify, the command itself, judging its result) is
 * engine-nvme.c's.
 *
 * The request is advisory: a command the direct path does not take goes the
 * normal passthrough path and still completes correctly, so results are
 * checked exactly as engine-nvme.c checks them, and the setup echo says
 * when no command of the run can use the queue. Closing the ring detaches
 * the queue, hence no teardown.
 */
#include <errno.h>
#include <string.h>
#include <linux/nvme_ioctl.h>

#include "iobench.h"

/* Tools may be built against headers that predate user queues. */
#ifndef NVME_URING_CMD_UQ_ATTACH
#define NVME_URING_CMD_UQ_ATTACH	_IO('N', 0x90)
#endif
#ifndef NVME_URING_CMD_IO_UQ
#define NVME_URING_CMD_IO_UQ	_IOWR('N', 0x92, struct nvme_uring_cmd)
#endif

/* The largest command the direct path takes; bigger ones go the normal way. */
#define USERQ_MAX_BYTES		(512 * 1024)

/* What the user can do about an attach that failed with -err, or NULL. */
static const char *attach_hint(int err)
{
	switch (err) {
	case EPERM:
		return "attaching a user queue needs CAP_SYS_ADMIN, run as root";
	case EBUSY:
		return "all user queues of the controller are taken; raise its user_queues_wanted in sysfs and reset it, or use fewer threads (-n)";
	case EOPNOTSUPP:
		return "the controller has no user queues; write N to /sys/class/nvme/nvmeX/user_queues_wanted and reset the controller, or boot with nvme.user_queues=N (NVMe PCI only)";
	case EEXIST:
		return "this ring already has a user queue (one per ring: each thread must drive one device)";
	case ENOTTY:
		return "this kernel has no NVMe user queues (NVME_URING_CMD_UQ_ATTACH unknown)";
	}
	return NULL;
}

/*
 * Attach synchronously: the ring is new and nothing else is in flight, so
 * the one CQE is the attach's. On an IOPOLL ring the wait is what polls.
 */
static const char *userq_ring_init(const struct dev *d, struct io_uring *ring,
				   int fd, bool fixed_file)
{
	struct io_req io = { .fd = fd, .buf_index = -1 };
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	const char *hint;
	int ret;

	if (!sqe)
		die("BUG: no free SQE in a new ring");
	prep_uring_cmd(sqe, &io);
	sqe->cmd_op = NVME_URING_CMD_UQ_ATTACH;
	if (fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;

	ret = io_uring_submit_and_wait(ring, 1);
	if (ret < 0)
		die("%s: io_uring_submit (user queue attach): %s", d->path,
		    strerror(-ret));
	ret = io_uring_wait_cqe(ring, &cqe);
	if (ret < 0)
		die("%s: io_uring_wait_cqe (user queue attach): %s", d->path,
		    strerror(-ret));
	ret = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	if (ret < 0) {
		hint = attach_hint(-ret);
		die("%s: cannot attach a user queue: %s%s%s", d->path,
		    strerror(-ret), hint ? "; " : "", hint ? hint : "");
	}

	/* Attached but idle would read as "user queues are no faster". */
	if (opt.vectored)
		return "user queue: attached, unused by -V1 (vectored) commands";
	if (opt.bs > USERQ_MAX_BYTES)
		return "user queue: attached, unused by commands over 512 KiB";
	return "user queue: attached";
}

static void userq_prep(const struct dev *d, struct io_uring_sqe *sqe,
		       const struct io_req *io)
{
	nvme_prep(d, sqe, io);
	/* vectored commands have no user-queue form: the normal path */
	if (sqe->cmd_op == NVME_URING_CMD_IO)
		sqe->cmd_op = NVME_URING_CMD_IO_UQ;
}

const struct engine_ops engine_userq = {
	.name		= "nvme-userq",
	.probe		= nvme_probe,
	.ring_flags	= IORING_SETUP_SQE128 | IORING_SETUP_CQE32,
	.setup		= nvme_setup,
	.ring_init	= userq_ring_init,
	.prep		= userq_prep,
	.res_error	= nvme_res_error,
};
