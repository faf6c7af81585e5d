// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan queue's scanner threads: prepare (a writer's pages written
 * back once, after every joiner's submit, before the scan), retries (how
 * many, and when not) with a scripted scanner, joins around a verdict
 * (never after the last decision, always while it is answered), the hold
 * on what a scan runs on across a reload, and verdicts
 * known before clamd is asked.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "let_time_pass.h"
#include "scanq_fake.h"

static int submit_prepared(struct scanq *q, ino_t ino, uid_t uid,
			   struct twaiter *t, uint64_t key)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = 100};
	struct scan_request r = {
		.timeout_ms = test_timeout_ms,
		.file = &f,
		.fd = devnull,
		.uid = uid,
		.prepare = true,
		.prepare_key = key,
	};

	return scanq_submit(q, &r, &t->w);
}

/*
 * Opens of a file a writer holds, while its scan is still queued: they
 * share it (one write-back, after the last of them submitted, then one
 * scan), whoever's they are.
 */
static void test_prepared_joins_queued_scan(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter gate, a, b, c;
	struct scanq_counters cnt;

	(void)state;
	prep_reset();
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	twaiter_init(&c, false);
	assert_int_equal(submit(q, 700, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1)); /* the only thread is busy */
	assert_int_equal(submit_prepared(q, 701, 1000, &a, 42), 0);
	assert_int_equal(submit_prepared(q, 701, 2000, &b, 42), 0);
	assert_int_equal(submit(q, 701, 100, 3000, &c), 0); /* no writer */
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.joined, 2);
	assert_int_equal(prep_get(&prep.calls), 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&a, 5000) && wait_done(&b, 5000) &&
		    wait_done(&c, 5000));
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(fake.order[1], 701);
	pthread_mutex_lock(&prep.lock);
	assert_int_equal(prep.calls, 1);
	assert_int_equal(prep.key, 42);
	assert_ptr_equal(prep.ctx, &prep);
	assert_int_equal(prep.scans_before, 1); /* before 701's scan */
	pthread_mutex_unlock(&prep.lock);
	assert_int_equal(a.o.res.verdict, CDP_CLEAN);
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	assert_int_equal(c.o.res.verdict, CDP_CLEAN);
	scanq_free(q);
}

/*
 * A write-back that cannot be had (the daemon is stopping) fails the scan
 * of everyone waiting for it: clamd must not be asked about bytes the
 * readers would not read.
 */
static void test_failed_prepare_fails_the_scan(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter a;

	(void)state;
	prep_reset();
	pthread_mutex_lock(&prep.lock);
	prep.result = -ESHUTDOWN;
	pthread_mutex_unlock(&prep.lock);
	twaiter_init(&a, false);
	assert_int_equal(submit_prepared(q, 720, 1000, &a, 9), 0);
	assert_true(wait_done(&a, 5000));
	assert_int_equal(prep_get(&prep.calls), 1);
	assert_int_equal(fake_nscans(), 0);
	assert_int_equal(a.o.res.verdict, CDP_ERROR);
	assert_int_equal(a.o.res.cat, CDP_ERR_LOCAL);
	assert_int_equal(a.o.res.err, ESHUTDOWN);
	scanq_free(q);
}

/*
 * A writer's open that joins a queued scan that had no write-back gives
 * it one: the scan must see the pages dirtied before that open.
 */
static void test_prepared_join_adds_write_back(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter gate, a, b;

	(void)state;
	prep_reset();
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 710, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit(q, 711, 100, 1000, &a), 0);
	assert_int_equal(submit_prepared(q, 711, 2000, &b, 7), 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&a, 5000) && wait_done(&b, 5000));
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(prep_get(&prep.calls), 1);
	assert_int_equal(prep_get_key(), 7);
	assert_int_equal(prep_get(&prep.scans_before), 1);
	scanq_free(q);
}

/*
 * A scan under way may have read the file before a new writer's pages
 * were written back: a writer's open does not join it but has a scan
 * (and a write-back) of its own.
 */
static void test_prepared_does_not_join_running_scan(void **state)
{
	struct scanq *q = new_queue(2, 10000, 0);
	struct twaiter a, b;
	struct scanq_counters cnt;

	(void)state;
	prep_reset();
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 720, 100, 1000, &a), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit_prepared(q, 720, 1000, &b, 9), 0);
	assert_true(fake_wait_scans(2));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.joined, 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&a, 5000) && wait_done(&b, 5000));
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(prep_get(&prep.calls), 1);
	scanq_free(q);
}

/*
 * A write-back that takes long (a large dirty mapping, a slow backend)
 * does not hold its waiters past their deadlines: each is answered at its
 * own, also one that joined without needing the write-back.
 */
static void test_waiters_answered_at_deadline_during_write_back(void **state)
{
	struct scanq *q = new_queue(1, 300, 0);
	struct twaiter gate, a, b;
	uint64_t t0;

	(void)state;
	prep_reset();
	pthread_mutex_lock(&prep.lock);
	prep.block = true;
	pthread_mutex_unlock(&prep.lock);
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	fake.fast_from = 741; /* 741's scan itself never blocks */
	assert_int_equal(submit(q, 740, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	t0 = now_ms();
	assert_int_equal(submit(q, 741, 100, 2000, &a), 0);
	assert_int_equal(submit_prepared(q, 741, 1000, &b, 3), 0);
	fake_release(740);
	assert_true(wait_done(&gate, 5000));
	/* the write-back is under way, and stays so */
	assert_true(wait_done(&a, 3000) && wait_done(&b, 3000));
	assert_int_equal(prep_get(&prep.calls), 1);
	assert_true(now_ms() - t0 < 2000);
	assert_int_equal(a.o.res.cat, CDP_ERR_TIMEOUT);
	assert_int_equal(b.o.res.cat, CDP_ERR_TIMEOUT);
	assert_int_equal(fake_nscans(), 1);
	prep_unblock();
	scanq_free(q);
}

/*
 * A waiter of a shared scan with a write-back that gives up while it runs
 * is answered at once, and the scan goes on for the others: the
 * write-back uses nothing of its waiters.
 */
static void test_prepared_waiter_leaves_running_scan(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter gate, a, b;
	struct scanq_counters cnt;

	(void)state;
	prep_reset();
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 730, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit_prepared(q, 731, 1000, &a, 1), 0);
	assert_int_equal(submit_prepared(q, 731, 2000, &b, 1), 0);
	fake_release(730);
	assert_true(fake_wait_scans(2)); /* 731's scan is under way */
	t_interrupt(&a);
	assert_true(wait_done(&a, 2000));
	assert_true(scanq_waiter_interrupted(&a.w));
	assert_false(atomic_load(&b.done));
	fake_release(731);
	assert_true(wait_done(&b, 5000));
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(prep_get(&prep.calls), 1);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.joined, 1);
	scanq_free(q);
}

/*
 * The scripted scanner: its first fail_calls calls end in an error of
 * category cat (after waiting for the cancel, or for the deadline to pass,
 * if asked to); later calls are clean. Every call is recorded.
 */
#define SCRIPT_CALLS 8

struct script {
	pthread_mutex_t lock;
	int calls;
	int fail_calls;
	enum cdp_errcat cat;
	bool wait_cancel;   /* fail only once cancelled */
	bool outlive_limit; /* fail only after the time it was given */
	bool block;	    /* clean calls wait for release */
	bool released;
	unsigned int attempt[SCRIPT_CALLS];
	bool fresh[SCRIPT_CALLS]; /* the token asked for a new connection */
	struct cdp_fleet *fleet[SCRIPT_CALLS];
	enum scan_mode mode[SCRIPT_CALLS];
	int timeout_ms[SCRIPT_CALLS];
};

static struct script script = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void script_reset(int fail_calls, enum cdp_errcat cat)
{
	pthread_mutex_lock(&script.lock);
	script.calls = 0;
	script.fail_calls = fail_calls;
	script.cat = cat;
	script.wait_cancel = false;
	script.outlive_limit = false;
	script.block = false;
	script.released = false;
	pthread_mutex_unlock(&script.lock);
}

static int script_calls(void)
{
	int n;

	pthread_mutex_lock(&script.lock);
	n = script.calls;
	pthread_mutex_unlock(&script.lock);
	return n;
}

static bool script_wait_calls(int n)
{
	uint64_t end = now_ms() + 5000;

	while (script_calls() < n) {
		if (now_ms() > end)
			return false;
		usleep(1000);
	}
	return true;
}

static void script_release(void)
{
	pthread_mutex_lock(&script.lock);
	script.released = true;
	pthread_mutex_unlock(&script.lock);
}

static void script_scan(const struct scanq_scan *s, struct cdp_result *res)
{
	uint64_t limit = now_ms() + (uint64_t)s->timeout_ms;
	bool fail, block;
	int n;

	memset(res, 0, sizeof(*res));
	pthread_mutex_lock(&script.lock);
	n = script.calls++;
	if (n < SCRIPT_CALLS) {
		script.attempt[n] = s->attempt;
		script.fresh[n] = cdp_cancel_fresh(s->cancel);
		script.fleet[n] = s->fleet;
		script.mode[n] = s->mode;
		script.timeout_ms[n] = s->timeout_ms;
	}
	fail = n < script.fail_calls;
	block = !fail && script.block;
	pthread_mutex_unlock(&script.lock);
	for (;;) {
		bool go = true;

		pthread_mutex_lock(&script.lock);
		if (fail && script.wait_cancel)
			go = cdp_cancel_triggered(s->cancel);
		else if (fail && script.outlive_limit)
			go = now_ms() > limit + 20;
		else if (block)
			go = script.released || cdp_cancel_triggered(s->cancel);
		pthread_mutex_unlock(&script.lock);
		if (go)
			break;
		usleep(2000);
	}
	if (fail) {
		res->verdict = CDP_ERROR;
		res->cat = script.cat;
		res->err = EPIPE;
	} else if (cdp_cancel_triggered(s->cancel)) {
		res->verdict = CDP_ERROR;
		res->cat = CDP_ERR_CANCELLED;
	} else {
		res->verdict = CDP_CLEAN;
	}
}

static struct scanq *script_queue(int timeout_ms)
{
	struct scanq_config cfg = {
		.threads = 1,
		.hooks.scan = script_scan,
	};

	return new_queue_cfg(&cfg, timeout_ms);
}

/* A connection that broke once: one retry, and the verdict is clean. */
static void test_retry_once_then_clean(void **state)
{
	enum cdp_errcat cats[] = {CDP_ERR_CONNECT, CDP_ERR_PROTOCOL};
	struct scanq_counters cnt;

	(void)state;
	for (size_t i = 0; i < sizeof(cats) / sizeof(cats[0]); i++) {
		struct scanq *q = script_queue(10000);
		struct twaiter a;

		script_reset(1, cats[i]);
		twaiter_init(&a, false);
		assert_int_equal(submit(q, 200 + i, 100, 1, &a), 0);
		assert_true(wait_done(&a, 5000));
		assert_int_equal(a.o.res.verdict, CDP_CLEAN);
		scanq_counters(q, &cnt);
		scanq_free(q);
		assert_int_equal(script_calls(), 2);
		assert_int_equal(script.attempt[0], 0);
		assert_int_equal(script.attempt[1], 1);
		/* the retry does not reuse an idle session */
		assert_false(script.fresh[0]);
		assert_true(script.fresh[1]);
		/* one scan sent, retried once */
		assert_int_equal(cnt.scans, 1);
		assert_int_equal(cnt.retries, 1);
	}
}

/* Broken every time: an error after exactly SCANQ_SCAN_ATTEMPTS calls. */
static void test_retry_gives_up(void **state)
{
	struct scanq *q = script_queue(10000);
	struct scanq_counters cnt;
	struct twaiter a;

	(void)state;
	script_reset(100, CDP_ERR_CONNECT);
	twaiter_init(&a, false);
	assert_int_equal(submit(q, 210, 100, 1, &a), 0);
	assert_true(wait_done(&a, 5000));
	assert_int_equal(a.o.res.verdict, CDP_ERROR);
	assert_int_equal(a.o.res.cat, CDP_ERR_CONNECT);
	scanq_counters(q, &cnt);
	scanq_free(q);
	assert_int_equal(SCANQ_SCAN_ATTEMPTS, 2);
	assert_int_equal(script_calls(), SCANQ_SCAN_ATTEMPTS);
	assert_int_equal(cnt.retries, SCANQ_SCAN_ATTEMPTS - 1);
}

/* clamd answered (an error of its own): asking again would not help. */
static void test_no_retry_of_clamd_error(void **state)
{
	struct scanq *q = script_queue(10000);
	struct twaiter a;

	(void)state;
	script_reset(1, CDP_ERR_CLAMD);
	twaiter_init(&a, false);
	assert_int_equal(submit(q, 215, 100, 1, &a), 0);
	assert_true(wait_done(&a, 5000));
	assert_int_equal(a.o.res.cat, CDP_ERR_CLAMD);
	scanq_free(q);
	assert_int_equal(script_calls(), 1);
}

/* The connection breaks as the scan is cancelled: no retry. */
static void test_no_retry_after_cancel(void **state)
{
	struct scanq *q = script_queue(10000);
	struct twaiter a;

	(void)state;
	script_reset(100, CDP_ERR_CONNECT);
	script.wait_cancel = true;
	twaiter_init(&a, false);
	assert_int_equal(submit(q, 220, 100, 1, &a), 0);
	assert_true(script_wait_calls(1));
	t_interrupt(&a);
	assert_true(wait_done(&a, 2000));
	/*
	 * Answered by the reaper (cancelled) or, when the scan ended first,
	 * with its error: the daemon looks at the interrupt either way.
	 */
	assert_true(scanq_waiter_interrupted(&a.w));
	assert_int_equal(a.o.res.verdict, CDP_ERROR);
	/* scanq_free waits for the scanner thread: a retry would show */
	scanq_free(q);
	assert_int_equal(script_calls(), 1);
}

/* The connection breaks when the deadline has passed: no retry. */
static void test_no_retry_past_deadline(void **state)
{
	struct scanq *q = script_queue(300);
	struct scanq_counters cnt;
	struct twaiter a;

	(void)state;
	script_reset(100, CDP_ERR_PROTOCOL);
	script.outlive_limit = true;
	twaiter_init(&a, false);
	assert_int_equal(submit(q, 230, 100, 1, &a), 0);
	assert_true(wait_done(&a, 5000));
	assert_int_equal(a.o.res.verdict, CDP_ERROR);
	assert_int_equal(a.o.res.cat, CDP_ERR_PROTOCOL);
	/* clamd was asked: not an expiry in the queue */
	assert_false(a.o.expired_queued);
	scanq_counters(q, &cnt);
	scanq_free(q);
	assert_int_equal(script_calls(), 1);
	assert_int_equal(cnt.retries, 0);
}

/*
 * A waiter joins a running scan that then times out (clamd took all the
 * time it was given, the creator's): the scan is asked again with the
 * joiner's time, as a scan of its own would have had, and the joiner gets
 * its verdict. The creator, whose deadline has passed, is told so.
 */
static void test_timeout_retried_for_later_joiner(void **state)
{
	struct scanq *q = script_queue(600);
	struct scanq_counters cnt;
	struct twaiter a, b;

	(void)state;
	script_reset(1, CDP_ERR_TIMEOUT);
	script.outlive_limit = true;
	script.block = true; /* the second call, until released */
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 240, 100, 1, &a), 0);
	assert_true(script_wait_calls(1));
	/*
	 * b joins 300 ms after a submitted: its deadline, which the retry
	 * is given (timeout_ms[1] below), is that much later than a's
	 */
	let_time_pass(300, "b's deadline is to be 300 ms later than a's");
	assert_int_equal(submit(q, 240, 100, 2, &b), 0);
	/* a's own deadline has passed: told so, not kept for b's time */
	assert_true(wait_done(&a, 3000));
	assert_int_equal(a.o.res.cat, CDP_ERR_TIMEOUT);
	assert_false(a.o.expired_queued);
	assert_true(script_wait_calls(2));
	assert_false(atomic_load(&b.done));
	script_release();
	assert_true(wait_done(&b, 3000));
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	scanq_counters(q, &cnt);
	scanq_free(q);
	assert_int_equal(script_calls(), 2);
	assert_true(script.timeout_ms[0] <= 600);
	assert_true(script.timeout_ms[1] >= SCANQ_EXTEND_MIN_MS &&
		    script.timeout_ms[1] < 400);
	assert_int_equal(script.attempt[1], 1);
	assert_int_equal(cnt.scans, 1);
	assert_int_equal(cnt.retries, 1);
}

/* Without a later joiner a timeout is final, as before. */
static void test_timeout_alone_not_retried(void **state)
{
	struct scanq *q = script_queue(300);
	struct twaiter a;

	(void)state;
	script_reset(1, CDP_ERR_TIMEOUT);
	script.outlive_limit = true;
	twaiter_init(&a, false);
	assert_int_equal(submit(q, 241, 100, 1, &a), 0);
	assert_true(wait_done(&a, 3000));
	assert_int_equal(a.o.res.cat, CDP_ERR_TIMEOUT);
	scanq_free(q);
	assert_int_equal(script_calls(), 1);
}

/*
 * A waiter that comes between a failed scan's last decision and its end
 * (here from the observe callback, which runs on the scanner thread right
 * then) must not join the failed scan and get its error at once: it gets
 * a scan of its own.
 */
static struct scanq *gap_q;
static struct twaiter gap_b;
static atomic_int gap_submits;

static void submit_in_the_gap(void *arg, uint64_t usec)
{
	(void)arg, (void)usec;
	if (atomic_fetch_add(&gap_submits, 1) == 0)
		assert_int_equal(submit(gap_q, 242, 100, 2, &gap_b), 0);
}

static void test_no_join_after_the_last_decision(void **state)
{
	struct scanq_config cfg = {
		.threads = 1,
		.hooks.scan = script_scan,
		.hooks.observe = submit_in_the_gap,
	};
	struct twaiter a;

	(void)state;
	script_reset(1, CDP_ERR_TIMEOUT);
	script.outlive_limit = true;
	atomic_store(&gap_submits, 0);
	gap_q = new_queue_cfg(&cfg, 300);
	twaiter_init(&a, false);
	twaiter_init(&gap_b, false);
	assert_int_equal(submit(gap_q, 242, 100, 1, &a), 0);
	assert_true(wait_done(&a, 3000));
	assert_int_equal(a.o.res.cat, CDP_ERR_TIMEOUT);
	assert_true(wait_done(&gap_b, 3000));
	assert_int_equal(gap_b.o.res.verdict, CDP_CLEAN);
	scanq_free(gap_q);
	assert_int_equal(script_calls(), 2);
}

/*
 * An opener that comes after the scan gave its verdict but before the
 * verdict reached the cache (the daemon caches it in done()) joins the
 * verdict rather than finding neither it nor the scan: one scan only.
 */
static struct scanq *late_q;
static struct twaiter late_b;

static void submit_while_answered(struct scan_waiter *w,
				  const struct scan_outcome *o)
{
	assert_int_equal(submit(late_q, 250, 100, 2, &late_b), 0);
	on_done(w, o);
}

static void test_join_while_the_verdict_is_answered(void **state)
{
	struct scanq_counters cnt;
	struct twaiter a;

	(void)state;
	late_q = new_queue(2, 10000, 0);
	twaiter_init(&a, false);
	twaiter_init(&late_b, false);
	a.w.done = submit_while_answered;
	fake.verdict = CDP_INFECTED;
	assert_int_equal(submit(late_q, 250, 100, 1, &a), 0);
	fake_release(250);
	assert_true(wait_done(&a, 5000));
	assert_true(wait_done(&late_b, 5000));
	assert_int_equal(late_b.o.res.verdict, CDP_INFECTED);
	assert_true(late_b.seq > a.seq);
	scanq_counters(late_q, &cnt);
	assert_int_equal(cnt.joined, 1);
	scanq_free(late_q);
	assert_int_equal(fake_nscans(), 1);
}

static atomic_int holds, releases;

/* A hold on another configuration: the scan runs with its fleet and mode. */
static char held_fleet;

static void *swap_hold(void *arg, struct cdp_fleet **fleet,
		       enum scan_mode *mode)
{
	(void)arg;
	*fleet = (struct cdp_fleet *)&held_fleet;
	*mode = SCAN_MODE_STREAM;
	atomic_fetch_add(&holds, 1);
	return &holds;
}

static void count_release(void *ctx, void *token)
{
	(void)ctx;
	assert_ptr_equal(token, &holds);
	atomic_fetch_add(&releases, 1);
}

/* "The configuration in force" of in_force_hold: a reload replaces it. */
static char fleet_a, fleet_b; /* never dereferenced by the scanner */
static _Atomic(struct cdp_fleet *) in_force_fleet;
static _Atomic(enum scan_mode) in_force_mode;

static void *in_force_hold(void *ctx, struct cdp_fleet **fleet,
			   enum scan_mode *mode)
{
	(void)ctx;
	*fleet = atomic_load(&in_force_fleet);
	*mode = atomic_load(&in_force_mode);
	atomic_fetch_add(&holds, 1);
	return &holds;
}

/*
 * A reload with one scan running and one queued: the running scan keeps
 * the fleet and mode it started with, the queued one starts with the new
 * ones but keeps the deadline it was submitted with; a request submitted
 * under the new configuration has that one's (shorter) deadline. Each
 * request's deadline is its own: the queue has none of its own to change.
 * Every hold is released.
 */
static void test_reload_under_way(void **state)
{
	struct scanq_config cfg = {
		.threads = 1,
		.hooks.scan = script_scan,
		.hooks.hold = in_force_hold,
		.hooks.release = count_release,
	};
	struct scanq *q;
	struct twaiter run, queued, late;
	uint64_t t0;

	(void)state;
	atomic_store(&holds, 0);
	atomic_store(&releases, 0);
	atomic_store(&in_force_fleet, (struct cdp_fleet *)&fleet_a);
	atomic_store(&in_force_mode, SCAN_MODE_FDPASS);
	q = new_queue_cfg(&cfg, 10000);
	script_reset(0, CDP_ERR_NONE);
	script.block = true;
	twaiter_init(&run, false);
	twaiter_init(&queued, false);
	twaiter_init(&late, false);
	assert_int_equal(submit(q, 400, 100, 1, &run), 0);
	assert_true(script_wait_calls(1));
	assert_int_equal(submit(q, 401, 100, 2, &queued), 0);
	/* the reload: scans starting from now run on the new fleet */
	atomic_store(&in_force_fleet, (struct cdp_fleet *)&fleet_b);
	atomic_store(&in_force_mode, SCAN_MODE_STREAM);
	/* a request decided under it: its 300 ms pass while queued */
	test_timeout_ms = 300;
	t0 = now_ms();
	assert_int_equal(submit(q, 402, 100, 3, &late), 0);
	assert_true(wait_done(&late, 3000));
	assert_true(late.at_ms - t0 < 1500);
	assert_int_equal(late.o.res.cat, CDP_ERR_TIMEOUT);
	assert_true(late.o.expired_queued);
	/* the queued scan submitted before the change is still waiting */
	assert_false(atomic_load(&queued.done));
	script_release();
	assert_true(wait_done(&run, 5000) && wait_done(&queued, 5000));
	assert_int_equal(run.o.res.verdict, CDP_CLEAN);
	assert_int_equal(queued.o.res.verdict, CDP_CLEAN);
	scanq_free(q);
	assert_int_equal(script_calls(), 2);
	assert_ptr_equal(script.fleet[0], &fleet_a);
	assert_int_equal(script.mode[0], SCAN_MODE_FDPASS);
	assert_ptr_equal(script.fleet[1], &fleet_b);
	assert_int_equal(script.mode[1], SCAN_MODE_STREAM);
	/* its deadline still counts from its submission, 10 s */
	assert_true(script.timeout_ms[1] > 1000);
	assert_int_equal(atomic_load(&holds), 2);
	assert_int_equal(atomic_load(&releases), 2);
}

/*
 * A scan runs on what its hold gives (the daemon's pins the configuration
 * in force and gives its clamds), and the hold is released once.
 */
static void test_hold_gives_the_fleet(void **state)
{
	struct scanq_config cfg = {
		.threads = 1,
		.hooks.scan = script_scan,
		.hooks.hold = swap_hold,
		.hooks.release = count_release,
	};
	struct scanq *q;
	struct twaiter w;

	(void)state;
	atomic_store(&holds, 0);
	atomic_store(&releases, 0);
	q = new_queue_cfg(&cfg, 10000);
	script_reset(0, CDP_ERR_NONE);
	twaiter_init(&w, false);
	assert_int_equal(submit(q, 410, 100, 1, &w), 0);
	assert_true(wait_done(&w, 5000));
	scanq_free(q);
	assert_int_equal(script_calls(), 1);
	assert_ptr_equal(script.fleet[0], &held_fleet);
	assert_int_equal(script.mode[0], SCAN_MODE_STREAM);
	assert_int_equal(atomic_load(&holds), 1);
	assert_int_equal(atomic_load(&releases), 1);
}

static int submit_known(struct scanq *q, ino_t ino, uint64_t tag,
			struct fake_cache *c, struct twaiter *t)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = 100};
	struct scan_request r = {
		.timeout_ms = test_timeout_ms,
		.file = &f,
		.tag = tag,
		.fd = devnull,
		.uid = 1,
	};

	known_cache = c;
	return scanq_submit(q, &r, &t->w);
}

/*
 * An opener that looked at the cache before a scan of its file ended and
 * submitted after the scan left the queue (too late to join it) is
 * answered with what the scan left in the cache (known), clamd unasked;
 * so is one whose file is known infected; a file the cache does not know
 * is scanned as ever.
 */
static void test_verdict_known_since_the_submit(void **state)
{
	struct scanq *q = new_queue(2, 10000, 0);
	struct twaiter a, late, bad, other;
	struct fake_cache c = {0};
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&a, false);
	twaiter_init(&late, false);
	twaiter_init(&bad, false);
	twaiter_init(&other, false);
	pthread_mutex_lock(&fake.lock);
	fake.fast_from = 0;
	pthread_mutex_unlock(&fake.lock);
	/* nothing known yet: scanned, and its verdict "cached" */
	assert_int_equal(submit_known(q, 260, 7, &c, &a), 0);
	assert_true(wait_done(&a, 5000));
	assert_int_equal(a.o.res.verdict, CDP_CLEAN);
	assert_false(a.o.known);
	assert_true(a.o.started_ns > 0);
	atomic_store(&c.clean_ino, 260);
	/* the late opener: its scan ended before it submitted */
	assert_true(wait_no_scan_live(q));
	assert_int_equal(submit_known(q, 260, 7, &c, &late), 0);
	assert_true(wait_done(&late, 5000));
	assert_int_equal(late.o.res.verdict, CDP_CLEAN);
	assert_int_equal(late.o.res.cat, CDP_ERR_NONE);
	assert_true(late.o.known);
	/* asked with what the scan holds (the queue's default hold) */
	assert_ptr_equal(atomic_load(&known_held), &held_token);
	assert_int_equal(late.o.started_ns, 0);
	assert_int_equal(late.o.usec, 0);
	assert_int_equal(c.tag_seen, 7);
	/* known infected: the verdict and its signature */
	atomic_store(&c.infected_ino, 262);
	assert_int_equal(submit_known(q, 262, 9, &c, &bad), 0);
	assert_true(wait_done(&bad, 5000));
	assert_int_equal(bad.o.res.verdict, CDP_INFECTED);
	assert_string_equal(bad.o.res.text, "Cached.Sig");
	assert_true(bad.o.known);
	assert_int_equal(c.tag_seen, 9);
	/* another file is not known: scanned */
	assert_int_equal(submit_known(q, 261, 7, &c, &other), 0);
	assert_true(wait_done(&other, 5000));
	assert_false(other.o.known);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.scans, 2);
	assert_int_equal(cnt.spared, 2);
	assert_int_equal(cnt.joined, 0);
	assert_int_equal(atomic_load(&c.asked), 4);
	scanq_free(q);
	assert_int_equal(fake_nscans(), 2);
}

/* A background scan dropped by its confirm never asks known(). */
static void test_known_not_asked_after_a_drop(void **state)
{
	struct scanq *q = new_queue(3, 10000, 0);
	struct fake_cache c = {0};
	struct vcache_file f = {.dev = 1, .ino = 263, .size = 100};
	struct scan_request r = {
		.timeout_ms = test_timeout_ms,
		.file = &f,
		.fd = devnull,
		.shared_queue = BG_QUEUE,
		.background = true,
		.confirm = CONFIRM_NO,
	};
	struct twaiter dropped;

	(void)state;
	twaiter_init(&dropped, false);
	atomic_store(&c.clean_ino, 263);
	known_cache = &c;
	assert_int_equal(scanq_submit(q, &r, &dropped.w), 0);
	assert_true(wait_done(&dropped, 5000));
	assert_true(dropped.o.dropped);
	assert_false(dropped.o.known);
	scanq_free(q);
	assert_int_equal(atomic_load(&c.asked), 0);
	assert_int_equal(fake_nscans(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prepared_joins_queued_scan),
		cmocka_unit_test(test_prepared_join_adds_write_back),
		cmocka_unit_test(test_failed_prepare_fails_the_scan),
		cmocka_unit_test(test_prepared_does_not_join_running_scan),
		cmocka_unit_test(test_prepared_waiter_leaves_running_scan),
		cmocka_unit_test(
			test_waiters_answered_at_deadline_during_write_back),
		cmocka_unit_test(test_retry_once_then_clean),
		cmocka_unit_test(test_retry_gives_up),
		cmocka_unit_test(test_no_retry_of_clamd_error),
		cmocka_unit_test(test_no_retry_after_cancel),
		cmocka_unit_test(test_no_retry_past_deadline),
		cmocka_unit_test(test_timeout_retried_for_later_joiner),
		cmocka_unit_test(test_timeout_alone_not_retried),
		cmocka_unit_test(test_no_join_after_the_last_decision),
		cmocka_unit_test(test_join_while_the_verdict_is_answered),
		cmocka_unit_test(test_reload_under_way),
		cmocka_unit_test(test_hold_gives_the_fleet),
		cmocka_unit_test(test_verdict_known_since_the_submit),
		cmocka_unit_test(test_known_not_asked_after_a_drop),
	};

	return cmocka_run_group_tests(tests, scanq_fake_setup,
				      scanq_fake_teardown);
}
