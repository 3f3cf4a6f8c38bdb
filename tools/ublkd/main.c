// SPDX-License-Identifier: GPL-2.0
/*
 * ublkd - a ublk server.
 *
 *   ublkd add -t null|loop|nbd [-n ID] [-q QUEUES] [-d DEPTH] [-b MAX_IO]
 *             [-g|--get-data | -u|--user-copy] [-r|--recovery [--no-reissue]]
 *             [--logical-block-size N] [--physical-block-size N]
 *             [--read-only] [--foreground] [--unprivileged] [target options]
 *   ublkd del -n ID | -a
 *   ublkd list [-n ID] [-v]
 *   ublkd features
 *   ublkd recover -n ID
 *
 * add forks one daemon per device, which adds the device, starts one
 * thread per queue and prints /dev/ublkbN once the disk is live. The
 * daemon's log, its counters and the arguments recover needs are in
 * /run/ublkd/N/. With --foreground add itself serves the device, its log
 * on stderr, until SIGINT/SIGTERM/SIGHUP stops and deletes the device or
 * ublkd del does (as rublk's and ublksrv's foreground mode); recover always
 * starts a daemon. recover refuses at once while the device's server
 * still runs; when it is gone and the device still LIVE, it waits for
 * the device to be QUIESCED for up to the disk's request timeout
 * (/sys/block/ublkbN/queue/io_timeout) plus 10 s, saying so when that
 * takes more than a second. --read-only makes a read-only disk (loop
 * opens its backing O_RDONLY) and the server fails any write that still
 * reaches it with EROFS. --unprivileged asks for UBLK_F_UNPRIVILEGED_DEV, which
 * lets a user without CAP_SYS_ADMIN add a device and serve it: every
 * command for such a device names its /dev/ublkcN, which the caller must
 * have access to (a udev rule gives it to the device's owner), and its
 * state is in $XDG_RUNTIME_DIR/ublkd/N. Each queue's thread is pinned to
 * the CPUs the driver maps to its queue (GET_QUEUE_AFFINITY). Exit
 * status: 0 success, 1 failure (the message says what failed), 2 bad
 * usage.
 */
#include <ctype.h>
#include <dirent.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/openat2.h>
#include <time.h>
#include <unistd.h>

#include "ublkd.h"

#define CTRL_DEV	"/dev/ublk-control"

static const struct ublkd_tgt_ops *targets[] = { &tgt_null, &tgt_loop, &tgt_nbd };
static int log_dev_id = -1;

/*
 * One message, formatted whole and handed to stdio in one call: the queue
 * threads log too, and a prefix and a message written apart (stderr is
 * unbuffered until the log is redirected) interleaved with another
 * thread's line. A line longer than the buffer is cut.
 */
void ublkd_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int off;

	if (log_dev_id >= 0)
		off = snprintf(line, sizeof(line), "ublkd[%d]: ", log_dev_id);
	else
		off = snprintf(line, sizeof(line), "ublkd: ");
	va_start(ap, fmt);
	vsnprintf(line + off, sizeof(line) - off, fmt, ap);
	va_end(ap);
	fputs(line, stderr);
}

/* The synopsis and the targets' options: ublkd(8) lists the same. */
static void print_usage(FILE *f)
{
	unsigned int i;

	fprintf(f,
		"usage: ublkd add -t TARGET [-n ID] [-q QUEUES (1)] [-d DEPTH (64)] [-b MAX_IO (1M)]\n"
		"                 [-g|--get-data | -u|--user-copy] [-r|--recovery [--no-reissue]]\n"
		"                 [--logical-block-size N (the backend's, else 512)]\n"
		"                 [--physical-block-size N (the backend's, else 4096)]\n"
		"                 [--read-only] [--foreground] [--unprivileged] [target options]\n"
		"       ublkd del -n ID | -a\n"
		"       ublkd list [-n ID] [-v]\n"
		"       ublkd features\n"
		"       ublkd recover -n ID\n"
		"targets:\n");
	for (i = 0; i < ARRAY_SIZE(targets); i++)
		fprintf(f, "  %-5s %s\n", targets[i]->name, targets[i]->usage);
}

static void __attribute__((noreturn)) die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("ublkd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	print_usage(stderr);
	exit(2);
}

/*
 * The start both number parsers below check before strtoull/strtoul,
 * which skip blanks, take a sign and negate a '-' (so "-4096" would be
 * 2^64 - 4096): 0 when @s starts with a digit, -ERANGE when with a minus
 * sign (the callers say "negative"), -EINVAL otherwise (" 5", "+5", "").
 */
static int unsigned_start(const char *s)
{
	if (*s == '-')
		return -ERANGE;
	return isdigit((unsigned char)*s) ? 0 : -EINVAL;
}

/*
 * A size: a number of bytes (decimal, or hex with 0x) with an optional
 * binary suffix k, m, g or t, nothing around it. 0, -EINVAL when it has
 * another form, -ERANGE when it is negative or does not fit in 64 bits
 * (strtoull alone takes "-4096" as 2^64 - 4096, and a shift overflows).
 * A leading 0 is not octal: "0100M" is 100 MiB, as anyone typing it means.
 */
int ublkd_parse_size(const char *s, uint64_t *val)
{
	unsigned int shift = 0;
	unsigned long long v;
	char *end;
	int ret = unsigned_start(s);

	if (ret)
		return ret;
	errno = 0;
	v = strtoull(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX >> shift)
		return -ERANGE;
	*val = (uint64_t)v << shift;
	return 0;
}

/*
 * An unsigned decimal number in [min, max], nothing around it: 0, -EINVAL
 * when it is not such a number ("5x", " 5", "+5"), -ERANGE outside.
 */
int ublkd_parse_uint(const char *s, unsigned long min, unsigned long max,
		     unsigned long *val)
{
	unsigned long v;
	char *end;
	int ret = unsigned_start(s);

	if (ret)
		return ret;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*val = v;
	return 0;
}

/* ---- control commands, on an SQE128 ring over /dev/ublk-control ---- */

static int open_ctrl(void)
{
	int fd = open(CTRL_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT)
			ublkd_log("%s is missing: no ublk driver (modprobe ublk_drv)\n",
				  CTRL_DEV);
		else
			ublkd_log("opening %s: %s\n", CTRL_DEV, strerror(errno));
		exit(1);
	}
	return fd;
}

static struct io_uring ring;
static bool ring_ok;

/* A forked daemon sets up its own control ring. */
static void ctrl_ring_reset(void)
{
	if (ring_ok)
		io_uring_queue_exit(&ring);
	ring_ok = false;
}

/* One control command; @path_len bytes of @buf are a char device path. */
static int raw_cmd(int ctrl_fd, unsigned int op, int dev_id, void *buf,
		   unsigned int len, uint64_t data0, unsigned int path_len)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct ublksrv_ctrl_cmd cmd = {
		.dev_id = dev_id,
		.queue_id = (__u16)-1,
		.addr = (uintptr_t)buf,
		.len = len,
		.data = { data0 },
		.dev_path_len = path_len,
	};
	int ret;

	if (!ring_ok) {
		ret = io_uring_queue_init(4, &ring, IORING_SETUP_SQE128);
		if (ret) {
			ublkd_log("io_uring setup for control commands: %s\n",
				  strerror(-ret));
			exit(1);
		}
		ring_ok = true;
	}
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, ctrl_fd, NULL, 0, 0);
	sqe->cmd_op = op;
	/* the 80-byte command area of an SQE128 slot */
	memcpy((char *)sqe + offsetof(struct io_uring_sqe, addr3), &cmd,
	       sizeof(cmd));
	/*
	 * A failed submit leaves the SQE in the ring, and a failed wait its
	 * CQE: the next command would send this one again, or read its
	 * answer as its own. Start the next one on a fresh ring.
	 */
	ret = io_uring_submit(&ring);
	if (ret < 0) {
		ctrl_ring_reset();
		return ret;
	}
	do {
		ret = io_uring_wait_cqe(&ring, &cqe);
	} while (ret == -EINTR);
	if (ret < 0) {
		ctrl_ring_reset();
		return ret;
	}
	ret = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	return ret;
}

/*
 * A command for a device added with UBLK_F_UNPRIVILEGED_DEV: the path of
 * its char device goes first in the buffer (dev_path_len bytes, the NUL
 * included), and the driver checks that the caller may read it (the
 * queries) or read and write it (every other command) before it looks at
 * the rest (ublk_ctrl_uring_cmd_permission()). The same layout as
 * ublksrv's.
 */
static int path_cmd(int ctrl_fd, unsigned int op, int dev_id, void *buf,
		    unsigned int len, uint64_t data0)
{
	char path[64], *full;
	unsigned int path_len;
	int ret;

	path_len = snprintf(path, sizeof(path), "/dev/ublkc%d", dev_id) + 1;
	if (path_len + len > UINT16_MAX)
		return -EINVAL;
	full = malloc(path_len + len);
	if (!full)
		return -ENOMEM;
	memcpy(full, path, path_len);
	if (len)
		memcpy(full + path_len, buf, len);
	ret = raw_cmd(ctrl_fd, op, dev_id, full, path_len + len, data0, path_len);
	if (len)
		memcpy(buf, full + path_len, len);
	free(full);
	return ret;
}

/*
 * Which devices are unprivileged, as far as this process knows: asked
 * with GET_DEV_INFO2, which carries the path whatever the device's kind,
 * once per device.
 */
static struct {
	int id;
	bool unprivileged;
} dev_kinds[64];
static unsigned int nr_dev_kinds;

static void dev_kind_set(int dev_id, bool unprivileged)
{
	unsigned int i;

	for (i = 0; i < nr_dev_kinds && i < ARRAY_SIZE(dev_kinds); i++)
		if (dev_kinds[i].id == dev_id)
			break;
	if (i == nr_dev_kinds)
		nr_dev_kinds++;
	i %= ARRAY_SIZE(dev_kinds);
	dev_kinds[i].id = dev_id;
	dev_kinds[i].unprivileged = unprivileged;
}

static void dev_kind_forget(int dev_id)
{
	unsigned int i;

	for (i = 0; i < nr_dev_kinds && i < ARRAY_SIZE(dev_kinds); i++)
		if (dev_kinds[i].id == dev_id)
			dev_kinds[i].id = -1;
}

/*
 * 1 when device @dev_id is unprivileged, 0 when it is not or cannot be
 * told (no /dev/ublkcN to name, a driver without GET_DEV_INFO2: such a
 * device is an ordinary one), or the -errno that settles it: no such
 * device, or no permission (the command itself would fail so too).
 */
static int dev_unprivileged(int ctrl_fd, int dev_id)
{
	struct ublksrv_ctrl_dev_info info;
	unsigned int i;
	int ret;

	for (i = 0; i < nr_dev_kinds && i < ARRAY_SIZE(dev_kinds); i++)
		if (dev_kinds[i].id == dev_id)
			return dev_kinds[i].unprivileged;
	ret = path_cmd(ctrl_fd, UBLK_U_CMD_GET_DEV_INFO2, dev_id, &info,
		       sizeof(info), 0);
	if (ret == -ENODEV || ret == -EPERM || ret == -EACCES)
		return ret;
	if (ret)
		return 0;
	dev_kind_set(dev_id, info.flags & UBLK_F_UNPRIVILEGED_DEV);
	return !!(info.flags & UBLK_F_UNPRIVILEGED_DEV);
}

/* A control command: for an existing device, in the form its kind takes. */
static int ctrl_cmd(int ctrl_fd, unsigned int op, int dev_id, void *buf,
		    unsigned int len, uint64_t data0)
{
	int ret;

	if (op == UBLK_U_CMD_ADD_DEV || op == UBLK_U_CMD_GET_FEATURES)
		return raw_cmd(ctrl_fd, op, dev_id, buf, len, data0, 0);
	ret = dev_unprivileged(ctrl_fd, dev_id);
	if (ret < 0)
		return ret;
	if (ret)
		ret = path_cmd(ctrl_fd, op, dev_id, buf, len, data0);
	else
		ret = raw_cmd(ctrl_fd, op, dev_id, buf, len, data0, 0);
	if (op == UBLK_U_CMD_DEL_DEV && !ret)
		dev_kind_forget(dev_id);
	return ret;
}

static int get_info(int ctrl_fd, int dev_id, struct ublksrv_ctrl_dev_info *info)
{
	memset(info, 0, sizeof(*info));
	return ctrl_cmd(ctrl_fd, UBLK_U_CMD_GET_DEV_INFO, dev_id, info,
			sizeof(*info), 0);
}

/* get_info() for a device the user named: says what is wrong if it fails. */
static int get_named_info(int ctrl_fd, int dev_id,
			  struct ublksrv_ctrl_dev_info *info)
{
	int ret = get_info(ctrl_fd, dev_id, info);

	if (ret)
		ublkd_log("device %d: %s%s\n", dev_id,
			  ret == -ENODEV ? "no such device" : strerror(-ret),
			  ret == -EPERM ? " (an ordinary device: it takes CAP_SYS_ADMIN)" :
			  ret == -EACCES ? " (an unprivileged device: only who may read and write its /dev/ublkcN controls it)" : "");
	return ret;
}

/* The driver's features, or 0 with a message when it cannot say. */
static uint64_t get_features(int ctrl_fd)
{
	uint64_t features = 0;
	int ret = ctrl_cmd(ctrl_fd, UBLK_U_CMD_GET_FEATURES, -1, &features,
			   sizeof(features), 0);

	if (ret) {
		ublkd_log("the ublk driver does not report its features (GET_FEATURES: %s); it predates 6.5\n",
			  strerror(-ret));
		return 0;
	}
	return features;
}

static const struct {
	uint64_t flag;
	const char *name;
} flag_names[] = {
	{ UBLK_F_SUPPORT_ZERO_COPY, "SUPPORT_ZERO_COPY" },
	{ UBLK_F_URING_CMD_COMP_IN_TASK, "URING_CMD_COMP_IN_TASK" },
	{ UBLK_F_NEED_GET_DATA, "NEED_GET_DATA" },
	{ UBLK_F_USER_RECOVERY, "USER_RECOVERY" },
	{ UBLK_F_USER_RECOVERY_REISSUE, "USER_RECOVERY_REISSUE" },
	{ UBLK_F_UNPRIVILEGED_DEV, "UNPRIVILEGED_DEV" },
	{ UBLK_F_CMD_IOCTL_ENCODE, "CMD_IOCTL_ENCODE" },
	{ UBLK_F_USER_COPY, "USER_COPY" },
	{ UBLK_F_ZONED, "ZONED" },
};

/*
 * @set as a CPU list, "0-3,6", the form of /proc's Cpus_allowed_list;
 * "none" when it is empty.
 */
void ublkd_cpu_list(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;
	int cpu, first;

	buf[0] = 0;
	for (cpu = 0; cpu < CPU_SETSIZE && off < len; cpu++) {
		if (!CPU_ISSET(cpu, set))
			continue;
		first = cpu;
		while (cpu + 1 < CPU_SETSIZE && CPU_ISSET(cpu + 1, set))
			cpu++;
		if (first == cpu)
			off += snprintf(buf + off, len - off, "%s%d",
					off ? "," : "", cpu);
		else
			off += snprintf(buf + off, len - off, "%s%d-%d",
					off ? "," : "", first, cpu);
	}
	if (!off)
		snprintf(buf, len, "none");
}

static void print_flags(uint64_t flags)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(flag_names); i++)
		if (flags & flag_names[i].flag)
			printf(" %s", flag_names[i].name);
}

static const char *state_name(int state)
{
	switch (state) {
	case UBLK_S_DEV_DEAD: return "DEAD";
	case UBLK_S_DEV_LIVE: return "LIVE";
	case UBLK_S_DEV_QUIESCED: return "QUIESCED";
	}
	return "?";
}

/*
 * ---- per-device state in /run/ublkd/N/ ----
 *
 * An unprivileged device's daemon cannot write /run/ublkd: its state is
 * under its owner's runtime directory, $XDG_RUNTIME_DIR/ublkd/N (the
 * owner's own XDG_RUNTIME_DIR; for anyone else /run/user/UID/ublkd/N).
 *
 * Such a directory is its owner's to fill with anything, and root reads
 * it (list, which a udev rule runs for every new device) and used to
 * delete in it (del): a FIFO named "target" hung list until udev killed
 * it, a "stats" shorter than the counters killed list -v with SIGBUS,
 * and a symlink made del unlink files anywhere. So every file is read
 * through openat2() below run_parent without following a symlink or
 * crossing a mount, opened O_NONBLOCK, and used only when it is a regular
 * file of the device's owner (root for /run/ublkd); it is read into
 * memory, never mapped; and only the owner removes the directory.
 */
/* (room left for "/ublkd/N/name" in a PATH_MAX path) */
static char run_parent[PATH_MAX - 128] = "/run";
static char run_base[PATH_MAX - 64] = UBLKD_RUN_DIR;
static uid_t run_owner;		/* whose the state files must be */

static void set_run_base(const struct ublksrv_ctrl_dev_info *info)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	run_owner = 0;
	if (!(info->flags & UBLK_F_UNPRIVILEGED_DEV)) {
		snprintf(run_parent, sizeof(run_parent), "/run");
	} else {
		run_owner = info->owner_uid;
		if (xdg && *xdg == '/' && getuid() == info->owner_uid)
			snprintf(run_parent, sizeof(run_parent), "%s", xdg);
		else
			snprintf(run_parent, sizeof(run_parent), "/run/user/%u",
				 info->owner_uid);
	}
	snprintf(run_base, sizeof(run_base), "%s/ublkd", run_parent);
}

static void run_path(char *buf, size_t len, int dev_id, const char *name)
{
	snprintf(buf, len, "%s/%d/%s", run_base, dev_id, name);
}

/*
 * openat2() of @rel below run_parent with @flags: no symlink followed,
 * no mount crossed, whatever the path's components are now.
 */
static int run_openat(int at, const char *rel, uint64_t flags)
{
	struct open_how how = {
		.flags = flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
			   RESOLVE_NO_MAGICLINKS,
	};

	return syscall(SYS_openat2, at, rel, &how, sizeof(how));
}

/*
 * Read at most @size bytes of device @dev_id's state file @name into
 * @buf: the bytes read, or -1 when it is missing or not to be trusted
 * (see above).
 */
static ssize_t run_read(int dev_id, const char *name, void *buf, size_t size)
{
	char rel[64];
	struct stat st;
	ssize_t n = -1;
	int pfd, fd;

	pfd = open(run_parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	snprintf(rel, sizeof(rel), "ublkd/%d/%s", dev_id, name);
	fd = run_openat(pfd, rel, O_RDONLY | O_NONBLOCK);
	close(pfd);
	if (fd < 0)
		return -1;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == run_owner)
		n = read(fd, buf, size);
	close(fd);
	return n;
}

/*
 * Remove device @dev_id's state directory: only its owner does (root for
 * /run/ublkd), through directory fds that followed no symlink. Root
 * never deletes in a user's directory; the daemon, the owner's, removes
 * its own when it ends.
 */
static void run_dir_remove(int dev_id)
{
	static const char *const files[] = { "args", "stats", "log", "target" };
	char name[16];
	unsigned int i;
	int pfd, bfd = -1, dfd = -1;

	if (geteuid() != run_owner)
		return;
	snprintf(name, sizeof(name), "%d", dev_id);
	pfd = open(run_parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd >= 0)
		bfd = run_openat(pfd, "ublkd", O_PATH | O_DIRECTORY);
	if (bfd >= 0)
		dfd = run_openat(bfd, name, O_PATH | O_DIRECTORY);
	if (dfd >= 0) {
		for (i = 0; i < ARRAY_SIZE(files); i++)
			unlinkat(dfd, files[i], 0);
		unlinkat(bfd, name, AT_REMOVEDIR);
		close(dfd);
	}
	if (bfd >= 0)
		close(bfd);
	if (pfd >= 0)
		close(pfd);
}

static int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, buf, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -EIO;
}

/*
 * Read at most @size - 1 bytes of the small file @path into @buf and
 * NUL-terminate them. Returns the bytes read, or <= 0 when the file is
 * missing, unreadable or empty.
 */
static ssize_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* Save the add arguments (NUL-separated) for recover. */
static int save_args(int dev_id, int argc, char **argv)
{
	char path[PATH_MAX], *buf;
	size_t len = 0, off = 0;
	int i, ret;

	for (i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < argc; i++) {
		strcpy(buf + off, argv[i]);
		off += strlen(argv[i]) + 1;
	}
	run_path(path, sizeof(path), dev_id, "args");
	ret = write_file(path, buf, len);
	free(buf);
	return ret;
}

static char **load_args(int dev_id, int *argcp)
{
	static char buf[8192];
	int argc = 0, i;
	char **argv;
	ssize_t n;

	n = run_read(dev_id, "args", buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	/* the last argument ends with the NUL put after it */
	if (buf[n - 1])
		n++;
	for (i = 0; i < n; i++)
		argc += !buf[i];
	argv = calloc(argc + 1, sizeof(*argv));
	if (!argv)
		return NULL;
	argv[0] = buf;
	for (i = 0, argc = 1; i < n - 1; i++)
		if (!buf[i])
			argv[argc++] = buf + i + 1;
	*argcp = argc;
	return argv;
}

/*
 * The daemon's counters file, mapped shared; list reads it with
 * run_read() (a file its owner truncates would SIGBUS a mapping).
 */
static struct ublkd_stats *map_stats(int dev_id)
{
	char path[PATH_MAX];
	void *p;
	int fd;

	run_path(path, sizeof(path), dev_id, "stats");
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, sizeof(struct ublkd_stats))) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, sizeof(struct ublkd_stats), PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- add / recover: the daemon ---- */

/* Core options without a short form: above every target's (256 up). */
enum {
	OPT_LBS = 0x1000, OPT_PBS, OPT_READ_ONLY, OPT_FOREGROUND,
	OPT_UNPRIVILEGED, OPT_NO_REISSUE,
};

static const struct option core_opts[] = {
	{ "target", required_argument, NULL, 't' },
	{ "number", required_argument, NULL, 'n' },
	{ "queues", required_argument, NULL, 'q' },
	{ "depth", required_argument, NULL, 'd' },
	{ "max-io", required_argument, NULL, 'b' },
	{ "get-data", no_argument, NULL, 'g' },
	{ "user-copy", no_argument, NULL, 'u' },
	{ "recovery", no_argument, NULL, 'r' },
	/* ublksrv: --recovery_reissue 0 */
	{ "no-reissue", no_argument, NULL, OPT_NO_REISSUE },
	{ "logical-block-size", required_argument, NULL, OPT_LBS },
	{ "physical-block-size", required_argument, NULL, OPT_PBS },
	{ "read-only", no_argument, NULL, OPT_READ_ONLY },
	{ "foreground", no_argument, NULL, OPT_FOREGROUND },
	/* ublksrv's name for UBLK_F_UNPRIVILEGED_DEV */
	{ "unprivileged", no_argument, NULL, OPT_UNPRIVILEGED },
};

static const struct ublkd_tgt_ops *find_target(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(targets); i++)
		if (!strcmp(targets[i]->name, name))
			return targets[i];
	return NULL;
}

/*
 * A device id, queue count or depth: decimal, so that "-n 010" is device
 * 10 (strtol's base 0 read it as octal 8, and "0x10" as 16).
 */
static int parse_int(const char *s, const char *what, int min, int max)
{
	unsigned long v;

	if (ublkd_parse_uint(s, min, max, &v))
		die_usage("bad %s '%s' (%d..%d)\n", what, s, min, max);
	return v;
}

/*
 * A block size option: a power of two in [min, max], as a number of bytes
 * (no suffix: "4k" is not a block size anyone types).
 */
static unsigned int parse_block_size(const char *s, const char *what,
				     unsigned long min, unsigned long max)
{
	unsigned long v;
	int ret = ublkd_parse_uint(s, min, max, &v);

	if (ret || (v & (v - 1)))
		die_usage("bad %s '%s': %s (it takes powers of two, %lu..%lu)\n", what, s,
			  ret == -ERANGE ? (*s == '-' ? "negative" : "out of range") :
			  ret ? "not a number" : "not a power of two", min, max);
	return v;
}

/*
 * The absolute form of @path: realpath() when it exists, else joined to
 * the working directory (loop --size creates the file later).
 */
static char *absolute_path(const char *path)
{
	char *abs = realpath(path, NULL), cwd[PATH_MAX];

	if (abs)
		return abs;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, path) < 0) {
		ublkd_log("making '%s' absolute: %s\n", path, strerror(errno));
		exit(1);
	}
	return abs;
}

/*
 * Option @val's argument @arg, somewhere in @argv, is a relative path:
 * make it absolute in @argv as well, which save_args() stores, so that
 * recover, run from any directory, opens the same file. Returns the
 * absolute path.
 */
static char *absolute_arg(int argc, char **argv, char *arg)
{
	char *abs = absolute_path(arg), *joined;
	int i;

	for (i = 0; i < argc; i++) {
		size_t len = strlen(argv[i]);

		if (arg < argv[i] || arg > argv[i] + len)
			continue;
		if (arg == argv[i]) {
			argv[i] = abs;
		} else {	/* "--file=x" or "-fx" */
			if (asprintf(&joined, "%.*s%s", (int)(arg - argv[i]),
				     argv[i], abs) < 0)
				exit(1);
			argv[i] = joined;
		}
		break;
	}
	return abs;
}

static bool is_path_opt(const struct ublkd_tgt_ops *ops, int val)
{
	unsigned int i;

	for (i = 0; ops->path_opts && ops->path_opts[i]; i++)
		if (ops->path_opts[i] == val)
			return true;
	return false;
}

/* How the user spells option @val of @opts: "--name", or "-f". */
static const char *opt_name(const struct option *opts, int val)
{
	static char buf[64];
	unsigned int i;

	for (i = 0; opts[i].name; i++)
		if (opts[i].val == val) {
			snprintf(buf, sizeof(buf), "--%s", opts[i].name);
			return buf;
		}
	snprintf(buf, sizeof(buf), "-%c", val);
	return buf;
}

/* Parse add's arguments (argv[0] is "add") into @dev. */
static void parse_add(struct ublkd_dev *dev, int argc, char **argv)
{
	struct option opts[64];
	const struct ublkd_tgt_ops *ops = NULL;
	unsigned int nr = 0, i;
	uint64_t v;
	int c;

	dev->dev_id = -1;
	dev->nr_queues = 1;
	dev->depth = 64;
	dev->max_io_bytes = UBLKD_DEF_IO_BYTES;
	dev->mode = MODE_DEFAULT;

	/* The target decides which options follow: find it first. */
	for (c = 1; c < argc - 1; c++)
		if (!strcmp(argv[c], "-t") || !strcmp(argv[c], "--target"))
			ops = find_target(argv[c + 1]);
		else if (!strncmp(argv[c], "--target=", 9))
			ops = find_target(argv[c] + 9);
	if (!ops)
		die_usage("add needs -t TARGET, one of null, loop, nbd\n");
	dev->ops = ops;

	for (i = 0; i < ARRAY_SIZE(core_opts); i++)
		opts[nr++] = core_opts[i];
	for (i = 0; ops->opts && ops->opts[i].name; i++)
		opts[nr++] = ops->opts[i];
	memset(&opts[nr], 0, sizeof(opts[nr]));

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:n:q:d:b:gurf:", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			break;
		case 'n':
			dev->dev_id = parse_int(optarg, "device id", 0, 1 << 20);
			break;
		case 'q':
			dev->nr_queues = parse_int(optarg, "queue count", 1,
						   UBLKD_MAX_QUEUES);
			break;
		case 'd':
			dev->depth = parse_int(optarg, "queue depth", 1,
					       UBLKD_MAX_DEPTH);
			break;
		case 'b': {
			/*
			 * The driver rounds max_io_buf_bytes down to a page
			 * (ublk_align_max_io_size()): with 64 KiB pages "-b 4k"
			 * would be 0 and "-b 68k" 64k. A multiple of the page
			 * is what the device gets.
			 */
			unsigned long pg = sysconf(_SC_PAGESIZE);

			if (ublkd_parse_size(optarg, &v) || v < pg ||
			    v > (1U << UBLK_IO_BUF_BITS) || (v % pg))
				die_usage("bad max I/O size '%s' (%luk..32M, a multiple of the page size, %lu)\n",
					  optarg, pg >> 10, pg);
			dev->max_io_bytes = v;
			break;
		}
		case 'g':
			if (dev->mode == MODE_USER_COPY)
				die_usage("--get-data and --user-copy exclude each other\n");
			dev->mode = MODE_GET_DATA;
			break;
		case 'u':
			if (dev->mode == MODE_GET_DATA)
				die_usage("--get-data and --user-copy exclude each other\n");
			dev->mode = MODE_USER_COPY;
			break;
		case 'r':
			dev->recovery = true;
			break;
		case OPT_NO_REISSUE:
			dev->no_reissue = true;
			break;
		case OPT_LBS:
			/* ublk takes 512 up to a page (ublk_validate_params()) */
			dev->lbs = parse_block_size(optarg, "--logical-block-size",
						    512, 4096);
			break;
		case OPT_PBS:
			dev->pbs = parse_block_size(optarg, "--physical-block-size",
						    512, 65536);
			break;
		case OPT_READ_ONLY:
			dev->read_only = true;
			break;
		case OPT_FOREGROUND:
			dev->foreground = true;
			break;
		case OPT_UNPRIVILEGED:
			dev->unprivileged = true;
			break;
		default:
			/* -f is loop's --file, as ublksrv spells it */
			if ((c >= 256 || c == 'f') && ops->opt) {
				int ret;

				if (optarg && optarg[0] != '/' && is_path_opt(ops, c))
					optarg = absolute_arg(argc, argv, optarg);
				ret = ops->opt(dev, c, optarg);

				if (ret)
					die_usage("bad %s target option %s '%s': %s\n",
						  ops->name, opt_name(opts, c),
						  optarg ? optarg : "",
						  ret == -ERANGE ? (optarg && *optarg == '-' ?
						  "negative" : "out of range") :
						  "not a valid value");
				break;
			}
			die_usage("unknown option for add -t %s\n", ops->name);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'\n", argv[optind]);
	if (dev->lbs && dev->pbs && dev->pbs < dev->lbs)
		die_usage("--physical-block-size %u is smaller than --logical-block-size %u\n",
			  dev->pbs, dev->lbs);

	dev->flags = UBLK_F_CMD_IOCTL_ENCODE | UBLK_F_URING_CMD_COMP_IN_TASK;
	if (dev->mode == MODE_GET_DATA)
		dev->flags |= UBLK_F_NEED_GET_DATA;
	if (dev->mode == MODE_USER_COPY)
		dev->flags |= UBLK_F_USER_COPY;
	if (dev->no_reissue && !dev->recovery)
		die_usage("--no-reissue goes with --recovery\n");
	/*
	 * With REISSUE the requests the dead server had taken go to the next
	 * one; without it they fail with EIO (for a backend that must not
	 * see a write twice), and only what comes later waits.
	 */
	if (dev->recovery)
		dev->flags |= UBLK_F_USER_RECOVERY;
	if (dev->recovery && !dev->no_reissue)
		dev->flags |= UBLK_F_USER_RECOVERY_REISSUE;
	if (dev->unprivileged) {
		/* What ublk_ctrl_add_dev() does with them for such a device. */
		if (dev->mode == MODE_USER_COPY)
			die_usage("--unprivileged excludes --user-copy: the driver refuses USER_COPY for an unprivileged device (a server that never fills a READ's buffer would show the reader kernel memory)\n");
		if (dev->recovery)
			die_usage("--unprivileged excludes --recovery: the driver drops USER_RECOVERY for an unprivileged device (a server it cannot trust could hang the error handling)\n");
		dev->flags |= UBLK_F_UNPRIVILEGED_DEV;
	}
}

/* Every flag asked for must be one the driver has: say which is not. */
static void check_features(struct ublkd_dev *dev)
{
	uint64_t features = get_features(dev->ctrl_fd), missing;
	unsigned int i;

	if (!features) {
		if (dev->mode == MODE_USER_COPY) {
			ublkd_log("--user-copy needs UBLK_F_USER_COPY (6.5+), which this driver cannot confirm\n");
			exit(1);
		}
		return;
	}
	missing = dev->flags & ~features &
		~(UBLK_F_CMD_IOCTL_ENCODE | UBLK_F_URING_CMD_COMP_IN_TASK);
	for (i = 0; i < ARRAY_SIZE(flag_names); i++)
		if (missing & flag_names[i].flag)
			ublkd_log("the ublk driver lacks UBLK_F_%s, needed by %s\n",
				  flag_names[i].name,
				  flag_names[i].flag == UBLK_F_NEED_GET_DATA ? "--get-data" :
				  flag_names[i].flag == UBLK_F_USER_COPY ? "--user-copy" :
				  flag_names[i].flag == UBLK_F_UNPRIVILEGED_DEV ? "--unprivileged" :
				  "--recovery");
	if (missing)
		exit(1);
}

/*
 * After the target's init: the block sizes the device reports. Logical:
 * --logical-block-size, else the backend's alignment (a loop device on
 * 4 KiB-sector storage, opened O_DIRECT, takes nothing smaller: as the
 * kernel's loop, ublksrv and rublk do), else 512. Physical:
 * --physical-block-size, else the backend's, else 4096, never below the
 * logical. The size is rounded down to whole logical blocks. 0, or 1
 * after saying what is wrong. ublkd_logical_block_size() is the logical
 * block alone, for a target's init (loop's --offset must be a multiple).
 */
unsigned int ublkd_logical_block_size(const struct ublkd_dev *dev)
{
	if (dev->lbs)
		return dev->lbs;
	return dev->backend_lbs > 512 ? dev->backend_lbs : 512;
}

static int choose_block_sizes(struct ublkd_dev *dev)
{
	unsigned int lbs = ublkd_logical_block_size(dev), pbs = dev->pbs;

	if (!dev->lbs) {
		if (lbs > 4096) {
			ublkd_log("%s: the backend needs I/O aligned to %u bytes, more than ublk's largest logical block (4096)\n",
				  dev->ops->name, lbs);
			return 1;
		}
	} else if (lbs < dev->backend_lbs) {
		ublkd_log("%s: --logical-block-size %u is smaller than the %u bytes its backend needs for O_DIRECT (%s)\n",
			  dev->ops->name, lbs, dev->backend_lbs, dev->tgt_desc);
		return 1;
	}
	if (!pbs) {
		pbs = dev->backend_pbs ? dev->backend_pbs : 4096;
		pbs = pbs > 65536 ? 65536 : pbs < lbs ? lbs : pbs;
	} else if (pbs < lbs) {
		ublkd_log("--physical-block-size %u is smaller than the logical block size %u\n",
			  pbs, lbs);
		return 1;
	}
	dev->size &= ~(uint64_t)(lbs - 1);
	if (!dev->size) {
		ublkd_log("%s: the device would be smaller than one %u-byte block\n",
			  dev->ops->name, lbs);
		return 1;
	}
	dev->lbs = lbs;
	dev->pbs = pbs;
	return 0;
}

static void set_basic_params(struct ublkd_dev *dev)
{
	struct ublk_param_basic *b = &dev->params.basic;

	dev->params.len = sizeof(dev->params);
	dev->params.types |= UBLK_PARAM_TYPE_BASIC;
	b->logical_bs_shift = __builtin_ctz(dev->lbs);
	b->physical_bs_shift = __builtin_ctz(dev->pbs);
	b->io_opt_shift = b->physical_bs_shift;
	b->io_min_shift = b->logical_bs_shift;
	if (dev->read_only)
		b->attrs |= UBLK_ATTR_READ_ONLY;
	b->max_sectors = dev->info.max_io_buf_bytes >> SECTOR_SHIFT;
	b->dev_sectors = dev->size >> SECTOR_SHIFT;
}

/*
 * recover: the device keeps the parameters add gave it (nothing sets them
 * again), so a new server must agree with them, not only with its size:
 * a backend whose O_DIRECT block grew, saved arguments that no longer
 * match the device (a data mode the driver does not use for it would
 * hand the driver wrong buffers), a different --read-only. 1 after
 * saying what differs.
 */
static int recover_mismatch(struct ublkd_dev *dev)
{
	const uint64_t mode_flags = UBLK_F_NEED_GET_DATA | UBLK_F_USER_COPY |
		UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE |
		UBLK_F_UNPRIVILEGED_DEV;
	const struct ublk_param_basic *was = &dev->recover_basic;
	const uint32_t attrs = UBLK_ATTR_READ_ONLY | UBLK_ATTR_VOLATILE_CACHE |
		UBLK_ATTR_FUA;
	uint64_t flags = (dev->flags ^ dev->info.flags) & mode_flags;
	uint32_t now_attrs;

	if (flags) {
		ublkd_log("the saved arguments ask for flags 0x%llx, the device has 0x%llx (they differ in 0x%llx): refusing to recover\n",
			  (unsigned long long)(dev->flags & mode_flags),
			  (unsigned long long)(dev->info.flags & mode_flags),
			  (unsigned long long)flags);
		return 1;
	}
	if (1U << was->logical_bs_shift != dev->lbs ||
	    1U << was->physical_bs_shift != dev->pbs) {
		ublkd_log("the device has logical/physical block sizes %u/%u, the backend (%s) now gives %u/%u: refusing to recover\n",
			  1U << was->logical_bs_shift, 1U << was->physical_bs_shift,
			  dev->tgt_desc, dev->lbs, dev->pbs);
		return 1;
	}
	now_attrs = dev->params.basic.attrs |
		(dev->read_only ? UBLK_ATTR_READ_ONLY : 0);
	if ((now_attrs ^ was->attrs) & attrs) {
		ublkd_log("the device has attributes 0x%x, the backend (%s) now gives 0x%x: refusing to recover\n",
			  was->attrs & attrs, dev->tgt_desc, now_attrs & attrs);
		return 1;
	}
	return 0;
}

static int open_cdev(struct ublkd_dev *dev)
{
	char path[64];
	int i;

	snprintf(path, sizeof(path), "/dev/ublkc%d", dev->info.dev_id);
	/*
	 * devtmpfs creates the node; give a udev rule a moment too. An
	 * unprivileged device's node is root's (0600) until a udev rule
	 * gives it to its owner: wait up to 10 s for that.
	 */
	for (i = 0; i < 500; i++) {
		dev->cdev_fd = open(path, O_RDWR | O_CLOEXEC);
		if (dev->cdev_fd >= 0)
			break;
		if (errno != ENOENT && !(dev->unprivileged &&
					 (errno == EACCES || errno == EPERM)))
			break;
		if (errno == ENOENT && i >= 100)
			break;
		usleep(20000);
	}
	if (dev->cdev_fd < 0) {
		ublkd_log("opening %s: %s%s\n", path, strerror(errno),
			  dev->unprivileged && (errno == EACCES || errno == EPERM) ?
			  " (an unprivileged device's /dev/ublkcN and /dev/ublkbN must be given to their owner, as the udev rule make install installs does: see ublkd(8))" : "");
		return -errno;
	}
	return 0;
}

/*
 * Each queue's CPUs, for its thread to be pinned to: GET_QUEUE_AFFINITY
 * fills a cpumask (a multiple of 8 bytes covering every possible CPU)
 * with the CPUs the block layer maps to that hardware queue. When the
 * driver cannot say, a warning: the threads then run anywhere.
 */
static void get_affinity(struct ublkd_dev *dev)
{
	cpu_set_t *sets = calloc(dev->nr_queues, sizeof(*sets));
	int q, ret;

	if (!sets)
		return;
	for (q = 0; q < dev->nr_queues; q++) {
		ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_GET_QUEUE_AFFINITY,
			       dev->info.dev_id, &sets[q], sizeof(sets[q]), q);
		if (ret) {
			ublkd_log("warning: GET_QUEUE_AFFINITY for queue %d: %s; the queue threads are not pinned\n",
				  q, strerror(-ret));
			free(sets);
			return;
		}
	}
	dev->affinity = sets;
}

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static int nr_done;

/* Called by each queue thread as it ends. */
void ublkd_queue_done(struct ublkd_dev *dev)
{
	pthread_mutex_lock(&done_lock);
	if (++nr_done == dev->nr_queues)
		kill(getpid(), SIGUSR1);
	pthread_mutex_unlock(&done_lock);
}

/* Whether every queue thread has ended (its SIGUSR1 is not a stray one). */
static bool queues_done(struct ublkd_dev *dev)
{
	bool done;

	pthread_mutex_lock(&done_lock);
	done = nr_done == dev->nr_queues;
	pthread_mutex_unlock(&done_lock);
	return done;
}

/*
 * The daemon, after the queues run: wait until every queue ended (the
 * device was stopped) or a signal asks to stop and delete the device.
 * SIGUSR1 ends the wait only when the queues sent it: one from anyone
 * else used to leave the daemon in pthread_join() with SIGTERM blocked,
 * its device impossible to stop but by ublkd del. A STOP_DEV that fails
 * (the driver refused it) leaves the device running, so the next signal
 * tries again rather than being ignored as a repeat.
 */
static int daemon_wait(struct ublkd_dev *dev, sigset_t *set)
{
	bool deleting = false;
	int sig, ret;

	for (;;) {
		if (sigwait(set, &sig))
			continue;
		if (sig == SIGUSR1) {
			if (queues_done(dev))
				break;
			ublkd_log("ignoring a SIGUSR1 the queues did not send\n");
			continue;
		}
		if (!deleting) {
			ublkd_log("signal %d: stopping the device\n", sig);
			ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_STOP_DEV,
				       dev->info.dev_id, NULL, 0, 0);
			if (ret)
				ublkd_log("STOP_DEV: %s; the device still runs, another signal tries again\n",
					  strerror(-ret));
			else
				deleting = true;
		}
	}
	ublkd_join_queues(dev);
	if (dev->ops->deinit)
		dev->ops->deinit(dev);
	/*
	 * The device is stopped, by a signal or by ublkd del: its state goes
	 * now, by the daemon (the owner: root's del does not delete in a
	 * user's directory), before /dev/ublkcN is closed, which a del's
	 * DEL_DEV waits for.
	 */
	run_dir_remove(dev->info.dev_id);
	close(dev->cdev_fd);
	if (deleting) {
		ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_DEL_DEV,
			       dev->info.dev_id, NULL, 0, 0);
		if (ret && ret != -ENODEV)
			ublkd_log("DEL_DEV: %s\n", strerror(-ret));
	}
	ublkd_log("exiting\n");
	return 0;
}

static void redirect_log(int dev_id)
{
	char path[PATH_MAX];
	int fd;

	run_path(path, sizeof(path), dev_id, "log");
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		fd = open("/dev/null", O_WRONLY);
	dup2(fd, STDERR_FILENO);
	close(fd);
	fd = open("/dev/null", O_RDWR);
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	setvbuf(stderr, NULL, _IOLBF, 0);
}

static void describe(struct ublkd_dev *dev, int argc, char **argv)
{
	char path[PATH_MAX];
	size_t off = 0;
	int i;

	for (i = 1; i < argc && off < sizeof(dev->tgt_desc) - 1; i++)
		off += snprintf(dev->tgt_desc + off, sizeof(dev->tgt_desc) - off,
				"%s%s", i > 1 ? " " : "", argv[i]);
	run_path(path, sizeof(path), dev->info.dev_id, "target");
	write_file(path, dev->tgt_desc, strlen(dev->tgt_desc));
}

/*
 * The daemon's body for add (recover == false) and recover. Reports
 * "OK N\n" on @ready once the device is live; any earlier exit means
 * failure, with the reason already on stderr.
 */
static int run_daemon(struct ublkd_dev *dev, int argc, char **argv,
		      bool recover, int ready)
{
	char msg[32], path[PATH_MAX];
	sigset_t set;
	int ret;

	/*
	 * The caller may be gone (Ctrl-C, a timeout) by the time the device
	 * is live: writing to its pipe, or to its stderr before the log is
	 * redirected, must fail with EPIPE, not kill the server of a live
	 * device (left DEAD, or QUIESCED with its I/O hanging).
	 */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	ret = dev->ops->init(dev);
	if (ret || choose_block_sizes(dev))
		return 1;
	if (recover && dev->size != dev->recover_size) {
		ublkd_log("the backend (%s) has %llu bytes, the device %llu: refusing to recover onto a resized backend\n",
			  dev->tgt_desc, (unsigned long long)dev->size,
			  (unsigned long long)dev->recover_size);
		return 1;
	}
	if (recover && recover_mismatch(dev))
		return 1;

	if (!recover) {
		struct ublksrv_ctrl_dev_info *info = &dev->info;

		memset(info, 0, sizeof(*info));
		info->nr_hw_queues = dev->nr_queues;
		info->queue_depth = dev->depth;
		info->max_io_buf_bytes = dev->max_io_bytes;
		info->dev_id = dev->dev_id;
		info->ublksrv_pid = getpid();
		info->flags = dev->flags;
		ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_ADD_DEV, dev->dev_id,
			       info, sizeof(*info), 0);
		if (ret) {
			ublkd_log("ADD_DEV: %s%s\n", strerror(-ret),
				  ret == -EEXIST ? " (that device id is taken)" :
				  ret == -EPERM && !dev->unprivileged ?
				  " (adding a device takes CAP_SYS_ADMIN; without it, add an unprivileged device with --unprivileged)" :
				  ret == -EACCES && dev->unprivileged ?
				  " (the driver's limit of unprivileged devices, ublk_drv's ublks_max, is reached)" : "");
			return 1;
		}
		/* With CAP_SYS_ADMIN the driver makes an ordinary device. */
		if (dev->unprivileged && !(info->flags & UBLK_F_UNPRIVILEGED_DEV)) {
			ublkd_log("--unprivileged: the caller has CAP_SYS_ADMIN, so the driver made an ordinary device\n");
			dev->unprivileged = false;
			dev->flags &= ~UBLK_F_UNPRIVILEGED_DEV;
		}
		dev_kind_set(info->dev_id, dev->unprivileged);
		if ((info->flags & dev->flags) != dev->flags) {
			ublkd_log("the driver dropped flags 0x%llx\n",
				  (unsigned long long)(dev->flags & ~info->flags));
			goto del;
		}
		/* The target sized its discard limits and buffers for it. */
		if (info->max_io_buf_bytes != dev->max_io_bytes) {
			ublkd_log("the driver made the largest request %u bytes, not the %u asked for (-b)\n",
				  info->max_io_buf_bytes, dev->max_io_bytes);
			goto del;
		}
	} else {
		/* Wait for the dead daemon's release: bounded. */
		int i;

		for (i = 0; i < 300; i++) {
			ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_START_USER_RECOVERY,
				       dev->info.dev_id, NULL, 0, 0);
			if (ret != -EBUSY)
				break;
			usleep(100000);
		}
		if (ret) {
			ublkd_log("START_USER_RECOVERY: %s\n", strerror(-ret));
			return 1;
		}
	}
	log_dev_id = dev->info.dev_id;
	dev->depth = dev->info.queue_depth;
	dev->nr_queues = dev->info.nr_hw_queues;
	dev->max_io_bytes = dev->info.max_io_buf_bytes;

	set_run_base(&dev->info);
	snprintf(path, sizeof(path), "%s/%d", run_base, dev->info.dev_id);
	mkdir(run_base, dev->unprivileged ? 0700 : 0755);
	if (mkdir(path, 0755) && errno != EEXIST) {
		ublkd_log("making %s: %s%s\n", path, strerror(errno),
			  dev->unprivileged ? " (an unprivileged device keeps its state in $XDG_RUNTIME_DIR/ublkd: set XDG_RUNTIME_DIR to a directory of yours)" : "");
		goto del;
	}
	if (!recover && save_args(dev->info.dev_id, argc, argv)) {
		ublkd_log("writing %s/args: %s\n", path, strerror(errno));
		goto del;
	}
	dev->stats = map_stats(dev->info.dev_id);
	if (!dev->stats) {
		ublkd_log("mapping %s/stats: %s\n", path, strerror(errno));
		goto del;
	}
	describe(dev, argc, argv);

	if (open_cdev(dev))
		goto del;
	get_affinity(dev);
	if (ublkd_start_queues(dev)) {
		ublkd_log("queue setup failed\n");
		goto del;
	}
	if (!recover) {
		set_basic_params(dev);
		ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_SET_PARAMS,
			       dev->info.dev_id, &dev->params,
			       sizeof(dev->params), 0);
		if (ret) {
			ublkd_log("SET_PARAMS: %s\n", strerror(-ret));
			goto del;
		}
		ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_START_DEV,
			       dev->info.dev_id, NULL, 0, getpid());
		if (ret) {
			ublkd_log("START_DEV: %s\n", strerror(-ret));
			goto del;
		}
	} else {
		ret = ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_END_USER_RECOVERY,
			       dev->info.dev_id, NULL, 0, getpid());
		if (ret) {
			ublkd_log("END_USER_RECOVERY: %s\n", strerror(-ret));
			exit(1);
		}
	}
	if (ready < 0) {	/* --foreground: no caller to tell */
		ublkd_log("started: pid %d, %s\n", getpid(), dev->tgt_desc);
		printf("/dev/ublkb%d\n", dev->info.dev_id);
		fflush(stdout);
		return daemon_wait(dev, &set);
	}
	redirect_log(dev->info.dev_id);
	ublkd_log("%s: pid %d, %s\n", recover ? "recovered" : "started",
		  getpid(), dev->tgt_desc);
	snprintf(msg, sizeof(msg), "OK %d\n", dev->info.dev_id);
	if (write(ready, msg, strlen(msg)) < 0)
		ublkd_log("telling ublkd %s: %s%s\n", recover ? "recover" : "add",
			  strerror(errno), errno == EPIPE ?
			  " (it is gone; the device is live all the same)" : "");
	close(ready);
	return daemon_wait(dev, &set);

del:
	if (recover)
		return 1;
	/* Exiting closes /dev/ublkcN, which DEL_DEV waits for: fork it off. */
	if (fork() == 0) {
		close(dev->cdev_fd);
		ctrl_cmd(dev->ctrl_fd, UBLK_U_CMD_DEL_DEV, dev->info.dev_id,
			 NULL, 0, 0);
		run_dir_remove(dev->info.dev_id);
		_exit(0);
	}
	return 1;
}

/*
 * In the daemon: close every fd above stderr that it did not open itself
 * for its work, @a and @b (the control device and the pipe to add).
 */
static void close_inherited(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;

	if (lo > 3)
		close_range(3, lo - 1, 0);
	if (hi > lo + 1)
		close_range(lo + 1, hi - 1, 0);
	close_range(hi + 1, ~0U, 0);
}

/* Fork the daemon, wait until it says the device is live, print it. */
static int spawn(struct ublkd_dev *dev, int argc, char **argv, bool recover)
{
	int pfd[2], status;
	char buf[32] = "";
	ssize_t n;
	pid_t pid;

	if (dev->foreground && !recover)
		return run_daemon(dev, argc, argv, false, -1);
	if (pipe(pfd)) {
		ublkd_log("pipe: %s\n", strerror(errno));
		return 1;
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		ublkd_log("fork: %s\n", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return 1;
	}
	if (pid == 0) {
		close(pfd[0]);
		ctrl_ring_reset();
		setsid();
		/* The daemon must not hold the parent's stdout open (a pipe
		 * to a test would never see EOF). */
		if (!freopen("/dev/null", "w", stdout))
			_exit(1);
		/*
		 * Nor its working directory (a filesystem that could not be
		 * unmounted while the device lives) or any other fd it was
		 * started with: every path it uses is absolute by now.
		 */
		if (chdir("/"))
			_exit(1);
		close_inherited(dev->ctrl_fd, pfd[1]);
		_exit(run_daemon(dev, argc, argv, recover, pfd[1]));
	}
	close(pfd[1]);
	do {
		n = read(pfd[0], buf, sizeof(buf) - 1);
	} while (n < 0 && errno == EINTR);
	close(pfd[0]);
	if (n > 3 && !strncmp(buf, "OK ", 3)) {
		printf("/dev/ublkb%d\n", atoi(buf + 3));
		return 0;
	}
	waitpid(pid, &status, 0);
	ublkd_log("%s failed\n", recover ? "recover" : "add");
	return 1;
}

static int cmd_add(int argc, char **argv)
{
	struct ublkd_dev dev = { 0 };

	parse_add(&dev, argc, argv);
	dev.ctrl_fd = open_ctrl();
	check_features(&dev);
	return spawn(&dev, argc, argv, false);
}

static int parse_id_opts(int argc, char **argv, int *id, bool *all, bool *verbose)
{
	static const struct option opts[] = {
		{ "number", required_argument, NULL, 'n' },
		{ "all", no_argument, NULL, 'a' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*id = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:av", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			*id = parse_int(optarg, "device id", 0, 1 << 20);
			break;
		case 'a':
			if (!all)
				die_usage("%s takes no -a\n", argv[0]);
			*all = true;
			break;
		case 'v':
			if (!verbose)
				die_usage("%s takes no -v\n", argv[0]);
			*verbose = true;
			break;
		default:
			die_usage("bad option for %s\n", argv[0]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'\n", argv[optind]);
	return 0;
}

/* Device ids that exist, from the char devices' class. */
static int list_ids(int *ids, int max)
{
	DIR *d = opendir("/sys/class/ublk-char");
	struct dirent *e;
	int n = 0, i, j;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max)
		if (!strncmp(e->d_name, "ublkc", 5))
			ids[n++] = atoi(e->d_name + 5);
	closedir(d);
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			int t = ids[j];

			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	return n;
}

static int del_one(int ctrl_fd, int id)
{
	struct ublksrv_ctrl_dev_info info;
	int ret = get_named_info(ctrl_fd, id, &info);

	if (ret)
		return 1;
	ret = ctrl_cmd(ctrl_fd, UBLK_U_CMD_STOP_DEV, id, NULL, 0, 0);
	if (ret && ret != -ENODEV) {
		ublkd_log("device %d: STOP_DEV: %s\n", id, strerror(-ret));
		return 1;
	}
	/* DEL_DEV returns once the daemon has closed /dev/ublkcN. */
	ret = ctrl_cmd(ctrl_fd, UBLK_U_CMD_DEL_DEV, id, NULL, 0, 0);
	if (ret && ret != -ENODEV) {
		ublkd_log("device %d: DEL_DEV: %s\n", id, strerror(-ret));
		return 1;
	}
	set_run_base(&info);
	run_dir_remove(id);
	return 0;
}

static int cmd_del(int argc, char **argv)
{
	int id, ids[1024], n, i, ctrl_fd, ret = 0;
	bool all = false;

	parse_id_opts(argc, argv, &id, &all, NULL);
	if ((id < 0) == !all)
		die_usage("del needs -n ID or -a\n");
	ctrl_fd = open_ctrl();
	if (!all)
		return del_one(ctrl_fd, id);
	n = list_ids(ids, ARRAY_SIZE(ids));
	for (i = 0; i < n; i++)
		ret |= del_one(ctrl_fd, ids[i]);
	return ret;
}

static void list_one(int ctrl_fd, int id, bool verbose)
{
	static const char *const stat_names[ST_NR] = {
		"read", "write", "flush", "fua", "discard", "write_zeroes",
		"get_data", "errors", "dropped",
	};
	struct ublksrv_ctrl_dev_info info;
	struct ublk_params params = { .len = sizeof(params) };
	struct ublkd_stats stats, *st = &stats;
	char desc[256];
	ssize_t n;
	int ret, q, s;

	ret = get_info(ctrl_fd, id, &info);
	if (ret) {
		ublkd_log("device %d: GET_DEV_INFO: %s\n", id, strerror(-ret));
		return;
	}
	ret = ctrl_cmd(ctrl_fd, UBLK_U_CMD_GET_PARAMS, id, &params,
		       sizeof(params), 0);
	printf("dev id %d: nr_hw_queues %d queue_depth %d block size %d dev_capacity %llu\n",
	       id, info.nr_hw_queues, info.queue_depth,
	       ret ? 0 : 1 << params.basic.logical_bs_shift,
	       ret ? 0ULL : (unsigned long long)params.basic.dev_sectors);
	printf("\tmax rq size %u daemon pid %d state %s\n", info.max_io_buf_bytes,
	       info.ublksrv_pid, state_name(info.state));
	printf("\tflags 0x%llx [", (unsigned long long)info.flags);
	print_flags(info.flags);
	printf(" ]\n");
	if (info.flags & UBLK_F_UNPRIVILEGED_DEV)
		printf("\towner uid %u gid %u\n", info.owner_uid, info.owner_gid);
	set_run_base(&info);
	n = run_read(id, "target", desc, sizeof(desc) - 1);
	if (n >= 0) {
		desc[n] = 0;
		printf("\ttarget: %s\n", desc);
	}
	if (!verbose)
		return;
	if (!ret)
		printf("\tattrs 0x%x%s%s%s physical block size %u max_sectors %u discard %s\n",
		       params.basic.attrs,
		       params.basic.attrs & UBLK_ATTR_READ_ONLY ? " read-only" : "",
		       params.basic.attrs & UBLK_ATTR_VOLATILE_CACHE ? " volatile-cache" : "",
		       params.basic.attrs & UBLK_ATTR_FUA ? " fua" : "",
		       1U << params.basic.physical_bs_shift,
		       params.basic.max_sectors,
		       params.types & UBLK_PARAM_TYPE_DISCARD ? "yes" : "no");
	if (run_read(id, "stats", &stats, sizeof(stats)) != sizeof(stats))
		st = NULL;
	/* A line per queue: its thread and its CPUs, as ublksrv's list. */
	for (q = 0; q < info.nr_hw_queues && q < UBLKD_MAX_QUEUES; q++) {
		char cpus[256] = "?";
		cpu_set_t set;

		if (!ctrl_cmd(ctrl_fd, UBLK_U_CMD_GET_QUEUE_AFFINITY, id, &set,
			      sizeof(set), q))
			ublkd_cpu_list(&set, cpus, sizeof(cpus));
		printf("\tqueue %d: tid %d affinity %s\n", q,
		       st ? st->tid[q] : 0, cpus);
	}
	if (!st)
		return;
	printf("\tcounters:");
	for (s = 0; s < ST_NR; s++) {
		uint64_t sum = 0;

		for (q = 0; q < UBLKD_MAX_QUEUES; q++)
			sum += st->q[q][s];
		printf(" %s %llu", stat_names[s], (unsigned long long)sum);
	}
	printf("\n");
}

static int cmd_list(int argc, char **argv)
{
	int id, ids[1024], n, i, ctrl_fd;
	bool verbose = false;

	parse_id_opts(argc, argv, &id, NULL, &verbose);
	ctrl_fd = open_ctrl();
	if (id >= 0) {
		struct ublksrv_ctrl_dev_info info;
		int ret = get_named_info(ctrl_fd, id, &info);

		if (ret)
			return 1;
		list_one(ctrl_fd, id, verbose);
		return 0;
	}
	n = list_ids(ids, ARRAY_SIZE(ids));
	for (i = 0; i < n; i++)
		list_one(ctrl_fd, ids[i], verbose);
	return 0;
}

static int cmd_features(int argc, char **argv)
{
	uint64_t features;
	unsigned int i;
	int ctrl_fd;

	(void)argv;
	if (argc > 1)
		die_usage("features takes no arguments\n");
	ctrl_fd = open_ctrl();
	features = get_features(ctrl_fd);
	if (!features)
		return 1;
	printf("features 0x%llx\n", (unsigned long long)features);
	for (i = 0; i < ARRAY_SIZE(flag_names); i++)
		printf("\t%-24s %s\n", flag_names[i].name,
		       features & flag_names[i].flag ? "yes" : "no");
	return 0;
}

/* ---- recover: waiting for the dead server's device to quiesce ---- */

/*
 * How long recover waits for a LIVE device whose server is gone to become
 * QUIESCED. 6.12 quiesces it at once when the dying server left some
 * tag's command with the driver: io_uring cancels that command as the
 * process exits (ublk_uring_cmd_cancel_fn()). When the server held every
 * tag of its queues there is no command to cancel, and only the block
 * layer's request timeout does it: ublk_timeout() resets the timer while
 * the server lives and aborts the queue once it is dying, so up to the
 * disk's io_timeout after the death (30 s unless someone changed
 * /sys/block/ublkbN/queue/io_timeout), plus the timer's rounding and the
 * quiesce work. A fixed wait, ublksrv's and ours before (30 s), gave up
 * just before such a device became recoverable, or long before when
 * io_timeout is larger. So: that timeout plus a margin.
 */
#define BLK_DEFAULT_TIMEOUT_MS	30000	/* blk-mq's when the driver sets none, as ublk */
#define RECOVER_MARGIN_MS	10000
#define RECOVER_SAY_MS		1000	/* a longer wait is announced on stderr */
#define PROC_PF_EXITING		0x00000004	/* PF_EXITING in /proc/PID/stat */

/* The disk's request timeout in ms (its io_timeout in sysfs), 0 when unknown. */
static unsigned long disk_io_timeout_ms(int dev_id)
{
	char path[64], buf[32];
	unsigned long ms;

	snprintf(path, sizeof(path), "/sys/block/ublkb%d/queue/io_timeout", dev_id);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	buf[strcspn(buf, "\n")] = 0;
	/* (the block layer keeps it as an unsigned int of jiffies) */
	return ublkd_parse_uint(buf, 1, UINT_MAX - RECOVER_MARGIN_MS, &ms) ? 0 : ms;
}

/* Whether process @pid has char device @rdev open. */
static bool holds_cdev(pid_t pid, dev_t rdev)
{
	char path[64];
	struct dirent *e;
	struct stat st;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	d = opendir(path);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd/%.16s", pid, e->d_name);
		found = !stat(path, &st) && S_ISCHR(st.st_mode) && st.st_rdev == rdev;
	}
	closedir(d);
	return found;
}

enum server_state { SERVER_GONE, SERVER_DYING, SERVER_RUNS };

/*
 * What became of process @pid, the server the driver names for device
 * @dev_id (ublksrv_pid). SERVER_DYING: it exits (PF_EXITING, or a SIGKILL
 * is pending: the driver sees it dying as soon as it runs). SERVER_RUNS:
 * it lives and holds /dev/ublkcN open, so it serves the device, not a
 * process that took its pid since. Else SERVER_GONE, a zombie included;
 * also when it cannot be told (its fds unreadable): that costs a bounded
 * wait, while a wrong "still runs" would fail the recovery.
 */
static enum server_state server_state(pid_t pid, int dev_id)
{
	char path[64], buf[512], line[128], *p;
	unsigned long long pending;
	unsigned int flags;
	struct stat cdev;
	bool killed = false;
	FILE *f;
	char st;

	if (pid <= 0)
		return SERVER_GONE;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return SERVER_GONE;
	/* "pid (comm) state ppid pgrp session tty_nr tpgid flags ..." */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %u", &st, &flags) != 2 ||
	    st == 'Z' || st == 'X' || st == 'x')
		return SERVER_GONE;
	if (flags & PROC_PF_EXITING)
		return SERVER_DYING;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if ((sscanf(line, "SigPnd: %llx", &pending) == 1 ||
		     sscanf(line, "ShdPnd: %llx", &pending) == 1) &&
		    pending & 1ULL << (SIGKILL - 1))
			killed = true;
	if (f)
		fclose(f);
	if (killed)
		return SERVER_DYING;
	snprintf(path, sizeof(path), "/dev/ublkc%d", dev_id);
	if (stat(path, &cdev) || !S_ISCHR(cdev.st_mode))
		return SERVER_GONE;
	return holds_cdev(pid, cdev.st_rdev) ? SERVER_RUNS : SERVER_GONE;
}

static unsigned long ms_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0->tv_sec) * 1000 +
		(now.tv_nsec - t0->tv_nsec) / 1000000;
}

/*
 * @dev's device is LIVE: wait until it is no longer (dev->info then says
 * what it became), for at most the disk's io_timeout plus a margin. 0,
 * or 1 after saying why not: its server still runs (at once: recover
 * never takes a device from a live server), or the wait ran out.
 */
static int wait_quiesced(struct ublkd_dev *dev)
{
	int id = dev->info.dev_id, pid = dev->info.ublksrv_pid, ret = 0;
	unsigned long timeout_ms = disk_io_timeout_ms(id), bound_ms, ms;
	enum server_state srv;
	struct timespec t0;
	bool said = false;

	if (!timeout_ms) {
		ublkd_log("device %d: /sys/block/ublkb%d/queue/io_timeout is unreadable; assuming the block layer's default, %d s\n",
			  id, id, BLK_DEFAULT_TIMEOUT_MS / 1000);
		timeout_ms = BLK_DEFAULT_TIMEOUT_MS;
	}
	bound_ms = timeout_ms + RECOVER_MARGIN_MS;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		srv = server_state(pid, id);
		if (srv == SERVER_RUNS) {
			ublkd_log("device %d is LIVE, not QUIESCED: its server (pid %d) still runs; recover replaces a server that died (kill it first, or stop the device with ublkd del -n %d)\n",
				  id, pid, id);
			return 1;
		}
		ms = ms_since(&t0);
		if (ms >= bound_ms)
			break;
		if (!said && ms >= RECOVER_SAY_MS) {
			ublkd_log("device %d is still LIVE though its server (pid %d) %s: waiting for the driver's request timeout (%lu %s, /sys/block/ublkb%d/queue/io_timeout) to quiesce it, at most %lu s\n",
				  id, pid, srv == SERVER_DYING ? "is exiting" : "is gone",
				  timeout_ms % 1000 ? timeout_ms : timeout_ms / 1000,
				  timeout_ms % 1000 ? "ms" : "s", id,
				  (bound_ms + 999) / 1000);
			said = true;
		}
		usleep(100000);
		ret = get_info(dev->ctrl_fd, id, &dev->info);
		if (ret) {
			ublkd_log("device %d: GET_DEV_INFO: %s\n", id, strerror(-ret));
			return 1;
		}
		if (dev->info.state != UBLK_S_DEV_LIVE) {
			ms = ms_since(&t0);
			if (said)
				ublkd_log("device %d is %s after %lu.%lu s\n", id,
					  state_name(dev->info.state), ms / 1000,
					  ms % 1000 / 100);
			return 0;
		}
	}
	ublkd_log("device %d is LIVE, not QUIESCED, %lu s after recover began to wait: %s\n",
		  id, bound_ms / 1000, srv == SERVER_DYING ?
		  "its server has not finished exiting" :
		  "its server is gone, but the driver's request timeout did not quiesce it");
	return 1;
}

static int cmd_recover(int argc, char **argv)
{
	struct ublk_params params = { 0 };
	struct ublkd_dev dev = { 0 };
	int id, ret, sargc;
	char **sargv;

	parse_id_opts(argc, argv, &id, NULL, NULL);
	if (id < 0)
		die_usage("recover needs -n ID\n");
	dev.ctrl_fd = open_ctrl();
	if (get_named_info(dev.ctrl_fd, id, &dev.info))
		return 1;
	if (!(dev.info.flags & UBLK_F_USER_RECOVERY)) {
		ublkd_log("device %d was not added with --recovery\n", id);
		return 1;
	}
	sargv = load_args(id, &sargc);
	if (!sargv) {
		ublkd_log("device %d: no saved arguments in " UBLKD_RUN_DIR "/%d/args\n",
			  id, id);
		return 1;
	}
	parse_add(&dev, sargc, sargv);
	dev.recovering = true;
	/* The size the backend must still have. */
	params.len = sizeof(params);
	ret = ctrl_cmd(dev.ctrl_fd, UBLK_U_CMD_GET_PARAMS, id, &params,
		       sizeof(params), 0);
	if (ret) {
		ublkd_log("device %d: GET_PARAMS: %s\n", id, strerror(-ret));
		return 1;
	}
	dev.recover_size = params.basic.dev_sectors << SECTOR_SHIFT;
	dev.recover_basic = params.basic;
	/* The driver's view wins over the saved arguments. */
	ret = get_info(dev.ctrl_fd, id, &dev.info);
	if (ret) {
		ublkd_log("device %d: GET_DEV_INFO: %s\n", id, strerror(-ret));
		return 1;
	}
	/*
	 * Before the target's init sees them: nbd makes one connection per
	 * queue there, and one fewer than the device's queues failed the
	 * last queue's setup (and a saved -q above what the driver gave
	 * opened connections for queues that do not exist).
	 */
	dev.nr_queues = dev.info.nr_hw_queues;
	dev.depth = dev.info.queue_depth;
	dev.max_io_bytes = dev.info.max_io_buf_bytes;
	if (dev.info.state == UBLK_S_DEV_LIVE && wait_quiesced(&dev))
		return 1;
	if (dev.info.state != UBLK_S_DEV_QUIESCED) {
		ublkd_log("device %d is %s, not QUIESCED: it cannot be recovered\n",
			  id, state_name(dev.info.state));
		return 1;
	}
	return spawn(&dev, sargc, sargv, true);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{ "add", cmd_add },
		{ "del", cmd_del },
		{ "list", cmd_list },
		{ "features", cmd_features },
		{ "recover", cmd_recover },
	};
	unsigned int i;

	if (argc < 2)
		die_usage("no command\n");
	for (i = 0; i < ARRAY_SIZE(cmds); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		print_usage(stdout);
		return 0;
	}
	die_usage("unknown command '%s'\n", argv[1]);
}
