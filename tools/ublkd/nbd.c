// SPDX-License-Identifier: GPL-2.0
/*
 * nbd target: a client of the NBD protocol (fixed newstyle handshake,
 * NBD_OPT_GO or, when the server refuses it, NBD_OPT_EXPORT_NAME; simple
 * replies), one connection per queue, over TCP or a UNIX socket. More
 * than one queue needs a server that offers multi-conn.
 *
 *   --host HOST --port PORT | --unix PATH   the server (127.0.0.1:10809)
 *   --export NAME                           the export ("")
 *   --timeout SECONDS                       a request without a reply for
 *                                           that long fails the connection;
 *                                           also bounds connect() and the
 *                                           handshake (30)
 *
 * Every tag owns a message buffer: the 28-byte request header directly in
 * front of the data, so a WRITE goes out as one send. With --get-data (and
 * --user-copy) the driver copies a WRITE's data straight into that message
 * and a READ's reply is received where the driver copies it from; in the
 * default mode the server memcpys between the message and the slot buffer,
 * as a server built on an RPC library with its own buffers must.
 *
 * An NBD error is a u32: it becomes a negative errno (the protocol's
 * table, EIO otherwise), never a byte count. A handle carries a generation
 * besides the tag; a reply that matches no request in flight is dropped
 * and counted ("dropped" in ublkd list -v).
 *
 * When the connection fails (the server went away, or a reply is overdue)
 * every request in flight and every later one completes with -EIO; the
 * device stays deletable.
 */
#include <endian.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ublkd.h"

#define NBD_MAGIC		0x4e42444d41474943ULL	/* "NBDMAGIC" */
#define NBD_OPT_MAGIC		0x49484156454f5054ULL	/* "IHAVEOPT" */
#define NBD_REP_MAGIC		0x0003e889045565a9ULL
#define NBD_REQUEST_MAGIC	0x25609513
#define NBD_SIMPLE_REPLY_MAGIC	0x67446698

#define NBD_FLAG_FIXED_NEWSTYLE	(1 << 0)
#define NBD_FLAG_NO_ZEROES	(1 << 1)
#define NBD_OPT_EXPORT_NAME	1
#define NBD_OPT_GO		7
#define NBD_REP_ACK		1
#define NBD_REP_INFO		3
#define NBD_REP_FLAG_ERROR	(1U << 31)
#define NBD_REP_ERR_UNSUP	(NBD_REP_FLAG_ERROR | 1)
#define NBD_INFO_EXPORT		0

#define NBD_FLAG_HAS_FLAGS	(1 << 0)
#define NBD_FLAG_READ_ONLY	(1 << 1)
#define NBD_FLAG_SEND_FLUSH	(1 << 2)
#define NBD_FLAG_SEND_FUA	(1 << 3)
#define NBD_FLAG_SEND_TRIM	(1 << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1 << 6)
#define NBD_FLAG_CAN_MULTI_CONN	(1 << 8)

#define NBD_CMD_READ		0
#define NBD_CMD_WRITE		1
#define NBD_CMD_DISC		2
#define NBD_CMD_FLUSH		3
#define NBD_CMD_TRIM		4
#define NBD_CMD_WRITE_ZEROES	6
#define NBD_CMD_FLAG_FUA	(1 << 0)
#define NBD_CMD_FLAG_NO_HOLE	(1 << 1)

struct nbd_request {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t handle;
	uint64_t offset;
	uint32_t length;
} __attribute__((packed));

struct nbd_reply {
	uint32_t magic;
	uint32_t error;
	uint64_t handle;
} __attribute__((packed));

/* The header sits right before the page-aligned data. */
#define MSG_DATA_OFF		4096
#define MSG_HDR_OFF		(MSG_DATA_OFF - sizeof(struct nbd_request))

#define NBD_MAX_TIMEOUT		86400

enum { OPT_HOST = 256, OPT_PORT, OPT_UNIX, OPT_EXPORT, OPT_TIMEOUT };

struct nbd_tgt {
	const char *host;
	const char *port;
	const char *unix_path;
	const char *export;
	int timeout;
	uint16_t flags;		/* transmission flags */
	int *fds;		/* one connection per queue, made by init */
	int nr_fds;
	bool said_no_go;	/* the NBD_OPT_GO fallback was logged */
};

enum slot_state { SLOT_IDLE, SLOT_WAIT };

struct nbd_slot {
	char *msg;
	enum slot_state state;
	uint32_t send_len;
	uint64_t handle;	/* of the request in flight */
	struct timespec start;
};

/*
 * An NBD handle: the tag in bits 0-15, a generation in bits 16-63 that
 * grows with every request of the queue, so that a stale or duplicated
 * reply never completes the request that holds its tag now.
 */
#define HANDLE_TAG_MASK		0xffffULL
#define HANDLE_GEN_SHIFT	16

enum { NBD_SEND = 1, NBD_RECV_HDR, NBD_RECV_DATA };

struct nbd_queue {
	int fd;
	bool dead;
	struct nbd_slot *slots;
	/* send FIFO: one send in flight per connection */
	int *sendq;
	int sq_head, sq_count;
	bool sending;
	uint32_t sent;
	/* receive state */
	struct nbd_reply reply;
	uint32_t got;
	int rtag;
	int nr_err_logged;	/* error replies logged, at most 8 */
	int nr_drop_logged;	/* dropped replies logged, at most 8 */
	uint64_t gen;		/* the last generation handed out */
};

static const struct option nbd_opts[] = {
	{ "host", required_argument, NULL, OPT_HOST },
	{ "port", required_argument, NULL, OPT_PORT },
	{ "unix", required_argument, NULL, OPT_UNIX },
	{ "export", required_argument, NULL, OPT_EXPORT },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ NULL, 0, NULL, 0 },
};

static struct nbd_tgt *nbd_of(struct ublkd_dev *dev)
{
	struct nbd_tgt *t = dev->tgt;

	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t) {
			ublkd_log("nbd: out of memory\n");
			exit(1);
		}
		t->host = "127.0.0.1";
		t->port = "10809";
		t->export = "";
		t->timeout = 30;
		dev->tgt = t;
	}
	return t;
}

static int nbd_opt(struct ublkd_dev *dev, int val, const char *arg)
{
	struct nbd_tgt *t = nbd_of(dev);

	switch (val) {
	case OPT_HOST: t->host = arg; return 0;
	case OPT_PORT: t->port = arg; return 0;
	case OPT_UNIX: t->unix_path = arg; return 0;
	case OPT_EXPORT: t->export = arg; return 0;
	case OPT_TIMEOUT: {
		unsigned long v;
		int ret = ublkd_parse_uint(arg, 1, NBD_MAX_TIMEOUT, &v);

		if (ret == -ERANGE)
			ublkd_log("nbd: --timeout takes 1..%d seconds\n",
				  NBD_MAX_TIMEOUT);
		if (!ret)
			t->timeout = v;
		return ret;
	}
	}
	return -EINVAL;
}

/* A deadline @secs from now, for the blocking steps before transmission. */
static struct timespec deadline_in(int secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += secs;
	return ts;
}

/* Milliseconds left until @deadline, 0 once it has passed. */
static int ms_left(const struct timespec *deadline)
{
	struct timespec now;
	int64_t ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 +
		(deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? (ms > INT32_MAX ? INT32_MAX : ms) : 0;
}

/*
 * Send or receive exactly @len bytes on the blocking socket @fd before
 * @deadline: 0, -ETIMEDOUT when the peer stays silent, -ECONNRESET when it
 * closes, or -errno.
 */
static int full_io(int fd, void *buf, size_t len, bool wr,
		   const struct timespec *deadline)
{
	size_t done = 0;

	while (done < len) {
		struct pollfd pfd = { .fd = fd, .events = wr ? POLLOUT : POLLIN };
		ssize_t n;
		int ret;

		ret = poll(&pfd, 1, ms_left(deadline));
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0)
			return -errno;
		if (ret == 0)
			return -ETIMEDOUT;
		n = wr ? send(fd, (char *)buf + done, len - done,
			      MSG_NOSIGNAL | MSG_DONTWAIT) :
			recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		done += n;
	}
	return 0;
}

static const char *server_name(struct nbd_tgt *t, char *buf, size_t len)
{
	if (t->unix_path)
		snprintf(buf, len, "unix:%.100s", t->unix_path);
	else
		snprintf(buf, len, "%.60s:%.20s", t->host, t->port);
	return buf;
}

/*
 * connect() bounded by --timeout: SO_SNDTIMEO bounds a blocking connect on
 * TCP (EINPROGRESS when it expires) and on a UNIX socket whose listener's
 * backlog is full (EAGAIN). Cleared again once connected.
 */
static int connect_bounded(int fd, const struct sockaddr *sa, socklen_t len,
			   int timeout)
{
	struct timeval tv = { .tv_sec = timeout };
	int ret = 0;

	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -errno;
	if (connect(fd, sa, len))
		ret = errno == EINPROGRESS || errno == EAGAIN ? -ETIMEDOUT : -errno;
	tv.tv_sec = 0;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return ret;
}

static int nbd_connect(struct nbd_tgt *t)
{
	char name[128];
	int fd = -1, ret, one = 1;

	if (t->unix_path) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		if (strlen(t->unix_path) >= sizeof(sun.sun_path))
			return -ENAMETOOLONG;
		strcpy(sun.sun_path, t->unix_path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		ret = connect_bounded(fd, (struct sockaddr *)&sun, sizeof(sun),
				      t->timeout);
		if (ret) {
			close(fd);
			goto fail;
		}
		return fd;
	} else {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;

		ret = getaddrinfo(t->host, t->port, &hints, &res);
		if (ret) {
			ublkd_log("nbd: resolving %s: %s\n",
				  server_name(t, name, sizeof(name)), gai_strerror(ret));
			return -EINVAL;
		}
		ret = -ECONNREFUSED;
		for (ai = res; ai; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
				    ai->ai_protocol);
			if (fd < 0)
				continue;
			ret = connect_bounded(fd, ai->ai_addr, ai->ai_addrlen,
					      t->timeout);
			if (!ret)
				break;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
		if (fd < 0)
			goto fail;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		return fd;
	}
fail:
	if (ret == -ETIMEDOUT)
		ublkd_log("nbd: connecting to %s: no answer within %d s (--timeout)\n",
			  server_name(t, name, sizeof(name)), t->timeout);
	else
		ublkd_log("nbd: connecting to %s: %s (is the NBD server running?)\n",
			  server_name(t, name, sizeof(name)), strerror(-ret));
	return ret;
}

/*
 * NBD_OPT_EXPORT_NAME, for a server that refuses NBD_OPT_GO (the protocol
 * says a client SHOULD fall back): the server answers with the export's
 * size and flags (and 124 zero bytes unless NO_ZEROES was agreed), or
 * closes the connection when it has no such export.
 */
static int nbd_export_name(struct nbd_tgt *t, int fd, bool no_zeroes,
			   uint64_t *size, uint16_t *flags,
			   const struct timespec *deadline)
{
	struct {
		uint64_t magic;
		uint32_t opt;
		uint32_t len;
	} __attribute__((packed)) hdr = {
		.magic = htobe64(NBD_OPT_MAGIC),
		.opt = htobe32(NBD_OPT_EXPORT_NAME),
		.len = htobe32(strlen(t->export)),
	};
	struct {
		uint64_t size;
		uint16_t flags;
		char zeroes[124];
	} __attribute__((packed)) rep;
	int ret;

	ret = full_io(fd, &hdr, sizeof(hdr), true, deadline);
	if (!ret)
		ret = full_io(fd, (void *)t->export, strlen(t->export), true,
			      deadline);
	if (!ret)
		ret = full_io(fd, &rep, no_zeroes ? 10 : sizeof(rep), false,
			      deadline);
	if (ret == -ECONNRESET) {
		ublkd_log("nbd: export '%s' refused (NBD_OPT_EXPORT_NAME: the server closed the connection)\n",
			  t->export);
		return -ENOENT;
	}
	if (ret)
		return ret;
	*size = be64toh(rep.size);
	*flags = be16toh(rep.flags);
	return 0;
}

/*
 * Fixed newstyle handshake with NBD_OPT_GO, or NBD_OPT_EXPORT_NAME when
 * the server refuses GO; fills @size and @flags. The whole exchange must
 * end within --timeout.
 */
static int nbd_handshake(struct nbd_tgt *t, int fd, uint64_t *size,
			 uint16_t *flags)
{
	struct {
		uint64_t magic;
		uint64_t opt_magic;
		uint16_t flags;
	} __attribute__((packed)) hello;
	struct {
		uint64_t magic;
		uint32_t opt;
		uint32_t type;
		uint32_t len;
	} __attribute__((packed)) rep;
	struct timespec deadline = deadline_in(t->timeout);
	uint32_t cflags, namelen = strlen(t->export);
	char opt[16 + 4 + 4 + 4096 + 2];
	char data[1024], name[128];
	uint16_t hflags;
	size_t off = 0;
	int ret;

	ret = full_io(fd, &hello, sizeof(hello), false, &deadline);
	if (ret)
		goto io_err;
	if (be64toh(hello.magic) != NBD_MAGIC ||
	    be64toh(hello.opt_magic) != NBD_OPT_MAGIC) {
		ublkd_log("nbd: the server does not speak newstyle NBD\n");
		return -EPROTO;
	}
	hflags = be16toh(hello.flags);
	if (!(hflags & NBD_FLAG_FIXED_NEWSTYLE)) {
		ublkd_log("nbd: the server lacks fixed newstyle negotiation\n");
		return -EPROTO;
	}
	cflags = htobe32(NBD_FLAG_FIXED_NEWSTYLE |
			 (hflags & NBD_FLAG_NO_ZEROES));
	if (namelen > 4096)
		return -ENAMETOOLONG;
	*(uint64_t *)(opt + off) = htobe64(NBD_OPT_MAGIC); off += 8;
	*(uint32_t *)(opt + off) = htobe32(NBD_OPT_GO); off += 4;
	*(uint32_t *)(opt + off) = htobe32(4 + namelen + 2); off += 4;
	*(uint32_t *)(opt + off) = htobe32(namelen); off += 4;
	memcpy(opt + off, t->export, namelen); off += namelen;
	*(uint16_t *)(opt + off) = 0; off += 2;
	ret = full_io(fd, &cflags, sizeof(cflags), true, &deadline);
	if (!ret)
		ret = full_io(fd, opt, off, true, &deadline);
	if (ret)
		goto io_err;

	*size = 0;
	for (;;) {
		uint32_t type, len;

		ret = full_io(fd, &rep, sizeof(rep), false, &deadline);
		if (ret)
			goto io_err;
		type = be32toh(rep.type);
		len = be32toh(rep.len);
		if (be64toh(rep.magic) != NBD_REP_MAGIC || len > sizeof(data) - 1) {
			ublkd_log("nbd: bad option reply\n");
			return -EPROTO;
		}
		ret = full_io(fd, data, len, false, &deadline);
		if (ret)
			goto io_err;
		data[len] = 0;
		if (type == NBD_REP_ERR_UNSUP) {
			if (!t->said_no_go)
				ublkd_log("nbd: the server does not support NBD_OPT_GO; using NBD_OPT_EXPORT_NAME\n");
			t->said_no_go = true;
			ret = nbd_export_name(t, fd, hflags & NBD_FLAG_NO_ZEROES,
					      size, flags, &deadline);
			if (ret == -ENOENT)
				return ret;
			if (ret)
				goto io_err;
			break;
		}
		if (type & NBD_REP_FLAG_ERROR) {
			ublkd_log("nbd: export '%s' refused (reply 0x%x)%s%s\n",
				  t->export, type, len ? ": " : "", data);
			return -ENOENT;
		}
		if (type == NBD_REP_INFO && len >= 12 &&
		    be16toh(*(uint16_t *)data) == NBD_INFO_EXPORT) {
			*size = be64toh(*(uint64_t *)(data + 2));
			*flags = be16toh(*(uint16_t *)(data + 10));
		}
		if (type == NBD_REP_ACK)
			break;
	}
	if (!*size) {
		ublkd_log("nbd: the server gave no export size\n");
		return -EPROTO;
	}
	return 0;
io_err:
	if (ret == -ETIMEDOUT)
		ublkd_log("nbd: handshake with %s: no answer within %d s (--timeout)\n",
			  server_name(t, name, sizeof(name)), t->timeout);
	else
		ublkd_log("nbd: handshake with %s: %s\n",
			  server_name(t, name, sizeof(name)), strerror(-ret));
	return ret;
}

/*
 * Every connection is made here, before ADD_DEV, so that a server that
 * does not answer fails "add" within --timeout instead of hanging a queue
 * thread's setup; each must show the export the first one showed.
 */
static int nbd_init(struct ublkd_dev *dev)
{
	struct nbd_tgt *t = nbd_of(dev);
	struct ublk_param_basic *b = &dev->params.basic;
	struct ublk_param_discard *d = &dev->params.discard;
	char name[128];
	int i, ret;

	t->fds = malloc(dev->nr_queues * sizeof(*t->fds));
	if (!t->fds)
		return -ENOMEM;
	t->nr_fds = dev->nr_queues;
	for (i = 0; i < t->nr_fds; i++)
		t->fds[i] = -1;
	for (i = 0; i < t->nr_fds; i++) {
		uint64_t size;
		uint16_t flags;

		t->fds[i] = nbd_connect(t);
		if (t->fds[i] < 0)
			return t->fds[i];
		ret = nbd_handshake(t, t->fds[i], &size, &flags);
		if (ret)
			return ret;
		if (i == 0) {
			dev->size = size;
			t->flags = flags;
			/*
			 * Without multi-conn a FLUSH (or FUA) on one connection
			 * need not cover writes acknowledged on another (the
			 * protocol; the kernel's nbd client refuses it too).
			 */
			if (dev->nr_queues > 1 &&
			    !(flags & NBD_FLAG_CAN_MULTI_CONN)) {
				ublkd_log("nbd: %s does not offer multi-conn (NBD_FLAG_CAN_MULTI_CONN): with %d queues (connections) a FLUSH on one would not cover writes done on another; use -q 1\n",
					  server_name(t, name, sizeof(name)),
					  dev->nr_queues);
				return -EINVAL;
			}
		} else if (size != dev->size || flags != t->flags) {
			ublkd_log("nbd: connection %d shows size %llu flags 0x%x, the first showed %llu 0x%x\n",
				  i, (unsigned long long)size, flags,
				  (unsigned long long)dev->size, t->flags);
			return -EPROTO;
		}
	}
	dev->size &= ~511ULL;
	if (t->flags & NBD_FLAG_READ_ONLY)
		b->attrs |= UBLK_ATTR_READ_ONLY;
	if (t->flags & NBD_FLAG_SEND_FLUSH) {
		b->attrs |= UBLK_ATTR_VOLATILE_CACHE;
		if (t->flags & NBD_FLAG_SEND_FUA)
			b->attrs |= UBLK_ATTR_FUA;
	}
	if (t->flags & (NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES)) {
		dev->params.types |= UBLK_PARAM_TYPE_DISCARD;
		d->discard_granularity = 4096;
		d->max_discard_segments = 1;
		if (t->flags & NBD_FLAG_SEND_TRIM)
			d->max_discard_sectors = dev->max_io_bytes >> 9;
		if (t->flags & NBD_FLAG_SEND_WRITE_ZEROES)
			d->max_write_zeroes_sectors = dev->max_io_bytes >> 9;
	}
	snprintf(dev->tgt_desc, sizeof(dev->tgt_desc), "%.100s export '%.100s'",
		 server_name(t, name, sizeof(name)), t->export);
	return 0;
}

static void recv_hdr(struct ublkd_queue *q);

static int nbd_init_queue(struct ublkd_queue *q)
{
	struct nbd_tgt *t = q->dev->tgt;
	struct nbd_queue *nq = calloc(1, sizeof(*nq));
	int i;

	if (!nq)
		return -ENOMEM;
	q->tgt = nq;
	nq->fd = -1;
	nq->slots = calloc(q->depth, sizeof(*nq->slots));
	nq->sendq = calloc(q->depth, sizeof(*nq->sendq));
	if (!nq->slots || !nq->sendq)
		return -ENOMEM;
	for (i = 0; i < q->depth; i++)
		if (posix_memalign((void **)&nq->slots[i].msg, 4096,
				   MSG_DATA_OFF + q->dev->max_io_bytes))
			return -ENOMEM;
	if (q->q_id >= t->nr_fds || t->fds[q->q_id] < 0)
		return -ENOTCONN;
	nq->fd = t->fds[q->q_id];
	t->fds[q->q_id] = -1;
	/* The driver may give fewer queues than asked (one per CPU at most). */
	if (q->q_id == 0)
		for (i = q->dev->nr_queues; i < t->nr_fds; i++)
			if (t->fds[i] >= 0) {
				close(t->fds[i]);
				t->fds[i] = -1;
			}
	recv_hdr(q);
	return 0;
}

/*
 * Before the ring closes: say goodbye and shut the connection down, so
 * that the receive still armed on the ring ends (with 0) instead of
 * writing into buffers nbd_deinit_queue() frees.
 */
static void nbd_stop_queue(struct ublkd_queue *q)
{
	struct nbd_tgt *t = q->dev->tgt;
	struct nbd_queue *nq = q->tgt;
	struct nbd_request req = {
		.magic = htobe32(NBD_REQUEST_MAGIC),
		.type = htobe16(NBD_CMD_DISC),
	};
	struct timespec deadline = deadline_in(t->timeout);

	if (!nq || nq->fd < 0)
		return;
	if (!nq->dead && !nq->sending)
		full_io(nq->fd, &req, sizeof(req), true, &deadline);
	shutdown(nq->fd, SHUT_RDWR);
}

/* After the ring is closed: nothing can write into these any more. */
static void nbd_deinit_queue(struct ublkd_queue *q)
{
	struct nbd_queue *nq = q->tgt;
	int i;

	if (!nq)
		return;
	if (nq->fd >= 0)
		close(nq->fd);
	if (nq->slots)
		for (i = 0; i < q->depth; i++)
			free(nq->slots[i].msg);
	free(nq->slots);
	free(nq->sendq);
	free(nq);
}

static void nbd_deinit(struct ublkd_dev *dev)
{
	struct nbd_tgt *t = dev->tgt;
	int i;

	for (i = 0; i < t->nr_fds; i++)
		if (t->fds[i] >= 0)
			close(t->fds[i]);
	free(t->fds);
}

static void *nbd_get_buf(struct ublkd_queue *q, int tag,
			 const struct ublksrv_io_desc *iod)
{
	struct nbd_queue *nq = q->tgt;

	(void)iod;
	return nq->slots[tag].msg + MSG_DATA_OFF;
}

static void recv_into(struct ublkd_queue *q, void *buf, uint32_t len, int kind,
		      int tag)
{
	struct nbd_queue *nq = q->tgt;
	struct io_uring_sqe *sqe = ublkd_get_sqe(q);

	io_uring_prep_recv(sqe, nq->fd, buf, len, MSG_WAITALL);
	sqe->user_data = ud_build(tag, kind, 0, true);
	q->tgt_inflight++;
}

static void recv_hdr(struct ublkd_queue *q)
{
	struct nbd_queue *nq = q->tgt;

	recv_into(q, (char *)&nq->reply + nq->got, sizeof(nq->reply) - nq->got,
		  NBD_RECV_HDR, 0);
}

static void send_head(struct ublkd_queue *q)
{
	struct nbd_queue *nq = q->tgt;
	int tag = nq->sendq[nq->sq_head];
	struct nbd_slot *s = &nq->slots[tag];
	struct io_uring_sqe *sqe = ublkd_get_sqe(q);

	io_uring_prep_send(sqe, nq->fd, s->msg + MSG_HDR_OFF + nq->sent,
			   s->send_len - nq->sent, MSG_NOSIGNAL | MSG_WAITALL);
	sqe->user_data = ud_build(tag, NBD_SEND, 0, true);
	q->tgt_inflight++;
	nq->sending = true;
}

/* The connection is gone: fail everything in flight, and all that comes. */
static void nbd_fail_all(struct ublkd_queue *q, const char *why, int err)
{
	struct nbd_queue *nq = q->tgt;
	int i, n = 0;

	if (!nq->dead)
		ublkd_log("nbd: queue %d: connection lost (%s: %s); failing I/O\n",
			  q->q_id, why, strerror(-err));
	nq->dead = true;
	shutdown(nq->fd, SHUT_RDWR);
	for (i = 0; i < q->depth; i++) {
		if (nq->slots[i].state != SLOT_WAIT)
			continue;
		nq->slots[i].state = SLOT_IDLE;
		ublkd_complete(q, i, -EIO);
		n++;
	}
	nq->sq_count = 0;
	if (n)
		ublkd_log("nbd: queue %d: %d requests failed with EIO\n", q->q_id, n);
}

static int nbd_queue_io(struct ublkd_queue *q, int tag,
			const struct ublksrv_io_desc *iod)
{
	struct nbd_tgt *t = q->dev->tgt;
	struct nbd_queue *nq = q->tgt;
	struct nbd_slot *s = &nq->slots[tag];
	struct nbd_request *req = (struct nbd_request *)(s->msg + MSG_HDR_OFF);
	void *data = s->msg + MSG_DATA_OFF, *buf = q->ios[tag].buf;
	uint32_t len = iod_len(iod);
	uint16_t type, flags = 0;

	if (nq->dead)
		return -EIO;
	switch (iod_op(iod)) {
	case UBLK_IO_OP_READ:
		type = NBD_CMD_READ;
		break;
	case UBLK_IO_OP_WRITE:
		type = NBD_CMD_WRITE;
		if (buf != data)	/* the default mode's second copy */
			memcpy(data, buf, len);
		break;
	case UBLK_IO_OP_FLUSH:
		if (!(t->flags & NBD_FLAG_SEND_FLUSH))
			return 0;
		type = NBD_CMD_FLUSH;
		break;
	case UBLK_IO_OP_DISCARD:
		type = NBD_CMD_TRIM;
		break;
	case UBLK_IO_OP_WRITE_ZEROES:
		type = NBD_CMD_WRITE_ZEROES;
		if (iod->op_flags & UBLK_IO_F_NOUNMAP)
			flags |= NBD_CMD_FLAG_NO_HOLE;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if ((iod->op_flags & UBLK_IO_F_FUA) && (t->flags & NBD_FLAG_SEND_FUA))
		flags |= NBD_CMD_FLAG_FUA;

	req->magic = htobe32(NBD_REQUEST_MAGIC);
	req->flags = htobe16(flags);
	req->type = htobe16(type);
	s->handle = ++nq->gen << HANDLE_GEN_SHIFT | tag;
	req->handle = htobe64(s->handle);
	/* A FLUSH's position is not meaningful; NBD wants 0 and 0. */
	req->offset = htobe64(type == NBD_CMD_FLUSH ? 0 : iod_off(iod));
	req->length = htobe32(type == NBD_CMD_FLUSH ? 0 : len);
	s->send_len = sizeof(*req) + (type == NBD_CMD_WRITE ? len : 0);
	s->state = SLOT_WAIT;
	clock_gettime(CLOCK_MONOTONIC, &s->start);

	nq->sendq[(nq->sq_head + nq->sq_count) % q->depth] = tag;
	if (nq->sq_count++ == 0 && !nq->sending) {
		nq->sent = 0;
		send_head(q);
	}
	return UBLKD_QUEUED;
}

static void complete_read(struct ublkd_queue *q, int tag)
{
	struct nbd_queue *nq = q->tgt;
	const struct ublksrv_io_desc *iod = &q->iods[tag];
	void *data = nq->slots[tag].msg + MSG_DATA_OFF, *buf = q->ios[tag].buf;

	if (buf != data)	/* the default mode's second copy */
		memcpy(buf, data, iod_len(iod));
	nq->slots[tag].state = SLOT_IDLE;
	ublkd_complete(q, tag, iod_len(iod));
}

/*
 * An NBD error is a u32 on the wire: map it to a negative errno with the
 * protocol's table, anything else to -EIO. Never pass it through: from
 * 0x80000001 up, -(int)err is a positive byte count, which would complete
 * a READ as success with the buffer's stale bytes.
 */
static int nbd_errno(uint32_t err)
{
	static const struct {
		uint32_t nbd;
		int err;
	} map[] = {
		{ 1, EPERM }, { 5, EIO }, { 12, ENOMEM }, { 22, EINVAL },
		{ 28, ENOSPC }, { 75, EOVERFLOW }, { 95, EOPNOTSUPP },
		{ 108, ESHUTDOWN },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(map); i++)
		if (map[i].nbd == err)
			return -map[i].err;
	return -EIO;
}

static void on_reply(struct ublkd_queue *q)
{
	struct nbd_queue *nq = q->tgt;
	uint64_t handle = be64toh(nq->reply.handle);
	uint32_t err = be32toh(nq->reply.error);
	int tag = handle & HANDLE_TAG_MASK;

	nq->got = 0;
	if (be32toh(nq->reply.magic) != NBD_SIMPLE_REPLY_MAGIC) {
		nbd_fail_all(q, "bad reply magic", -EPROTO);
		return;
	}
	if (tag >= q->depth || nq->slots[tag].state != SLOT_WAIT ||
	    nq->slots[tag].handle != handle) {
		/*
		 * Stale, duplicated or made up: no request waits for it, and
		 * the request that holds its tag now is not its own. Drop it.
		 * (A simple reply's payload length is known only from its
		 * request: should a dropped READ reply carry data, that data
		 * follows as the next "header", whose magic check then fails
		 * the connection.)
		 */
		q->stats[ST_DROPPED]++;
		if (nq->nr_drop_logged < 8) {
			nq->nr_drop_logged++;
			ublkd_log("nbd: queue %d: dropped a reply that matches no request (handle 0x%llx)\n",
				  q->q_id, (unsigned long long)handle);
		}
		recv_hdr(q);
		return;
	}
	if (err) {
		if (nq->nr_err_logged < 8) {
			nq->nr_err_logged++;
			ublkd_log("nbd: queue %d tag %d: the server answered error %u (%s)\n",
				  q->q_id, tag, err, strerror(-nbd_errno(err)));
		}
		nq->slots[tag].state = SLOT_IDLE;
		ublkd_complete(q, tag, nbd_errno(err));
	} else if (iod_op(&q->iods[tag]) == UBLK_IO_OP_READ) {
		nq->rtag = tag;
		recv_into(q, nq->slots[tag].msg + MSG_DATA_OFF,
			  iod_len(&q->iods[tag]), NBD_RECV_DATA, tag);
		return;
	} else {
		nq->slots[tag].state = SLOT_IDLE;
		ublkd_complete(q, tag, iod_op(&q->iods[tag]) == UBLK_IO_OP_WRITE ?
			       (int)iod_len(&q->iods[tag]) : 0);
	}
	recv_hdr(q);
}

/*
 * True when the connection is gone: already (a failure seen before), or
 * with this send or receive, which then fails every request in flight.
 * A result of 0 is the server closing the connection.
 */
static bool io_failed(struct ublkd_queue *q, int res, const char *what)
{
	struct nbd_queue *nq = q->tgt;

	if (nq->dead)
		return true;
	if (res > 0)
		return false;
	nbd_fail_all(q, what, res ? res : -ECONNRESET);
	return true;
}

static void nbd_io_done(struct ublkd_queue *q, const struct io_uring_cqe *cqe)
{
	struct nbd_queue *nq = q->tgt;
	int tag = ud_tag(cqe->user_data), res = cqe->res;

	switch (ud_op(cqe->user_data)) {
	case NBD_SEND:
		nq->sending = false;
		if (io_failed(q, res, "send"))
			return;
		nq->sent += res;
		if (nq->sent < nq->slots[tag].send_len) {
			send_head(q);
			return;
		}
		nq->sq_head = (nq->sq_head + 1) % q->depth;
		nq->sent = 0;
		if (--nq->sq_count)
			send_head(q);
		return;
	case NBD_RECV_HDR:
		if (io_failed(q, res, "receive"))
			return;
		nq->got += res;
		if (nq->got < sizeof(nq->reply))
			recv_hdr(q);
		else
			on_reply(q);
		return;
	case NBD_RECV_DATA:
		if (io_failed(q, res, "receive"))
			return;
		nq->got += res;
		if (nq->got < iod_len(&q->iods[tag])) {
			recv_into(q, nq->slots[tag].msg + MSG_DATA_OFF + nq->got,
				  iod_len(&q->iods[tag]) - nq->got, NBD_RECV_DATA, tag);
			return;
		}
		nq->got = 0;
		complete_read(q, tag);
		recv_hdr(q);
		return;
	}
}

/* A reply overdue by more than --timeout fails the connection. */
static void nbd_tick(struct ublkd_queue *q)
{
	struct nbd_tgt *t = q->dev->tgt;
	struct nbd_queue *nq = q->tgt;
	struct timespec now;
	int i;

	if (nq->dead)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (i = 0; i < q->depth; i++) {
		if (nq->slots[i].state == SLOT_WAIT &&
		    now.tv_sec - nq->slots[i].start.tv_sec > t->timeout) {
			nbd_fail_all(q, "reply timeout", -ETIMEDOUT);
			return;
		}
	}
}

static const int nbd_path_opts[] = { OPT_UNIX, 0 };

const struct ublkd_tgt_ops tgt_nbd = {
	.name = "nbd",
	.path_opts = nbd_path_opts,
	.usage = "[--host HOST (127.0.0.1)] [--port PORT (10809)] | [--unix PATH]\n"
		 "        [--export NAME] [--timeout SECONDS (30)]",
	.opts = nbd_opts,
	.opt = nbd_opt,
	.init = nbd_init,
	.init_queue = nbd_init_queue,
	.stop_queue = nbd_stop_queue,
	.deinit_queue = nbd_deinit_queue,
	.deinit = nbd_deinit,
	.get_buf = nbd_get_buf,
	.queue_io = nbd_queue_io,
	.io_done = nbd_io_done,
	.tick = nbd_tick,
};
