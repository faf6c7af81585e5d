/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * CLOCK_MONOTONIC readings in the unit each caller keeps its deadlines in.
 */
#ifndef CLAMFS_MONOTIME_H
#define CLAMFS_MONOTIME_H

#include <stdint.h>
#include <time.h>

static inline int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t mono_usec(void)
{
	return (uint64_t)mono_ns() / 1000;
}

static inline long long mono_ms(void)
{
	return (long long)(mono_ns() / 1000000);
}

#endif
