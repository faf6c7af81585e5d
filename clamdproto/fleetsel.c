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

int cdp_fsel_pick(const struct cdp_fsel *b, size_t n, int exclude, unsigned *rr)
{
	int best = -1, oldest = -1;
	size_t k;

	if (n == 0)
		return -1;
	/* from the cursor on, so that equals take turns */
	for (k = 0; k < n; k++) {
		int i = (int)((*rr + k) % n);

		if (i == exclude)
			continue;
		if (b[i].ejected) {
			if (oldest < 0 || b[i].failed_at < b[oldest].failed_at)
				oldest = i;
			continue;
		}
		if (best < 0 || lighter(&b[i], &b[best]))
			best = i;
	}
	if (best < 0)
		best = oldest;
	if (best < 0)
		best = exclude >= 0 && (size_t)exclude < n ? exclude : 0;
	*rr = (unsigned)((size_t)best + 1) % (unsigned)n;
	return best;
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

enum cdp_fsel_change cdp_fsel_probe_done(struct cdp_fsel *b,
					 const struct cdp_fsel_timing *t,
					 int64_t started, bool ok, int64_t now)
{
	if (started <= b->failed_at) {
		/* a scan failed while this PING was out: not newer news */
		b->next_probe = now + b->backoff_ms;
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
