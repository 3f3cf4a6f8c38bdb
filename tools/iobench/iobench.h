/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What iobench.c and the engine-*.c files share: the options, a device,
 * one IO as an engine sees it, and the ops table an engine implements.
 *
 * An engine is one kind of device: how to size it, what a ring needs
 * before its first IO (-k1's user queue), how to turn an IO into an SQE
 * (or a synchronous call, -S1) and how to judge its result. It lives
 * in its own engine-<name>.c and is one entry of engines[] in iobench.c;
 * the rest (rings, threads, offsets, verify, statistics) is common.
 */
#ifndef IOBENCH_H
#define IOBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <liburing.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define MIN(a, b)	((a) < (b) ? (a) : (b))

/* Every option is a long so that one table can parse, print and dump them. */
struct options {
	long depth;
	long sbatch;
	long cbatch;
	long bs;
	long polled;
	long fixedbufs;
	long regfiles;
	long odirect;
	long nthreads;
	long nop;
	long track_lat;
	long runtime;
	long random;
	long sync;
	long regring;
	long passthru;
	long vectored;
	long wpct;
	long sqpoll;
	long sqpoll_cpu;
	long defer_taskrun;
	long verify;
	long nverify;
	long copy;
	long userq;
	const char *json;
};

extern struct options opt;

/* --copy: how engine-copy.c copies a block */
enum copy_mode {
	COPY_NONE,
	COPY_CFR,		/* copy_file_range(2), offloaded or emulated */
	COPY_OFFLOAD_ONLY,	/* copy_file_range(2), COPY_FILE_OFFLOAD_ONLY */
	COPY_RW,		/* pread + pwrite in userspace */
};

struct dev;

/* One IO as handed to an engine's prep() or sync_io(). */
struct io_req {
	uint64_t off;			/* bytes */
	uint32_t len;			/* bytes */
	bool write;
	void *buf;
	const struct iovec *iov;	/* -V1: the one iovec of buf, else NULL */
	int buf_index;			/* -B1: registered buffer, else -1 */
	int fd;				/* the fd, or its index with -F1 */
};

struct engine_ops {
	const char *name;
	/*
	 * Does this engine drive a file of this type? For a char device,
	 * sysname and class are its name and class in sysfs ("" otherwise).
	 * NULL: never picked by type (the -N1 engine).
	 */
	bool (*probe)(const struct stat *st, const char *sysname,
		      const char *class);
	/* Ring setup flags the engine's SQEs need (SQE128 for uring_cmd). */
	unsigned int ring_flags;
	/*
	 * Fill d->size and, if IO must be aligned to an LBA, d->lba_shift;
	 * anything else it needs goes into d->u. Dies with a message if the
	 * device cannot be used. NULL: this build cannot drive the device.
	 */
	void (*setup)(struct dev *d);
	/*
	 * Fill the whole SQE (128 bytes with ring_flags SQE128) for io;
	 * the caller adds IOSQE_FIXED_FILE and user_data afterwards.
	 */
	void (*prep)(const struct dev *d, struct io_uring_sqe *sqe,
		     const struct io_req *io);
	/*
	 * Per-ring state the engine's SQEs rely on (the -k1 user queue).
	 * Called in the thread that owns the ring (SINGLE_ISSUER), after its
	 * files and buffers are registered and before the clock starts, once
	 * for each device the ring drives; fd is the device's fd or, with
	 * fixed_file, its registered index. Dies with a message if the ring
	 * cannot be set up; returns a few words for the setup echo, or NULL.
	 * Nothing undoes it: what it sets up must go away with the ring.
	 * NULL: the engine needs nothing per ring.
	 */
	const char *(*ring_init)(const struct dev *d, struct io_uring *ring,
				 int fd, bool fixed_file);
	/* NULL if res (cqe->res or sync_io's) means success, else why not. */
	const char *(*res_error)(const struct dev *d, int res, char *buf,
				 size_t len);
	/* -S1: do io synchronously, return as a CQE would. NULL: no -S1. */
	int (*sync_io)(const struct dev *d, const struct io_req *io);
};

struct dev {
	const char *path;
	int fd;
	uint64_t size;			/* bytes available for IO */
	uint64_t nblocks;		/* size / bs */
	unsigned int lba_shift;		/* log2(LBA size) if aligned IO, else 0 */
	const struct engine_ops *engine;
	union {
		struct {
			__u32 nsid;
		} nvme;
		struct {
			uint64_t half;	/* destination = source + half */
		} copy;
	} u;
};

extern const struct engine_ops engine_block;
extern const struct engine_ops engine_nvme;
extern const struct engine_ops engine_vblk;
extern const struct engine_ops engine_nop;
extern const struct engine_ops engine_copy;
extern const struct engine_ops engine_userq;

/* engine-nvme.c's ops, which engine-userq.c builds on. */
bool nvme_probe(const struct stat *st, const char *sysname, const char *class);
void nvme_setup(struct dev *d);
void nvme_prep(const struct dev *d, struct io_uring_sqe *sqe,
	       const struct io_req *io);
const char *nvme_res_error(const struct dev *d, int res, char *buf,
			   size_t len);

void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...);

/* The common part of every IORING_OP_URING_CMD SQE; cmd_op and cmd are left 0. */
void prep_uring_cmd(struct io_uring_sqe *sqe, const struct io_req *io);
/* res_error for engines whose success is -b bytes, failure a negative errno. */
const char *res_error_full_block(const struct dev *d, int res, char *buf,
				 size_t len);
/* res_error for engines whose success is 0 and failure a negative errno. */
const char *res_error_zero_ok(const struct dev *d, int res, char *buf,
			      size_t len);

/* The cmd[] area of a 128-byte SQE: 80 bytes. */
#define SQE_CMD_BYTES		80

#endif
