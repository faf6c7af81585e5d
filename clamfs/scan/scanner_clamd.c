// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scanner the daemon gives its scan queue: one attempt of a scan,
 * asked of a clamd of the fleet (scanner_clamd.h).
 */
#include "scanner_clamd.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>

#include "monotime.h"

/*
 * A retry that goes where the failed attempt went (the only clamd, or a
 * balancer in front of several) waits a moment first.  A killed clamd
 * still completes TCP handshakes while its process is torn down, and a
 * balancer hands an immediate retry to it before any health check can
 * mark it down (doc/fleet.md): both attempts then fail.  At most a quarter
 * of the time left; the cancel cuts it short.  Returns what is left of
 * @timeout_ms after the pause.
 */
#define RETRY_PAUSE_MS 200
#define PAUSE_SLICE_MS 20

static int retry_pause(const struct scanq_scan *s, int timeout_ms)
{
	int pause = RETRY_PAUSE_MS;
	uint64_t start = mono_usec(), until, now;

	if (pause > timeout_ms / 4)
		pause = timeout_ms / 4;
	until = start + (uint64_t)pause * 1000;
	while (!cdp_cancel_triggered(s->cancel) &&
	       (now = mono_usec()) < until) {
		uint64_t left = until - now;

		if (left > PAUSE_SLICE_MS * 1000)
			left = PAUSE_SLICE_MS * 1000;
		poll(NULL, 0, (int)((left + 999) / 1000));
	}
	now = mono_usec();
	timeout_ms -= (int)((now - start) / 1000);
	return timeout_ms > 1 ? timeout_ms : 1;
}

/*
 * A backend with a free slot (no more scans in flight there than its
 * clamd has threads, one kept for small files), waited for within the
 * deadline: a scan beyond clamd's MaxThreads would wait in clamd's own
 * queue, where a small file queues behind the big ones. Returns what is
 * left of @timeout_ms, or 0 with @res filled when none came free.
 */
static int acquire(const struct scanq_scan *s, int exclude, int timeout_ms,
		   struct cdp_fleet_pick *pick, struct cdp_result *res)
{
	uint64_t start = mono_usec();
	int ret, left;

	ret = cdp_fleet_acquire_slot(s->fleet, exclude, s->small, timeout_ms,
				     s->cancel, pick);
	if (ret == -ECANCELED) {
		scanq_result_fail(res, CDP_ERR_CANCELLED, ECANCELED,
				  "cancelled");
		return 0;
	}
	if (ret) {
		scanq_result_fail(
			res, CDP_ERR_TIMEOUT, ETIMEDOUT,
			"no clamd thread came free before the deadline");
		return 0;
	}
	left = timeout_ms - (int)((mono_usec() - start) / 1000);
	return left > 1 ? left : 1;
}

void scanner_clamd_scan(const struct scanq_scan *s, struct cdp_result *res)
{
	int exclude = s->attempt > 0 && s->note ? s->note->backend : -1;
	int timeout_ms = s->timeout_ms;
	struct cdp_fleet_pick pick;
	bool halved;

	if (s->note)
		s->note->bounded = false;
	timeout_ms = acquire(s, exclude, timeout_ms, &pick, res);
	if (timeout_ms == 0)
		return;
	if (s->attempt > 0 && pick.index == exclude) {
		timeout_ms = retry_pause(s, timeout_ms);
		cdp_fleet_restart(s->fleet, &pick);
	}
	/* a stalled backend must not eat the time of the retry elsewhere */
	halved = s->attempt + 1 < SCANQ_SCAN_ATTEMPTS &&
		 pick.alternatives > 0 && timeout_ms >= 2;
	if (halved)
		timeout_ms /= 2;
	if (s->note) {
		s->note->backend = pick.index;
		s->note->bounded = halved;
	}
	/*
	 * What the backend takes: the descriptor, or the content streamed.
	 * Never a name, in path mode too: the directories on a path in a
	 * share belong to its users, who can swap them while clamd walks it
	 * (doc/security.md).
	 */
	if (pick.fildes)
		cdp_scan_fildes(pick.pool, s->fd, timeout_ms, s->cancel, res);
	else
		cdp_scan_stream_fd(pick.pool, s->fd, timeout_ms, s->cancel,
				   res);
	cdp_fleet_release(s->fleet, &pick, res);
}
