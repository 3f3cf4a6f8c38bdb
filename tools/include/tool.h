/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the tools share: the test tools' (vblk-pt, ublk-misuse, userq-check)
 * exit status, as the tests read it (77 is blktests' "not run"),
 * ARRAY_SIZE, and the monotonic clock in seconds (blkcopy, userq-check).
 */
#ifndef FASTPATH_TOOL_H
#define FASTPATH_TOOL_H

#include <time.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define EXIT_PASS	0
#define EXIT_FAIL	1
#define EXIT_USAGE	2
#define EXIT_SKIP	77

static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif
