/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one fixed wait unit tests have (test/README.md): at least ms
 * milliseconds of the monotonic clock, for a window in which something
 * must NOT happen, or for time the code under test measures (a deadline
 * counted from a submit). Anything that is to happen is waited for,
 * bounded, instead. why says which, for the reader.
 */
#ifndef CLAMFS_TEST_LET_TIME_PASS_H
#define CLAMFS_TEST_LET_TIME_PASS_H

#include <errno.h>
#include <time.h>

static inline void let_time_pass(unsigned int ms, const char *why)
{
	struct timespec until;

	(void)why;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) ==
	       EINTR)
		;
}

#endif
