// SPDX-License-Identifier: GPL-2.0
/*
 * iobench engine: block devices and regular files, with plain read/write
 * opcodes (READ/WRITE, READV/WRITEV with -V1, READ_FIXED/WRITE_FIXED with
 * -B1) or, with -S1, preadv2/pwritev2 as t/io_uring's sync mode.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
/* BLKGETSIZE64, BLKSSZGET: newer <linux/fs.h> redefine <sys/uio.h>'s RWF_* */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "iobench.h"

static bool block_probe(const struct stat *st, const char *sysname,
			const char *class)
{
	(void)sysname;
	(void)class;
	return S_ISBLK(st->st_mode) || S_ISREG(st->st_mode);
}

static void block_setup(struct dev *d)
{
	struct stat st;
	int lbs;

	if (fstat(d->fd, &st))
		die("%s: %s", d->path, strerror(errno));
	if (S_ISREG(st.st_mode)) {
		d->size = (uint64_t)st.st_size;
		return;
	}
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

static void block_prep(const struct dev *d, struct io_uring_sqe *sqe,
		       const struct io_req *io)
{
	const void *addr = io->buf;
	unsigned int len = io->len;
	int op;

	(void)d;
	if (io->iov) {
		op = io->write ? IORING_OP_WRITEV : IORING_OP_READV;
		addr = io->iov;
		len = 1;
	} else if (io->buf_index >= 0) {
		op = io->write ? IORING_OP_WRITE_FIXED : IORING_OP_READ_FIXED;
	} else {
		op = io->write ? IORING_OP_WRITE : IORING_OP_READ;
	}
	io_uring_prep_rw(op, sqe, io->fd, addr, len, io->off);
	if (io->buf_index >= 0)
		sqe->buf_index = (__u16)io->buf_index;
}

/* As t/io_uring -S1: RWF_HIPRI makes -p1 poll for the completion. */
static int block_sync_io(const struct dev *d, const struct io_req *io)
{
	struct iovec iov = { .iov_base = io->buf, .iov_len = io->len };
	int flags = opt.polled ? RWF_HIPRI : 0;
	ssize_t ret;

	if (io->write)
		ret = pwritev2(d->fd, &iov, 1, (off_t)io->off, flags);
	else
		ret = preadv2(d->fd, &iov, 1, (off_t)io->off, flags);
	return ret < 0 ? -errno : (int)ret;
}

const struct engine_ops engine_block = {
	.name		= "block",
	.probe		= block_probe,
	.setup		= block_setup,
	.prep		= block_prep,
	.res_error	= res_error_full_block,
	.sync_io	= block_sync_io,
};
