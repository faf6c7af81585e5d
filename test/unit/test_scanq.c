// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scan queue with a fake, blocking scanner (no clamd): single flight,
 * interruption of running and of queued scans, deadlines counted from
 * submission, round-robin between uids, the small-file lane, the per-uid
 * bound, and answer_first waiters getting their verdict before the others.
 * A scripted scanner covers retries (how many, and when not), withdrawal of
 * a queued scan's last waiter, and scanq_reconfigure_fleet with scans
 * under way.
 * Joins across uids (issue 22): a joiner keeps its own place in its own
 * queue and its own deadline, and counts against its uid's waiter bound.
 * Background scans (issue 23) come last, one at a time and only while no
 * other scan runs, never on the small-file thread,
 * wait for not_before unless joined, are dropped when their confirm says
 * the file changed, and are bounded. A verdict can be joined until all
 * its waiters have it.
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

#include "scanq.h"

#define MAX_SCANS 64
#define BIG	  (SCANQ_SMALL_BYTES + 1)

/*
 * The fake scanner: records which file it was asked about, then blocks
 * until released (or cancelled) unless the file is marked fast.
 */
struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	ino_t order[MAX_SCANS];	 /* files in the order their scans began */
	ino_t fd_ino[MAX_SCANS]; /* what the fd given to the scanner is */
	int nscans;
	int running;
	int max_running_big;
	int running_big;
	ino_t release;	 /* ino whose scan may end; (ino_t)-1: all */
	ino_t fast_from; /* inos from this one on never block */
	enum cdp_verdict verdict;
};

static struct fake fake = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void fake_reset(void)
{
	pthread_mutex_lock(&fake.lock);
	memset(fake.order, 0, sizeof(fake.order));
	memset(fake.fd_ino, 0, sizeof(fake.fd_ino));
	fake.nscans = 0;
	fake.running = 0;
	fake.running_big = 0;
	fake.max_running_big = 0;
	fake.release = 0;
	fake.fast_from = (ino_t)-1;
	fake.verdict = CDP_CLEAN;
	pthread_mutex_unlock(&fake.lock);
}

static void fake_scan(const struct scanq_scan *s, struct cdp_result *res)
{
	bool big = (uint64_t)s->file->size > SCANQ_SMALL_BYTES;
	ino_t ino = s->file->ino;

	assert_true(s->fd >= 0);
	assert_true(s->timeout_ms > 0);
	memset(res, 0, sizeof(*res));
	pthread_mutex_lock(&fake.lock);
	if (fake.nscans < MAX_SCANS) {
		struct stat st;

		fake.order[fake.nscans] = ino;
		fake.fd_ino[fake.nscans] =
			fstat(s->fd, &st) == 0 ? st.st_ino : 0;
	}
	fake.nscans++;
	fake.running++;
	if (big && ++fake.running_big > fake.max_running_big)
		fake.max_running_big = fake.running_big;
	pthread_cond_broadcast(&fake.cond);
	while (ino < fake.fast_from && fake.release != ino &&
	       fake.release != (ino_t)-1 && !cdp_cancel_triggered(s->cancel)) {
		struct timespec ts;

		/* the cancel has no way to wake us: poll it */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 5 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fake.cond, &fake.lock, &ts);
	}
	fake.running--;
	if (big)
		fake.running_big--;
	if (cdp_cancel_triggered(s->cancel)) {
		res->verdict = CDP_ERROR;
		res->cat = CDP_ERR_CANCELLED;
	} else {
		res->verdict = fake.verdict;
	}
	pthread_mutex_unlock(&fake.lock);
}

static void fake_release(ino_t ino)
{
	pthread_mutex_lock(&fake.lock);
	fake.release = ino;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits up to 5 s for the fake to have started n scans in all. */
static bool fake_wait_scans(int n)
{
	uint64_t end = now_ms() + 5000;
	bool ok;

	for (;;) {
		pthread_mutex_lock(&fake.lock);
		ok = fake.nscans >= n;
		pthread_mutex_unlock(&fake.lock);
		if (ok || now_ms() > end)
			return ok;
		usleep(1000);
	}
}

static int fake_nscans(void)
{
	int n;

	pthread_mutex_lock(&fake.lock);
	n = fake.nscans;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

/*
 * A waiter that records its outcome and when it came. Its interrupts go
 * through t_interrupt, which keeps the contract the daemon gets from
 * libfuse (see scanq_interrupt): done() waits for an interrupt still
 * running, and no interrupt starts once done() has.
 */
struct twaiter {
	struct scan_waiter w; /* first */
	pthread_mutex_t ilock;
	bool answered; /* under ilock */
	atomic_int done;
	int seq; /* 1 for the first done() since the queue was made, ... */
	struct scan_outcome o;
	uint64_t at_ms;
};

static atomic_int total_done;

static void on_done(struct scan_waiter *w, const struct scan_outcome *o)
{
	struct twaiter *t = (struct twaiter *)w;

	pthread_mutex_lock(&t->ilock);
	t->answered = true;
	pthread_mutex_unlock(&t->ilock);
	t->o = *o;
	t->at_ms = now_ms();
	t->seq = atomic_fetch_add(&total_done, 1) + 1;
	atomic_store(&t->done, 1);
}

static void twaiter_init(struct twaiter *t, bool answer_first)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->ilock, NULL);
	t->w.done = on_done;
	t->w.answer_first = answer_first;
}

static void t_interrupt(struct twaiter *t)
{
	pthread_mutex_lock(&t->ilock);
	if (!t->answered)
		scanq_interrupt(&t->w);
	pthread_mutex_unlock(&t->ilock);
}

static bool wait_done(struct twaiter *t, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (!atomic_load(&t->done)) {
		if (now_ms() > end)
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * Waits up to 5 s for every scan to have ended: a waiter is answered
 * while its scan can still be joined, so a submit right after wait_done()
 * may join the scan that answered it.
 */
static bool wait_no_scan_live(struct scanq *q)
{
	uint64_t end = now_ms() + 5000;
	struct scanq_counters cnt;

	for (;;) {
		scanq_counters(q, &cnt);
		if (cnt.live == 0)
			return true;
		if (now_ms() > end)
			return false;
		usleep(1000);
	}
}

static int devnull = -1;

static int submit_fd(struct scanq *q, ino_t ino, off_t size, uid_t uid,
		     struct twaiter *t, int fd)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = size};
	struct scan_request r = {
		.file = &f,
		.fd = fd,
		.uid = uid,
	};

	return scanq_submit(q, &r, &t->w);
}

static int submit(struct scanq *q, ino_t ino, off_t size, uid_t uid,
		  struct twaiter *t)
{
	return submit_fd(q, ino, size, uid, t, devnull);
}

/* The hooks every test queue has (new_queue_cfg); defined with their tests. */
static int count_prepare(void *ctx, uint64_t key);
static bool fake_known(void *ctx, int fd, const struct vcache_file *f,
		       uint64_t tag, struct cdp_result *res);
static struct fake_cache *known_cache; /* fake_known's; NULL: none known */

/* What count_prepare saw (the prepare tests). */
struct prep_state {
	pthread_mutex_t lock;
	int calls;
	uint64_t key;
	int scans_before; /* fake scans started when it last ran */
	void *ctx;
	bool block; /* it waits until this is cleared */
	int result; /* what it returns */
	pthread_cond_t cond;
};
static struct prep_state prep;

/* scan_request.confirm codes of the tests: what test_confirm says */
enum { CONFIRM_NO = 1, CONFIRM_YES };

static bool test_confirm(void *ctx, unsigned int how, int fd,
			 const struct vcache_file *f)
{
	(void)ctx;
	(void)f;
	return how == CONFIRM_YES && fd >= 0;
}

static struct scanq *new_queue_cfg(const struct scanq_config *cfg)
{
	struct scanq_config c = *cfg;
	struct scanq *q = NULL;

	fake_reset();
	atomic_store(&total_done, 0);
	/* the hooks requests ask for by their flags, with one context */
	known_cache = NULL;
	if (!c.hooks.prepare)
		c.hooks.prepare = count_prepare;
	if (!c.hooks.confirm)
		c.hooks.confirm = test_confirm;
	if (!c.hooks.known)
		c.hooks.known = fake_known;
	if (!c.ctx)
		c.ctx = &prep;
	assert_int_equal(scanq_new(&c, &q), 0);
	return q;
}

static struct scanq *new_queue(unsigned int threads, int timeout_ms,
			       unsigned int max_per_uid)
{
	struct scanq_config cfg = {
		.threads = threads,
		.timeout_ms = timeout_ms,
		.hooks.scan = fake_scan,
		.max_queued_per_uid = max_per_uid,
	};

	return new_queue_cfg(&cfg);
}

static int setup(void **state)
{
	(void)state;
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return devnull < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	close(devnull);
	return 0;
}

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
		.timeout_ms = 10000,
		.hooks.scan = fake_scan,
		.max_waiters_per_uid = 3,
	};
	struct scanq *q = new_queue_cfg(&cfg);
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
 * Prepare (the daemon's write-back of a writer's dirty pages): records
 * each call and what the fake scanner had started by then, so a test can
 * tell that it ran once, with its key, after every joiner's submit and
 * before the scan.
 */
static struct prep_state prep = {.lock = PTHREAD_MUTEX_INITIALIZER,
				 .cond = PTHREAD_COND_INITIALIZER};

static void prep_reset(void)
{
	pthread_mutex_lock(&prep.lock);
	prep.calls = 0;
	prep.key = 0;
	prep.scans_before = -1;
	prep.ctx = NULL;
	prep.block = false;
	prep.result = 0;
	pthread_mutex_unlock(&prep.lock);
}

/* Reads prep's fields under its lock: the scanner thread writes them. */
static int prep_get(const int *field)
{
	int v;

	pthread_mutex_lock(&prep.lock);
	v = *field;
	pthread_mutex_unlock(&prep.lock);
	return v;
}

static uint64_t prep_get_key(void)
{
	uint64_t v;

	pthread_mutex_lock(&prep.lock);
	v = prep.key;
	pthread_mutex_unlock(&prep.lock);
	return v;
}

static void prep_unblock(void)
{
	pthread_mutex_lock(&prep.lock);
	prep.block = false;
	pthread_cond_broadcast(&prep.cond);
	pthread_mutex_unlock(&prep.lock);
}

static int count_prepare(void *ctx, uint64_t key)
{
	int scans = fake_nscans(), result;

	pthread_mutex_lock(&prep.lock);
	prep.calls++;
	prep.key = key;
	prep.ctx = ctx;
	prep.scans_before = scans;
	while (prep.block)
		pthread_cond_wait(&prep.cond, &prep.lock);
	result = prep.result;
	pthread_mutex_unlock(&prep.lock);
	return result;
}

static int submit_prepared(struct scanq *q, ino_t ino, uid_t uid,
			   struct twaiter *t, uint64_t key)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = 100};
	struct scan_request r = {
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
		.timeout_ms = timeout_ms,
		.hooks.scan = script_scan,
	};

	return new_queue_cfg(&cfg);
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
		.timeout_ms = 300,
		.hooks.scan = script_scan,
		.hooks.observe = submit_in_the_gap,
	};
	struct twaiter a;

	(void)state;
	script_reset(1, CDP_ERR_TIMEOUT);
	script.outlive_limit = true;
	atomic_store(&gap_submits, 0);
	gap_q = new_queue_cfg(&cfg);
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
		.timeout_ms = 10000,
		.hooks.scan = fake_scan,
		.max_queued_per_uid = 1,
		.max_waiters_per_uid = 8,
	};
	struct scanq *q = new_queue_cfg(&cfg);
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

static atomic_int holds, releases;

static void *count_hold(void *arg, struct cdp_fleet **fleet,
			enum scan_mode *mode)
{
	(void)arg, (void)fleet, (void)mode;
	atomic_fetch_add(&holds, 1);
	return &holds;
}

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

/*
 * scanq_reconfigure_fleet with one scan running and one queued: the running
 * scan keeps the fleet and mode it started with, the queued one starts with the
 * new ones but keeps the deadline of its submission; a scan submitted after
 * the call gets the new timeout. Every hold is released.
 */
static void test_reconfigure_under_way(void **state)
{
	static char fleet_a, fleet_b; /* never dereferenced by the scanner */
	struct scanq_config cfg = {
		.threads = 1,
		.timeout_ms = 10000,
		.hooks.scan = script_scan,
		.fleet = (struct cdp_fleet *)&fleet_a,
		.mode = SCAN_MODE_FDPASS,
		.hooks.hold = count_hold,
		.hooks.release = count_release,
	};
	struct scanq *q;
	struct twaiter run, queued, late;
	uint64_t t0;

	(void)state;
	atomic_store(&holds, 0);
	atomic_store(&releases, 0);
	q = new_queue_cfg(&cfg);
	script_reset(0, CDP_ERR_NONE);
	script.block = true;
	twaiter_init(&run, false);
	twaiter_init(&queued, false);
	twaiter_init(&late, false);
	assert_int_equal(submit(q, 400, 100, 1, &run), 0);
	assert_true(script_wait_calls(1));
	assert_int_equal(submit(q, 401, 100, 2, &queued), 0);
	scanq_reconfigure_fleet(q, (struct cdp_fleet *)&fleet_b,
				SCAN_MODE_STREAM, 300);
	assert_int_equal(scanq_mode(q), SCAN_MODE_STREAM);
	/* the new timeout: a scan submitted now expires while queued */
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
 * The daemon's hold pins the configuration in force and scans with its
 * clamds, not with the fleet last configured: a reload between the two
 * must not leave a scan on a fleet nothing holds.
 */
static void test_hold_gives_the_fleet(void **state)
{
	static char fleet_a;
	struct scanq_config cfg = {
		.threads = 1,
		.timeout_ms = 10000,
		.hooks.scan = script_scan,
		.fleet = (struct cdp_fleet *)&fleet_a,
		.mode = SCAN_MODE_FDPASS,
		.hooks.hold = swap_hold,
		.hooks.release = count_release,
	};
	struct scanq *q;
	struct twaiter w;

	(void)state;
	atomic_store(&holds, 0);
	atomic_store(&releases, 0);
	q = new_queue_cfg(&cfg);
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

/* --- background scans (scanning ahead of a reader, issue 23) --- */

static int64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the shared queue background scans wait in (and the next one) */
#define BG_QUEUE 1

static int submit_bg(struct scanq *q, ino_t ino, off_t size, int64_t not_before,
		     unsigned int confirm, struct twaiter *t)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = size};
	struct scan_request r = {
		.file = &f,
		.fd = devnull,
		.shared_queue = BG_QUEUE,
		.background = true,
		.not_before_ns = not_before,
		.confirm = confirm,
	};

	return scanq_submit(q, &r, &t->w);
}

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

struct fake_cache {
	atomic_long clean_ino;	  /* the one file "cached" clean (0: none) */
	atomic_long infected_ino; /* ... and the one "cached" infected */
	atomic_int asked;
	uint64_t tag_seen;
};

static bool fake_known(void *ctx, int fd, const struct vcache_file *f,
		       uint64_t tag, struct cdp_result *res)
{
	struct fake_cache *c = known_cache;

	(void)ctx;
	assert_true(fd >= 0);
	if (!c)
		return false;
	atomic_fetch_add(&c->asked, 1);
	c->tag_seen = tag;
	if ((long)f->ino == atomic_load(&c->clean_ino)) {
		res->verdict = CDP_CLEAN;
		return true;
	}
	if ((long)f->ino == atomic_load(&c->infected_ino)) {
		res->verdict = CDP_INFECTED;
		snprintf(res->text, sizeof(res->text), "Cached.Sig");
		return true;
	}
	return false;
}

static int submit_known(struct scanq *q, ino_t ino, uint64_t tag,
			struct fake_cache *c, struct twaiter *t)
{
	known_cache = c;
	struct vcache_file f = {.dev = 1, .ino = ino, .size = 100};
	struct scan_request r = {
		.file = &f,
		.tag = tag,
		.fd = devnull,
		.uid = 1,
	};

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

/*
 * Work done for nobody in particular waits in a shared queue: bounded as
 * a user's queue is, but not the queue of the uid of the same number,
 * nor another shared one.
 */
static void test_shared_queue_is_not_a_users(void **state)
{
	struct scanq *q = new_queue(1, 10000, 2);
	struct vcache_file f = {.dev = 1, .size = 100};
	struct scan_request r = {.file = &f, .uid = 1, .shared_queue = 1};
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
		cmocka_unit_test(test_prepared_joins_queued_scan),
		cmocka_unit_test(test_prepared_join_adds_write_back),
		cmocka_unit_test(test_failed_prepare_fails_the_scan),
		cmocka_unit_test(test_prepared_does_not_join_running_scan),
		cmocka_unit_test(test_prepared_waiter_leaves_running_scan),
		cmocka_unit_test(
			test_waiters_answered_at_deadline_during_write_back),
		cmocka_unit_test(test_joiner_keeps_its_own_deadline_queued),
		cmocka_unit_test(test_earlier_deadline_answered_while_scanned),
		cmocka_unit_test(test_free_cancels_queued),
		cmocka_unit_test(test_retry_once_then_clean),
		cmocka_unit_test(test_retry_gives_up),
		cmocka_unit_test(test_no_retry_of_clamd_error),
		cmocka_unit_test(test_no_retry_after_cancel),
		cmocka_unit_test(test_no_retry_past_deadline),
		cmocka_unit_test(test_timeout_retried_for_later_joiner),
		cmocka_unit_test(test_timeout_alone_not_retried),
		cmocka_unit_test(test_no_join_after_the_last_decision),
		cmocka_unit_test(test_join_while_the_verdict_is_answered),
		cmocka_unit_test(test_withdraw_last_waiter_of_queued_scan),
		cmocka_unit_test(test_reconfigure_under_way),
		cmocka_unit_test(test_hold_gives_the_fleet),
		cmocka_unit_test(test_background_comes_last),
		cmocka_unit_test(test_small_thread_never_takes_background),
		cmocka_unit_test(test_background_waits_for_running_scans),
		cmocka_unit_test(test_beside_one_runs_beside_a_waited_scan),
		cmocka_unit_test(test_beside_one_passes_plain_background),
		cmocka_unit_test(test_background_past_deadline_is_dropped),
		cmocka_unit_test(test_background_held_back_until_not_before),
		cmocka_unit_test(test_background_confirm),
		cmocka_unit_test(test_verdict_known_since_the_submit),
		cmocka_unit_test(test_known_not_asked_after_a_drop),
		cmocka_unit_test(test_joiner_told_when_the_scan_began),
		cmocka_unit_test(test_no_background_with_one_general_thread),
		cmocka_unit_test(test_background_bound),
		cmocka_unit_test(test_shared_queue_is_not_a_users),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
