// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The fleet's pure decisions: selection, ejection, backoff, readmission.
 * No I/O, no clock, no lock (see fleetsel.h).
 */
#include <errno.h>

#include "fleetsel.h"

void cdp_fsel_init(struct cdp_fsel *b, unsigned weight, unsigned cap,
		   const struct cdp_fsel_timing *t, int64_t now)
{
	*b = (struct cdp_fsel){
		.weight = weight ? weight : 1,
		.cap = cap ? cap : 1,
		.next_probe = now + t->probe_interval_ms,
		.backoff_ms = t->backoff_min_ms,
	};
}

/* Whether @a carries less load than @b: in flight over weight, compared
 * without division; unsuspected before suspect, below the cap before at
 * it. */
static bool lighter(const struct cdp_fsel *a, const struct cdp_fsel *b)
{
	bool a_full = a->inflight >= a->cap, b_full = b->inflight >= b->cap;
	uint64_t la = (uint64_t)a->inflight * b->weight;
	uint64_t lb = (uint64_t)b->inflight * a->weight;

	if (a->suspect != b->suspect)
		return !a->suspect;
	if (a_full != b_full)
		return !a_full;
	return la < lb;
}

unsigned cdp_fsel_limit(const struct cdp_fsel *b, bool small)
{
	unsigned limit = b->threads;

	if (limit == 0)
		return b->cap;
	if (!small && limit > 1)
		limit--;
	return limit < b->cap ? limit : b->cap;
}

enum slot { ANY, SMALL, BIG };

/* Whether @b may take one more scan of kind @slot. */
static bool room(const struct cdp_fsel *b, enum slot slot)
{
	return slot == ANY ||
	       (!b->learning && b->inflight < cdp_fsel_limit(b, slot == SMALL));
}

/*
 * The pick of cdp_fsel_pick (@slot ANY) and cdp_fsel_pick_slot: a tier
 * (healthy, then ejected, then @exclude) with no backend in it is passed
 * over; one whose backends are all full is waited for (-1), not passed
 * over: a scan must not go to an ejected clamd because the healthy ones
 * are busy.
 */
static int choose(const struct cdp_fsel *b, size_t n, int exclude,
		  enum slot slot, unsigned *rr)
{
	int best = -1, oldest = -1;
	bool healthy = false, ejected = false;
	size_t k;

	if (n == 0)
		return -1;
	/* from the cursor on, so that equals take turns */
	for (k = 0; k < n; k++) {
		int i = (int)((*rr + k) % n);

		if (i == exclude)
			continue;
		if (b[i].ejected) {
			ejected = true;
			if (room(&b[i], slot) &&
			    (oldest < 0 ||
			     b[i].failed_at < b[oldest].failed_at))
				oldest = i;
			continue;
		}
		healthy = true;
		if (room(&b[i], slot) && (best < 0 || lighter(&b[i], &b[best])))
			best = i;
	}
	if (!healthy)
		best = oldest;
	if (!healthy && !ejected) {
		best = exclude >= 0 && (size_t)exclude < n ? exclude : 0;
		if (!room(&b[best], slot))
			best = -1;
	}
	if (best >= 0)
		*rr = (unsigned)((size_t)best + 1) % (unsigned)n;
	return best;
}

int cdp_fsel_pick(const struct cdp_fsel *b, size_t n, int exclude, unsigned *rr)
{
	return choose(b, n, exclude, ANY, rr);
}

int cdp_fsel_pick_slot(const struct cdp_fsel *b, size_t n, int exclude,
		       bool small, unsigned *rr)
{
	return choose(b, n, exclude, small ? SMALL : BIG, rr);
}

size_t cdp_fsel_healthy(const struct cdp_fsel *b, size_t n, int exclude)
{
	size_t i, count = 0;

	for (i = 0; i < n; i++)
		if (!b[i].ejected && (int)i != exclude)
			count++;
	return count;
}

bool cdp_fsel_is_failure(const struct cdp_result *res)
{
	if (res->verdict != CDP_ERROR)
		return false;
	if (res->cat == CDP_ERR_TIMEOUT)
		return res->err != EBUSY;
	return res->cat == CDP_ERR_CONNECT || res->cat == CDP_ERR_PROTOCOL;
}

bool cdp_fsel_failed(struct cdp_fsel *b, const struct cdp_fsel_timing *t,
		     int64_t now)
{
	b->failed_at = now;
	b->suspect = false;
	if (!b->ejected) {
		b->ejected = true;
		b->backoff_ms = t->backoff_min_ms;
		b->next_probe = now + b->backoff_ms;
		return true;
	}
	b->backoff_ms = b->backoff_ms > t->backoff_max_ms / 2
				? t->backoff_max_ms
				: b->backoff_ms * 2;
	b->next_probe = now + b->backoff_ms;
	return false;
}

bool cdp_fsel_succeeded(struct cdp_fsel *b, const struct cdp_fsel_timing *t,
			int64_t now)
{
	bool was = b->ejected;

	b->ejected = false;
	b->suspect = false;
	b->scan_probe = false;
	b->backoff_ms = t->backoff_min_ms;
	b->next_probe = now + t->probe_interval_ms;
	return was;
}

enum cdp_fsel_change
cdp_fsel_scan_done(struct cdp_fsel *b, const struct cdp_fsel_timing *t,
		   int64_t started, const struct cdp_result *res, int64_t now)
{
	/* begun before the last failure: it met the same outage, or came
	 * through it on a connection older than the news */
	if (started <= b->failed_at)
		return CDP_FSEL_SAME;
	if (res->verdict != CDP_ERROR)
		return cdp_fsel_succeeded(b, t, now) ? CDP_FSEL_READMITTED
						     : CDP_FSEL_SAME;
	if (!cdp_fsel_is_failure(res))
		return CDP_FSEL_SAME;
	/* from now on only a scan tells whether it scans */
	if (res->cat == CDP_ERR_TIMEOUT)
		b->scan_probe = true;
	if (b->ejected) {
		/* sent there because none was healthy: it is now the one
		 * that failed last (a timeout too: a wedged clamd must not
		 * keep every scan), but only probes set the backoff */
		b->failed_at = now;
		return CDP_FSEL_SAME;
	}
	if (res->cat == CDP_ERR_TIMEOUT) {
		if (b->suspect)
			return CDP_FSEL_SAME;
		b->suspect = true;
		b->next_probe = now;
		return CDP_FSEL_SUSPECT;
	}
	return cdp_fsel_failed(b, t, now) ? CDP_FSEL_EJECTED : CDP_FSEL_SAME;
}

enum cdp_fsel_probe cdp_fsel_probe_kind(const struct cdp_fsel *b)
{
	return b->scan_probe ? CDP_FSEL_SCAN : CDP_FSEL_PING;
}

enum cdp_fsel_change cdp_fsel_probe_done(struct cdp_fsel *b,
					 const struct cdp_fsel_timing *t,
					 int64_t started,
					 enum cdp_fsel_probe kind, bool ok,
					 int64_t now)
{
	if (started <= b->failed_at) {
		/* a scan failed while this probe was out: not newer news */
		b->next_probe = now + b->backoff_ms;
		return CDP_FSEL_SAME;
	}
	if (ok && kind == CDP_FSEL_PING && b->scan_probe) {
		/* a scan timed out while the PING was out: it answers, but
		 * whether it scans only a scan can tell: at once, unless a
		 * backoff is running */
		if (!b->ejected)
			b->next_probe = now;
		return CDP_FSEL_SAME;
	}
	if (ok)
		return cdp_fsel_succeeded(b, t, now) ? CDP_FSEL_READMITTED
						     : CDP_FSEL_SAME;
	return cdp_fsel_failed(b, t, now) ? CDP_FSEL_EJECTED : CDP_FSEL_SAME;
}

bool cdp_fsel_probe_due(const struct cdp_fsel *b, int64_t now)
{
	return now >= b->next_probe;
}

int64_t cdp_fsel_next_due(const struct cdp_fsel *b, size_t n)
{
	int64_t due = INT64_MAX;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i].next_probe < due)
			due = b[i].next_probe;
	return due;
}
