// SPDX-License-Identifier: GPL-2.0
/*
 * iobench engine: --copy, copies of -b bytes within one block device, the
 * copy offload workload. Each IO copies the block at its offset in the
 * first half of the device to the same offset in the second half:
 *   --copy 1  copy_file_range(2): offloaded when the device can, emulated
 *             by the kernel otherwise (copy_max_bytes 0 forces emulation);
 *   --copy 2  copy_file_range(2) with COPY_FILE_OFFLOAD_ONLY: offloaded or
 *             an error (EOPNOTSUPP);
 *   --copy 3  pread + pwrite in this process through one buffer (with -O1,
 *             O_DIRECT), the copy an application does without offload.
 * copy_file_range has no io_uring opcode, so copies are synchronous (-S1):
 * -n N runs N copies at once, one per thread, and -d stays 1.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "iobench.h"

/* <linux/fs.h> of a kernel with the copy-offload topic */
#ifndef COPY_FILE_OFFLOAD_ONLY
#define COPY_FILE_OFFLOAD_ONLY	0x00000001
#endif

static bool copy_probe(const struct stat *st, const char *sysname,
		       const char *class)
{
	(void)sysname;
	(void)class;
	return S_ISBLK(st->st_mode);
}

static void copy_setup(struct dev *d)
{
	uint64_t bytes;
	int lbs;

	if (ioctl(d->fd, BLKGETSIZE64, &bytes))
		die("%s: BLKGETSIZE64: %s", d->path, strerror(errno));
	if (ioctl(d->fd, BLKSSZGET, &lbs))
		die("%s: BLKSSZGET: %s", d->path, strerror(errno));
	if (opt.bs % lbs)
		die("%s: -b %ld is not a multiple of the %d byte logical block size (copy_file_range on a block device needs it)",
		    d->path, opt.bs, lbs);
	/* sources in the first half, each copied to the same offset + half */
	d->u.copy.half = bytes / 2 / (uint64_t)lbs * (uint64_t)lbs;
	d->size = d->u.copy.half;
}

static int copy_sync_io(const struct dev *d, const struct io_req *io)
{
	loff_t in = (loff_t)io->off, out = (loff_t)(io->off + d->u.copy.half);
	ssize_t ret;

	if (opt.copy == COPY_RW) {
		ret = pread(d->fd, io->buf, io->len, in);
		if (ret != (ssize_t)io->len)
			return ret < 0 ? -errno : (int)ret;
		ret = pwrite(d->fd, io->buf, io->len, out);
	} else {
		ret = copy_file_range(d->fd, &in, d->fd, &out, io->len,
				      opt.copy == COPY_OFFLOAD_ONLY ?
				      COPY_FILE_OFFLOAD_ONLY : 0);
	}
	return ret < 0 ? -errno : (int)ret;
}

const struct engine_ops engine_copy = {
	.name		= "copy",
	.probe		= copy_probe,
	.setup		= copy_setup,
	.res_error	= res_error_full_block,
	.sync_io	= copy_sync_io,
};
