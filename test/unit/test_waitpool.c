// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The wait pool: one uid's blocked jobs hold only that uid's share of the
 * threads, the queue of each uid is bounded, and ending the pool cancels
 * what is queued and waits for what runs.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "waitpool.h"

/* Jobs that wait until the test opens the gate, as a lease wait would. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	int ran, cancelled;
};

struct job {
	struct gate *g;
	bool wait; /* for the gate; else it returns at once */
};

static struct gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			   false, 0, 0};

static void job_fn(void *arg, bool cancelled)
{
	struct job *j = arg;

	pthread_mutex_lock(&j->g->lock);
	if (cancelled) {
		j->g->cancelled++;
	} else {
		while (j->wait && !j->g->open)
			pthread_cond_wait(&j->g->cond, &j->g->lock);
		j->g->ran++;
	}
	pthread_cond_broadcast(&j->g->cond);
	pthread_mutex_unlock(&j->g->lock);
}

static void gate_reset(void)
{
	gate.open = false;
	gate.ran = 0;
	gate.cancelled = 0;
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.open = true;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

/* Waits (bounded) until n jobs have run; how many did. */
static int wait_ran(int n)
{
	struct timespec until;
	int ran;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&gate.lock);
	while (gate.ran < n &&
	       pthread_cond_timedwait(&gate.cond, &gate.lock, &until) == 0)
		;
	ran = gate.ran;
	pthread_mutex_unlock(&gate.lock);
	return ran;
}

/* Polls the pool's counts until running is n (bounded); the last read. */
static unsigned int wait_running(struct waitpool *p, unsigned int n)
{
	struct waitpool_counts c;
	struct timespec pause = {0, 1000000};

	for (int i = 0; i < 20000; i++) {
		waitpool_counts(p, &c);
		if (c.running == n)
			break;
		nanosleep(&pause, NULL);
	}
	return c.running;
}

static void test_jobs_run(void **state)
{
	struct waitpool *p = waitpool_new(0, 0, 0);
	struct job jobs[10];
	struct waitpool_counts c;

	gate_reset();
	for (int i = 0; i < 10; i++) {
		jobs[i] = (struct job){&gate, false};
		assert_int_equal(
			waitpool_submit(p, 1000 + i % 3, job_fn, &jobs[i]), 0);
	}
	assert_int_equal(wait_ran(10), 10);
	assert_int_equal(wait_running(p, 0), 0);
	waitpool_counts(p, &c);
	assert_int_equal(c.submitted, 10);
	assert_int_equal(c.rejected, 0);
	assert_int_equal(c.queued, 0);
	waitpool_free(p);
}

/*
 * A uid whose jobs all wait runs only its share; another uid's job runs
 * meanwhile, and the first uid's queued jobs run once the gate opens.
 */
static void test_one_uid_blocks_only_itself(void **state)
{
	struct waitpool *p = waitpool_new(8, 2, 16);
	struct job blocked[5], other = {&gate, false};
	struct waitpool_counts c;

	gate_reset();
	for (int i = 0; i < 5; i++) {
		blocked[i] = (struct job){&gate, true};
		assert_int_equal(waitpool_submit(p, 1, job_fn, &blocked[i]), 0);
	}
	assert_int_equal(wait_running(p, 2), 2);
	waitpool_counts(p, &c);
	assert_int_equal(c.queued, 3);
	assert_int_equal(waitpool_submit(p, 2, job_fn, &other), 0);
	assert_int_equal(wait_ran(1), 1); /* uid 2's, while uid 1's wait */
	/* uid 2's job is counted as running until its thread takes it back */
	assert_int_equal(wait_running(p, 2), 2);
	waitpool_counts(p, &c);
	assert_int_equal(c.queued, 3);
	assert_true(c.threads <= 8);
	gate_open();
	assert_int_equal(wait_ran(6), 6);
	waitpool_free(p);
}

static void test_queue_of_a_uid_is_bounded(void **state)
{
	struct waitpool *p = waitpool_new(4, 1, 3);
	struct job jobs[6];
	struct waitpool_counts c;

	gate_reset();
	for (int i = 0; i < 6; i++)
		jobs[i] = (struct job){&gate, true};
	assert_int_equal(waitpool_submit(p, 7, job_fn, &jobs[0]), 0);
	assert_int_equal(wait_running(p, 1), 1);
	for (int i = 1; i < 4; i++)
		assert_int_equal(waitpool_submit(p, 7, job_fn, &jobs[i]), 0);
	/* one running, three queued: the fourth in the queue is refused */
	assert_int_equal(waitpool_submit(p, 7, job_fn, &jobs[4]), -EAGAIN);
	/* another uid has its own room */
	assert_int_equal(waitpool_submit(p, 8, job_fn, &jobs[5]), 0);
	waitpool_counts(p, &c);
	assert_int_equal(c.rejected, 1);
	gate_open();
	assert_int_equal(wait_ran(5), 5);
	waitpool_free(p);
}

static void *free_pool(void *p)
{
	waitpool_free(p);
	return NULL;
}

/* Ending the pool: queued jobs are told, running ones finish first. */
static void test_free_cancels_the_queued(void **state)
{
	struct waitpool *p = waitpool_new(2, 1, 8);
	struct timespec until;
	struct job jobs[4];
	pthread_t ender;
	int cancelled;

	gate_reset();
	for (int i = 0; i < 4; i++) {
		jobs[i] = (struct job){&gate, true};
		assert_int_equal(waitpool_submit(p, 5, job_fn, &jobs[i]), 0);
	}
	assert_int_equal(wait_running(p, 1), 1);
	assert_int_equal(pthread_create(&ender, NULL, free_pool, p), 0);
	/* the three queued are cancelled while the running one still waits */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&gate.lock);
	while (gate.cancelled < 3 &&
	       pthread_cond_timedwait(&gate.cond, &gate.lock, &until) == 0)
		;
	cancelled = gate.cancelled;
	assert_int_equal(gate.ran, 0);
	pthread_mutex_unlock(&gate.lock);
	assert_int_equal(cancelled, 3);
	gate_open();
	pthread_join(ender, NULL);
	assert_int_equal(gate.ran, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_run),
		cmocka_unit_test(test_one_uid_blocks_only_itself),
		cmocka_unit_test(test_queue_of_a_uid_is_bounded),
		cmocka_unit_test(test_free_cancels_the_queued),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
