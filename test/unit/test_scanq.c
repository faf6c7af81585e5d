// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan queue's queues and tickets, with a fake, blocking scanner (no
 * clamd): single flight, interruption of running and of queued scans,
 * deadlines counted from submission, round-robin between uids and shared
 * queues, the small-file lane, the per-uid bound, and answer_first
 * waiters getting their verdict before the others. Joins across uids
 * (issue 22): a joiner keeps its own place in its own queue and its own
 * deadline, and counts against its uid's waiter bound. Withdrawal of a
 * queued scan's last waiter. The scanner threads' work is in
 * test_scanq_run.c, background scans in test_scanq_background.c.
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

static void test_single_flight(void **state)
{
	struct scanq *q = new_queue(2, 10000, 0);
	struct twaiter a, b, c;

	(void)state;
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	twaiter_init(&c, true); /* joins last, is answered first */
	fake.verdict = CDP_INFECTED;
	assert_int_equal(submit(q, 10, 100, 1000, &a), 0);
	assert_true(fake_wait_scans(1));
	/* another uid, same file and stamp: joins the scan in flight */
	assert_int_equal(submit(q, 10, 100, 2000, &b), 0);
	assert_int_equal(submit(q, 10, 100, 1000, &c), 0);
	assert_false(atomic_load(&a.done));
	fake_release(10);
	assert_true(wait_done(&a, 5000));
	assert_true(wait_done(&b, 5000));
	assert_true(wait_done(&c, 5000));
	assert_int_equal(a.o.res.verdict, CDP_INFECTED);
	assert_int_equal(b.o.res.verdict, CDP_INFECTED);
	assert_int_equal(c.o.res.verdict, CDP_INFECTED);
	scanq_free(q);
	assert_int_equal(c.seq, 1);
	assert_true(a.seq > 1 && b.seq > 1);
	assert_int_equal(fake_nscans(), 1);
}

static void test_counters_single_flight(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter a, b;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 11, 100, 1, &a), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit(q, 11, 100, 1, &b), 0);
	fake_release(11);
	assert_true(wait_done(&a, 5000) && wait_done(&b, 5000));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.scans, 1);
	assert_int_equal(cnt.joined, 1);
	assert_int_equal(cnt.queued, 0);
	scanq_free(q);
}

static void test_interrupt_running_scan(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter a, b, c;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	twaiter_init(&c, false);
	assert_int_equal(submit(q, 20, 100, 1, &a), 0);
	assert_int_equal(submit(q, 20, 100, 1, &b), 0);
	assert_true(fake_wait_scans(1));
	/* one of two waiters gives up: it is answered now, the scan goes on */
	t_interrupt(&a);
	assert_true(wait_done(&a, 2000));
	assert_true(scanq_waiter_interrupted(&a.w));
	assert_int_equal(a.o.res.cat, CDP_ERR_CANCELLED);
	assert_false(atomic_load(&b.done));
	fake_release(20);
	assert_true(wait_done(&b, 2000));
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	/* the last waiter gives up: the scan itself is cancelled */
	assert_int_equal(submit(q, 21, 100, 1, &c), 0);
	assert_true(fake_wait_scans(2));
	t_interrupt(&c);
	assert_true(wait_done(&c, 2000));
	assert_int_equal(c.o.res.cat, CDP_ERR_CANCELLED);
	scanq_free(q);
	q = NULL;
	assert_int_equal(fake_nscans(), 2);
	/* an interrupted waiter cannot submit again */
	q = new_queue(1, 10000, 0);
	assert_int_equal(submit(q, 22, 100, 1, &a), -EINTR);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.scans, 0);
	scanq_free(q);
}

/*
 * The waiter that created a scan gives up and closes its fd (its number
 * then names another file): the scan others joined still reads the file.
 */
static void test_creator_gone_scan_reads_its_file(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter gate, a, b;
	struct stat want;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), other;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &want), 0);
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 25, 100, 1, &gate), 0); /* thread busy */
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit_fd(q, 26, 100, 1, &a, fd), 0);
	assert_int_equal(submit(q, 26, 100, 2, &b), 0);
	t_interrupt(&a);
	assert_true(wait_done(&a, 2000));
	close(fd);
	other = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(other >= 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&b, 2000));
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(fake.order[1], 26);
	assert_int_equal(fake.fd_ino[1], want.st_ino);
	close(other);
	scanq_free(q);
}

static void test_interrupt_queued_scan(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter a, b;
	uint64_t t0;

	(void)state;
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 30, 100, 1, &a), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit(q, 31, 100, 1, &b), 0);
	/* b waits for the only thread, which is busy: it ends all the same */
	t0 = now_ms();
	t_interrupt(&b);
	assert_true(wait_done(&b, 2000));
	assert_true(b.at_ms - t0 < 1000);
	assert_int_equal(b.o.res.cat, CDP_ERR_CANCELLED);
	assert_false(atomic_load(&a.done));
	fake_release(30);
	assert_true(wait_done(&a, 2000));
	assert_int_equal(a.o.res.verdict, CDP_CLEAN);
	/* b's file never reached the scanner */
	assert_int_equal(fake_nscans(), 1);
	scanq_free(q);
}

static void test_deadline_counts_from_submission(void **state)
{
	struct scanq *q = new_queue(1, 300, 0);
	struct twaiter a, b;
	struct scanq_counters cnt;
	uint64_t t0;

	(void)state;
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	/* a's scan ignores its deadline: the thread stays busy */
	assert_int_equal(submit(q, 40, 100, 1, &a), 0);
	assert_true(fake_wait_scans(1));
	t0 = now_ms();
	assert_int_equal(submit(q, 41, 100, 2, &b), 0);
	/* b ends at its deadline although it never left the queue */
	assert_true(wait_done(&b, 3000));
	assert_true(b.at_ms - t0 >= 250);
	assert_true(b.at_ms - t0 < 1000);
	assert_int_equal(b.o.res.verdict, CDP_ERROR);
	assert_int_equal(b.o.res.cat, CDP_ERR_TIMEOUT);
	/* never sent to clamd: on_error=allow must not serve it */
	assert_true(b.o.expired_queued);
	assert_false(atomic_load(&a.done));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.expired, 1);
	assert_int_equal(cnt.queued, 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&a, 2000));
	assert_false(a.o.expired_queued);
	assert_int_equal(fake_nscans(), 1);
	scanq_free(q);
}

static void test_round_robin_between_uids(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter gate, flood[5], other;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&other, false);
	assert_int_equal(submit(q, 50, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	for (int i = 0; i < 5; i++) {
		twaiter_init(&flood[i], false);
		assert_int_equal(submit(q, 51 + i, 100, 1000, &flood[i]), 0);
	}
	assert_int_equal(submit(q, 60, 100, 2000, &other), 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&other, 5000));
	for (int i = 0; i < 5; i++)
		assert_true(wait_done(&flood[i], 5000));
	assert_int_equal(fake_nscans(), 7);
	/* uid 1000's own order is kept; uid 2000 comes after one of its */
	assert_int_equal(fake.order[0], 50);
	assert_int_equal(fake.order[1], 51);
	assert_int_equal(fake.order[2], 60);
	assert_int_equal(fake.order[3], 52);
	assert_int_equal(fake.order[6], 55);
	scanq_free(q);
}

static void test_small_file_lane(void **state)
{
	struct scanq *q = new_queue(2, 10000, 0);
	struct twaiter big[3], small;
	uint64_t t0;

	(void)state;
	for (int i = 0; i < 3; i++) {
		twaiter_init(&big[i], false);
		assert_int_equal(submit(q, 70 + i, BIG, 1000, &big[i]), 0);
	}
	assert_true(fake_wait_scans(1));
	/*
	 * Nothing more is to happen: two threads, one kept for small
	 * files, one big scan at a time.
	 */
	let_time_pass(50, "no second big scan may start");
	assert_int_equal(fake_nscans(), 1);
	twaiter_init(&small, false);
	t0 = now_ms();
	/* the small file's scan does not block (the big ones run: lock) */
	pthread_mutex_lock(&fake.lock);
	fake.fast_from = 800;
	pthread_mutex_unlock(&fake.lock);
	assert_int_equal(submit(q, 800, 7, 2000, &small), 0);
	assert_true(wait_done(&small, 2000));
	/* the big scans block until released: any answer before shows it */
	assert_true(small.at_ms - t0 < 1500);
	assert_int_equal(small.o.res.verdict, CDP_CLEAN);
	assert_false(atomic_load(&big[0].done));
	fake_release((ino_t)-1);
	for (int i = 0; i < 3; i++)
		assert_true(wait_done(&big[i], 5000));
	assert_int_equal(fake.max_running_big, 1);
	scanq_free(q);
}

static void test_bound_per_uid(void **state)
{
	struct scanq *q = new_queue(1, 10000, 2);
	struct twaiter gate, w[3], other, join;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&other, false);
	twaiter_init(&join, false);
	assert_int_equal(submit(q, 90, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	for (int i = 0; i < 3; i++)
		twaiter_init(&w[i], false);
	assert_int_equal(submit(q, 91, 100, 1000, &w[0]), 0);
	assert_int_equal(submit(q, 92, 100, 1000, &w[1]), 0);
	/* two queued already: the third distinct file is refused */
	assert_int_equal(submit(q, 93, 100, 1000, &w[2]), -EAGAIN);
	/*
	 * Joining holds an open as much as a scan of its own: three waiting
	 * (the bound's two plus one per thread), a join is refused too.
	 * Other users are unaffected.
	 */
	assert_int_equal(submit(q, 91, 100, 1000, &join), -EAGAIN);
	assert_int_equal(submit(q, 94, 100, 2000, &other), 0);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.rejected, 1);
	assert_int_equal(cnt.rejected_waiters, 1);
	assert_int_equal(cnt.joined, 0);
	assert_int_equal(cnt.queued, 3);
	fake_release((ino_t)-1);
	assert_true(wait_done(&w[0], 5000) && wait_done(&w[1], 5000));
	assert_true(wait_done(&other, 5000));
	assert_false(atomic_load(&w[2].done));
	assert_false(atomic_load(&join.done));
	scanq_free(q);
}

/*
 * Issue 22 item 6: one uid opening one file many times. Joins count
 * against the joining uid's waiters (not the scan's creator's), are
 * refused with -EAGAIN beyond the bound and counted, and a place given
 * back by a waiter that left can be taken again.
 */
static void test_waiter_bound_counts_joins(void **state)
{
	struct scanq_config cfg = {
		.threads = 1,
		.hooks.scan = fake_scan,
		.max_waiters_per_uid = 3,
	};
	struct scanq *q = new_queue_cfg(&cfg, 10000);
	struct twaiter w[3], over, late, other[4];
	struct scanq_counters cnt;

	(void)state;
	for (int i = 0; i < 3; i++) {
		twaiter_init(&w[i], false);
		assert_int_equal(submit(q, 900, 100, 1, &w[i]), 0);
	}
	assert_true(fake_wait_scans(1));
	twaiter_init(&over, false);
	assert_int_equal(submit(q, 900, 100, 1, &over), -EAGAIN);
	/* another uid's joins are its own: four of them would be too many */
	for (int i = 0; i < 4; i++) {
		twaiter_init(&other[i], false);
		assert_int_equal(submit(q, 900, 100, 2, &other[i]),
				 i < 3 ? 0 : -EAGAIN);
	}
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.rejected_waiters, 2);
	assert_int_equal(cnt.rejected, 0);
	assert_int_equal(cnt.joined, 5);
	/* one of uid 1 gives up: its place is free again once answered */
	t_interrupt(&w[0]);
	assert_true(wait_done(&w[0], 2000));
	twaiter_init(&late, false);
	assert_int_equal(submit(q, 900, 100, 1, &late), 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&w[1], 5000) && wait_done(&w[2], 5000));
	assert_true(wait_done(&late, 5000));
	for (int i = 0; i < 3; i++)
		assert_true(wait_done(&other[i], 5000));
	assert_int_equal(late.o.res.verdict, CDP_CLEAN);
	assert_false(atomic_load(&over.done));
	assert_false(atomic_load(&other[3].done));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.rejected_waiters, 2);
	assert_int_equal(cnt.scans, 1);
	scanq_free(q);
}

/*
 * Issue 22 item 4: uid 1000 has a long queue and then asks for file 600;
 * uid 2000 asks for the same file. uid 2000 joins the scan but keeps its
 * own place: the scan starts on uid 2000's turn of the round-robin, after
 * one more of uid 1000's (not after all five), and runs once.
 */
static void test_joiner_keeps_its_own_place(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter gate, flood[5], a, b;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 500, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	for (int i = 0; i < 5; i++) {
		twaiter_init(&flood[i], false);
		assert_int_equal(submit(q, 501 + i, 100, 1000, &flood[i]), 0);
	}
	assert_int_equal(submit(q, 600, 100, 1000, &a), 0);
	assert_int_equal(submit(q, 600, 100, 2000, &b), 0);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.queued, 6); /* jobs, not tickets */
	fake_release((ino_t)-1);
	assert_true(wait_done(&a, 5000) && wait_done(&b, 5000));
	for (int i = 0; i < 5; i++)
		assert_true(wait_done(&flood[i], 5000));
	assert_int_equal(fake_nscans(), 7);
	assert_int_equal(fake.order[0], 500);
	assert_int_equal(fake.order[1], 501);
	assert_int_equal(fake.order[2], 600);
	assert_int_equal(fake.order[3], 502);
	assert_int_equal(fake.order[6], 505);
	assert_int_equal(a.o.res.verdict, CDP_CLEAN);
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.queued, 0);
	assert_int_equal(cnt.expired, 0);
	scanq_free(q);
}

/*
 * The creator's deadline passes while the scan is queued: the creator is
 * answered then (timeout, never sent to clamd), but the scan stays queued
 * for the joiner, whose own deadline is later, and is scanned for it.
 */
static void test_joiner_keeps_its_own_deadline_queued(void **state)
{
	struct scanq *q = new_queue(1, 600, 0);
	struct twaiter gate, a, b;
	struct scanq_counters cnt;
	uint64_t t0;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 610, 100, 3, &gate), 0);
	assert_true(fake_wait_scans(1));
	t0 = now_ms();
	assert_int_equal(submit(q, 611, 100, 1000, &a), 0);
	/* deadlines count from each submit: b's must come 300 ms after a's */
	let_time_pass(300, "b's deadline is to be 300 ms later than a's");
	assert_int_equal(submit(q, 611, 100, 2000, &b), 0);
	assert_true(wait_done(&a, 3000));
	assert_true(a.at_ms - t0 >= 550 && a.at_ms - t0 < 850);
	assert_int_equal(a.o.res.cat, CDP_ERR_TIMEOUT);
	assert_true(a.o.expired_queued);
	assert_false(atomic_load(&b.done));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.queued, 1);
	assert_int_equal(cnt.expired, 0);
	/* the gate ends (clamd answers it) before b's deadline */
	fake_release((ino_t)-1);
	assert_true(wait_done(&b, 3000));
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	assert_true(wait_done(&gate, 3000));
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(fake.order[1], 611);
	scanq_free(q);
}

/*
 * The scan runs with the time of its latest waiter; the creator, whose
 * deadline comes first, is answered at that deadline (a timeout, clamd
 * having been asked) while the scan goes on and ends clean for the other.
 */
static void test_earlier_deadline_answered_while_scanned(void **state)
{
	struct scanq *q = new_queue(1, 600, 0);
	struct twaiter gate, a, b;
	uint64_t t0;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 620, 100, 3, &gate), 0);
	assert_true(fake_wait_scans(1));
	t0 = now_ms();
	assert_int_equal(submit(q, 621, 100, 1000, &a), 0);
	/* deadlines count from each submit: b's must come 300 ms after a's */
	let_time_pass(300, "b's deadline is to be 300 ms later than a's");
	assert_int_equal(submit(q, 621, 100, 2000, &b), 0);
	fake_release(620);
	assert_true(fake_wait_scans(2));
	assert_true(wait_done(&a, 3000));
	assert_true(a.at_ms - t0 >= 550 && a.at_ms - t0 < 850);
	assert_int_equal(a.o.res.cat, CDP_ERR_TIMEOUT);
	assert_false(a.o.expired_queued);
	assert_false(atomic_load(&b.done));
	fake_release(621);
	assert_true(wait_done(&b, 3000));
	assert_int_equal(b.o.res.verdict, CDP_CLEAN);
	scanq_free(q);
	assert_int_equal(fake_nscans(), 2);
}

static void test_free_cancels_queued(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter a, b;

	(void)state;
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	assert_int_equal(submit(q, 100, 100, 1, &a), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit(q, 101, 100, 1, &b), 0);
	/* the running scan ends on its cancel, the queued one unscanned */
	scanq_free(q);
	assert_true(atomic_load(&a.done) && atomic_load(&b.done));
	assert_int_equal(b.o.res.cat, CDP_ERR_CANCELLED);
	assert_int_equal(fake_nscans(), 1);
}

/*
 * Two waiters on a queued scan leave one after the other: the first is
 * answered and the scan stays queued; when the last leaves, the scan ends
 * unscanned, gives back its place in the uid's bound, and the same file
 * submitted again gets a scan of its own.
 */
static void test_withdraw_last_waiter_of_queued_scan(void **state)
{
	struct scanq_config cfg = {
		.threads = 1,
		.hooks.scan = fake_scan,
		.max_queued_per_uid = 1,
		.max_waiters_per_uid = 8,
	};
	struct scanq *q = new_queue_cfg(&cfg, 10000);
	struct twaiter gate, a, b, c, other;
	struct scanq_counters cnt;

	(void)state;
	twaiter_init(&gate, false);
	twaiter_init(&a, false);
	twaiter_init(&b, false);
	twaiter_init(&c, false);
	twaiter_init(&other, false);
	assert_int_equal(submit(q, 300, 100, 1, &gate), 0);
	assert_true(fake_wait_scans(1));
	assert_int_equal(submit(q, 301, 100, 1, &a), 0);
	assert_int_equal(submit(q, 301, 100, 1, &b), 0);
	t_interrupt(&a);
	assert_true(wait_done(&a, 2000));
	assert_int_equal(a.o.res.cat, CDP_ERR_CANCELLED);
	/*
	 * Nothing is to happen: b still waits, the scan keeps its place,
	 * the bound is reached.
	 */
	let_time_pass(50, "b must not be answered, its scan stays queued");
	assert_false(atomic_load(&b.done));
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.queued, 1);
	assert_int_equal(cnt.cancelled, 0);
	assert_int_equal(submit(q, 302, 100, 1, &other), -EAGAIN);
	t_interrupt(&b);
	assert_true(wait_done(&b, 2000));
	assert_int_equal(b.o.res.cat, CDP_ERR_CANCELLED);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.queued, 0);
	assert_int_equal(cnt.cancelled, 1);
	/* the place is free again, and the file is scanned afresh */
	assert_int_equal(submit(q, 301, 100, 1, &c), 0);
	scanq_counters(q, &cnt);
	assert_int_equal(cnt.joined, 1); /* b's join only */
	fake_release((ino_t)-1);
	assert_true(wait_done(&gate, 5000) && wait_done(&c, 5000));
	assert_int_equal(c.o.res.verdict, CDP_CLEAN);
	scanq_free(q);
	assert_int_equal(fake_nscans(), 2);
	assert_int_equal(fake.order[1], 301);
}

/*
 * A waiter that joins a scan under way is told when the scan began, which
 * is before its own stamp: the daemon keeps a verdict only if that
 * instant, not the joiner's later stamp, was past the racy window.
 */
static void test_joiner_told_when_the_scan_began(void **state)
{
	struct scanq *q = new_queue(1, 10000, 0);
	struct twaiter first, joiner;
	int64_t t0, t1;

	(void)state;
	twaiter_init(&first, false);
	twaiter_init(&joiner, false);
	t0 = real_ns();
	assert_int_equal(submit(q, 240, 100, 1000, &first), 0);
	assert_true(fake_wait_scans(1));
	/* the joiner's stamp is to be clearly later than the scan's start */
	let_time_pass(30, "the clock moves on past the scan's start");
	t1 = real_ns();
	assert_int_equal(submit(q, 240, 100, 2000, &joiner), 0);
	fake_release(240);
	assert_true(wait_done(&first, 5000) && wait_done(&joiner, 5000));
	assert_true(joiner.o.started_ns >= t0);
	assert_true(joiner.o.started_ns < t1);
	assert_int_equal(joiner.o.started_ns, first.o.started_ns);
	assert_int_equal(joiner.o.confirmed_ns, 0);
	scanq_free(q);
}

/*
 * Work done for nobody in particular waits in a shared queue: bounded as
 * a user's queue is, but not the queue of the uid of the same number,
 * nor another shared one.
 */
static void test_shared_queue_is_not_a_users(void **state)
{
	struct scanq *q = new_queue(1, 10000, 2);
	struct vcache_file f = {.dev = 1, .size = 100};
	struct scan_request r = {.file = &f,
				 .timeout_ms = test_timeout_ms,
				 .uid = 1,
				 .shared_queue = 1};
	struct twaiter gate, shared[3], own[2], other;

	(void)state;
	twaiter_init(&gate, false);
	assert_int_equal(submit(q, 500, 100, 1000, &gate), 0);
	assert_true(fake_wait_scans(1));
	r.fd = devnull;
	for (int i = 0; i < 3; i++) {
		twaiter_init(&shared[i], false);
		f.ino = 510 + i;
		assert_int_equal(scanq_submit(q, &r, &shared[i].w),
				 i < 2 ? 0 : -EAGAIN);
	}
	assert_false(scanq_background_room(q, 0, 1));
	assert_true(scanq_background_room(q, 1, 0));
	/* uid 1's own queue is empty, and so is shared queue 2 */
	for (int i = 0; i < 2; i++) {
		twaiter_init(&own[i], false);
		assert_int_equal(submit(q, 520 + i, 100, 1, &own[i]), 0);
	}
	twaiter_init(&other, false);
	r.shared_queue = 2;
	f.ino = 530;
	assert_int_equal(scanq_submit(q, &r, &other.w), 0);
	fake_release((ino_t)-1);
	assert_true(wait_done(&gate, 5000));
	for (int i = 0; i < 2; i++) {
		assert_true(wait_done(&shared[i], 5000));
		assert_true(wait_done(&own[i], 5000));
	}
	assert_true(wait_done(&other, 5000));
	scanq_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_flight),
		cmocka_unit_test(test_counters_single_flight),
		cmocka_unit_test(test_interrupt_running_scan),
		cmocka_unit_test(test_creator_gone_scan_reads_its_file),
		cmocka_unit_test(test_interrupt_queued_scan),
		cmocka_unit_test(test_deadline_counts_from_submission),
		cmocka_unit_test(test_round_robin_between_uids),
		cmocka_unit_test(test_small_file_lane),
		cmocka_unit_test(test_bound_per_uid),
		cmocka_unit_test(test_waiter_bound_counts_joins),
		cmocka_unit_test(test_joiner_keeps_its_own_place),
		cmocka_unit_test(test_joiner_keeps_its_own_deadline_queued),
		cmocka_unit_test(test_earlier_deadline_answered_while_scanned),
		cmocka_unit_test(test_free_cancels_queued),
		cmocka_unit_test(test_withdraw_last_waiter_of_queued_scan),
		cmocka_unit_test(test_joiner_told_when_the_scan_began),
		cmocka_unit_test(test_shared_queue_is_not_a_users),
	};

	return cmocka_run_group_tests(tests, scanq_fake_setup,
				      scanq_fake_teardown);
}
