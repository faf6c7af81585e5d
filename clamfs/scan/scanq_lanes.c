// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan queue's users, tickets and lanes: each user (or shared queue)
 * has a FIFO per lane, served round-robin; a job has a ticket in the
 * queue of each user waiting for it; which job a scanner thread takes
 * next. Everything here runs under the queue's lock.
 */
#include "scanq_impl.h"

#include <stdlib.h>

/* A queue's key: an opener's uid, or a shared queue above every uid. */
uint64_t queue_key(uid_t uid, unsigned int shared_queue)
{
	return shared_queue ? (uint64_t)shared_queue << 32 : uid;
}

struct user_list *user_bucket(struct scanq *q, uint64_t key)
{
	return &q->users[((key ^ (key >> 32)) * 2654435761U) %
			 SCANQ_USER_BUCKETS];
}

struct scanq_user *user_get(struct scanq *q, uint64_t key)
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

void user_put(struct scanq_user *u)
{
	if (u->queued || u->waiters)
		return;
	LIST_REMOVE(u, hash_link);
	free(u);
}

void ticket_enqueue(struct scanq *q, struct scan_ticket *t)
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

struct scan_ticket *ticket_of(struct scan_job *job, uint64_t key)
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
void waiter_leave(struct scanq *q, struct scan_waiter *w)
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
struct scan_job *lanes_pick(struct scanq *q, bool small_only)
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
void lanes_wake_for(struct scanq *q, const struct scan_job *job,
		    const struct scanq_user *u)
{
	if (u->background && !background_may_start(q, u))
		return;
	if (job->lane == LANE_SMALL && !u->background)
		pthread_cond_signal(&q->wake_small);
	pthread_cond_signal(&q->wake);
}

/* Under q->lock, after the job's scan: it no longer counts as running. */
void job_stopped(struct scanq *q, struct scan_job *job)
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

void job_unmap(struct scan_job *job)
{
	if (job->in_map)
		LIST_REMOVE(job, map_link);
	job->in_map = false;
}

/* The job has ended: no waiter can join it or be detached from it. */
void job_end(struct scanq *q, struct scan_job *job)
{
	struct scan_waiter *w;

	job_dequeue(q, job);
	job_unmap(job);
	TAILQ_REMOVE(&q->live, job, live_link);
	q->counters.live--;
	for (w = job->waiters; w; w = w->next)
		waiter_leave(q, w);
}

/* The latest deadline of the waiters still attached (the creator's if none). */
uint64_t job_latest_deadline(const struct scan_job *job)
{
	const struct scan_waiter *w;
	uint64_t d = 0;

	for (w = job->waiters; w; w = w->next) {
		if (w->deadline_us > d)
			d = w->deadline_us;
	}
	return d ? d : job->deadline_us;
}
