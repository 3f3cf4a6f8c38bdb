/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small PRNG shared by the tools: xorshift64* is cheap, has a period of
 * 2^64 - 1 and is good enough to spread offsets over a device or to pick
 * fuzz cases. The state must not be zero.
 */
#ifndef FASTPATH_RNG_H
#define FASTPATH_RNG_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [0, n) without a division (Lemire's multiply-shift); 0 for n 0. */
static inline uint64_t rng_below(uint64_t *state, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(state) * n) >> 64);
}

#endif
