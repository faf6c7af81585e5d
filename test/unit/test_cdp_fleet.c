// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for the fleet's decisions (fleetsel.c) on a fake clock: ties
 * go round robin, weights and connection caps share the load, a retry
 * excludes the failed backend, failures eject, re-probes back off by
 * doubling up to a cap, a success readmits, and with every backend ejected
 * the one that failed longest ago is still tried.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ties_round_robin),
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_exclude),
		cmocka_unit_test(test_failure_kinds),
		cmocka_unit_test(test_ejection_and_readmission),
		cmocka_unit_test(test_backoff_doubles_to_cap),
		cmocka_unit_test(test_all_ejected),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
