// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scan queue: per-uid FIFOs served round-robin by a fixed set of scanner
 * threads (one of them kept for small files), a map of jobs in flight
 * keyed by file identity and stamp for single flight, and a reaper thread
 * that ends queued jobs at their deadline or once nobody waits for them.
 * Waiters join a job under the queue lock; interruption is lock-free
 * (atomics, cdp_cancel_trigger and an eventfd write only). This file
 * holds the API and a job's life; scanq_impl.h names the others.
 */
#include "scanq_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <unistd.h>

#include "log.h"
#include "monotime.h"

const char *scan_mode_name(enum scan_mode mode)
{
	switch (mode) {
	case SCAN_MODE_FDPASS:
		return "fdpass";
	case SCAN_MODE_STREAM:
		return "stream";
	case SCAN_MODE_PATH:
		return "path";
	}
	return "?";
}

static struct job_list *bucket_of(struct scanq *q, const struct vcache_file *f)
{
	uint64_t h = f->ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)f->dev;

	return &q->map[(h >> 20) % SCANQ_BUCKETS];
}

void wake_reaper(struct scanq *q)
{
	uint64_t one = 1;
	ssize_t n;

	/* a full counter still wakes it: nothing to do on failure */
	n = write(q->reap_fd, &one, sizeof(one));
	(void)n;
}

/* --- jobs --- */

static void job_free(struct scan_job *job)
{
	struct scan_ticket *t;

	while ((t = job->tickets)) {
		job->tickets = t->next;
		free(t);
	}
	if (job->fd >= 0)
		close(job->fd);
	cdp_cancel_free(job->cancel);
	free(job);
}

/* NULL with *err set (negative errno) on failure. */
static struct scan_job *job_new(struct scanq *q, const struct scan_request *r,
				int *err)
{
	struct scan_job *job = calloc(1, sizeof(*job));

	*err = -ENOMEM;
	if (!job)
		return NULL;
	job->q = q;
	/*
	 * The job's own duplicate, made here, outside the lock: the opener's
	 * fd may be closed while the job still runs (a waiter that gave up
	 * is answered at once). Never one open for writing: clamd gets it.
	 */
	job->fd = -1;
	if ((fcntl(r->fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
		*err = -EINVAL;
	else if ((job->fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0)) == -1)
		*err = -errno;
	if (job->fd < 0) {
		job_free(job);
		return NULL;
	}
	*err = -ENOMEM;
	job->cancel = cdp_cancel_new();
	if (!job->cancel) {
		job_free(job);
		return NULL;
	}
	job->file = *r->file;
	job->gen = r->gen;
	job->tag = r->tag;
	job->prepare = r->prepare;
	job->prepare_key = r->prepare_key;
	job->confirm = r->confirm;
	job->background_only = r->background;
	job->not_before_ns = r->not_before_ns;
	atomic_store(&job->interested, 1);
	return job;
}

void scanq_result_fail(struct cdp_result *res, enum cdp_errcat cat, int err,
		       const char *text)
{
	memset(res, 0, sizeof(*res));
	res->verdict = CDP_ERROR;
	res->cat = cat;
	res->err = err;
	strlcpy(res->text, text, sizeof(res->text));
}

/* done() may free its waiter: the link is read first. */
void waiter_answer(struct scan_waiter *w, const struct scan_outcome *o)
{
	struct scan_waiter *next;

	for (; w; w = next) {
		next = w->next;
		w->done(w, o);
	}
}

/*
 * Waiters that hold a lock until answered go first: another waiter's
 * done() may block on that lock.
 */
void waiters_answer_ordered(struct scan_waiter *list,
			    const struct scan_outcome *o)
{
	struct scan_waiter *w, *next, *first = NULL, *rest = NULL;

	for (w = list; w; w = next) {
		next = w->next;
		if (w->answer_first) {
			w->next = first;
			first = w;
		} else {
			w->next = rest;
			rest = w;
		}
	}
	waiter_answer(first, o);
	waiter_answer(rest, o);
}

/* After job_end(): answers what is left of its waiters and frees it. */
void job_finish(struct scan_job *job, const struct scan_outcome *o)
{
	struct scan_waiter *list = job->waiters;

	job->waiters = NULL;
	waiters_answer_ordered(list, o);
	job_free(job);
}

/* --- the API --- */

int scanq_new(const struct scanq_config *cfg, struct scanq **out)
{
	struct scanq *q;
	unsigned int n;
	int ret = -ENOMEM;

	if (!cfg->hooks.scan || !cfg->hooks.hold)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->cfg = *cfg;
	if (q->cfg.threads == 0)
		q->cfg.threads = 1;
	if (q->cfg.small_bytes == 0)
		q->cfg.small_bytes = SCANQ_SMALL_BYTES;
	if (q->cfg.max_queued_per_uid == 0)
		q->cfg.max_queued_per_uid = SCANQ_MAX_QUEUED_PER_UID;
	/* what one user could hold with scans of distinct files */
	if (q->cfg.max_waiters_per_uid == 0)
		q->cfg.max_waiters_per_uid =
			q->cfg.max_queued_per_uid + q->cfg.threads;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	pthread_cond_init(&q->wake_small, NULL);
	TAILQ_INIT(&q->ring);
	TAILQ_INIT(&q->small_ring);
	TAILQ_INIT(&q->live);
	for (int i = 0; i < SCANQ_USER_BUCKETS; i++)
		LIST_INIT(&q->users[i]);
	for (int i = 0; i < SCANQ_BUCKETS; i++)
		LIST_INIT(&q->map[i]);
	q->reap_at = UINT64_MAX;
	q->reap_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->reap_fd < 0) {
		ret = -errno;
		goto fail;
	}
	n = q->cfg.threads;
	q->scanners = calloc(n, sizeof(*q->scanners));
	if (!q->scanners)
		goto fail;
	ret = -pthread_create(&q->reaper, NULL, reaper_main, q);
	if (ret)
		goto fail;
	q->reaper_started = true;
	/* set before any thread reads it */
	q->ngeneral = n >= 2 ? n - 1 : n;
	for (; q->nthreads < n; q->nthreads++) {
		struct scanner *s = &q->scanners[q->nthreads];

		s->q = q;
		/* the last of two or more serves small files only */
		s->small_only = n >= 2 && q->nthreads == n - 1;
		ret = -pthread_create(&s->thread, NULL, scanner_main, s);
		if (ret)
			goto fail;
	}
	*out = q;
	return 0;
fail:
	scanq_free(q);
	return ret;
}

void scanq_free(struct scanq *q)
{
	struct scan_job *job;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	/* scans under way end now, not at their deadline */
	TAILQ_FOREACH (job, &q->live, live_link)
		cdp_cancel_trigger(job->cancel);
	pthread_cond_broadcast(&q->wake);
	pthread_cond_broadcast(&q->wake_small);
	pthread_mutex_unlock(&q->lock);
	if (q->reaper_started) {
		wake_reaper(q);
		pthread_join(q->reaper, NULL);
	}
	/* general threads drain what is left, each job cancelled */
	for (unsigned int i = 0; i < q->nthreads; i++)
		pthread_join(q->scanners[i].thread, NULL);
	free(q->scanners);
	if (q->reap_fd >= 0)
		close(q->reap_fd);
	pthread_cond_destroy(&q->wake_small);
	pthread_cond_destroy(&q->wake);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* One waiter less who cares for job: the last one's going cancels it. */
static void lose_interest(struct scan_job *job)
{
	if (atomic_fetch_sub(&job->interested, 1) == 1)
		cdp_cancel_trigger(job->cancel);
}

/*
 * Lock-free: called from interrupt callbacks too. The job stays alive
 * while w is among its waiters (job_finish() answers w, and w's done() waits
 * for this callback to return); once withdrawn is set the reaper may
 * detach w and the job end and be freed: nothing of it is touched after.
 * A waiter the reaper claimed (its deadline passed) may already be
 * detached: the job is not touched before the claim either.
 */
static void withdraw(struct scan_waiter *w, struct scan_job *job)
{
	struct scanq *q;

	if (atomic_exchange(&w->withdrawing, true))
		return;
	q = job->q;
	lose_interest(job);
	atomic_store_explicit(&w->withdrawn, true, memory_order_release);
	/* the reaper answers w, and ends a queued job nobody waits for */
	atomic_store(&q->withdrawals, true);
	wake_reaper(q);
}

/* Outside the lock: logging may block. */
static void log_rejected(const struct scan_request *r, bool waiters,
			 unsigned int bound)
{
	static struct log_limit limit;
	unsigned long held_back;

	if (!log_limit_pass(&limit, &held_back))
		return;
	if (r->shared_queue)
		log_warn("scan queue full shared_queue=%u %s=%u: scan refused "
			 "with EAGAIN suppressed_before=%lu",
			 r->shared_queue, waiters ? "waiting" : "queued", bound,
			 held_back);
	else
		log_warn("scan queue full uid=%u %s=%u: open refused "
			 "with EAGAIN suppressed_before=%lu",
			 (unsigned)r->uid, waiters ? "waiting" : "queued",
			 bound, held_back);
}

static unsigned int queue_bound(const struct scanq *q,
				const struct scanq_user *u)
{
	if (u->background &&
	    q->cfg.max_queued_per_uid > SCANQ_MAX_QUEUED_BACKGROUND)
		return SCANQ_MAX_QUEUED_BACKGROUND;
	return q->cfg.max_queued_per_uid;
}

bool scanq_background_room(struct scanq *q, uid_t uid,
			   unsigned int shared_queue)
{
	uint64_t key = queue_key(uid, shared_queue);
	struct scanq_user *u;
	bool room = true;

	pthread_mutex_lock(&q->lock);
	LIST_FOREACH (u, user_bucket(q, key), hash_link) {
		if (u->key == key) {
			room = u->queued < SCANQ_MAX_QUEUED_BACKGROUND &&
			       u->queued < q->cfg.max_queued_per_uid;
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return room;
}

/* Under q->lock: the scan in flight r may join, or NULL. */
static struct scan_job *joinable(struct job_list *bucket,
				 const struct scan_request *r)
{
	struct scan_job *job;

	LIST_FOREACH (job, bucket, map_link) {
		/*
		 * A scan under way may have read the file before the joiner's
		 * writers' pages were written back; a queued one has not, and
		 * its prepare runs after this submit.
		 */
		if (vcache_file_same(&job->file, r->file) &&
		    job->tag == r->tag &&
		    (job->queued || (!job->prepare && !r->prepare)))
			return job;
	}
	return NULL;
}

/*
 * Under q->lock: whether u may have another waiter, on job (NULL: a scan
 * of its own). -EAGAIN, *full_waiters telling which bound, when not.
 */
static int admit(struct scanq *q, struct scanq_user *u, struct scan_job *job,
		 bool *full_waiters)
{
	if (!job && u->queued >= queue_bound(q, u)) {
		if (u->background)
			q->counters.background_dropped++;
		else
			q->counters.rejected++;
		return -EAGAIN;
	}
	/*
	 * Every waiter holds the opener's descriptor and request, joined or
	 * not: a uid gets no more of them than scans of distinct files
	 * would give it.
	 */
	if (u->waiters >= q->cfg.max_waiters_per_uid) {
		q->counters.rejected_waiters++;
		*full_waiters = true;
		return -EAGAIN;
	}
	return 0;
}

/*
 * Under q->lock: u's ticket on job, which r joins: its own uid's place (a
 * joiner is served no later than its own submit would have been: the
 * scan starts at whichever of its tickets comes first), beyond
 * max_queued_per_uid too, as it is bounded as a waiter. Takes *spare if
 * it needs a ticket; NULL when it needs one and there is none.
 */
static struct scan_ticket *join_job(struct scanq *q, struct scan_job *job,
				    struct scanq_user *u,
				    const struct scan_request *r,
				    struct scan_ticket **spare)
{
	struct scan_ticket *t = ticket_of(job, u->key);

	if (!t) {
		if (!*spare)
			return NULL;
		t = *spare;
		*spare = NULL;
		t->job = job;
		t->user = u;
		t->next = job->tickets;
		job->tickets = t;
	}
	if (job->queued && !t->queued) {
		ticket_enqueue(q, t);
		/* a background scan no thread would take may now go */
		if (job->background_only && !u->background)
			lanes_wake_for(q, job, u);
	}
	if (!r->background) {
		job->background_only = false;
		/* now somebody waits for it: no background scan beside */
		if (job->counts_bg && !job->counts_fg) {
			job->counts_fg = true;
			q->running_fg++;
		}
	}
	/* the scan thread reads it after taking the job, under lock */
	if (r->prepare && !job->prepare) {
		job->prepare = true;
		job->prepare_key = r->prepare_key;
	}
	q->counters.joined++;
	return t;
}

/* Under q->lock: job, fresh, queued in u's lane with ticket t. */
static void start_job(struct scanq *q, struct job_list *bucket,
		      struct scan_job *job, struct scanq_user *u,
		      struct scan_ticket *t, const struct scan_request *r)
{
	t->job = job;
	t->user = u;
	job->tickets = t;
	/* deadline and lane as submitted now, not when allocated */
	job->deadline_us = mono_usec() + (uint64_t)r->timeout_ms * 1000;
	job->lane = (uint64_t)r->file->size <= q->cfg.small_bytes ? LANE_SMALL
								  : LANE_BIG;
	LIST_INSERT_HEAD(bucket, job, map_link);
	job->in_map = true;
	TAILQ_INSERT_TAIL(&q->live, job, live_link);
	q->counters.live++;
	job->queued = true;
	q->counters.queued++;
	ticket_enqueue(q, t);
	lanes_wake_for(q, job, u);
}

/*
 * Under q->lock: w waits for job with u's ticket t, with its own
 * deadline, whoever else waits for the scan. Whether the reaper must
 * wake sooner.
 */
static bool add_waiter(struct scanq *q, struct scan_job *job,
		       struct scan_ticket *t, struct scanq_user *u,
		       struct scan_waiter *w, const struct scan_request *r)
{
	bool wake;

	w->deadline_us = mono_usec() + (uint64_t)r->timeout_ms * 1000;
	w->ticket = t;
	t->waiters++;
	u->waiters++;
	w->next = job->waiters;
	job->waiters = w;
	wake = w->deadline_us < q->reap_at;
	atomic_store(&w->job, job);
	/* an interrupt that came before w->job was visible found no job */
	if (atomic_load(&w->interrupted))
		withdraw(w, job);
	return wake;
}

int scanq_submit(struct scanq *q, const struct scan_request *r,
		 struct scan_waiter *w)
{
	struct job_list *bucket = bucket_of(q, r->file);
	struct scan_job *job, *fresh;
	struct scan_ticket *spare, *t;
	struct scanq_user *u = NULL;
	bool wake = false, full_waiters = false;
	int ret, fresh_err;

	if (r->timeout_ms <= 0)
		return -EINVAL;
	if (atomic_load(&w->interrupted))
		return -EINTR;
	/* allocated outside the lock; freed again if unused */
	fresh = job_new(q, r, &fresh_err);
	spare = calloc(1, sizeof(*spare));
	pthread_mutex_lock(&q->lock);
	job = joinable(bucket, r);
	u = user_get(q, queue_key(r->uid, r->shared_queue));
	if (!u) {
		ret = -ENOMEM;
		goto out;
	}
	if (!u->queued && !u->waiters) {
		u->background = r->background;
		u->beside_one = r->background && r->beside_one;
	}
	/* a job everybody gave up on is being cancelled: start afresh */
	if (job && atomic_fetch_add(&job->interested, 1) == 0) {
		atomic_fetch_sub(&job->interested, 1);
		job_unmap(job);
		job = NULL;
	}
	ret = admit(q, u, job, &full_waiters);
	if (ret)
		goto lost;
	if (job) {
		t = join_job(q, job, u, r, &spare);
		ret = t ? 0 : -ENOMEM;
		if (ret)
			goto lost;
	} else if (fresh && spare) {
		job = fresh;
		t = spare;
		fresh = NULL;
		spare = NULL;
		start_job(q, bucket, job, u, t, r);
	} else {
		ret = fresh ? -ENOMEM : fresh_err;
		goto out;
	}
	wake = add_waiter(q, job, t, u, w, r);
	goto out;
lost:
	if (job)
		lose_interest(job);
out:
	if (ret && u)
		user_put(u);
	pthread_mutex_unlock(&q->lock);
	if (fresh)
		job_free(fresh);
	free(spare);
	if (wake)
		wake_reaper(q);
	if (ret == -EAGAIN && !r->background)
		log_rejected(r, full_waiters,
			     full_waiters ? q->cfg.max_waiters_per_uid
					  : q->cfg.max_queued_per_uid);
	return ret;
}

void scanq_interrupt(struct scan_waiter *w)
{
	struct scan_job *job;

	atomic_store(&w->interrupted, true);
	job = atomic_load(&w->job);
	if (job)
		withdraw(w, job);
}

bool scanq_waiter_interrupted(const struct scan_waiter *w)
{
	return atomic_load(&w->interrupted);
}

void scanq_counters(struct scanq *q, struct scanq_counters *out)
{
	pthread_mutex_lock(&q->lock);
	*out = q->counters;
	pthread_mutex_unlock(&q->lock);
}
