// SPDX-License-Identifier: GPL-2.0
/*
 * iobench engine: virtio-blk char devices (/dev/vdXc0), VIRTIO_BLK_T_IN and
 * _OUT as IORING_OP_URING_CMD (VIRTIO_BLK_URING_CMD_IO, _IO_VEC with -V1).
 *
 * Built against kernel headers without the virtio-blk passthrough UAPI the
 * engine still recognises the device, but has no setup and says so.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/virtio_blk.h>
#if __has_include(<linux/virtio_blk_uring.h>)
#include <linux/virtio_blk_uring.h>
#endif

#include "iobench.h"

static bool vblk_probe(const struct stat *st, const char *sysname,
		       const char *class)
{
	(void)class;
	return S_ISCHR(st->st_mode) && !fnmatch("vd*c0", sysname, 0);
}

#ifdef VIRTIO_BLK_URING_CMD_IO
_Static_assert(sizeof(struct virtio_blk_uring_cmd) <= SQE_CMD_BYTES,
	       "virtio_blk_uring_cmd does not fit a 128-byte SQE");

/* One unsigned number from a sysfs attribute; false if unreadable. */
static bool sysfs_read_u64(const char *path, uint64_t *val)
{
	unsigned long long v;
	FILE *f = fopen(path, "r");
	int n;

	if (!f)
		return false;
	n = fscanf(f, "%llu", &v);
	fclose(f);
	if (n != 1)
		return false;
	*val = v;
	return true;
}

/*
 * The char device has no BLKGETSIZE64, so the capacity comes from the disk's
 * sysfs directory. The char device's parent is the virtio device, and that
 * device's block/ directory holds exactly the one disk the char device was
 * made for: /sys/dev/char/MAJ:MIN/device/block/vdX. Going through the device
 * link rather than stripping "c0" from the name keeps working whatever the
 * disks are called, and never picks another disk's size. Both the size
 * (always in 512-byte sectors) and the logical block size are read at the
 * same place, so they describe the same disk.
 */
static void vblk_setup(struct dev *d)
{
	char dir[128], path[PATH_MAX], disk[NAME_MAX + 1] = "";
	uint64_t sectors, lbs;
	struct dirent *de;
	struct stat st;
	unsigned int n = 0;
	DIR *dp;

	if (fstat(d->fd, &st))
		die("%s: %s", d->path, strerror(errno));
	snprintf(dir, sizeof(dir), "/sys/dev/char/%u:%u/device/block",
		 major(st.st_rdev), minor(st.st_rdev));
	dp = opendir(dir);
	if (!dp)
		die("%s: cannot find its disk in %s: %s", d->path, dir,
		    strerror(errno));
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(disk, sizeof(disk), "%s", de->d_name);
		n++;
	}
	closedir(dp);
	if (n != 1)
		die("%s: expected one disk in %s, found %u", d->path, dir, n);

	snprintf(path, sizeof(path), "%s/%s/size", dir, disk);
	if (!sysfs_read_u64(path, &sectors))
		die("%s: cannot read %s", d->path, path);
	snprintf(path, sizeof(path), "%s/%s/queue/logical_block_size", dir, disk);
	if (!sysfs_read_u64(path, &lbs))
		die("%s: cannot read %s", d->path, path);
	if (lbs < 512 || lbs > (1U << 24) || (lbs & (lbs - 1)))
		die("%s: unsupported logical block size %" PRIu64, d->path, lbs);
	if (sectors > UINT64_MAX >> 9)
		die("%s: bogus capacity %" PRIu64 " sectors", d->path, sectors);

	d->lba_shift = (unsigned int)__builtin_ctzll(lbs);
	d->size = sectors << 9;
}

static void vblk_prep(const struct dev *d, struct io_uring_sqe *sqe,
		      const struct io_req *io)
{
	struct virtio_blk_uring_cmd *cmd = (struct virtio_blk_uring_cmd *)sqe->cmd;

	(void)d;
	prep_uring_cmd(sqe, io);
	cmd->type = io->write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;
	cmd->sector = io->off >> 9;	/* always 512-byte units */
	if (io->iov) {
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO_VEC;
		cmd->data = (uintptr_t)io->iov;
		cmd->data_len = 1;	/* vectored: number of iovecs */
	} else {
		sqe->cmd_op = VIRTIO_BLK_URING_CMD_IO;
		cmd->data = (uintptr_t)io->buf;
		cmd->data_len = io->len;
	}
}

#endif /* VIRTIO_BLK_URING_CMD_IO */

const struct engine_ops engine_vblk = {
	.name		= "virtio-blk",
	.probe		= vblk_probe,
	/*
	 * The command needs the 128-byte SQE; its completion has nothing
	 * for a 32-byte CQE (big_cqe is 0), so the ring does without, as
	 * fio's cmd_type=vblk does.
	 */
	.ring_flags	= IORING_SETUP_SQE128,
#ifdef VIRTIO_BLK_URING_CMD_IO
	.setup		= vblk_setup,
	.prep		= vblk_prep,
	/* the device status reaches us mapped to an errno */
	.res_error	= res_error_zero_ok,
#endif
};
