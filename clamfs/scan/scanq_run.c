// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan queue's threads: scanners, which take a job, prepare and
 * confirm it, hold what it runs on, ask the scanner (clamd) and retry or
 * extend it within its waiters' deadlines; and the reaper, which ends
 * queued jobs at their deadline or once nobody waits for them.
 */
#include "scanq_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "monotime.h"

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
	int ms = left_ms(job_latest_deadline(job), now);

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
	job_unmap(job);
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
static bool known_already(struct scanq *q, struct scan_job *job, void *held,
			  struct scan_outcome *out)
{
	struct cdp_result res = {0};

	if (!q->cfg.hooks.known ||
	    !q->cfg.hooks.known(q->cfg.ctx, held, job->fd, &job->file, job->tag,
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
	struct cdp_fleet *fleet = NULL;
	enum scan_mode mode = SCAN_MODE_FDPASS;
	/* set at scanq_new and never changed: read without the lock */
	const struct scanq_config *cfg = &q->cfg;
	struct scanq_scan s;
	void *held = NULL;
	bool holding = false, asked = false, wake, retry, extend;
	unsigned int tries = 0;

	memset(out, 0, sizeof(*out));
	out->gen = job->gen;
	out->tag = job->tag;
	if (job->prepare && cfg->hooks.prepare &&
	    !cdp_cancel_triggered(job->cancel)) {
		int err = cfg->hooks.prepare(cfg->ctx, job->prepare_key);

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
	/*
	 * What the scan runs on, from right before clamd is asked (after the
	 * write-back, hold-back and confirm): known() reads the same. Held
	 * to the end: its waiters may all give up and be answered first.
	 */
	pthread_mutex_lock(&q->lock);
	held = cfg->hooks.hold(cfg->ctx, &fleet, &mode);
	holding = true;
	pthread_mutex_unlock(&q->lock);
	if (known_already(q, job, held, out))
		goto out;
	s = (struct scanq_scan){
		.ctx = cfg->ctx,
		.fleet = fleet,
		.note = &note,
		.mode = mode,
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
		cfg->hooks.scan(&s, &out->res);
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
			 job_latest_deadline(job) >=
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
			job_unmap(job);
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
	if (holding && cfg->hooks.release)
		cfg->hooks.release(cfg->ctx, held);
	out->usec = asked ? mono_usec() - start : 0;
	/* before job_finish(): whoever got the verdict sees the scan counted */
	if (asked && cfg->hooks.observe)
		cfg->hooks.observe(cfg->ctx, out->usec);
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
		waiters_answer_ordered(list, o);
		pthread_mutex_lock(&q->lock);
	}
}

void *scanner_main(void *arg)
{
	struct scanner *self = arg;
	struct scanq *q = self->q;

	for (;;) {
		struct scan_outcome outcome;
		struct scan_job *job;

		pthread_mutex_lock(&q->lock);
		while (!(job = lanes_pick(q, self->small_only)) && !q->stopping)
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
		job_finish(job, &outcome);
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
	waiters_answer_ordered(r.gone, &o);
	scanq_result_fail(&o.res, CDP_ERR_TIMEOUT, ETIMEDOUT,
			  "deadline passed while queued for a scanner");
	o.expired_queued = true;
	waiters_answer_ordered(r.late_q, &o);
	scanq_result_fail(&o.res, CDP_ERR_TIMEOUT, ETIMEDOUT,
			  "deadline passed while scanned");
	o.expired_queued = false;
	waiters_answer_ordered(r.late_run, &o);

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
		job_finish(job, &o);
	}
	if (r.next == UINT64_MAX)
		return -1;
	now = mono_usec();
	ms = r.next > now ? (int)((r.next - now + 999) / 1000) : 0;
	return ms;
}

void *reaper_main(void *arg)
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
