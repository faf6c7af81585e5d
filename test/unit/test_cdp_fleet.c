// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for the fleet's decisions (fleetsel.c) on a fake clock: ties
 * go round robin, weights and connection caps share the load, a retry
 * excludes the failed backend, failures eject, re-probes back off by
 * doubling up to a cap, a success readmits, and with every backend ejected
 * the one that failed longest ago is still tried.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fleetsel.h"

static const struct cdp_fsel_timing T = {
	.probe_interval_ms = 5000,
	.backoff_min_ms = 500,
	.backoff_max_ms = 30000,
};

static int64_t now; /* the fake clock, ms */

static void init(struct cdp_fsel *b, size_t n, const unsigned *weights,
		 unsigned cap)
{
	size_t i;

	now = 1000000;
	for (i = 0; i < n; i++)
		cdp_fsel_init(&b[i], weights ? weights[i] : 1, cap, &T, now);
}

/* Pick and count the pick in flight, as the fleet does. */
static int take(struct cdp_fsel *b, size_t n, int exclude, unsigned *rr)
{
	int i = cdp_fsel_pick(b, n, exclude, rr);

	assert_true(i >= 0 && (size_t)i < n);
	b[i].inflight++;
	return i;
}

static void test_ties_round_robin(void **state)
{
	struct cdp_fsel b[3];
	unsigned rr = 0;
	int i;

	(void)state;
	init(b, 3, NULL, 8);
	/* idle backends: every pick released at once goes round */
	for (i = 0; i < 9; i++) {
		int k = cdp_fsel_pick(b, 3, -1, &rr);

		assert_int_equal(k, i % 3);
	}
	/* held in flight: the fewest in flight wins, ties in turn */
	rr = 0;
	assert_int_equal(take(b, 3, -1, &rr), 0);
	assert_int_equal(take(b, 3, -1, &rr), 1);
	assert_int_equal(take(b, 3, -1, &rr), 2);
	b[1].inflight--; /* backend 1 finished first */
	assert_int_equal(take(b, 3, -1, &rr), 1);
	assert_int_equal(take(b, 3, -1, &rr), 2); /* the turn after 1 */
}

static void test_weights(void **state)
{
	static const unsigned w[2] = {3, 1};
	struct cdp_fsel b[2];
	unsigned rr = 0;
	int i;

	(void)state;
	init(b, 2, w, 64);
	/* 8 scans held: in flight relative to weight stays level, 6 : 2 */
	for (i = 0; i < 8; i++)
		take(b, 2, -1, &rr);
	assert_int_equal(b[0].inflight, 6);
	assert_int_equal(b[1].inflight, 2);
}

static void test_caps(void **state)
{
	static const unsigned w[2] = {10, 1};
	struct cdp_fsel b[2];
	unsigned rr = 0;
	int i;

	(void)state;
	init(b, 2, w, 2);
	/* weight 10 would take nearly all, but its cap is 2 connections */
	for (i = 0; i < 4; i++)
		take(b, 2, -1, &rr);
	assert_int_equal(b[0].inflight, 2);
	assert_int_equal(b[1].inflight, 2);
	/* both full: still a pick (the pool then waits), by load */
	assert_int_equal(take(b, 2, -1, &rr), 0);
}

static void test_exclude(void **state)
{
	struct cdp_fsel b[3];
	unsigned rr = 0;
	int i;

	(void)state;
	init(b, 3, NULL, 8);
	for (i = 0; i < 6; i++)
		assert_int_not_equal(cdp_fsel_pick(b, 3, 1, &rr), 1);
	/* the excluded one even when it is the least loaded */
	b[0].inflight = 3;
	b[2].inflight = 3;
	assert_int_not_equal(cdp_fsel_pick(b, 3, 1, &rr), 1);
	/* a fleet of one: the retry goes where the first attempt went */
	init(b, 1, NULL, 8);
	assert_int_equal(cdp_fsel_pick(b, 1, 0, &rr), 0);
	assert_int_equal(cdp_fsel_pick(b, 1, -1, &rr), 0);
	assert_int_equal(cdp_fsel_pick(b, 0, -1, &rr), -1);
}

static void test_failure_kinds(void **state)
{
	struct cdp_result r = {.verdict = CDP_ERROR};

	(void)state;
	r.cat = CDP_ERR_CONNECT;
	assert_true(cdp_fsel_is_failure(&r));
	r.cat = CDP_ERR_TIMEOUT;
	assert_true(cdp_fsel_is_failure(&r));
	r.cat = CDP_ERR_PROTOCOL;
	assert_true(cdp_fsel_is_failure(&r));
	r.cat = CDP_ERR_CLAMD;
	assert_false(cdp_fsel_is_failure(&r));
	r.cat = CDP_ERR_CANCELLED;
	assert_false(cdp_fsel_is_failure(&r));
	r.cat = CDP_ERR_SIZE_LIMIT;
	assert_false(cdp_fsel_is_failure(&r));
	r.cat = CDP_ERR_LOCAL;
	assert_false(cdp_fsel_is_failure(&r));
	r.verdict = CDP_INFECTED;
	r.cat = CDP_ERR_NONE;
	assert_false(cdp_fsel_is_failure(&r));
}

static void test_ejection_and_readmission(void **state)
{
	struct cdp_fsel b[3];
	unsigned rr = 0;
	int i;

	(void)state;
	init(b, 3, NULL, 8);
	assert_true(cdp_fsel_failed(&b[1], &T, now)); /* a change: logged */
	assert_true(b[1].ejected);
	assert_int_equal(cdp_fsel_healthy(b, 3, -1), 2);
	assert_int_equal(cdp_fsel_healthy(b, 3, 0), 1);
	for (i = 0; i < 10; i++)
		assert_int_not_equal(cdp_fsel_pick(b, 3, -1, &rr), 1);
	/* probed again after the first backoff, not before */
	assert_false(cdp_fsel_probe_due(&b[1], now + 499));
	assert_true(cdp_fsel_probe_due(&b[1], now + 500));
	assert_int_equal(cdp_fsel_next_due(b, 3), now + 500);
	now += 500;
	assert_true(cdp_fsel_succeeded(&b[1], &T, now)); /* a change again */
	assert_false(b[1].ejected);
	assert_false(cdp_fsel_succeeded(&b[1], &T, now)); /* not twice */
	assert_int_equal(b[1].next_probe, now + T.probe_interval_ms);
	/* it takes scans again */
	b[0].inflight = b[2].inflight = 1;
	assert_int_equal(cdp_fsel_pick(b, 3, -1, &rr), 1);
}

static void test_backoff_doubles_to_cap(void **state)
{
	static const int want[] = {1000,  2000,	 4000,	8000,
				   16000, 30000, 30000, 30000};
	struct cdp_fsel b[1];
	size_t k;

	(void)state;
	init(b, 1, NULL, 8);
	/* a healthy one's PINGs come an interval apart */
	assert_false(cdp_fsel_probe_due(&b[0], now + 4999));
	assert_true(cdp_fsel_probe_due(&b[0], now + 5000));
	assert_true(cdp_fsel_failed(&b[0], &T, now));
	assert_int_equal(b[0].backoff_ms, 500);
	for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		now = b[0].next_probe;
		assert_false(cdp_fsel_failed(&b[0], &T, now)); /* no change */
		assert_int_equal(b[0].backoff_ms, want[k]);
		assert_int_equal(b[0].next_probe, now + want[k]);
	}
	/* readmitted: the next ejection starts the backoff over */
	assert_true(cdp_fsel_succeeded(&b[0], &T, now));
	assert_true(cdp_fsel_failed(&b[0], &T, now));
	assert_int_equal(b[0].backoff_ms, 500);
}

static void test_all_ejected(void **state)
{
	struct cdp_fsel b[3];
	unsigned rr = 0;

	(void)state;
	init(b, 3, NULL, 8);
	cdp_fsel_failed(&b[2], &T, now);
	cdp_fsel_failed(&b[0], &T, now + 10);
	cdp_fsel_failed(&b[1], &T, now + 20);
	assert_int_equal(cdp_fsel_healthy(b, 3, -1), 0);
	/* the one that failed longest ago */
	assert_int_equal(cdp_fsel_pick(b, 3, -1, &rr), 2);
	/* it failed again: now 0 is the oldest failure */
	cdp_fsel_failed(&b[2], &T, now + 30);
	assert_int_equal(cdp_fsel_pick(b, 3, -1, &rr), 0);
	/* a retry excluding 0 takes the next oldest */
	assert_int_equal(cdp_fsel_pick(b, 3, 0, &rr), 1);
	/* one comes back: it takes every scan */
	cdp_fsel_succeeded(&b[1], &T, now + 40);
	assert_int_equal(cdp_fsel_pick(b, 3, -1, &rr), 1);
	assert_int_equal(cdp_fsel_pick(b, 3, -1, &rr), 1);
	/* a healthy one, even full, before an ejected one */
	b[1].inflight = b[1].cap;
	assert_int_equal(cdp_fsel_pick(b, 3, -1, &rr), 1);
	/* excluded and healthy: an ejected other one is tried instead */
	assert_int_equal(cdp_fsel_pick(b, 3, 1, &rr), 0);
}

/* The outcome @cat (@err) of a scan attempt on @b handed out at @started,
 * ending now. */
static enum cdp_fsel_change done(struct cdp_fsel *b, int64_t started,
				 enum cdp_errcat cat, int err)
{
	struct cdp_result r = {
		.verdict = cat == CDP_ERR_NONE ? CDP_CLEAN : CDP_ERROR,
		.cat = cat,
		.err = err,
	};

	return cdp_fsel_scan_done(b, &T, started, &r, now);
}

/*
 * Every backend ejected, scans go to the one that failed longest ago: when
 * it times out (a wedged clamd that accepts and never answers), it becomes
 * the one that failed last, so the next scan tries another that may be
 * back, rather than every open waiting out its deadline on the same one.
 */
static void test_all_ejected_timeout_rotates(void **state)
{
	struct cdp_fsel b[2];
	unsigned rr = 0;
	int64_t started;

	(void)state;
	init(b, 2, NULL, 8);
	cdp_fsel_failed(&b[0], &T, now + 100);
	cdp_fsel_failed(&b[1], &T, now + 200);
	now += 300;
	assert_int_equal(cdp_fsel_pick(b, 2, -1, &rr), 0);
	started = now;
	now += 4000;
	assert_int_equal(done(&b[0], started, CDP_ERR_TIMEOUT, ETIMEDOUT),
			 CDP_FSEL_SAME);
	assert_int_equal(cdp_fsel_pick(b, 2, -1, &rr), 1);
	/* a wait for its own pool's slot says nothing of the backend */
	started = now;
	now += 4000;
	done(&b[1], started, CDP_ERR_TIMEOUT, EBUSY);
	assert_int_equal(cdp_fsel_pick(b, 2, -1, &rr), 1);
	/* the backoff is the probes' business, as for connect errors */
	assert_int_equal(b[0].backoff_ms, T.backoff_min_ms);
}

/*
 * A timeout may be the scan's own doing (a big file, or the first attempt
 * cut to half the deadline): it makes the backend suspect, and only a
 * failed probe then ejects it.  That probe is a scan: a clamd wedged in
 * its scans still answers PING (issue 22, item 5).
 */
static void test_timeout_is_suspect_until_probe_scan(void **state)
{
	struct cdp_fsel b[3];
	unsigned rr = 0;
	int i;

	(void)state;
	init(b, 3, NULL, 8);
	now += 100;
	assert_int_not_equal(
		done(&b[0], now - 60000, CDP_ERR_TIMEOUT, ETIMEDOUT),
		CDP_FSEL_EJECTED);
	assert_false(b[0].ejected);
	assert_int_equal(cdp_fsel_healthy(b, 3, -1), 3);
	/* the prober asks it at once */
	assert_true(cdp_fsel_probe_due(&b[0], now));
	assert_int_equal(cdp_fsel_next_due(b, 3), now);
	/* meanwhile new scans go to the others, even when they are busier */
	b[1].inflight = 3;
	b[2].inflight = 3;
	for (i = 0; i < 6; i++)
		assert_int_not_equal(take(b, 3, -1, &rr), 0);
	/* the probe it is due for is a scan; the others' are PINGs */
	assert_int_equal(cdp_fsel_probe_kind(&b[0]), CDP_FSEL_SCAN);
	assert_int_equal(cdp_fsel_probe_kind(&b[1]), CDP_FSEL_PING);
	/* a PING (sent before the timeout was known) that it answers
	 * proves nothing: still suspect, the scan probe due at once */
	now += 5;
	assert_int_equal(cdp_fsel_probe_done(&b[0], &T, now - 5, CDP_FSEL_PING,
					     true, now),
			 CDP_FSEL_SAME);
	assert_true(b[0].suspect);
	assert_true(cdp_fsel_probe_due(&b[0], now));
	assert_int_not_equal(take(b, 3, -1, &rr), 0);
	/* the probe scan gets a verdict: no change to log, PINGs an
	 * interval apart, and it takes scans again */
	now += 5;
	assert_int_equal(cdp_fsel_probe_done(&b[0], &T, now - 5, CDP_FSEL_SCAN,
					     true, now),
			 CDP_FSEL_SAME);
	assert_false(b[0].ejected);
	assert_false(b[0].suspect);
	assert_int_equal(cdp_fsel_probe_kind(&b[0]), CDP_FSEL_PING);
	assert_int_equal(b[0].next_probe, now + T.probe_interval_ms);
	assert_int_equal(cdp_fsel_pick(b, 3, -1, &rr), 0);
	/* another timeout, and this time the probe scan fails too: ejected */
	now += 1000;
	done(&b[0], now - 60000, CDP_ERR_TIMEOUT, ETIMEDOUT);
	assert_false(b[0].ejected);
	now += 2000;
	assert_int_equal(cdp_fsel_probe_done(&b[0], &T, now - 2000,
					     CDP_FSEL_SCAN, false, now),
			 CDP_FSEL_EJECTED);
	/* ejected, it is still probed with a scan: an answered PING does
	 * not readmit it, a probe scan with a verdict does */
	assert_int_equal(cdp_fsel_probe_kind(&b[0]), CDP_FSEL_SCAN);
	assert_int_equal(cdp_fsel_probe_done(&b[0], &T, now + 1, CDP_FSEL_PING,
					     true, now + 2),
			 CDP_FSEL_SAME);
	assert_true(b[0].ejected);
	assert_int_equal(b[0].next_probe, now + T.backoff_min_ms);
	/* a timeout of an ejected one changes nothing more */
	assert_int_equal(done(&b[0], now, CDP_ERR_TIMEOUT, ETIMEDOUT),
			 CDP_FSEL_SAME);
	assert_int_equal(b[0].next_probe, now + T.backoff_min_ms);
	/* connect and protocol errors still eject at once */
	assert_int_equal(done(&b[1], now - 10, CDP_ERR_CONNECT, ECONNREFUSED),
			 CDP_FSEL_EJECTED);
	assert_int_equal(done(&b[2], now - 10, CDP_ERR_PROTOCOL, EPROTO),
			 CDP_FSEL_EJECTED);
}

/* No free connection in the backend's own pool says nothing about it. */
static void test_pool_wait_is_not_the_backend(void **state)
{
	struct cdp_fsel b[2];
	unsigned rr = 0;

	(void)state;
	init(b, 2, NULL, 1);
	b[0].inflight = 1;
	assert_int_equal(done(&b[0], now - 100, CDP_ERR_TIMEOUT, EBUSY),
			 CDP_FSEL_SAME);
	assert_false(b[0].ejected);
	assert_false(cdp_fsel_probe_due(&b[0], now));
	/* nor does it change where scans go */
	b[0].inflight = 0;
	b[1].inflight = 1;
	assert_int_equal(cdp_fsel_pick(b, 2, -1, &rr), 0);
}

/*
 * A clamd that dies with 7 scans in flight fails them all within a few
 * milliseconds: that is one ejection and one step of backoff, and a scan
 * begun before the ejection that still got its verdict does not readmit
 * it.  Only failed PINGs double the backoff.
 */
static void test_inflight_outcomes_after_ejection(void **state)
{
	struct cdp_fsel b[2];
	int64_t began, ejected_at;
	int i;

	(void)state;
	init(b, 2, NULL, 8);
	began = now;
	now += 1000;
	ejected_at = now;
	assert_int_equal(done(&b[0], began, CDP_ERR_CONNECT, ECONNRESET),
			 CDP_FSEL_EJECTED);
	for (i = 0; i < 6; i++) {
		now++;
		assert_int_equal(done(&b[0], began, CDP_ERR_PROTOCOL, EPROTO),
				 CDP_FSEL_SAME);
	}
	assert_int_equal(b[0].backoff_ms, T.backoff_min_ms);
	assert_int_equal(b[0].next_probe, ejected_at + T.backoff_min_ms);
	/* one begun before the ejection had its verdict: still ejected */
	now++;
	assert_int_equal(done(&b[0], began, CDP_ERR_NONE, 0), CDP_FSEL_SAME);
	assert_true(b[0].ejected);
	assert_int_equal(b[0].next_probe, ejected_at + T.backoff_min_ms);
	/* a failed PING doubles the backoff */
	now = b[0].next_probe;
	assert_int_equal(cdp_fsel_probe_done(&b[0], &T, now, CDP_FSEL_PING,
					     false, now + 3),
			 CDP_FSEL_SAME);
	now += 3;
	assert_int_equal(b[0].backoff_ms, 2 * T.backoff_min_ms);
	assert_int_equal(b[0].next_probe, now + 2 * T.backoff_min_ms);
	/* every backend down: a scan sent to it anyway that fails is no
	 * PING, the backoff stays, but it rotates the choice */
	assert_int_equal(done(&b[1], now - 1, CDP_ERR_CONNECT, ECONNREFUSED),
			 CDP_FSEL_EJECTED);
	now += 10;
	assert_int_equal(done(&b[0], now - 5, CDP_ERR_CONNECT, ECONNREFUSED),
			 CDP_FSEL_SAME);
	assert_int_equal(b[0].backoff_ms, 2 * T.backoff_min_ms);
	assert_int_equal(b[0].failed_at, now);
	/* one begun after its last failure that gets a verdict readmits it */
	now += 10;
	assert_int_equal(done(&b[0], now - 5, CDP_ERR_NONE, 0),
			 CDP_FSEL_READMITTED);
	assert_false(b[0].ejected);
}

/* A PING sent before a scan ejected the backend says nothing newer. */
static void test_probe_begun_before_ejection(void **state)
{
	struct cdp_fsel b[2];
	int64_t sent;

	(void)state;
	init(b, 2, NULL, 8);
	sent = now;
	now += 10;
	assert_int_equal(done(&b[0], now - 20, CDP_ERR_CONNECT, ECONNRESET),
			 CDP_FSEL_EJECTED);
	now += 10;
	assert_int_equal(
		cdp_fsel_probe_done(&b[0], &T, sent, CDP_FSEL_PING, true, now),
		CDP_FSEL_SAME);
	assert_true(b[0].ejected);
	assert_int_equal(
		cdp_fsel_probe_done(&b[0], &T, sent, CDP_FSEL_PING, false, now),
		CDP_FSEL_SAME);
	assert_int_equal(b[0].backoff_ms, T.backoff_min_ms);
	/* the next one is a backoff away, as after the ejection */
	assert_false(cdp_fsel_probe_due(&b[0], now + T.backoff_min_ms - 1));
	assert_true(cdp_fsel_probe_due(&b[0], now + T.backoff_min_ms));
	/* one sent after it decides */
	now += T.backoff_min_ms;
	assert_int_equal(cdp_fsel_probe_done(&b[0], &T, now, CDP_FSEL_PING,
					     true, now + 1),
			 CDP_FSEL_READMITTED);
}

/*
 * clamd's MaxThreads bounds the scans in flight on a backend, one thread
 * kept for small files (issue 22, item 9); unknown, the cap alone does.
 */
static void test_thread_limits(void **state)
{
	struct cdp_fsel b[1];

	(void)state;
	init(b, 1, NULL, 8);
	assert_int_equal(cdp_fsel_limit(&b[0], false), 8);
	assert_int_equal(cdp_fsel_limit(&b[0], true), 8);
	b[0].threads = 4;
	assert_int_equal(cdp_fsel_limit(&b[0], false), 3);
	assert_int_equal(cdp_fsel_limit(&b[0], true), 4);
	b[0].threads = 1; /* nothing to keep back: one scan at a time */
	assert_int_equal(cdp_fsel_limit(&b[0], false), 1);
	assert_int_equal(cdp_fsel_limit(&b[0], true), 1);
	b[0].threads = 20; /* more threads than connections */
	assert_int_equal(cdp_fsel_limit(&b[0], false), 8);
	assert_int_equal(cdp_fsel_limit(&b[0], true), 8);
}

static void test_pick_slot_waits_rather_than_queue(void **state)
{
	struct cdp_fsel b[2];
	unsigned rr = 0;

	(void)state;
	/* one backend of MaxThreads 4: three big, then only a small one */
	init(b, 1, NULL, 8);
	b[0].threads = 4;
	b[0].inflight = 2;
	assert_int_equal(cdp_fsel_pick_slot(b, 1, -1, false, &rr), 0);
	b[0].inflight = 3;
	assert_int_equal(cdp_fsel_pick_slot(b, 1, -1, false, &rr), -1);
	assert_int_equal(cdp_fsel_pick_slot(b, 1, -1, true, &rr), 0);
	b[0].inflight = 4;
	assert_int_equal(cdp_fsel_pick_slot(b, 1, -1, true, &rr), -1);
	/* a retry on the only backend waits for it too */
	assert_int_equal(cdp_fsel_pick_slot(b, 1, 0, true, &rr), -1);
	b[0].inflight = 1;
	assert_int_equal(cdp_fsel_pick_slot(b, 1, 0, true, &rr), 0);
	/* cdp_fsel_pick still hands out a full one (its pool waits) */
	b[0].inflight = 4;
	assert_int_equal(cdp_fsel_pick(b, 1, -1, &rr), 0);

	/* two: the full one is passed over for the one with room, even a
	 * lighter-weighted or suspect one */
	init(b, 2, NULL, 8);
	b[0].threads = 2;
	b[0].inflight = 1;
	b[1].inflight = 5;
	b[1].suspect = true;
	for (int k = 0; k < 4; k++)
		assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, false, &rr), 1);
	assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, true, &rr), 0);
	/* one being asked for its MaxThreads has no slot yet */
	b[0].learning = true;
	assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, true, &rr), 1);
	b[0].learning = false;
	/* healthy ones all full: wait, not the ejected one with room */
	b[1].suspect = false;
	b[1].inflight = 8;
	assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, false, &rr), -1);
	b[0].inflight = 0;
	assert_int_equal(cdp_fsel_failed(&b[0], &T, now), true);
	assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, false, &rr), -1);
	/* only ejected ones: the one with room */
	assert_int_equal(cdp_fsel_failed(&b[1], &T, now + 1), true);
	assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, false, &rr), 0);
	b[0].inflight = 1;
	assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, false, &rr), -1);
	assert_int_equal(cdp_fsel_pick_slot(b, 2, -1, true, &rr), 0);
}

/* ---------------------------------------------- against a silent peer */

/*
 * A clamd that accepts (the kernel's backlog does) and never answers: a
 * listening UNIX socket nobody accepts on, in a short temporary directory.
 */
struct silent {
	char dir[32];
	char path[64];
	int fd;
};

static void silent_open(struct silent *s)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	strcpy(s->dir, "/tmp/cdpfXXXXXX");
	assert_non_null(mkdtemp(s->dir));
	snprintf(s->path, sizeof(s->path), "%s/s", s->dir);
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->fd >= 0);
	strcpy(sun.sun_path, s->path);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(s->fd, 64), 0);
}

static void silent_close(struct silent *s)
{
	close(s->fd);
	unlink(s->path);
	rmdir(s->dir);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct holder {
	struct cdp_pool *pool;
	struct cdp_cancel *cancel;
	struct cdp_result res;
};

static void *hold_slot(void *arg)
{
	struct holder *h = arg;

	cdp_scan_buf(h->pool, "x", 1, 10000, h->cancel, &h->res);
	return NULL;
}

/* The pool marks a wait for a free connection as such (EBUSY), so that
 * the fleet can tell it from a clamd that did not answer. */
static void test_pool_wait_says_so(void **state)
{
	struct cdp_pool_counters c;
	struct cdp_config cfg;
	struct cdp_result res;
	struct silent peer;
	struct holder h;
	pthread_t t;
	int64_t until;

	(void)state;
	silent_open(&peer);
	cdp_config_init(&cfg);
	cfg.addr = peer.path;
	cfg.max_conns = 1;
	assert_int_equal(cdp_pool_new(&cfg, &h.pool), 0);
	h.cancel = cdp_cancel_new();
	assert_non_null(h.cancel);
	assert_int_equal(pthread_create(&t, NULL, hold_slot, &h), 0);
	until = mono_ms() + 5000;
	do {
		poll(NULL, 0, 5);
		cdp_pool_counters(h.pool, &c);
	} while (c.open < 1 && mono_ms() < until);
	assert_int_equal(c.open, 1);
	cdp_scan_buf(h.pool, "x", 1, 50, NULL, &res);
	assert_int_equal(res.verdict, CDP_ERROR);
	assert_int_equal(res.cat, CDP_ERR_TIMEOUT);
	assert_int_equal(res.err, EBUSY);
	cdp_cancel_trigger(h.cancel);
	pthread_join(t, NULL);
	assert_int_equal(h.res.cat, CDP_ERR_CANCELLED);
	cdp_cancel_free(h.cancel);
	cdp_pool_free(h.pool);
	silent_close(&peer);
}

/*
 * A connect that the call's own deadline cut short (the time went on a
 * wait for a slot, or the attempt had half the deadline) is a timeout,
 * which only makes a fleet's backend suspect; one that ran out of
 * connect_timeout_ms is a connect failure.  A TCP listener with a full
 * accept queue never completes another handshake.
 */
static void test_connect_cut_by_deadline(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	struct cdp_config cfg;
	struct cdp_result res;
	struct cdp_pool *pool;
	char addr[64];
	int l, c;

	(void)state;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 0), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &len), 0);
	/* fills the accept queue */
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sin, sizeof(sin)), 0);
	snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%u",
		 (unsigned)ntohs(sin.sin_port));
	cdp_config_init(&cfg);
	cfg.addr = addr;
	cfg.connect_timeout_ms = 5000;
	assert_int_equal(cdp_pool_new(&cfg, &pool), 0);
	cdp_scan_buf(pool, "x", 1, 100, NULL, &res);
	assert_int_equal(res.cat, CDP_ERR_TIMEOUT);
	assert_int_equal(res.err, ETIMEDOUT);
	cdp_pool_free(pool);
	cfg.connect_timeout_ms = 100;
	assert_int_equal(cdp_pool_new(&cfg, &pool), 0);
	cdp_scan_buf(pool, "x", 1, 5000, NULL, &res);
	assert_int_equal(res.cat, CDP_ERR_CONNECT);
	assert_int_equal(res.err, ETIMEDOUT);
	cdp_pool_free(pool);
	close(c);
	close(l);
}

/*
 * cdp_fleet_free() runs in whatever thread drops the last reference (a
 * reload, the unmount): it must not wait out a PING of a clamd that
 * accepted and never answers.
 */
static void test_free_cancels_a_ping(void **state)
{
	struct cdp_backend_config bc[2] = {{0}};
	struct cdp_fleet_config cfg;
	struct silent peer[2];
	struct cdp_fleet *fleet;
	struct pollfd pfd;
	int64_t t;
	size_t bad;

	(void)state;
	silent_open(&peer[0]);
	silent_open(&peer[1]);
	bc[0].addr = peer[0].path;
	bc[1].addr = peer[1].path;
	cdp_fleet_config_init(&cfg);
	cfg.probe_interval_ms = 10; /* the first PING at once */
	cfg.probe_timeout_ms = 2000;
	assert_int_equal(cdp_fleet_new(&cfg, bc, 2, &fleet, &bad), 0);
	assert_int_equal(cdp_fleet_start(fleet), 0);
	/* the prober's connection waits in the backlog: it is PINGing */
	pfd = (struct pollfd){.fd = peer[0].fd, .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	poll(NULL, 0, 50); /* PING sent, its reply awaited */
	t = mono_ms();
	cdp_fleet_free(fleet);
	t = mono_ms() - t;
	if (t >= 300)
		fail_msg("cdp_fleet_free took %lld ms, the PING's deadline is "
			 "2000 ms",
			 (long long)t);
	silent_close(&peer[0]);
	silent_close(&peer[1]);
}

/*
 * A pick restarted after the caller's own wait: the wait is not the
 * backend's latency, and a failure recorded during it does not make the
 * attempt's verdict "older than the failure".
 */
static void test_restart_after_a_pause(void **state)
{
	struct cdp_result clean = {.verdict = CDP_CLEAN};
	struct cdp_result refused = {.verdict = CDP_ERROR,
				     .cat = CDP_ERR_CONNECT};
	struct cdp_backend_config bc[2] = {{0}};
	struct cdp_fleet_config cfg;
	struct cdp_fleet_pick slow, other;
	struct cdp_backend_stats st;
	struct cdp_fleet *fleet;
	size_t bad;

	(void)state;
	/* never connected to: acquire and release only count */
	bc[0].addr = "/nonexistent/a.sock";
	bc[1].addr = "/nonexistent/b.sock";
	cdp_fleet_config_init(&cfg);
	assert_int_equal(cdp_fleet_new(&cfg, bc, 2, &fleet, &bad), 0);
	cdp_fleet_acquire(fleet, 1, &slow);
	assert_int_equal(slow.index, 0);
	poll(NULL, 0, 150); /* the caller's pause */
	/* another attempt on the same backend fails meanwhile */
	cdp_fleet_acquire(fleet, 1, &other);
	assert_int_equal(other.index, 0);
	cdp_fleet_release(fleet, &other, &refused);
	assert_int_equal(cdp_fleet_backend_stats(fleet, 0, &st), 0);
	assert_false(st.healthy);
	poll(NULL, 0, 2); /* the attempt starts after that failure */
	cdp_fleet_restart(fleet, &slow);
	cdp_fleet_release(fleet, &slow, &clean);
	assert_int_equal(cdp_fleet_backend_stats(fleet, 0, &st), 0);
	assert_true(st.healthy);
	if (st.last_ms >= 100)
		fail_msg("latency %llu ms counts the caller's pause",
			 (unsigned long long)st.last_ms);
	cdp_fleet_free(fleet);
}

/*
 * A clamd that answers one STATS (MaxThreads 2) on a UNIX socket, then
 * stays silent: the fleet's first acquire asks it.
 */
struct stats_peer {
	struct silent s;
	pthread_t t;
	int stats_seen;
};

static void *stats_serve(void *arg)
{
	static const char reply[] =
		"POOLS: 1\n\nSTATE: VALID PRIMARY\nTHREADS: live 1  idle 0 "
		"max 2 idle-timeout 30\nQUEUE: 0 items\nEND";
	struct stats_peer *p = arg;
	char buf[64] = "";
	ssize_t n;
	int c;

	c = accept(p->s.fd, NULL, NULL);
	if (c < 0)
		return NULL;
	n = read(c, buf, sizeof(buf) - 1);
	if (n > 0 && memcmp(buf, "zSTATS", 7) == 0) {
		p->stats_seen = 1;
		if (write(c, reply, sizeof(reply)) != (ssize_t)sizeof(reply))
			p->stats_seen = -1;
	}
	close(c);
	return NULL;
}

struct slot_try {
	struct cdp_fleet *fleet;
	struct cdp_cancel *cancel;
	struct cdp_fleet_pick pick;
	int rc;
};

static void *try_slot(void *arg)
{
	struct slot_try *t = arg;

	t->rc = cdp_fleet_acquire_slot(t->fleet, -1, true, 10000, t->cancel,
				       &t->pick);
	return NULL;
}

/*
 * cdp_fleet_acquire_slot learns MaxThreads (2) at the first acquire, hands
 * out one big and two small slots, then waits: within the timeout, cut
 * short by a cancel, and ended by a release.
 */
static void test_acquire_slot_learns_and_waits(void **state)
{
	struct cdp_result clean = {.verdict = CDP_CLEAN};
	struct cdp_backend_config bc = {0};
	struct cdp_fleet_pick big, small1, small2, extra;
	struct cdp_fleet_config cfg;
	struct cdp_backend_stats st;
	struct stats_peer peer = {0};
	struct slot_try waiter;
	struct cdp_fleet *fleet;
	pthread_t t;
	int64_t t0;
	size_t bad;

	(void)state;
	silent_open(&peer.s);
	assert_int_equal(pthread_create(&peer.t, NULL, stats_serve, &peer), 0);
	bc.addr = peer.s.path;
	cdp_fleet_config_init(&cfg);
	cfg.pool.max_conns = 8;
	assert_int_equal(cdp_fleet_new(&cfg, &bc, 1, &fleet, &bad), 0);
	assert_int_equal(
		cdp_fleet_acquire_slot(fleet, -1, false, 5000, NULL, &big), 0);
	pthread_join(peer.t, NULL);
	assert_int_equal(peer.stats_seen, 1);
	assert_int_equal(cdp_fleet_backend_stats(fleet, 0, &st), 0);
	assert_int_equal(st.threads, 2);
	assert_int_equal(st.inflight, 1);
	/* no second big one: it waits out its timeout */
	t0 = mono_ms();
	assert_int_equal(
		cdp_fleet_acquire_slot(fleet, -1, false, 120, NULL, &extra),
		-ETIMEDOUT);
	if (mono_ms() - t0 < 110)
		fail_msg("gave up after %lld ms of 120",
			 (long long)(mono_ms() - t0));
	/* the small lane's thread is free */
	assert_int_equal(
		cdp_fleet_acquire_slot(fleet, -1, true, 100, NULL, &small1), 0);
	assert_int_equal(
		cdp_fleet_acquire_slot(fleet, -1, true, 50, NULL, &small2),
		-ETIMEDOUT);
	assert_int_equal(cdp_fleet_slot_waits(fleet), 2);
	/* a waiter is cut short by its cancel */
	waiter = (struct slot_try){.fleet = fleet, .cancel = cdp_cancel_new()};
	assert_non_null(waiter.cancel);
	assert_int_equal(pthread_create(&t, NULL, try_slot, &waiter), 0);
	poll(NULL, 0, 100);
	t0 = mono_ms();
	cdp_cancel_trigger(waiter.cancel);
	pthread_join(t, NULL);
	assert_int_equal(waiter.rc, -ECANCELED);
	if (mono_ms() - t0 > 500)
		fail_msg("the cancel took %lld ms",
			 (long long)(mono_ms() - t0));
	cdp_cancel_free(waiter.cancel);
	/* and one is let in by a release */
	waiter = (struct slot_try){.fleet = fleet};
	assert_int_equal(pthread_create(&t, NULL, try_slot, &waiter), 0);
	poll(NULL, 0, 100);
	cdp_fleet_release(fleet, &big, &clean);
	pthread_join(t, NULL);
	assert_int_equal(waiter.rc, 0);
	cdp_fleet_release(fleet, &small1, &clean);
	cdp_fleet_release(fleet, &waiter.pick, &clean);
	assert_int_equal(cdp_fleet_backend_stats(fleet, 0, &st), 0);
	assert_int_equal(st.inflight, 0);
	cdp_fleet_free(fleet);
	silent_close(&peer.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ties_round_robin),
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_thread_limits),
		cmocka_unit_test(test_pick_slot_waits_rather_than_queue),
		cmocka_unit_test(test_acquire_slot_learns_and_waits),
		cmocka_unit_test(test_exclude),
		cmocka_unit_test(test_failure_kinds),
		cmocka_unit_test(test_ejection_and_readmission),
		cmocka_unit_test(test_backoff_doubles_to_cap),
		cmocka_unit_test(test_all_ejected),
		cmocka_unit_test(test_all_ejected_timeout_rotates),
		cmocka_unit_test(test_timeout_is_suspect_until_probe_scan),
		cmocka_unit_test(test_pool_wait_is_not_the_backend),
		cmocka_unit_test(test_inflight_outcomes_after_ejection),
		cmocka_unit_test(test_probe_begun_before_ejection),
		cmocka_unit_test(test_pool_wait_says_so),
		cmocka_unit_test(test_connect_cut_by_deadline),
		cmocka_unit_test(test_free_cancels_a_ping),
		cmocka_unit_test(test_restart_after_a_pause),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
