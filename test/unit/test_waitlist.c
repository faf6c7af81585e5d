// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The retry list: a job is tried until an attempt gets through, at
 * growing intervals; one uid's jobs that never get through neither hold
 * a thread nor delay another uid's job; each uid's jobs are bounded; the
 * end of the list ends every job still waiting.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "let_time_pass.h"
#include "waitlist.h"

/* A job that gets through at its `through`th attempt (0: never). */
struct job {
	atomic_int attempts;
	int through;
	atomic_int ended; /* the err end() was given, 1 until then */
	atomic_bool done;
};

static bool job_attempt(void *arg)
{
	struct job *j = arg;
	int n = atomic_fetch_add(&j->attempts, 1) + 1;

	if (j->through && n >= j->through) {
		atomic_store(&j->done, true);
		return true;
	}
	return false;
}

static void job_end(void *arg, int err)
{
	struct job *j = arg;

	atomic_store(&j->ended, err);
}

static const struct waitlist_job_ops ops = {job_attempt, job_end};

static void job_init(struct job *j, int through)
{
	atomic_init(&j->attempts, 0);
	j->through = through;
	atomic_init(&j->ended, 1);
	atomic_init(&j->done, false);
}

/* Waits (bounded: 20 s) for the job to be done; whether it is. */
static bool wait_done(struct job *j)
{
	for (int i = 0; i < 20000 && !atomic_load(&j->done); i++)
		let_time_pass(1, "polling for the job's last attempt");
	return atomic_load(&j->done);
}

static void test_tried_until_through(void **state)
{
	struct waitlist *wl = waitlist_new(0);
	struct waitlist_counts c;
	struct job j;

	job_init(&j, 5);
	assert_int_equal(waitlist_add(wl, 1000, &ops, &j), 0);
	assert_true(wait_done(&j));
	assert_int_equal(atomic_load(&j.attempts), 5);
	/* the list counts it out after its last attempt returned */
	for (int i = 0; i < 20000; i++) {
		waitlist_counts(wl, &c);
		if (c.waiting == 0)
			break;
		let_time_pass(1, "polling for the list to count the job out");
	}
	assert_int_equal(c.added, 1);
	assert_int_equal(c.waiting, 0);
	waitlist_free(wl);
	/* a job that got through is not ended again */
	assert_int_equal(atomic_load(&j.ended), 1);
}

/*
 * Attempts come at growing intervals (1, 2, 4 ... up to 200 ms): a job
 * that never gets through costs a few attempts a second, not a spin.
 */
static void test_attempts_slow_down(void **state)
{
	struct waitlist *wl = waitlist_new(0);
	struct job j;
	int n;

	job_init(&j, 0);
	assert_int_equal(waitlist_add(wl, 1000, &ops, &j), 0);
	let_time_pass(1000, "the attempts one second of waiting costs");
	n = atomic_load(&j.attempts);
	/* 1+2+...+128 ms, then every 200 ms: about 12 in the second */
	assert_true(n >= 6);
	assert_true(n <= 16);
	waitlist_free(wl);
	assert_int_equal(atomic_load(&j.ended), -ESHUTDOWN);
}

/* A hundred jobs of one uid that never get through delay nobody else. */
static void test_one_uid_delays_no_other(void **state)
{
	struct waitlist *wl = waitlist_new(0);
	static struct job stuck[100];
	struct job other;

	for (int i = 0; i < 100; i++) {
		job_init(&stuck[i], 0);
		assert_int_equal(waitlist_add(wl, 7, &ops, &stuck[i]), 0);
	}
	job_init(&other, 1);
	assert_int_equal(waitlist_add(wl, 8, &ops, &other), 0);
	/* its first attempt, due after 1 ms, comes among theirs */
	assert_true(wait_done(&other));
	assert_int_equal(atomic_load(&other.attempts), 1);
	waitlist_free(wl);
	for (int i = 0; i < 100; i++)
		assert_int_equal(atomic_load(&stuck[i].ended), -ESHUTDOWN);
}

static void test_jobs_of_a_uid_are_bounded(void **state)
{
	struct waitlist *wl = waitlist_new(3);
	struct job j[5];
	struct waitlist_counts c;

	for (int i = 0; i < 5; i++)
		job_init(&j[i], 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(waitlist_add(wl, 7, &ops, &j[i]), 0);
	assert_int_equal(waitlist_add(wl, 7, &ops, &j[3]), -EAGAIN);
	/* another uid has its own room */
	assert_int_equal(waitlist_add(wl, 8, &ops, &j[4]), 0);
	waitlist_counts(wl, &c);
	assert_int_equal(c.rejected, 1);
	assert_int_equal(c.waiting, 4);
	waitlist_free(wl);
	/* the refused job was never the list's */
	assert_int_equal(atomic_load(&j[3].attempts), 0);
	assert_int_equal(atomic_load(&j[3].ended), 1);
	assert_int_equal(atomic_load(&j[4].ended), -ESHUTDOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tried_until_through),
		cmocka_unit_test(test_attempts_slow_down),
		cmocka_unit_test(test_one_uid_delays_no_other),
		cmocka_unit_test(test_jobs_of_a_uid_are_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
