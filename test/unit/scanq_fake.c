// SPDX-License-Identifier: GPL-2.0-or-later
/* The scan queue tests' fake scanner, waiters and hooks (scanq_fake.h). */
#include "scanq_fake.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

struct fake fake = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};
atomic_int total_done;
int devnull = -1;
int test_timeout_ms;
struct fake_cache *known_cache;
char held_token;
_Atomic(void *) known_held;

/*
 * Prepare (the daemon's write-back of a writer's dirty pages): records
 * each call and what the fake scanner had started by then, so a test can
 * tell that it ran once, with its key, after every joiner's submit and
 * before the scan.
 */
struct prep_state prep = {.lock = PTHREAD_MUTEX_INITIALIZER,
			  .cond = PTHREAD_COND_INITIALIZER};

void fake_reset(void)
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

void fake_scan(const struct scanq_scan *s, struct cdp_result *res)
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

void fake_release(ino_t ino)
{
	pthread_mutex_lock(&fake.lock);
	fake.release = ino;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits up to 5 s for the fake to have started n scans in all. */
bool fake_wait_scans(int n)
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

int fake_nscans(void)
{
	int n;

	pthread_mutex_lock(&fake.lock);
	n = fake.nscans;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

void on_done(struct scan_waiter *w, const struct scan_outcome *o)
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

void twaiter_init(struct twaiter *t, bool answer_first)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->ilock, NULL);
	t->w.done = on_done;
	t->w.answer_first = answer_first;
}

void t_interrupt(struct twaiter *t)
{
	pthread_mutex_lock(&t->ilock);
	if (!t->answered)
		scanq_interrupt(&t->w);
	pthread_mutex_unlock(&t->ilock);
}

bool wait_done(struct twaiter *t, int ms)
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
bool wait_no_scan_live(struct scanq *q)
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

int submit_fd(struct scanq *q, ino_t ino, off_t size, uid_t uid,
	      struct twaiter *t, int fd)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = size};
	struct scan_request r = {
		.timeout_ms = test_timeout_ms,
		.file = &f,
		.fd = fd,
		.uid = uid,
	};

	return scanq_submit(q, &r, &t->w);
}

int submit(struct scanq *q, ino_t ino, off_t size, uid_t uid, struct twaiter *t)
{
	return submit_fd(q, ino, size, uid, t, devnull);
}

bool test_confirm(void *ctx, unsigned int how, int fd,
		  const struct vcache_file *f)
{
	(void)ctx;
	(void)f;
	return how == CONFIRM_YES && fd >= 0;
}

/* What test queues run on without a hold of their own: no fleet. */
static void *no_fleet(void *ctx, struct cdp_fleet **fleet, enum scan_mode *mode)
{
	(void)ctx;
	*fleet = NULL;
	*mode = SCAN_MODE_FDPASS;
	return &held_token;
}

struct scanq *new_queue_cfg(const struct scanq_config *cfg, int timeout_ms)
{
	struct scanq_config c = *cfg;
	struct scanq *q = NULL;

	fake_reset();
	test_timeout_ms = timeout_ms;
	atomic_store(&total_done, 0);
	/* the hooks requests ask for by their flags, with one context */
	known_cache = NULL;
	if (!c.hooks.hold)
		c.hooks.hold = no_fleet;
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

struct scanq *new_queue(unsigned int threads, int timeout_ms,
			unsigned int max_per_uid)
{
	struct scanq_config cfg = {
		.threads = threads,
		.hooks.scan = fake_scan,
		.max_queued_per_uid = max_per_uid,
	};

	return new_queue_cfg(&cfg, timeout_ms);
}

int scanq_fake_setup(void **state)
{
	(void)state;
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return devnull < 0 ? -1 : 0;
}

int scanq_fake_teardown(void **state)
{
	(void)state;
	close(devnull);
	return 0;
}

void prep_reset(void)
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
int prep_get(const int *field)
{
	int v;

	pthread_mutex_lock(&prep.lock);
	v = *field;
	pthread_mutex_unlock(&prep.lock);
	return v;
}

uint64_t prep_get_key(void)
{
	uint64_t v;

	pthread_mutex_lock(&prep.lock);
	v = prep.key;
	pthread_mutex_unlock(&prep.lock);
	return v;
}

void prep_unblock(void)
{
	pthread_mutex_lock(&prep.lock);
	prep.block = false;
	pthread_cond_broadcast(&prep.cond);
	pthread_mutex_unlock(&prep.lock);
}

int count_prepare(void *ctx, uint64_t key)
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

int64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int submit_bg(struct scanq *q, ino_t ino, off_t size, int64_t not_before,
	      unsigned int confirm, struct twaiter *t)
{
	struct vcache_file f = {.dev = 1, .ino = ino, .size = size};
	struct scan_request r = {
		.timeout_ms = test_timeout_ms,
		.file = &f,
		.fd = devnull,
		.shared_queue = BG_QUEUE,
		.background = true,
		.not_before_ns = not_before,
		.confirm = confirm,
	};

	return scanq_submit(q, &r, &t->w);
}

bool fake_known(void *ctx, void *held, int fd, const struct vcache_file *f,
		uint64_t tag, struct cdp_result *res)
{
	struct fake_cache *c = known_cache;

	(void)ctx;
	atomic_store(&known_held, held);
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
