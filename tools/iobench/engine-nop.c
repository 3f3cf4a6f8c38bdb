// SPDX-License-Identifier: GPL-2.0
/*
 * iobench engine: -N1, IORING_OP_NOP requests as t/io_uring -N1 issues
 * them, to measure the ring alone. It drives no device: iobench gives it
 * one pseudo device of one block and moves no data.
 */
#include <stdio.h>
#include <string.h>

#include "iobench.h"

static void nop_setup(struct dev *d)
{
	d->size = (uint64_t)opt.bs;
}

static void nop_prep(const struct dev *d, struct io_uring_sqe *sqe,
		     const struct io_req *io)
{
	(void)d;
	(void)io;
	io_uring_prep_nop(sqe);
}

const struct engine_ops engine_nop = {
	.name		= "nop",
	.setup		= nop_setup,
	.prep		= nop_prep,
	.res_error	= res_error_zero_ok,
};
