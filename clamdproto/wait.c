// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The clock and the wait every blocking step of the library shares: a
 * CLOCK_MONOTONIC deadline in milliseconds, and poll() in slices short
 * enough to notice a cancellation that did not wake it. Its own file so
 * that connecting (addr.c), TLS (tls.c) and connections (conn.c) all use
 * it without depending on each other.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "internal.h"

int64_t cdp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cdp_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t cdp_deadline(int timeout_ms)
{
	return cdp_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
}

int cdp_wait(int fd, short events, int64_t deadline, struct cdp_cancel *cancel)
{
	struct pollfd pfd = {.fd = fd, .events = events};

	for (;;) {
		int64_t left = deadline - cdp_now_ms();
		int slice, rc;

		if (cdp_cancel_triggered(cancel))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		/* shutdown() by a trigger wakes us, but a connecting socket
		 * may not notice it: look at the flag now and then. */
		slice = left > CDP_CANCEL_SLICE_MS && cancel
				? CDP_CANCEL_SLICE_MS
				: (int)left;
		rc = poll(&pfd, 1, slice);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (rc > 0) {
			if (cdp_cancel_triggered(cancel))
				return -ECANCELED;
			return pfd.revents;
		}
	}
}
