// SPDX-License-Identifier: GPL-2.0
/*
 * insn-profile: a QEMU TCG plugin that counts the guest instructions
 * executed per translation block start address, for instructions per I/O
 * by kernel function (bench/insn-userq.sh, bench/insn.py).
 *
 *   qemu-system-x86_64 ... -plugin insn-profile.so,out=FILE,map=System.map[,mark=SYMBOL]
 *
 * Why not icount: icount mode stalls polled NVMe I/O, and it only gives a
 * total. Why per TB start and not per function: the symbol lookup is done
 * afterwards by bench/insn.py against the guest's /proc/kallsyms, which
 * also knows module symbols; the plugin stays small and keeps every
 * count a guest function can be charged with.
 *
 * Counting: at translation, each TB gets two inline adds (instructions of
 * the TB, and one execution) on a counter keyed by the TB's start address.
 * Inline ops are emitted into the translated code, so the hot path costs a
 * few host instructions per TB and no helper call. A TB that starts at a
 * function's first byte is a call of that function, so the execution
 * counts also give calls per I/O. All user-space TBs share one counter
 * ([user]): user symbols would need every process's maps.
 * A TB's instructions are counted when it starts; a TB left early by an
 * exception or interrupt over-counts its tail, a small error against the
 * thousands of instructions of an I/O.
 *
 * Inline adds are not atomic: two vCPU threads running the same TB at the
 * same instant lose an increment. In the benchmark one vCPU polls and the
 * other is mostly halted, so that is rare; exact setups (one vCPU, or one
 * TCG thread) stall polled NVMe I/O (vm/run -P says why). Translation and
 * snapshots take a lock.
 *
 * Marks: when the TB at SYMBOL's address (System.map, default
 * __x64_sys_syncfs, which `sync -f FILE` in the guest enters and the
 * benchmark never does) executes, the plugin appends a snapshot of the
 * counters to FILE, so a guest script brackets a run between two marks.
 * The guest must run without KASLR (vm/run -P adds nokaslr) for the map's
 * address to be the one executed. One last snapshot is written at exit.
 *
 * FILE format, one snapshot after the other, counts cumulative since boot,
 * only the counters that changed since the previous snapshot:
 *   # insn-profile 1 mark=SYMBOL addr=0xADDR
 *   snap SEQ mark|exit
 *   ADDR INSNS EXECS      (ADDR in hex, or "user" for the user-space bucket)
 *   end SEQ
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The part of QEMU's include/qemu/qemu-plugin.h this plugin uses. Debian's
 * QEMU ships no header; these declarations mirror the documented QEMU 7.2
 * plugin ABI (QEMU_PLUGIN_VERSION 1), which the loader checks through the
 * exported qemu_plugin_version.
 */
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
#define QEMU_PLUGIN_API_VERSION 1

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;	/* only passed through */
struct qemu_plugin_tb;

enum qemu_plugin_cb_flags {
	QEMU_PLUGIN_CB_NO_REGS,
	QEMU_PLUGIN_CB_R_REGS,
	QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_op {
	QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags,
					  void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
					      enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
				    qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_API_VERSION;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info,
					   int argc, char **argv);

/* x86-64: canonical user addresses have bit 63 clear. */
#define USER_TOP 0x0000800000000000ULL

struct counter {
	uint64_t insns;		/* updated by the inline ops */
	uint64_t execs;
	uint64_t vaddr;
	uint64_t dumped_insns;	/* as written in the last snapshot */
	uint64_t dumped_execs;
};

/*
 * Counters live in chunks that never move, since translated code holds
 * their addresses; the hash table (open addressing on vaddr) holds
 * pointers and may grow.
 */
#define CHUNK 4096
static struct counter **chunks;
static size_t nr_counters, nr_chunks;
static struct counter **table;
static size_t table_size;	/* a power of two */
static struct counter user;	/* every user-space TB */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static FILE *out;
static const char *out_path;
static uint64_t mark_addr;
static unsigned long seq;

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p) {
		fprintf(stderr, "insn-profile: out of memory\n");
		abort();
	}
	return p;
}

static size_t slot(uint64_t vaddr, size_t size)
{
	/* Fibonacci hashing: TB addresses are close together. */
	return (vaddr * 0x9e3779b97f4a7c15ULL) >> 17 & (size - 1);
}

static void table_grow(void)
{
	size_t size = table_size ? table_size * 2 : 1 << 16, i, j;
	struct counter **t = xcalloc(size, sizeof(*t));

	for (i = 0; i < table_size; i++) {
		if (!table[i])
			continue;
		for (j = slot(table[i]->vaddr, size); t[j]; j = (j + 1) & (size - 1))
			;
		t[j] = table[i];
	}
	free(table);
	table = t;
	table_size = size;
}

/* The counter for a kernel address, created on first use. Under lock. */
static struct counter *counter_get(uint64_t vaddr)
{
	struct counter *c;
	size_t i;

	if (2 * (nr_counters + 1) > table_size)
		table_grow();
	for (i = slot(vaddr, table_size); table[i]; i = (i + 1) & (table_size - 1))
		if (table[i]->vaddr == vaddr)
			return table[i];
	if (nr_counters % CHUNK == 0) {
		chunks = realloc(chunks, (nr_chunks + 1) * sizeof(*chunks));
		if (!chunks) {
			fprintf(stderr, "insn-profile: out of memory\n");
			abort();
		}
		chunks[nr_chunks++] = xcalloc(CHUNK, sizeof(**chunks));
	}
	c = &chunks[nr_counters / CHUNK][nr_counters % CHUNK];
	nr_counters++;
	c->vaddr = vaddr;
	table[i] = c;
	return c;
}

static void dump_one(struct counter *c, const char *name)
{
	/* The inline ops may run on as we read; one snapshot, one read. */
	uint64_t insns = __atomic_load_n(&c->insns, __ATOMIC_RELAXED);
	uint64_t execs = __atomic_load_n(&c->execs, __ATOMIC_RELAXED);

	if (insns == c->dumped_insns && execs == c->dumped_execs)
		return;
	if (name)
		fprintf(out, "%s %" PRIu64 " %" PRIu64 "\n", name, insns, execs);
	else
		fprintf(out, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", c->vaddr, insns, execs);
	c->dumped_insns = insns;
	c->dumped_execs = execs;
}

static void snapshot(const char *why)
{
	size_t i;

	pthread_mutex_lock(&lock);
	seq++;
	fprintf(out, "snap %lu %s\n", seq, why);
	dump_one(&user, "user");
	for (i = 0; i < nr_counters; i++)
		dump_one(&chunks[i / CHUNK][i % CHUNK], NULL);
	fprintf(out, "end %lu\n", seq);
	if (fflush(out))
		fprintf(stderr, "insn-profile: writing %s: %s\n", out_path, strerror(errno));
	pthread_mutex_unlock(&lock);
}

static void on_mark(unsigned int vcpu_index, void *userdata)
{
	(void)vcpu_index;
	(void)userdata;
	snapshot("mark");
}

static void on_exit_cb(qemu_plugin_id_t id, void *userdata)
{
	(void)id;
	(void)userdata;
	snapshot("exit");
	fclose(out);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	uint64_t n = qemu_plugin_tb_n_insns(tb);
	struct counter *c;

	(void)id;
	if (vaddr < USER_TOP) {
		c = &user;
	} else {
		pthread_mutex_lock(&lock);
		c = counter_get(vaddr);
		pthread_mutex_unlock(&lock);
	}
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &c->insns, n);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &c->execs, 1);
	if (vaddr == mark_addr)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
}

/* The address of SYMBOL's text in System.map MAP, or 0. */
static uint64_t map_lookup(const char *map, const char *symbol)
{
	char line[512], type, name[256];
	uint64_t addr, found = 0;
	FILE *f = fopen(map, "r");

	if (!f) {
		fprintf(stderr, "insn-profile: map=%s: %s\n", map, strerror(errno));
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &type, name) == 3 &&
		    (type == 'T' || type == 't') && !strcmp(name, symbol)) {
			found = addr;
			break;
		}
	}
	fclose(f);
	if (!found)
		fprintf(stderr, "insn-profile: no text symbol %s in %s\n", symbol, map);
	return found;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *map = NULL, *mark = "__x64_sys_syncfs";
	int i;

	(void)info;
	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			out_path = argv[i] + 4;
		} else if (!strncmp(argv[i], "map=", 4)) {
			map = argv[i] + 4;
		} else if (!strncmp(argv[i], "mark=", 5)) {
			mark = argv[i] + 5;
		} else {
			fprintf(stderr, "insn-profile: unknown argument %s (out=FILE map=System.map [mark=SYMBOL])\n",
				argv[i]);
			return -1;
		}
	}
	if (!out_path || !map) {
		fprintf(stderr, "insn-profile: out=FILE and map=System.map are required\n");
		return -1;
	}
	mark_addr = map_lookup(map, mark);
	if (!mark_addr)
		return -1;
	out = fopen(out_path, "w");
	if (!out) {
		fprintf(stderr, "insn-profile: out=%s: %s\n", out_path, strerror(errno));
		return -1;
	}
	fprintf(out, "# insn-profile 1 mark=%s addr=0x%" PRIx64 "\n", mark, mark_addr);
	fflush(out);
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
	return 0;
}
