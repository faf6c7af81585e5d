// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scan queue: per-uid FIFOs served round-robin by a fixed set of scanner
 * threads (one of them kept for small files), a map of jobs in flight
 * keyed by file identity and stamp for single flight, and a reaper thread
 * that ends queued jobs at their deadline or once nobody waits for them.
 * Waiters join a job under the queue lock; interruption is lock-free
 * (atomics, cdp_cancel_trigger and an eventfd write only).
 */
#include "scanq.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "monotime.h"

#define SCANQ_BUCKETS	   256
#define SCANQ_USER_BUCKETS 64

enum lane { LANE_SMALL, LANE_BIG, LANES };

struct scanq_user;

/*
 * A scan's place in one user's queue, and the count of that user's
 * waiters on the scan. A scan has one ticket per uid waiting for it: a
 * waiter that joins a queued scan of another user keeps its own place
 * in its own queue, and the scan starts at whichever of its tickets
 * comes first. Freed with its scan.
 */
struct scan_ticket {
	struct scan_job *job;
	struct scanq_user *user; /* valid while waiters > 0 or queued */
	unsigned int waiters;
	bool queued;			    /* in user->lane[job->lane] */
	struct scan_ticket *next;	    /* the job's tickets */
	TAILQ_ENTRY(scan_ticket) lane_link; /* in user->lane[lane] */
};

struct scan_job {
	struct scanq *q;
	struct vcache_file file;
	uint64_t tag;
	bool prepare; /* set while queued */
	uint64_t prepare_key;
	unsigned int confirm; /* scan_request.confirm */
	bool background_only; /* nobody but background submits joined */
	bool counts_fg;	      /* running, and somebody waits for it */
	bool counts_bg;	      /* running as a background scan */
	int64_t not_before_ns;
	int fd;
	uint64_t gen;
	uint64_t deadline_us; /* its creator's; each waiter has its own */
	uint64_t run_until;   /* the running attempt's end (0: none yet) */
	struct cdp_cancel *cancel;
	atomic_uint interested; /* waiters not interrupted */
	struct scan_waiter *waiters;
	struct scan_ticket *tickets;
	bool in_map;
	bool queued;		 /* has a ticket in a user's queue */
	bool answering;		 /* scanned: its waiters are being answered */
	struct scan_job *reaped; /* the reaper's list of jobs to end */
	bool expired;		 /* reaped at its deadline (else abandoned) */
	enum lane lane;
	TAILQ_ENTRY(scan_job) live_link; /* in q->live until it ends */
	LIST_ENTRY(scan_job) map_link;
};

TAILQ_HEAD(ticket_queue, scan_ticket);
TAILQ_HEAD(job_queue, scan_job);
LIST_HEAD(job_list, scan_job);

/*
 * A queue (a uid's or a shared one) with tickets queued or waiters in
 * flight; freed when it has neither.
 */
struct scanq_user {
	uint64_t key;	      /* queue_key() */
	unsigned int queued;  /* tickets in its lanes */
	unsigned int waiters; /* its waiters on any scan, queued or running */
	bool background;      /* its scans come after everybody else's */
	bool beside_one; /* ... and may run beside one that is waited for */
	struct ticket_queue lane[LANES];
	bool in_ring, in_small_ring;
	TAILQ_ENTRY(scanq_user) ring_link;	 /* has any queued ticket */
	TAILQ_ENTRY(scanq_user) small_ring_link; /* has a small one */
	LIST_ENTRY(scanq_user) hash_link;
};

TAILQ_HEAD(user_ring, scanq_user);
LIST_HEAD(user_list, scanq_user);

struct scanner {
	struct scanq *q;
	bool small_only;
	pthread_t thread;
};

struct scanq {
	struct scanq_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake;	     /* general scanner threads */
	pthread_cond_t wake_small;   /* the small-file thread */
	struct user_ring ring;	     /* round-robin over users: any job */
	struct user_ring small_ring; /* round-robin over users: small jobs */
	struct user_list users[SCANQ_USER_BUCKETS];
	struct job_queue live; /* every job not ended yet, queued or running */
	struct job_list map[SCANQ_BUCKETS];
	bool stopping;
	struct scanner *scanners;
	unsigned int nthreads;
	int reap_fd;		 /* eventfd: wakes the reaper */
	atomic_bool withdrawals; /* a waiter gave up since the last reap */
	uint64_t reap_at;	 /* when the reaper wakes on its own */
	pthread_t reaper;
	bool reaper_started;
	struct scanq_counters counters; /* under lock */
	unsigned int ngeneral;		/* threads that take any scan */
	unsigned int running_fg; /* scans running that someone waits for */
	unsigned int running_bg; /* background scans running */
};

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

static void wake_reaper(struct scanq *q)
{
	uint64_t one = 1;
	ssize_t n;

	/* a full counter still wakes it: nothing to do on failure */
	n = write(q->reap_fd, &one, sizeof(one));
	(void)n;
}

/* --- users, tickets and lanes (all under q->lock) --- */

/* A queue's key: an opener's uid, or a shared queue above every uid. */
static uint64_t queue_key(uid_t uid, unsigned int shared_queue)
{
	return shared_queue ? (uint64_t)shared_queue << 32 : uid;
}

static struct user_list *user_bucket(struct scanq *q, uint64_t key)
{
	return &q->users[((key ^ (key >> 32)) * 2654435761U) %
			 SCANQ_USER_BUCKETS];
}

static struct scanq_user *user_get(struct scanq *q, uint64_t key)
{
	struct user_list *b = user_bucket(q, key);
	struct scanq_user *u;

	LIST_FOREACH (u, b, hash_link) {
		if (u->key == key)
			return u;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->key = key;
	for (int l = 0; l < LANES; l++)
		TAILQ_INIT(&u->lane[l]);
	LIST_INSERT_HEAD(b, u, hash_link);
	return u;
}

static void user_put(struct scanq_user *u)
{
	if (u->queued || u->waiters)
		return;
	LIST_REMOVE(u, hash_link);
	free(u);
}

static void ticket_enqueue(struct scanq *q, struct scan_ticket *t)
{
	struct scanq_user *u = t->user;
	enum lane lane = t->job->lane;

	t->queued = true;
	TAILQ_INSERT_TAIL(&u->lane[lane], t, lane_link);
	u->queued++;
	if (!u->in_ring) {
		TAILQ_INSERT_TAIL(&q->ring, u, ring_link);
		u->in_ring = true;
	}
	if (lane == LANE_SMALL && !u->in_small_ring) {
		TAILQ_INSERT_TAIL(&q->small_ring, u, small_ring_link);
		u->in_small_ring = true;
	}
}

/* Takes a ticket out of its user's queue; the user may be freed. */
static void ticket_dequeue(struct scanq *q, struct scan_ticket *t)
{
	struct scanq_user *u = t->user;

	TAILQ_REMOVE(&u->lane[t->job->lane], t, lane_link);
	t->queued = false;
	u->queued--;
	if (u->in_small_ring && TAILQ_EMPTY(&u->lane[LANE_SMALL])) {
		TAILQ_REMOVE(&q->small_ring, u, small_ring_link);
		u->in_small_ring = false;
	}
	if (u->in_ring && u->queued == 0) {
		TAILQ_REMOVE(&q->ring, u, ring_link);
		u->in_ring = false;
	}
	user_put(u);
}

static struct scan_ticket *ticket_of(struct scan_job *job, uint64_t key)
{
	struct scan_ticket *t;

	for (t = job->tickets; t; t = t->next) {
		if (t->user && t->user->key == key)
			return t;
	}
	return NULL;
}

/*
 * Takes a job out of the queue (not out of the map): all its tickets, in
 * whichever users' queues they are.
 */
static void job_dequeue(struct scanq *q, struct scan_job *job)
{
	struct scan_ticket *t;

	if (!job->queued)
		return;
	for (t = job->tickets; t; t = t->next) {
		if (t->queued)
			ticket_dequeue(q, t);
	}
	job->queued = false;
	q->counters.queued--;
}

/*
 * A waiter leaves its scan (answered, or detached by the reaper): it no
 * longer counts against its user, and a queued ticket no waiter of its
 * user holds any more gives back its place. A queued scan keeps a
 * ticket as long as any waiter is left: each has one of its own uid.
 */
static void waiter_leave(struct scanq *q, struct scan_waiter *w)
{
	struct scan_ticket *t = w->ticket;
	struct scanq_user *u = t->user;

	w->ticket = NULL;
	t->waiters--;
	u->waiters--;
	if (t->waiters > 0) {
		user_put(u); /* still has this ticket's waiters: stays */
		return;
	}
	if (t->queued)
		ticket_dequeue(q, t);
	else
		user_put(u);
	t->user = NULL; /* unused now: the user may be gone */
}

/*
 * Under q->lock: whether a background scan may start. Not while a scan
 * somebody waits for runs (clamd's CPU is theirs: on a small machine a
 * background scan beside them would slow them down), and one at a time
 * (the writer that caused it is working too). Beside_one ones only
 * while a single such scan runs, whose reader leaves the rest of clamd
 * idle: one with three general threads, two with four or more (the
 * reader's, those two and one free for another user's big file). One
 * alone left half of two cores idle in a cold grep -r.
 * When stopping, anything: the queue is drained.
 */
bool scanq_background_possible(const struct scanq *q)
{
	return q->ngeneral >= 2;
}

static bool background_may_start(const struct scanq *q,
				 const struct scanq_user *u)
{
	if (q->stopping)
		return true;
	if (!scanq_background_possible(q))
		return false;
	if (u->beside_one && q->ngeneral >= 3)
		return q->running_fg <= 1 &&
		       q->running_bg < (q->ngeneral >= 4 ? 2u : 1u);
	return q->running_bg == 0 && q->running_fg == 0;
}

/*
 * The next job for a scanner thread: the first user in line gives one job
 * (its small ones first) and goes to the back of the line. The job's
 * tickets in other users' queues leave them too.
 */
static struct scan_job *pick(struct scanq *q, bool small_only)
{
	struct scanq_user *u, *bg = NULL;
	struct scan_ticket *t;
	struct scan_job *job;

	/* background users only when nobody else has a scan queued */
	if (small_only) {
		TAILQ_FOREACH (u, &q->small_ring, small_ring_link) {
			if (!u->background)
				break;
		}
		if (!u)
			return NULL;
		TAILQ_REMOVE(&q->small_ring, u, small_ring_link);
		TAILQ_INSERT_TAIL(&q->small_ring, u, small_ring_link);
	} else {
		TAILQ_FOREACH (u, &q->ring, ring_link) {
			if (!u->background)
				break;
			if (!bg && background_may_start(q, u))
				bg = u;
		}
		if (!u)
			u = bg;
		if (!u)
			return NULL;
		TAILQ_REMOVE(&q->ring, u, ring_link);
		TAILQ_INSERT_TAIL(&q->ring, u, ring_link);
	}
	t = TAILQ_FIRST(&u->lane[LANE_SMALL]);
	if (!t)
		t = TAILQ_FIRST(&u->lane[LANE_BIG]);
	job = t->job;
	job_dequeue(q, job);
	if (job->background_only) {
		job->counts_bg = true;
		q->running_bg++;
	} else {
		job->counts_fg = true;
		q->running_fg++;
	}
	return job;
}

/*
 * Under q->lock, job just queued for u: wakes a thread that can take it.
 * A background one no small-file thread takes, nor a general one before
 * background_may_start allows it (job_stopped wakes one then): a wake-up
 * now would only be slept off again.
 */
static void wake_for(struct scanq *q, const struct scan_job *job,
		     const struct scanq_user *u)
{
	if (u->background && !background_may_start(q, u))
		return;
	if (job->lane == LANE_SMALL && !u->background)
		pthread_cond_signal(&q->wake_small);
	pthread_cond_signal(&q->wake);
}

/* Under q->lock, after the job's scan: it no longer counts as running. */
static void job_stopped(struct scanq *q, struct scan_job *job)
{
	if (job->counts_fg)
		q->running_fg--;
	if (job->counts_bg)
		q->running_bg--;
	job->counts_fg = job->counts_bg = false;
	/* a background scan may start now: the small-file thread cannot */
	if (q->running_fg <= 1)
		pthread_cond_signal(&q->wake);
}

static void unmap(struct scan_job *job)
{
	if (job->in_map)
		LIST_REMOVE(job, map_link);
	job->in_map = false;
}

/* The job has ended: no waiter can join it or be detached from it. */
static void job_end(struct scanq *q, struct scan_job *job)
{
	struct scan_waiter *w;

	job_dequeue(q, job);
	unmap(job);
	TAILQ_REMOVE(&q->live, job, live_link);
	q->counters.live--;
	for (w = job->waiters; w; w = w->next)
		waiter_leave(q, w);
}

/* The latest deadline of the waiters still attached (the creator's if none). */
static uint64_t latest_deadline(const struct scan_job *job)
{
	const struct scan_waiter *w;
	uint64_t d = 0;

	for (w = job->waiters; w; w = w->next) {
		if (w->deadline_us > d)
			d = w->deadline_us;
	}
	return d ? d : job->deadline_us;
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
static void answer(struct scan_waiter *w, const struct scan_outcome *o)
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
static void answer_ordered(struct scan_waiter *list,
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
	answer(first, o);
	answer(rest, o);
}

/* After job_end(): answers what is left of its waiters and frees it. */
static void finish(struct scan_job *job, const struct scan_outcome *o)
{
	struct scan_waiter *list = job->waiters;

	job->waiters = NULL;
	answer_ordered(list, o);
	job_free(job);
}

/* --- scanner threads --- */

/*
 * clamd may not have looked at the file: asking again may well work. A
 * timeout only of an attempt cut short for a retry elsewhere (the whole
 * deadline has not passed).
 */
static bool worth_retry(const struct cdp_result *res,
			const struct scanq_attempt *note)
{
	return res->verdict == CDP_ERROR &&
	       (res->cat == CDP_ERR_CONNECT || res->cat == CDP_ERR_PROTOCOL ||
		(res->cat == CDP_ERR_TIMEOUT && note->bounded));
}

/* Milliseconds left until deadline; 0 when it has passed. */
static int left_ms(uint64_t deadline, uint64_t now)
{
	if (now + 1000 > deadline)
		return 0;
	return (int)((deadline - now) / 1000);
}

/*
 * Under q->lock: the time the next attempt gets, which is what is left
 * of the latest deadline of the scan's waiters (each is answered at its
 * own: the reaper answers those whose deadline comes before the
 * attempt's end). 0 when it has passed.
 */
static int attempt_ms(struct scan_job *job, bool *wake)
{
	uint64_t now = mono_usec();
	int ms = left_ms(latest_deadline(job), now);

	if (ms > 0)
		job->run_until = now + (uint64_t)ms * 1000;
	/* waiters whose deadline comes first are the reaper's to answer */
	*wake = ms > 0 && job->waiters && job->waiters->next;
	return ms;
}

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool background_only(struct scanq *q, struct scan_job *job)
{
	bool bg;

	pthread_mutex_lock(&q->lock);
	bg = job->background_only;
	pthread_mutex_unlock(&q->lock);
	return bg;
}

/*
 * A background scan started before its file's stamp has settled would
 * give a verdict nobody may keep: it waits until not_before_ns (bounded),
 * unless someone joins it meanwhile, who wants the verdict now. A thread
 * that waits here is a general one, and another general one is free for
 * scans that come meanwhile.
 */
static void hold_back(struct scanq *q, struct scan_job *job)
{
	/* bounded on the monotonic clock: the wall clock may be stepped */
	uint64_t cap = mono_usec() + SCANQ_NOT_BEFORE_MAX_MS * 1000;
	struct timespec ts = {0};
	int64_t left;

	for (;;) {
		left = job->not_before_ns - realtime_ns();
		if (left <= 0 || mono_usec() >= cap ||
		    cdp_cancel_triggered(job->cancel) ||
		    !background_only(q, job))
			return;
		/* short naps: a joiner must not wait out the whole delay */
		ts.tv_nsec = left < 2000000 ? left : 2000000;
		nanosleep(&ts, NULL);
	}
}

/*
 * Whether the job's confirm() (if any) still vouches for the stamp; a
 * background scan of a file that changed is dropped (false), since
 * whoever changed it will ask again.
 */
static bool confirmed(struct scanq *q, struct scan_job *job,
		      struct scan_outcome *out)
{
	int64_t at;

	if (!job->confirm || !q->cfg.hooks.confirm)
		return true;
	at = realtime_ns();
	if (q->cfg.hooks.confirm(q->cfg.ctx, job->confirm, job->fd,
				 &job->file)) {
		out->confirmed_ns = at;
		return true;
	}
	pthread_mutex_lock(&q->lock);
	if (!job->background_only) {
		pthread_mutex_unlock(&q->lock);
		return true;
	}
	/* decided under the lock: nobody joins a dropped scan any more */
	unmap(job);
	q->counters.background_dropped++;
	pthread_mutex_unlock(&q->lock);
	scanq_result_fail(&out->res, CDP_ERR_CANCELLED, ECANCELED,
			  "changed before its background scan");
	out->dropped = true;
	return false;
}

/*
 * Whether the verdict is known by now (scanq_hooks.known): mostly, the
 * submitter looked at the cache before a scan of the same file ended and
 * submitted after it left the queue, too late to join it.
 */
static bool known_already(struct scanq *q, struct scan_job *job,
			  struct scan_outcome *out)
{
	struct cdp_result res = {0};

	if (!q->cfg.hooks.known ||
	    !q->cfg.hooks.known(q->cfg.ctx, job->fd, &job->file, job->tag,
				&res) ||
	    (res.verdict != CDP_CLEAN && res.verdict != CDP_INFECTED))
		return false;
	res.cat = CDP_ERR_NONE;
	out->res = res;
	out->known = true;
	pthread_mutex_lock(&q->lock);
	q->counters.spared++;
	pthread_mutex_unlock(&q->lock);
	return true;
}

static void run_job(struct scanq *q, struct scan_job *job,
		    struct scan_outcome *out)
{
	uint64_t start = 0, until;
	struct scanq_attempt note = {.backend = -1};
	struct scanq_config cfg;
	struct scanq_scan s;
	void *held = NULL;
	bool asked = false, wake, retry, extend;
	unsigned int tries = 0;

	pthread_mutex_lock(&q->lock);
	cfg = q->cfg;
	/* its waiters may all give up and be answered before it ends */
	if (cfg.hooks.hold)
		held = cfg.hooks.hold(cfg.ctx, &cfg.fleet, &cfg.mode);
	pthread_mutex_unlock(&q->lock);
	memset(out, 0, sizeof(*out));
	out->gen = job->gen;
	out->tag = job->tag;
	if (job->prepare && cfg.hooks.prepare &&
	    !cdp_cancel_triggered(job->cancel)) {
		int err = cfg.hooks.prepare(cfg.ctx, job->prepare_key);

		if (err) {
			scanq_result_fail(&out->res, CDP_ERR_LOCAL, -err,
					  "not prepared");
			goto out;
		}
	}
	if (job->not_before_ns)
		hold_back(q, job);
	if (cdp_cancel_triggered(job->cancel)) {
		scanq_result_fail(&out->res, CDP_ERR_CANCELLED, ECANCELED,
				  "cancelled");
		goto out;
	}
	if (!confirmed(q, job, out))
		goto out;
	if (known_already(q, job, out))
		goto out;
	s = (struct scanq_scan){
		.ctx = cfg.ctx,
		.fleet = cfg.fleet,
		.note = &note,
		.mode = cfg.mode,
		.fd = job->fd,
		.file = &job->file,
		.cancel = job->cancel,
		.small = job->lane == LANE_SMALL,
	};
	pthread_mutex_lock(&q->lock);
	s.timeout_ms = attempt_ms(job, &wake);
	if (s.timeout_ms > 0) {
		q->counters.scans++;
		if (job->background_only)
			q->counters.background++;
	}
	pthread_mutex_unlock(&q->lock);
	if (s.timeout_ms == 0) {
		scanq_result_fail(
			&out->res, CDP_ERR_TIMEOUT, ETIMEDOUT,
			"deadline passed before the scan could start");
		out->expired_queued = true;
		goto out;
	}
	if (wake)
		wake_reaper(q);
	asked = true;
	/* clamd's time: not the write-back, the hold-back nor the confirm */
	start = mono_usec();
	out->started_ns = realtime_ns();
	for (;;) {
		cfg.hooks.scan(&s, &out->res);
		tries++;
		if (cdp_cancel_triggered(job->cancel))
			break;
		pthread_mutex_lock(&q->lock);
		until = job->run_until;
		retry = tries < SCANQ_SCAN_ATTEMPTS &&
			worth_retry(&out->res, &note);
		/*
		 * A waiter that joined while the attempt ran has a later
		 * deadline than the attempt was given: its open must not fail
		 * before that deadline, so it gets an attempt of its own time
		 * (as it would have had, submitting alone), if any is worth it.
		 */
		extend = !retry && out->res.verdict == CDP_ERROR &&
			 out->res.cat == CDP_ERR_TIMEOUT &&
			 latest_deadline(job) >=
				 until + SCANQ_EXTEND_MIN_MS * 1000;
		/* the retry must fit in what is left of the deadline */
		s.timeout_ms = retry || extend ? attempt_ms(job, &wake) : 0;
		if (s.timeout_ms > 1)
			q->counters.retries++;
		else if (out->res.verdict == CDP_ERROR)
			/*
			 * Decided under the lock: a waiter coming before
			 * job_end must not join this failure and get it at
			 * once, unused deadline and all; it gets a scan of its
			 * own.
			 */
			unmap(job);
		pthread_mutex_unlock(&q->lock);
		if (s.timeout_ms <= 1)
			break;
		if (wake)
			wake_reaper(q);
		/* the scanner's "retry": another backend, a pause */
		s.attempt = SCANQ_SCAN_ATTEMPTS - 1;
		/* not another idle session that may have died with it */
		cdp_cancel_want_fresh(job->cancel);
	}
out:
	if (cfg.hooks.release)
		cfg.hooks.release(cfg.ctx, held);
	out->usec = asked ? mono_usec() - start : 0;
	/* before finish(): whoever got the verdict sees the scan counted */
	if (asked && cfg.hooks.observe)
		cfg.hooks.observe(cfg.ctx, out->usec);
}

/*
 * Under q->lock, a scan that gave a verdict: its waiters are answered
 * (and cache it) while the scan can still be found, and so are those who
 * join meanwhile. Ended at once, an opener that came between its end and
 * the verdict reaching the cache would find neither, and scan the file
 * again. Returns with the lock held and no waiter left.
 */
static void answer_while_mapped(struct scanq *q, struct scan_job *job,
				const struct scan_outcome *o)
{
	struct scan_waiter *list, *w;

	if (!job->in_map ||
	    (o->res.verdict != CDP_CLEAN && o->res.verdict != CDP_INFECTED))
		return;
	job->answering = true;
	while ((list = job->waiters)) {
		job->waiters = NULL;
		for (w = list; w; w = w->next)
			waiter_leave(q, w);
		pthread_mutex_unlock(&q->lock);
		answer_ordered(list, o);
		pthread_mutex_lock(&q->lock);
	}
}

static void *scanner_main(void *arg)
{
	struct scanner *self = arg;
	struct scanq *q = self->q;

	for (;;) {
		struct scan_outcome outcome;
		struct scan_job *job;

		pthread_mutex_lock(&q->lock);
		while (!(job = pick(q, self->small_only)) && !q->stopping)
			pthread_cond_wait(self->small_only ? &q->wake_small
							   : &q->wake,
					  &q->lock);
		if (!job) {
			pthread_mutex_unlock(&q->lock);
			return NULL;
		}
		if (q->stopping)
			cdp_cancel_trigger(job->cancel);
		pthread_mutex_unlock(&q->lock);

		run_job(q, job, &outcome);

		pthread_mutex_lock(&q->lock);
		job_stopped(q, job);
		answer_while_mapped(q, job, &outcome);
		job_end(q, job);
		if (outcome.res.cat == CDP_ERR_CANCELLED && !outcome.dropped)
			q->counters.cancelled++;
		pthread_mutex_unlock(&q->lock);
		finish(job, &outcome);
	}
}

/* --- the reaper --- */

static bool abandoned(struct scan_job *job)
{
	return atomic_load(&job->interested) == 0;
}

/*
 * Whether the reaper answers w at its deadline: while the scan is queued,
 * and while it runs an attempt that ends after w's deadline. (Else the
 * attempt's own end, at the latest deadline, answers it.) And before the
 * first attempt, while prepare() (a write-back that may take long) runs.
 */
static bool reaper_watches(const struct scan_job *job,
			   const struct scan_waiter *w)
{
	if (job->answering)
		return false; /* the verdict is on its way to w */
	if (job->queued || job->run_until == 0)
		return true;
	return w->deadline_us < job->run_until;
}

struct reaped {
	struct scan_waiter *gone;     /* gave up: answered cancelled */
	struct scan_waiter *late_q;   /* deadline passed while queued */
	struct scan_waiter *late_run; /* deadline passed while scanned */
	struct scan_job *done;	      /* queued jobs nobody waits for */
	uint64_t next;		      /* the next deadline to watch */
};

/*
 * Detaches from one job the waiters that gave up and those whose
 * deadline passed, and ends the job if it is queued and nobody is left.
 */
static void reap_job(struct scanq *q, struct scan_job *job, uint64_t now,
		     struct reaped *r)
{
	struct scan_waiter **pw, *w;
	bool late = false;

	for (pw = &job->waiters; (w = *pw);) {
		if (atomic_load_explicit(&w->withdrawn, memory_order_acquire)) {
			*pw = w->next;
			waiter_leave(q, w);
			w->next = r->gone;
			r->gone = w;
			continue;
		}
		if (!reaper_watches(job, w) || atomic_load(&w->withdrawing)) {
			pw = &w->next;
			continue;
		}
		if (w->deadline_us > now) {
			if (w->deadline_us < r->next)
				r->next = w->deadline_us;
			pw = &w->next;
			continue;
		}
		/* an interrupt that comes now finds it claimed */
		if (atomic_exchange(&w->withdrawing, true)) {
			pw = &w->next;
			continue;
		}
		*pw = w->next;
		waiter_leave(q, w);
		if (atomic_fetch_sub(&job->interested, 1) == 1)
			cdp_cancel_trigger(job->cancel);
		if (job->queued) {
			w->next = r->late_q;
			r->late_q = w;
			late = true;
		} else {
			w->next = r->late_run;
			r->late_run = w;
		}
	}
	if (!job->queued || !abandoned(job))
		return;
	job_end(q, job);
	job->expired = late;
	/* nobody's open waited for a background scan: it is just dropped */
	if (late && job->background_only)
		q->counters.background_dropped++;
	else if (late)
		q->counters.expired++;
	else
		q->counters.cancelled++;
	job->reaped = r->done;
	r->done = job;
}

/*
 * Answers the waiters that gave up and those whose own deadline passed,
 * and ends the queued jobs nobody waits for any more; returns how long it
 * may sleep (ms, -1: until woken).
 */
static int reap(struct scanq *q)
{
	struct reaped r = {.next = UINT64_MAX};
	struct scan_job *job, *tmp;
	struct scan_outcome o;
	uint64_t now = mono_usec();
	int ms;

	pthread_mutex_lock(&q->lock);
	atomic_store(&q->withdrawals, false);
	TAILQ_FOREACH_SAFE (job, &q->live, live_link, tmp)
		reap_job(q, job, now, &r);
	q->reap_at = r.next;
	pthread_mutex_unlock(&q->lock);

	/* errors all: the generation and tag do not matter */
	memset(&o, 0, sizeof(o));
	scanq_result_fail(&o.res, CDP_ERR_CANCELLED, ECANCELED, "cancelled");
	answer_ordered(r.gone, &o);
	scanq_result_fail(&o.res, CDP_ERR_TIMEOUT, ETIMEDOUT,
			  "deadline passed while queued for a scanner");
	o.expired_queued = true;
	answer_ordered(r.late_q, &o);
	scanq_result_fail(&o.res, CDP_ERR_TIMEOUT, ETIMEDOUT,
			  "deadline passed while scanned");
	o.expired_queued = false;
	answer_ordered(r.late_run, &o);

	while (r.done) {
		job = r.done;
		r.done = job->reaped;
		memset(&o, 0, sizeof(o));
		o.gen = job->gen;
		o.tag = job->tag;
		if (job->expired) {
			scanq_result_fail(
				&o.res, CDP_ERR_TIMEOUT, ETIMEDOUT,
				"deadline passed while queued for a scanner");
			o.expired_queued = true;
		} else
			scanq_result_fail(&o.res, CDP_ERR_CANCELLED, ECANCELED,
					  "cancelled");
		finish(job, &o);
	}
	if (r.next == UINT64_MAX)
		return -1;
	now = mono_usec();
	ms = r.next > now ? (int)((r.next - now + 999) / 1000) : 0;
	return ms;
}

static void *reaper_main(void *arg)
{
	struct scanq *q = arg;
	struct pollfd pfd = {.fd = q->reap_fd, .events = POLLIN};
	uint64_t count;

	for (;;) {
		bool stopping;
		int ms = reap(q);
		ssize_t n;

		pthread_mutex_lock(&q->lock);
		stopping = q->stopping;
		pthread_mutex_unlock(&q->lock);
		if (stopping)
			return NULL;
		if (poll(&pfd, 1, ms) > 0) {
			n = read(q->reap_fd, &count, sizeof(count));
			(void)n;
		}
	}
}

/* --- the API --- */

int scanq_new(const struct scanq_config *cfg, struct scanq **out)
{
	struct scanq *q;
	unsigned int n;
	int ret = -ENOMEM;

	if (!cfg->hooks.scan)
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

/*
 * Lock-free: called from interrupt callbacks too. The job stays alive
 * while w is among its waiters (finish() answers w, and w's done() waits
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
	if (atomic_fetch_sub(&job->interested, 1) == 1)
		cdp_cancel_trigger(job->cancel);
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

int scanq_submit(struct scanq *q, const struct scan_request *r,
		 struct scan_waiter *w)
{
	struct job_list *bucket = bucket_of(q, r->file);
	struct scan_job *job = NULL, *fresh;
	struct scan_ticket *spare, *t;
	struct scanq_user *u = NULL;
	bool wake = false, full_waiters = false;
	int ret = 0, fresh_err;

	if (atomic_load(&w->interrupted))
		return -EINTR;
	/* allocated outside the lock; freed again if unused */
	fresh = job_new(q, r, &fresh_err);
	spare = calloc(1, sizeof(*spare));
	pthread_mutex_lock(&q->lock);
	LIST_FOREACH (job, bucket, map_link) {
		/*
		 * A scan under way may have read the file before the joiner's
		 * writers' pages were written back; a queued one has not, and
		 * its prepare runs after this submit.
		 */
		if (vcache_file_same(&job->file, r->file) &&
		    job->tag == r->tag &&
		    (job->queued || (!job->prepare && !r->prepare)))
			break;
	}
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
		unmap(job);
		job = NULL;
	}
	if (!job && u->queued >= queue_bound(q, u)) {
		if (u->background)
			q->counters.background_dropped++;
		else
			q->counters.rejected++;
		ret = -EAGAIN;
		goto out;
	}
	/*
	 * Every waiter holds the opener's descriptor and request, joined or
	 * not: a uid gets no more of them than scans of distinct files
	 * would give it.
	 */
	if (u->waiters >= q->cfg.max_waiters_per_uid) {
		if (job && atomic_fetch_sub(&job->interested, 1) == 1)
			cdp_cancel_trigger(job->cancel);
		q->counters.rejected_waiters++;
		full_waiters = true;
		ret = -EAGAIN;
		goto out;
	}
	if (job) {
		/*
		 * Its own uid's place: a joiner is served no later than its
		 * own submit would have been (the scan starts at whichever of
		 * its tickets comes first), beyond max_queued_per_uid too:
		 * it is bounded as a waiter.
		 */
		t = ticket_of(job, u->key);
		if (!t && !spare) {
			if (atomic_fetch_sub(&job->interested, 1) == 1)
				cdp_cancel_trigger(job->cancel);
			ret = -ENOMEM;
			goto out;
		}
		if (!t) {
			t = spare;
			spare = NULL;
			t->job = job;
			t->user = u;
			t->next = job->tickets;
			job->tickets = t;
		}
		if (job->queued && !t->queued) {
			ticket_enqueue(q, t);
			/* a background scan no thread would take may now go */
			if (job->background_only && !u->background)
				wake_for(q, job, u);
		}
		if (!r->background) {
			job->background_only = false;
			/* now somebody waits for it: no background scan beside
			 */
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
		goto join;
	}
	if (!fresh || !spare) {
		ret = fresh ? -ENOMEM : fresh_err;
		goto out;
	}
	job = fresh;
	fresh = NULL;
	t = spare;
	spare = NULL;
	t->job = job;
	t->user = u;
	job->tickets = t;
	/* deadline and lane as configured now, not when allocated */
	job->deadline_us = mono_usec() + (uint64_t)q->cfg.timeout_ms * 1000;
	job->lane = (uint64_t)r->file->size <= q->cfg.small_bytes ? LANE_SMALL
								  : LANE_BIG;
	LIST_INSERT_HEAD(bucket, job, map_link);
	job->in_map = true;
	TAILQ_INSERT_TAIL(&q->live, job, live_link);
	q->counters.live++;
	job->queued = true;
	q->counters.queued++;
	ticket_enqueue(q, t);
	wake_for(q, job, u);
join:
	/* its own deadline, whoever else waits for the scan */
	w->deadline_us = mono_usec() + (uint64_t)q->cfg.timeout_ms * 1000;
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

void scanq_reconfigure_fleet(struct scanq *q, struct cdp_fleet *fleet,
			     enum scan_mode mode, int timeout_ms)
{
	pthread_mutex_lock(&q->lock);
	q->cfg.fleet = fleet;
	q->cfg.mode = mode;
	q->cfg.timeout_ms = timeout_ms;
	pthread_mutex_unlock(&q->lock);
}

enum scan_mode scanq_mode(struct scanq *q)
{
	enum scan_mode mode;

	pthread_mutex_lock(&q->lock);
	mode = q->cfg.mode;
	pthread_mutex_unlock(&q->lock);
	return mode;
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
