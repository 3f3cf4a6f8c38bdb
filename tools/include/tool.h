/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the test tools (vblk-pt, ublk-misuse, userq-check) share: their exit
 * status, as the tests read it (77 is blktests' "not run"), and ARRAY_SIZE.
 */
#ifndef FASTPATH_TOOL_H
#define FASTPATH_TOOL_H

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define EXIT_PASS	0
#define EXIT_FAIL	1
#define EXIT_USAGE	2
#define EXIT_SKIP	77

#endif
