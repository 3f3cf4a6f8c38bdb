// SPDX-License-Identifier: GPL-2.0
/*
 * nbd target: a client of the NBD protocol (fixed newstyle handshake,
 * NBD_OPT_GO, simple replies), one connection per queue, over TCP or a
 * UNIX socket.
 *
 *   --host HOST --port PORT | --unix PATH   the server (127.0.0.1:10809)
 *   --export NAME                           the export ("")
 *   --timeout SECONDS                       a request without a reply for
 *                                           that long fails the connection (30)
 *
 * Every tag owns a message buffer: the 28-byte request header directly in
 * front of the data, so a WRITE goes out as one send. With --get-data (and
 * --user-copy) the driver copies a WRITE's data straight into that message
 * and a READ's reply is received where the driver copies it from; in the
 * default mode the server memcpys between the message and the slot buffer,
 * as a server built on an RPC library with its own buffers must.
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
#define NBD_OPT_GO		7
#define NBD_REP_ACK		1
#define NBD_REP_INFO		3
#define NBD_REP_FLAG_ERROR	(1U << 31)
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
	int first_fd;		/* the handshake of init, reused by queue 0 */
};

enum slot_state { SLOT_IDLE, SLOT_WAIT };

struct nbd_slot {
	char *msg;
	enum slot_state state;
	uint32_t send_len;
	struct timespec start;
};

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
		t->host = "127.0.0.1";
		t->port = "10809";
		t->export = "";
		t->timeout = 30;
		t->first_fd = -1;
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

static int full_io(int fd, void *buf, size_t len, bool wr)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = wr ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL) :
			read(fd, (char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
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
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
			ret = -errno;
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
			if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
				break;
			ret = -errno;
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
	ublkd_log("nbd: connecting to %s: %s (is the NBD server running?)\n",
		  server_name(t, name, sizeof(name)), strerror(-ret));
	return ret;
}

/* Fixed newstyle handshake with NBD_OPT_GO; fills size and flags. */
static int nbd_handshake(struct nbd_tgt *t, int fd, uint64_t *size)
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
	uint32_t cflags, namelen = strlen(t->export);
	char opt[16 + 4 + 4 + 4096 + 2];
	char data[1024];
	uint16_t hflags;
	size_t off = 0;
	int ret;

	ret = full_io(fd, &hello, sizeof(hello), false);
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
	ret = full_io(fd, &cflags, sizeof(cflags), true);
	if (!ret)
		ret = full_io(fd, opt, off, true);
	if (ret)
		goto io_err;

	*size = 0;
	for (;;) {
		uint32_t type, len;

		ret = full_io(fd, &rep, sizeof(rep), false);
		if (ret)
			goto io_err;
		type = be32toh(rep.type);
		len = be32toh(rep.len);
		if (be64toh(rep.magic) != NBD_REP_MAGIC || len > sizeof(data) - 1) {
			ublkd_log("nbd: bad option reply\n");
			return -EPROTO;
		}
		ret = full_io(fd, data, len, false);
		if (ret)
			goto io_err;
		data[len] = 0;
		if (type & NBD_REP_FLAG_ERROR) {
			ublkd_log("nbd: export '%s' refused (reply 0x%x)%s%s\n",
				  t->export, type, len ? ": " : "", data);
			return -ENOENT;
		}
		if (type == NBD_REP_INFO && len >= 12 &&
		    be16toh(*(uint16_t *)data) == NBD_INFO_EXPORT) {
			*size = be64toh(*(uint64_t *)(data + 2));
			t->flags = be16toh(*(uint16_t *)(data + 10));
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
	ublkd_log("nbd: handshake: %s\n", strerror(-ret));
	return ret;
}

static int nbd_init(struct ublkd_dev *dev)
{
	struct nbd_tgt *t = nbd_of(dev);
	struct ublk_param_basic *b = &dev->params.basic;
	struct ublk_param_discard *d = &dev->params.discard;
	char name[128];
	int fd, ret;

	fd = nbd_connect(t);
	if (fd < 0)
		return fd;
	ret = nbd_handshake(t, fd, &dev->size);
	if (ret) {
		close(fd);
		return ret;
	}
	t->first_fd = fd;
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
	if (dev->nr_queues > 1 && !(t->flags & NBD_FLAG_CAN_MULTI_CONN))
		ublkd_log("nbd: the server does not offer multi-conn; %d queues use %d connections\n",
			  dev->nr_queues, dev->nr_queues);
	snprintf(dev->tgt_desc, sizeof(dev->tgt_desc), "%.100s export '%.100s'",
		 server_name(t, name, sizeof(name)), t->export);
	return 0;
}

static void recv_hdr(struct ublkd_queue *q);

static int nbd_init_queue(struct ublkd_queue *q)
{
	struct nbd_tgt *t = q->dev->tgt;
	struct nbd_queue *nq = calloc(1, sizeof(*nq));
	uint64_t size;
	int i;

	if (!nq)
		return -ENOMEM;
	q->tgt = nq;
	nq->slots = calloc(q->depth, sizeof(*nq->slots));
	nq->sendq = calloc(q->depth, sizeof(*nq->sendq));
	if (!nq->slots || !nq->sendq)
		return -ENOMEM;
	for (i = 0; i < q->depth; i++)
		if (posix_memalign((void **)&nq->slots[i].msg, 4096,
				   MSG_DATA_OFF + q->dev->max_io_bytes))
			return -ENOMEM;
	if (q->q_id == 0 && t->first_fd >= 0) {
		nq->fd = t->first_fd;
		t->first_fd = -1;
	} else {
		nq->fd = nbd_connect(t);
		if (nq->fd < 0)
			return nq->fd;
		if (nbd_handshake(t, nq->fd, &size))
			return -EPROTO;
	}
	recv_hdr(q);
	return 0;
}

static void nbd_deinit_queue(struct ublkd_queue *q)
{
	struct nbd_queue *nq = q->tgt;
	struct nbd_request req = {
		.magic = htobe32(NBD_REQUEST_MAGIC),
		.type = htobe16(NBD_CMD_DISC),
	};
	int i;

	if (!nq)
		return;
	if (nq->fd >= 0) {
		if (!nq->dead)
			full_io(nq->fd, &req, sizeof(req), true);
		close(nq->fd);
	}
	if (nq->slots)
		for (i = 0; i < q->depth; i++)
			free(nq->slots[i].msg);
	free(nq->slots);
	free(nq->sendq);
	free(nq);
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
	req->handle = htobe64(tag);
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

static void on_reply(struct ublkd_queue *q)
{
	struct nbd_queue *nq = q->tgt;
	uint64_t handle = be64toh(nq->reply.handle);
	uint32_t err = be32toh(nq->reply.error);
	int tag = handle;

	nq->got = 0;
	if (be32toh(nq->reply.magic) != NBD_SIMPLE_REPLY_MAGIC ||
	    handle >= (uint64_t)q->depth || nq->slots[tag].state != SLOT_WAIT) {
		nbd_fail_all(q, "bad reply", -EPROTO);
		return;
	}
	if (err) {
		nq->slots[tag].state = SLOT_IDLE;
		ublkd_complete(q, tag, -(int)err);
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
	.deinit_queue = nbd_deinit_queue,
	.get_buf = nbd_get_buf,
	.queue_io = nbd_queue_io,
	.io_done = nbd_io_done,
	.tick = nbd_tick,
};
