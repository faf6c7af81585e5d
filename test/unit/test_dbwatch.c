// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The database watch (dbwatch.c) over a fleet, with clamd's VERSION and
 * the backends' health wrapped (-Wl,--wrap): a fleet of one behaves as a
 * single clamd; with backend 0 down a database change on another one
 * still drops the verdicts; ejected backends are not asked unless none
 * is healthy; during a rollout every backend's update drops; a backend
 * first seen with a newer database drops, one with an older does not; a
 * new fleet starts afresh.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "dbwatch.h"

#define MAX_BACKENDS 3

/* What each backend of the fleet under test answers. */
static struct fake {
	bool down;	       /* VERSION fails (connection refused) */
	bool ejected;	       /* as cdp_fleet_backend_stats says */
	bool silent;	       /* answers nothing until cancelled or 2 s */
	unsigned long version; /* its database version */
	unsigned calls; /* VERSION queries it got (atomic: the watch thread) */
} fake[MAX_BACKENDS];

static struct cdp_fleet *fleet;
static unsigned drops;
static unsigned errors_logged; /* log_err lines (atomic: the watch thread) */

void __real_log_err(const char *fmt, ...);
void __wrap_log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void __wrap_log_err(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	__atomic_fetch_add(&errors_logged, 1, __ATOMIC_RELEASE);
	__real_log_err("%s", line);
}

int __real_cdp_fleet_backend_stats(struct cdp_fleet *f, size_t i,
				   struct cdp_backend_stats *st);
int __wrap_cdp_version_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
			      struct cdp_version *ver, struct cdp_result *res);
int __wrap_cdp_fleet_backend_stats(struct cdp_fleet *f, size_t i,
				   struct cdp_backend_stats *st);

/* A clamd that accepts and never answers, as far as io_timeout allows. */
static int silence(struct cdp_cancel *cancel, struct cdp_result *res)
{
	const struct timespec slice = {0, 5 * 1000 * 1000};

	for (int waited = 0; waited < 2000; waited += 5) {
		if (cdp_cancel_triggered(cancel)) {
			*res = (struct cdp_result){.verdict = CDP_ERROR,
						   .cat = CDP_ERR_CANCELLED};
			return -ECANCELED;
		}
		nanosleep(&slice, NULL);
	}
	*res = (struct cdp_result){.verdict = CDP_ERROR,
				   .cat = CDP_ERR_TIMEOUT};
	return -ETIMEDOUT;
}

int __wrap_cdp_version_cancel(struct cdp_pool *pool, struct cdp_cancel *cancel,
			      struct cdp_version *ver, struct cdp_result *res)
{
	for (size_t i = 0; i < cdp_fleet_size(fleet); i++) {
		if (cdp_fleet_pool(fleet, i) != pool)
			continue;
		__atomic_fetch_add(&fake[i].calls, 1, __ATOMIC_RELEASE);
		if (fake[i].silent)
			return silence(cancel, res);
		if (fake[i].down) {
			*res = (struct cdp_result){.verdict = CDP_ERROR,
						   .cat = CDP_ERR_CONNECT};
			snprintf(res->text, sizeof(res->text),
				 "connection refused");
			return -ECONNREFUSED;
		}
		*ver = (struct cdp_version){.db_version = fake[i].version,
					    .db_time = 1700000000};
		snprintf(ver->engine, sizeof(ver->engine), "1.4.6");
		snprintf(ver->db_date, sizeof(ver->db_date), "v%lu",
			 fake[i].version);
		return 0;
	}
	fail_msg("VERSION to a pool of no backend");
	return -EINVAL;
}

int __wrap_cdp_fleet_backend_stats(struct cdp_fleet *f, size_t i,
				   struct cdp_backend_stats *st)
{
	int ret = __real_cdp_fleet_backend_stats(f, i, st);

	if (ret == 0 && f == fleet && i < MAX_BACKENDS)
		st->healthy = !fake[i].ejected;
	return ret;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0->tv_sec) * 1000 +
	       (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Waits up to 5 s for backend i to have been sent n VERSION queries. */
static bool wait_calls(size_t i, unsigned n)
{
	const struct timespec slice = {0, 1000 * 1000};
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (__atomic_load_n(&fake[i].calls, __ATOMIC_ACQUIRE) < n) {
		if (ms_since(&t0) > 5000)
			return false;
		nanosleep(&slice, NULL);
	}
	return true;
}

static struct cdp_fleet *pin_fleet(void *arg, void **pin)
{
	(void)arg;
	*pin = fleet;
	return fleet;
}

static void unpin(void *arg, void *pin)
{
	(void)arg;
	assert_ptr_equal(pin, fleet);
}

static void drop_verdicts(void *arg)
{
	(void)arg;
	drops++;
}

static struct cdp_fleet *new_fleet(size_t n)
{
	static const char *const addrs[MAX_BACKENDS] = {
		"/nonexistent/clamd0.sock", "tcp://127.0.0.1:1",
		"tcp://127.0.0.1:2"};
	struct cdp_backend_config b[MAX_BACKENDS] = {0};
	struct cdp_fleet_config cfg;
	struct cdp_fleet *f;
	size_t bad;

	cdp_fleet_config_init(&cfg);
	for (size_t i = 0; i < n; i++)
		b[i].addr = addrs[i];
	assert_int_equal(cdp_fleet_new(&cfg, b, n, &f, &bad), 0);
	return f;
}

static const struct dbwatch_source src = {
	.pin_fleet = pin_fleet,
	.unpin = unpin,
	.drop_verdicts = drop_verdicts,
};

struct ctx {
	struct stats stats;
	struct dbwatch *w;
};

static struct ctx *setup(size_t n)
{
	struct ctx *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	memset(fake, 0, sizeof(fake));
	drops = 0;
	fleet = new_fleet(n);
	assert_int_equal(dbwatch_new(&src, &c->stats, &c->w), 0);
	return c;
}

static void teardown(struct ctx *c)
{
	dbwatch_stop(c->w);
	cdp_fleet_free(fleet);
	fleet = NULL;
	free(c);
}

static unsigned long described_version(struct dbwatch *w)
{
	char buf[512];
	const char *p;

	dbwatch_describe(w, buf, sizeof(buf));
	p = strstr(buf, "clamd_db_version=");
	assert_non_null(p);
	return strtoul(p + strlen("clamd_db_version="), NULL, 10);
}

static void fleet_of_one_is_one_clamd(void **state)
{
	struct ctx *c = setup(1);

	(void)state;
	assert_int_equal(dbwatch_up(c->w), -1);
	fake[0].version = 100;
	dbwatch_check(c->w);
	dbwatch_check(c->w);
	assert_int_equal(drops, 0); /* the first answer is no change */
	assert_int_equal(dbwatch_up(c->w), 1);
	assert_int_equal(described_version(c->w), 100);
	fake[0].version = 101;
	dbwatch_check(c->w);
	assert_int_equal(drops, 1);
	assert_int_equal(stats_get(&c->stats, STAT_CACHE_CLEARS), 1);
	assert_int_equal(described_version(c->w), 101);
	/* down: said so, nothing dropped; back on the same database */
	fake[0].down = true;
	dbwatch_check(c->w);
	assert_int_equal(dbwatch_up(c->w), 0);
	fake[0].down = false;
	dbwatch_check(c->w);
	assert_int_equal(dbwatch_up(c->w), 1);
	assert_int_equal(drops, 1);
	/* one ejected backend is still asked: there is no other */
	fake[0].ejected = true;
	fake[0].version = 102;
	dbwatch_check(c->w);
	assert_int_equal(drops, 2);
	assert_int_equal(fake[0].calls, 6);
	teardown(c);
}

static void change_behind_a_dead_first_backend(void **state)
{
	struct ctx *c = setup(2);

	(void)state;
	fake[0].down = true;
	fake[1].version = 100;
	dbwatch_check(c->w);
	assert_int_equal(dbwatch_up(c->w), 1);
	assert_int_equal(described_version(c->w), 100);
	fake[1].version = 101;
	dbwatch_check(c->w);
	assert_int_equal(drops, 1);
	assert_int_equal(described_version(c->w), 101);
	assert_int_equal(fake[0].calls, 2); /* asked, with its deadline */
	teardown(c);
}

static void ejected_backends_are_left_to_the_prober(void **state)
{
	struct ctx *c = setup(3);

	(void)state;
	for (int i = 0; i < 3; i++)
		fake[i].version = 100;
	fake[1].ejected = true;
	dbwatch_check(c->w);
	assert_int_equal(fake[0].calls, 1);
	assert_int_equal(fake[1].calls, 0);
	assert_int_equal(fake[2].calls, 1);
	/* every one ejected: all asked, the watch still knows if any is up */
	for (int i = 0; i < 3; i++)
		fake[i].ejected = true;
	fake[0].down = fake[2].down = true;
	dbwatch_check(c->w);
	assert_int_equal(fake[1].calls, 1);
	assert_int_equal(dbwatch_up(c->w), 1);
	assert_int_equal(drops, 0);
	teardown(c);
}

static void every_step_of_a_rollout_drops(void **state)
{
	struct ctx *c = setup(2);

	(void)state;
	fake[0].version = fake[1].version = 100;
	dbwatch_check(c->w);
	fake[0].version = 101;
	dbwatch_check(c->w);
	assert_int_equal(drops, 1);
	assert_int_equal(described_version(c->w), 101);
	dbwatch_check(c->w);
	assert_int_equal(drops, 1);
	/* backend 1 cached verdicts of 100 meanwhile: they go too */
	fake[1].version = 101;
	dbwatch_check(c->w);
	assert_int_equal(drops, 2);
	/* an ejected backend keeps its record: readmitted, no change */
	fake[1].ejected = true;
	dbwatch_check(c->w);
	fake[1].ejected = false;
	dbwatch_check(c->w);
	assert_int_equal(drops, 2);
	teardown(c);
}

static void first_seen_newer_drops_older_does_not(void **state)
{
	struct ctx *c = setup(3);

	(void)state;
	fake[0].down = fake[2].down = true;
	fake[1].version = 100;
	dbwatch_check(c->w);
	fake[0].down = false;
	fake[0].version = 99;
	dbwatch_check(c->w);
	assert_int_equal(drops, 0);
	assert_int_equal(described_version(c->w), 100);
	fake[2].down = false;
	fake[2].version = 105;
	dbwatch_check(c->w);
	assert_int_equal(drops, 1);
	assert_int_equal(described_version(c->w), 105);
	teardown(c);
}

/*
 * A reload builds a new fleet of the same clamds: what each answered
 * carries over by address. Forgotten, a rollout finished after the reload
 * dropped nothing: backend 0 cached verdicts on 100 while backend 1 was
 * on 101, then updated too, and 101 was no newer than the newest seen.
 */
static void a_reload_keeps_each_clamds_record(void **state)
{
	struct ctx *c = setup(2);
	struct cdp_fleet *old;

	(void)state;
	fake[0].version = fake[1].version = 100;
	dbwatch_check(c->w);
	fake[1].version = 101;
	dbwatch_check(c->w);
	assert_int_equal(drops, 1);
	/* a reload adds a clamd on the newest database, and before the
	 * next check backend 0 finishes the rollout: its verdicts of 100 go */
	old = fleet;
	fleet = new_fleet(3);
	cdp_fleet_free(old);
	fake[2].version = 101;
	fake[0].version = 101;
	dbwatch_check(c->w);
	assert_int_equal(drops, 2);
	/* the new clamd, first seen on the newest database, dropped nothing */
	dbwatch_check(c->w);
	assert_int_equal(drops, 2);
	/* the same list again, as a reload of another setting builds it */
	old = fleet;
	fleet = new_fleet(3);
	cdp_fleet_free(old);
	fake[1].version = 102;
	dbwatch_check(c->w);
	assert_int_equal(drops, 3);
	assert_int_equal(described_version(c->w), 102);
	teardown(c);
}

/* A stop waits for no VERSION: one per backend added up to n deadlines. */
static void a_stop_cancels_the_version_under_way(void **state)
{
	struct timespec t0, t1;
	struct stats stats = {0};
	struct dbwatch *w;
	long ms;

	(void)state;
	memset(fake, 0, sizeof(fake));
	fleet = new_fleet(3);
	for (int i = 0; i < 3; i++)
		fake[i].silent = true;
	assert_int_equal(dbwatch_start(&src, &stats, 60, &w), 0);
	/* the first is under way (and, silent, stays so for 2 s) */
	assert_true(wait_calls(0, 1));
	assert_int_equal(__atomic_load_n(&fake[0].calls, __ATOMIC_ACQUIRE), 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	dbwatch_stop(w);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms < 500);
	assert_int_equal(fake[1].calls + fake[2].calls, 0);
	cdp_fleet_free(fleet);
	fleet = NULL;
}

/*
 * The VERSION a stop cancelled says nothing of clamd: a fleet of one (or
 * the last backend) cut short that way logs no "not answering" error.
 */
static void a_cancelled_version_is_not_an_outage(void **state)
{
	struct stats stats = {0};
	struct dbwatch *w;

	(void)state;
	memset(fake, 0, sizeof(fake));
	fleet = new_fleet(1);
	fake[0].silent = true;
	__atomic_store_n(&errors_logged, 0, __ATOMIC_RELEASE);
	assert_int_equal(dbwatch_start(&src, &stats, 60, &w), 0);
	/* the VERSION the stop is to cut short is under way */
	assert_true(wait_calls(0, 1));
	assert_int_equal(__atomic_load_n(&fake[0].calls, __ATOMIC_ACQUIRE), 1);
	dbwatch_stop(w);
	assert_int_equal(__atomic_load_n(&errors_logged, __ATOMIC_ACQUIRE), 0);
	cdp_fleet_free(fleet);
	fleet = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fleet_of_one_is_one_clamd),
		cmocka_unit_test(change_behind_a_dead_first_backend),
		cmocka_unit_test(ejected_backends_are_left_to_the_prober),
		cmocka_unit_test(every_step_of_a_rollout_drops),
		cmocka_unit_test(first_seen_newer_drops_older_does_not),
		cmocka_unit_test(a_reload_keeps_each_clamds_record),
		cmocka_unit_test(a_stop_cancels_the_version_under_way),
		cmocka_unit_test(a_cancelled_version_is_not_an_outage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
