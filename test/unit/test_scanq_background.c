// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan queue's background scans (issue 23): they come last, one at a
 * time and only while no other scan runs, never on the small-file thread;
 * beside_one ones may run beside a waited scan; they wait for not_before
 * unless joined, are dropped at their deadline or when their confirm says
 * the file changed, and are bounded.
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

static void test_background_comes_last(void **state)
{
	/* two general threads, and one for small files (not used: BIG) */
	struct scanq *q = new_queue(3, 10000, 0);
	struct twaiter gate, bg[2], fg[2];
	struct scanq_counters cnt;

	(void)state;
	assert_true(scanq_background_possible(q));
	twaiter_init(&gate, false);
	assert_int_equal(submit(q, 200, BIG, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	for (int i = 0; i < 2; i++) {
		twaiter_init(&bg[i], false);
		assert_int_equal(submit_bg(q, 201 + i, BIG, 0, 0, &bg[i]), 0);
	}
	/* queued after the background ones, scanned before them */
	twaiter_init(&fg[0], false);
	twaiter_init(&fg[1], false);
	assert_int_equal(submit(q, 203, BIG, 1000, &fg[0]), 0);
	assert_true(fake_wait_scans(2));
	assert_int_equal(submit(q, 204, BIG, 2000, &fg[1]), 0);
	fake_release((ino_t)-1);
	for (int i = 0; i < 2; i++)
		assert_true(wait_done(&bg[i], 5000) && wait_done(&fg[i], 5000));
	assert_int_equal(fake_nscans(), 5);
	assert_int_equal(fake.order[1], 203);
	assert_int_equal(fake.order[2], 204);
	assert_int_equal(fake.order[3], 201);
	assert_int_equal(fake.order[4], 202);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.background, 2);
	assert_int_equal(cnt.scans, 5);
	scanq_free(q);
}

static void test_small_thread_never_takes_background(void **state)
{
	struct scanq *q = new_queue(3, 10000, 0);
	struct twaiter gate, gate2, bg, reader;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&gate2, false);
	twaiter_init(&bg, false);
	twaiter_init(&reader, false);
	/* the general threads are busy: only the small-file thread is free */
	assert_int_equal(submit(q, 210, BIG, 1000, &gate), 0);
	assert_int_equal(submit(q, 209, BIG, 1000, &gate2), 0);
	assert_true(fake_wait_scans(2));
	pthread_mutex_lock(&fake.lock);
	fake.fast_from = 211;
	pthread_mutex_unlock(&fake.lock);
	assert_int_equal(submit_bg(q, 211, 100, 0, 0, &bg), 0);
	/* nothing is to happen: the scan must stay queued, unscanned */
	let_time_pass(100, "the small-file thread must not take the background "
			   "scan");
	assert_int_equal(fake_nscans(), 2);
	assert_false(atomic_load(&bg.done));
	/* a reader of the file joins it: the small-file thread takes it */
	assert_int_equal(submit(q, 211, 100, 2000, &reader), 0);
	assert_true(wait_done(&reader, 2000));
	assert_true(wait_done(&bg, 2000));
	assert_int_equal(reader.o.res.verdict, CDP_CLEAN);
	assert_int_equal(fake_nscans(), 3);
	scanq_counters(q, &cnt);
	/* a joined one is no background work any more */
	assert_int_equal(cnt.background, 0);
	assert_int_equal(cnt.joined, 1);
	fake_release((ino_t)-1);
	assert_true(wait_done(&gate, 5000) && wait_done(&gate2, 5000));
	scanq_free(q);
}

static void test_background_waits_for_running_scans(void **state)
{
	struct scanq *q = new_queue(3, 10000, 0);
	struct twaiter gate, bg[2];

	(void)state;
	twaiter_init(&gate, false);
	/* a scan somebody waits for runs; a general thread is idle */
	assert_int_equal(submit(q, 250, BIG, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	for (int i = 0; i < 2; i++) {
		twaiter_init(&bg[i], false);
		assert_int_equal(submit_bg(q, 251 + i, BIG, 0, 0, &bg[i]), 0);
	}
	/* nothing is to happen: a waited-for scan runs, so no background */
	let_time_pass(100, "no background scan may start while the gate runs");
	assert_int_equal(fake_nscans(), 1);
	/* once it is done, one background scan at a time */
	fake_release(250);
	assert_true(wait_done(&gate, 2000));
	assert_true(fake_wait_scans(2));
	/* nothing more is to happen: 252 waits until 251's scan ends */
	let_time_pass(100, "the second background scan must not start");
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(fake.order[1], 251);
	fake_release((ino_t)-1);
	assert_true(wait_done(&bg[0], 2000) && wait_done(&bg[1], 2000));
	assert_int_equal(fake.max_running_big, 1);
	scanq_free(q);
}

static int submit_beside(struct scanq *q, ino_t ino, struct twaiter *t)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = BIG};
	struct scan_request r = {
		.timeout_ms = test_timeout_ms,
		.file = &f,
		.fd = devnull,
		.shared_queue = BG_QUEUE + 1,
		.background = true,
		.beside_one = true,
	};

	return scanq_submit(q, &r, &t->w);
}

/*
 * A reader waits for one scan while the files beside it are scanned
 * ahead: one of those may use a clamd thread the reader leaves idle, one
 * at a time, and only while a general thread stays free for others.
 */
static void test_beside_one_runs_beside_a_waited_scan(void **state)
{
	struct twaiter gate, other, bg[3];
	struct scanq *q;
	int beside;

	(void)state;
	for (unsigned int threads = 3; threads <= 5; threads++) {
		/* one general thread stays free, and at most two beside */
		beside = threads == 3 ? 0 : threads == 4 ? 1 : 2;
		q = new_queue(threads, 10000, 0);
		twaiter_init(&gate, false);
		assert_int_equal(submit(q, 260, BIG, 1000, &gate), 0);
		assert_true(fake_wait_scans(1));
		for (int i = 0; i < 3; i++) {
			twaiter_init(&bg[i], false);
			assert_int_equal(submit_beside(q, 261 + i, &bg[i]), 0);
		}
		assert_true(fake_wait_scans(1 + beside));
		/* nothing more is to happen: the rest stay queued */
		let_time_pass(100, "no scan beside beyond those allowed may "
				   "start");
		assert_int_equal(fake_nscans(), 1 + beside);
		if (beside) {
			/* another user's big file still finds a thread */
			twaiter_init(&other, false);
			assert_int_equal(submit(q, 270, BIG, 1001, &other), 0);
			assert_true(fake_wait_scans(2 + beside));
		}
		fake_release((ino_t)-1);
		assert_true(wait_done(&gate, 2000));
		for (int i = 0; i < 3; i++)
			assert_true(wait_done(&bg[i], 2000));
		if (beside)
			assert_true(wait_done(&other, 2000));
		assert_int_equal(fake.max_running_big, beside ? 2 + beside : 1);
		scanq_free(q);
	}
}

static void test_beside_one_passes_plain_background(void **state)
{
	struct scanq *q = new_queue(4, 10000, 0);
	struct twaiter gate, plain, beside;

	(void)state;
	twaiter_init(&gate, false);
	assert_int_equal(submit(q, 280, BIG, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	twaiter_init(&plain, false);
	assert_int_equal(submit_bg(q, 281, BIG, 0, 0, &plain), 0);
	twaiter_init(&beside, false);
	assert_int_equal(submit_beside(q, 282, &beside), 0);
	assert_true(fake_wait_scans(2));
	assert_int_equal(fake.order[1], 282);
	/* nothing more is to happen: plain 281 waits while others run */
	let_time_pass(100, "the plain background scan must not start");
	assert_int_equal(fake_nscans(), 2);
	fake_release((ino_t)-1);
	assert_true(wait_done(&gate, 2000) && wait_done(&plain, 2000) &&
		    wait_done(&beside, 2000));
	scanq_free(q);
}

/*
 * A background scan whose deadline passes while it waits behind others is
 * dropped, not an expired scan: no open waited for it.
 */
static void test_background_past_deadline_is_dropped(void **state)
{
	struct scanq *q = new_queue(3, 300, 0);
	struct twaiter gate, bg;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&bg, false);
	assert_int_equal(submit(q, 260, BIG, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit_bg(q, 261, BIG, 0, 0, &bg), 0);
	assert_true(wait_done(&bg, 3000));
	assert_int_equal(bg.o.res.cat, CDP_ERR_TIMEOUT);
	fake_release(260);
	assert_true(wait_done(&gate, 3000));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.expired, 0);
	assert_int_equal(cnt.background_dropped, 1);
	scanq_free(q);
	assert_int_equal(fake_nscans(), 1);
}

static void test_background_held_back_until_not_before(void **state)
{
	struct scanq *q = new_queue(3, 10000, 0);
	struct twaiter alone, bg, reader;
	uint64_t t0;

	(void)state;
	twaiter_init(&alone, false);
	pthread_mutex_lock(&fake.lock);
	fake.fast_from = 0;
	pthread_mutex_unlock(&fake.lock);
	t0 = now_ms();
	assert_int_equal(
		submit_bg(q, 220, 100, real_ns() + 60 * 1000000LL, 0, &alone),
		0);
	assert_true(wait_done(&alone, 2000));
	assert_true(alone.at_ms - t0 >= 55);
	assert_true(alone.o.started_ns >= real_ns() - 1000000000LL);
	/* the hold-back is not clamd's time (the latency histogram) */
	assert_true(alone.o.usec < 50 * 1000);
	/* someone who wants the verdict now does not wait for it */
	twaiter_init(&bg, false);
	twaiter_init(&reader, false);
	assert_int_equal(
		submit_bg(q, 221, 100, real_ns() + 90 * 1000000LL, 0, &bg), 0);
	t0 = now_ms();
	assert_int_equal(submit(q, 221, 100, 1000, &reader), 0);
	assert_true(wait_done(&reader, 2000));
	/* well before the 90 ms it would have been held back */
	assert_true(reader.at_ms - t0 < 80);
	assert_int_equal(fake_nscans(), 2);
	scanq_free(q);
}

static void test_background_confirm(void **state)
{
	struct scanq *q = new_queue(3, 10000, 0);
	struct twaiter changed, same;
	struct scanq_counters cnt;
	int64_t t0 = real_ns();

	(void)state;
	twaiter_init(&changed, false);
	twaiter_init(&same, false);
	pthread_mutex_lock(&fake.lock);
	fake.fast_from = 0;
	pthread_mutex_unlock(&fake.lock);
	/* the file changed since it was stamped: no scan at all */
	assert_int_equal(submit_bg(q, 230, 100, 0, CONFIRM_NO, &changed), 0);
	assert_true(wait_done(&changed, 2000));
	assert_int_equal(changed.o.res.verdict, CDP_ERROR);
	assert_int_equal(changed.o.res.cat, CDP_ERR_CANCELLED);
	assert_int_equal(changed.o.confirmed_ns, 0);
	assert_int_equal(changed.o.started_ns, 0);
	assert_true(changed.o.dropped);
	assert_int_equal(fake_nscans(), 0);
	/* still as stamped: the confirmation's time comes with the verdict */
	assert_int_equal(submit_bg(q, 231, 100, 0, CONFIRM_YES, &same), 0);
	assert_true(wait_done(&same, 2000));
	assert_int_equal(same.o.res.verdict, CDP_CLEAN);
	assert_true(same.o.confirmed_ns >= t0);
	assert_true(same.o.started_ns >= same.o.confirmed_ns);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.background_dropped, 1);
	assert_int_equal(cnt.background, 1);
	/* dropped, not cancelled: nobody gave up on it */
	assert_int_equal(cnt.cancelled, 0);
	scanq_free(q);
}

/*
 * With one general thread a background scan would hold the only thread a
 * user's big file can have: none starts, unless someone joins it; the
 * queue still answers it when freed.
 */
static void test_no_background_with_one_general_thread(void **state)
{
	struct scanq *q = new_queue(2, 10000, 0);
	struct twaiter bg, joined, reader;

	(void)state;
	assert_false(scanq_background_possible(q));
	twaiter_init(&bg, false);
	twaiter_init(&joined, false);
	twaiter_init(&reader, false);
	pthread_mutex_lock(&fake.lock);
	fake.fast_from = 0;
	pthread_mutex_unlock(&fake.lock);
	assert_int_equal(submit_bg(q, 260, BIG, 0, 0, &bg), 0);
	assert_int_equal(submit_bg(q, 261, BIG, 0, 0, &joined), 0);
	/* nothing is to happen: both stay queued until someone joins */
	let_time_pass(100, "no background scan may start");
	assert_int_equal(fake_nscans(), 0);
	assert_int_equal(submit(q, 261, BIG, 1000, &reader), 0);
	assert_true(wait_done(&reader, 2000) && wait_done(&joined, 2000));
	assert_int_equal(reader.o.res.verdict, CDP_CLEAN);
	assert_int_equal(fake_nscans(), 1);
	assert_false(atomic_load(&bg.done));
	scanq_free(q);
	assert_true(atomic_load(&bg.done));
	assert_int_equal(bg.o.res.cat, CDP_ERR_CANCELLED);
}

static void test_background_bound(void **state)
{
	enum { N = SCANQ_MAX_QUEUED_BACKGROUND + 1 };
	struct scanq *q = new_queue(3, 10000, 0);
	static struct twaiter bg[N];
	struct twaiter gate;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&gate, false);
	assert_int_equal(submit(q, 300, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	for (int i = 0; i < N; i++) {
		/* the hint a walk waits on instead of having scans dropped */
		assert_true(scanq_background_room(q, 0, BG_QUEUE) ==
			    (i < N - 1));
		twaiter_init(&bg[i], false);
		assert_int_equal(submit_bg(q, 1000 + i, 100, 0, 0, &bg[i]),
				 i < N - 1 ? 0 : -EAGAIN);
	}
	/* another queue is not full */
	assert_true(scanq_background_room(q, 0, BG_QUEUE + 1));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.background_dropped, 1);
	assert_int_equal(cnt.rejected, 0);
	fake_release((ino_t)-1);
	for (int i = 0; i < N - 1; i++)
		assert_true(wait_done(&bg[i], 5000));
	scanq_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_background_comes_last),
		cmocka_unit_test(test_small_thread_never_takes_background),
		cmocka_unit_test(test_background_waits_for_running_scans),
		cmocka_unit_test(test_beside_one_runs_beside_a_waited_scan),
		cmocka_unit_test(test_beside_one_passes_plain_background),
		cmocka_unit_test(test_background_past_deadline_is_dropped),
		cmocka_unit_test(test_background_held_back_until_not_before),
		cmocka_unit_test(test_background_confirm),
		cmocka_unit_test(test_no_background_with_one_general_thread),
		cmocka_unit_test(test_background_bound),
	};

	return cmocka_run_group_tests(tests, scanq_fake_setup,
				      scanq_fake_teardown);
}
