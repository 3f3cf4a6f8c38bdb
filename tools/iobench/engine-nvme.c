// SPDX-License-Identifier: GPL-2.0
/*
 * iobench engine: NVMe generic char devices (/dev/ngXnY), NVMe Read and
 * Write as IORING_OP_URING_CMD (NVME_URING_CMD_IO, _IO_VEC with -V1).
 * Its ops are not static: engine-userq.c (-k1) sends the same commands.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/nvme_ioctl.h>

#include "iobench.h"

#define NVME_CMD_WRITE		0x01
#define NVME_CMD_READ		0x02
#define NVME_ADMIN_IDENTIFY	0x06
#define NVME_ID_CNS_NS		0x00
#define NVME_ID_LEN		4096
/* Byte offsets in the Identify Namespace data structure. */
#define NVME_ID_NS_NSZE		0
#define NVME_ID_NS_NLBAF	25
#define NVME_ID_NS_FLBAS	26
#define NVME_ID_NS_LBAF		128	/* 4 bytes each: MS(16) LBADS(8) RP(8) */

/* struct nvme_uring_cmd only uses 72 of the 80 bytes a big SQE offers. */
_Static_assert(sizeof(struct nvme_uring_cmd) <= SQE_CMD_BYTES,
	       "nvme_uring_cmd does not fit a 128-byte SQE");

bool nvme_probe(const struct stat *st, const char *sysname, const char *class)
{
	return S_ISCHR(st->st_mode) && !strcmp(class, "nvme-generic") &&
	       !strncmp(sysname, "ng", 2);
}

/* Identify Namespace on the namespace's own char device. */
static void nvme_identify_ns(const struct dev *d, __u32 nsid, uint8_t *id)
{
	struct nvme_passthru_cmd cmd;
	int ret;

	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = NVME_ADMIN_IDENTIFY;
	cmd.nsid = nsid;
	cmd.addr = (uintptr_t)id;
	cmd.data_len = NVME_ID_LEN;
	cmd.cdw10 = NVME_ID_CNS_NS;
	ret = ioctl(d->fd, NVME_IOCTL_ADMIN_CMD, &cmd);
	if (ret < 0)
		die("%s: Identify Namespace: %s", d->path, strerror(errno));
	if (ret > 0)
		die("%s: Identify Namespace: NVMe status %#x", d->path, ret);
}

void nvme_setup(struct dev *d)
{
	uint8_t id[NVME_ID_LEN];
	const uint8_t *lbaf;
	unsigned int fmt, lbads;
	uint64_t nsze;
	uint16_t ms;
	int nsid;

	nsid = ioctl(d->fd, NVME_IOCTL_ID);
	if (nsid < 0)
		die("%s: NVME_IOCTL_ID: %s", d->path, strerror(errno));
	nvme_identify_ns(d, (__u32)nsid, id);

	memcpy(&nsze, id + NVME_ID_NS_NSZE, sizeof(nsze));
	nsze = le64toh(nsze);
	/* FLBAS bits 3:0 are the format index, bits 6:5 its high bits. */
	fmt = (id[NVME_ID_NS_FLBAS] & 0xf) | ((id[NVME_ID_NS_FLBAS] >> 1) & 0x30);
	if (fmt > id[NVME_ID_NS_NLBAF])
		die("%s: LBA format %u out of range", d->path, fmt);
	lbaf = id + NVME_ID_NS_LBAF + 4 * fmt;
	memcpy(&ms, lbaf, sizeof(ms));
	ms = le16toh(ms);
	lbads = lbaf[2];

	/*
	 * With metadata the device would also transfer to or from a metadata
	 * pointer we never set up; refuse instead of corrupting memory.
	 */
	if (ms)
		die("%s: LBA format %u carries %u bytes of metadata, not supported",
		    d->path, fmt, ms);
	if (lbads < 9 || lbads > 24)
		die("%s: unsupported LBA size 2^%u", d->path, lbads);
	if (nsze > UINT64_MAX >> lbads)
		die("%s: bogus namespace size %" PRIu64, d->path, nsze);
	/* NLB is a 16-bit 0's based count. */
	if ((uint64_t)opt.bs >> lbads > 65536)
		die("%s: -b %ld exceeds 65536 LBAs", d->path, opt.bs);

	d->u.nvme.nsid = (__u32)nsid;
	d->lba_shift = lbads;
	d->size = nsze << lbads;
}

void nvme_prep(const struct dev *d, struct io_uring_sqe *sqe,
	       const struct io_req *io)
{
	struct nvme_uring_cmd *cmd = (struct nvme_uring_cmd *)sqe->cmd;
	uint64_t slba = io->off >> d->lba_shift;

	prep_uring_cmd(sqe, io);
	cmd->opcode = io->write ? NVME_CMD_WRITE : NVME_CMD_READ;
	cmd->nsid = d->u.nvme.nsid;
	cmd->cdw10 = (__u32)slba;
	cmd->cdw11 = (__u32)(slba >> 32);
	cmd->cdw12 = (io->len >> d->lba_shift) - 1;	/* NLB, 0's based */
	if (io->iov) {
		sqe->cmd_op = NVME_URING_CMD_IO_VEC;
		cmd->addr = (uintptr_t)io->iov;
		cmd->data_len = 1;	/* vectored: number of iovecs */
	} else {
		sqe->cmd_op = NVME_URING_CMD_IO;
		cmd->addr = (uintptr_t)io->buf;
		cmd->data_len = io->len;
	}
}

/* res is 0, a negative errno, or the NVMe status field (SCT 10:8, SC 7:0). */
const char *nvme_res_error(const struct dev *d, int res, char *buf,
			   size_t len)
{
	if (res <= 0)
		return res_error_zero_ok(d, res, buf, len);
	snprintf(buf, len, "NVMe status %#x (SCT %#x SC %#x)", res,
		 (res >> 8) & 0x7, res & 0xff);
	return buf;
}

const struct engine_ops engine_nvme = {
	.name		= "nvme-generic",
	.probe		= nvme_probe,
	.ring_flags	= IORING_SETUP_SQE128 | IORING_SETUP_CQE32,
	.setup		= nvme_setup,
	.prep		= nvme_prep,
	.res_error	= nvme_res_error,
};
