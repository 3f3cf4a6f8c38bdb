// SPDX-License-Identifier: GPL-2.0
/*
 * sqe-reuse: does an NVMe passthrough command (IORING_OP_URING_CMD) that
 * io_uring issues after io_uring_enter() returned still do what its SQE
 * said when the submitter has reused the SQ slot meanwhile?
 *
 *   sqe-reuse NG_DEV BLOCK_DEV
 *
 * io_uring consumes an SQE at submission: once io_uring_enter() returns,
 * the application may fill the slot with its next command. A request
 * that is not issued then and there (linked behind another, or held by
 * IOSQE_IO_DRAIN) must carry what it needs from the SQE; uring_cmd leaves
 * the command in the SQE and lets the driver read it at issue time, so
 * io_uring has to copy it before the slot can change.
 *
 * For each way of holding a command back (a link behind a read of an
 * empty pipe; a drain behind the same read), the tool writes block A to
 * LBA X through NG_DEV, and, after submission but before the pipe read
 * completes, overwrites the consumed slot with a write of block B to
 * LBA Y. It then reads both LBAs back through BLOCK_DEV with O_DIRECT:
 * X must hold A and Y its old contents. Y holding B means the driver read
 * the reused slot. Exit 0 when every mode is right, 1 otherwise, 2 on
 * bad usage or setup errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tool.h"

#define NVME_CMD_WRITE	0x01
#define BLOCK		4096

/* LBAs (in bytes) a run uses: far from where other tests write */
#define OFF_X		(96ULL << 20)
#define OFF_Y		(97ULL << 20)

static int ng_fd, blk_fd, lba_shift;
static __u32 nsid;

static void setup_fail(const char *what)
{
	fprintf(stderr, "sqe-reuse: %s: %s\n", what, strerror(errno));
	exit(EXIT_USAGE);
}

/* A Write of one BLOCK from buf to byte offset off, through the ng device. */
static void prep_write(struct io_uring_sqe *sqe, void *buf, __u64 off)
{
	struct nvme_uring_cmd *cmd;

	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = ng_fd;
	sqe->cmd_op = NVME_URING_CMD_IO;
	cmd = (struct nvme_uring_cmd *)sqe->cmd;
	cmd->opcode = NVME_CMD_WRITE;
	cmd->nsid = nsid;
	cmd->addr = (__u64)(uintptr_t)buf;
	cmd->data_len = BLOCK;
	cmd->cdw10 = (__u32)(off >> lba_shift);
	cmd->cdw11 = (__u32)((off >> lba_shift) >> 32);
	cmd->cdw12 = (BLOCK >> lba_shift) - 1;
}

static int read_back(__u64 off, void *buf)
{
	return pread(blk_fd, buf, BLOCK, off) == BLOCK ? 0 : -1;
}

/*
 * One mode: pipe read (held), then the write, linked to it or drained
 * behind it. Returns 0 when the data is right.
 */
static int run_mode(const char *mode, unsigned int flags, void *a, void *b,
		    void *old, void *chk)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32 };
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int pfd[2], ret, i, bad = 0;
	char byte = 0;

	if (io_uring_queue_init_params(8, &ring, &p) < 0)
		setup_fail("io_uring_queue_init");
	if (pipe(pfd))
		setup_fail("pipe");
	/* X and Y start out as "old" */
	if (pwrite(blk_fd, old, BLOCK, OFF_X) != BLOCK ||
	    pwrite(blk_fd, old, BLOCK, OFF_Y) != BLOCK)
		setup_fail("pwrite of the old contents");

	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, pfd[0], &byte, 1, 0);
	sqe->user_data = 1;
	if (flags & IOSQE_IO_LINK)
		sqe->flags |= IOSQE_IO_LINK;
	sqe = io_uring_get_sqe(&ring);
	prep_write(sqe, a, OFF_X);
	sqe->user_data = 2;
	if (flags & IOSQE_IO_DRAIN)
		sqe->flags |= IOSQE_IO_DRAIN;
	ret = io_uring_submit(&ring);
	if (ret != 2) {
		fprintf(stderr, "sqe-reuse: %s: io_uring_submit: %d\n", mode, ret);
		exit(EXIT_USAGE);
	}
	/*
	 * Both SQEs are consumed (the kernel's SQ head is past them), so the
	 * slots are the application's again: reuse the write's slot for
	 * another command, as a submitter filling its next batch would.
	 */
	if (io_uring_sq_ready(&ring) != 0) {
		fprintf(stderr, "sqe-reuse: %s: SQEs not consumed\n", mode);
		exit(EXIT_USAGE);
	}
	prep_write(sqe, b, OFF_Y);
	/* Now let the pipe read complete, which releases the write. */
	if (write(pfd[1], "x", 1) != 1)
		setup_fail("write to the pipe");
	for (i = 0; i < 2; i++) {
		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret < 0) {
			fprintf(stderr, "sqe-reuse: %s: io_uring_wait_cqe: %s\n",
				mode, strerror(-ret));
			exit(EXIT_USAGE);
		}
		if (cqe->res < 0) {
			printf("%s: FAIL: request %llu completed with %s\n", mode,
			       (unsigned long long)cqe->user_data, strerror(-cqe->res));
			bad = 1;
		}
		io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
	close(pfd[0]);
	close(pfd[1]);

	if (read_back(OFF_X, chk))
		setup_fail("pread of LBA X");
	if (memcmp(chk, a, BLOCK)) {
		printf("%s: FAIL: LBA %llu does not hold the block its SQE wrote\n",
		       mode, OFF_X >> lba_shift);
		bad = 1;
	}
	if (read_back(OFF_Y, chk))
		setup_fail("pread of LBA Y");
	if (!memcmp(chk, b, BLOCK)) {
		printf("%s: FAIL: LBA %llu holds the block of the command written into the reused SQ slot\n",
		       mode, OFF_Y >> lba_shift);
		bad = 1;
	} else if (memcmp(chk, old, BLOCK)) {
		printf("%s: FAIL: LBA %llu changed\n", mode, OFF_Y >> lba_shift);
		bad = 1;
	}
	if (!bad)
		printf("%s: ok\n", mode);
	return bad;
}

int main(int argc, char **argv)
{
	void *a, *b, *old, *chk;
	int ssz, ret, bad = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: sqe-reuse NG_DEV BLOCK_DEV\n");
		return EXIT_USAGE;
	}
	ng_fd = open(argv[1], O_RDWR);
	if (ng_fd < 0)
		setup_fail(argv[1]);
	blk_fd = open(argv[2], O_RDWR | O_DIRECT);
	if (blk_fd < 0)
		setup_fail(argv[2]);
	ret = ioctl(ng_fd, NVME_IOCTL_ID);
	if (ret <= 0)
		setup_fail("NVME_IOCTL_ID");
	nsid = ret;
	if (ioctl(blk_fd, BLKSSZGET, &ssz))
		setup_fail("BLKSSZGET");
	if (ssz < 512 || ssz > BLOCK || (ssz & (ssz - 1))) {
		fprintf(stderr, "sqe-reuse: logical block size %d not handled\n", ssz);
		return EXIT_USAGE;
	}
	lba_shift = __builtin_ctz(ssz);
	if (posix_memalign(&a, BLOCK, BLOCK) || posix_memalign(&b, BLOCK, BLOCK) ||
	    posix_memalign(&old, BLOCK, BLOCK) || posix_memalign(&chk, BLOCK, BLOCK))
		setup_fail("posix_memalign");
	memset(a, 'A', BLOCK);
	memset(b, 'B', BLOCK);
	memset(old, 'o', BLOCK);

	bad |= run_mode("link", IOSQE_IO_LINK, a, b, old, chk);
	bad |= run_mode("drain", IOSQE_IO_DRAIN, a, b, old, chk);
	return bad ? EXIT_FAIL : EXIT_PASS;
}
