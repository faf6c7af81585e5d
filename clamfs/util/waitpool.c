// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The wait pool (waitpool.h): jobs queued per uid, uids served in turn,
 * threads started on demand and ended when idle.
 */
#include "waitpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/queue.h>
#include <time.h>

/* A thread with nothing to do for this long ends. */
#define WAITPOOL_IDLE_S 30

struct job {
	STAILQ_ENTRY(job) next;
	void (*fn)(void *arg, bool cancelled);
	void *arg;
};

/* One uid with jobs queued or running; gone when it has neither. */
struct share {
	TAILQ_ENTRY(share) next;
	uid_t uid;
	unsigned int running;
	unsigned int queued;
	STAILQ_HEAD(, job) jobs;
};

struct waitpool {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a job may have become runnable */
	pthread_cond_t gone; /* a thread ended */
	/* in turn: a share whose job was taken goes to the end */
	TAILQ_HEAD(, share) shares;
	unsigned int max_threads, running_per_uid, queued_per_uid;
	unsigned int threads, idle, running, queued;
	uint64_t submitted, rejected;
	bool stopping;
};

struct waitpool *waitpool_new(unsigned int max_threads,
			      unsigned int running_per_uid,
			      unsigned int queued_per_uid)
{
	struct waitpool *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	/* idle timeouts on the monotonic clock, not the settable one */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->work, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&p->gone, NULL);
	TAILQ_INIT(&p->shares);
	p->max_threads = max_threads ? max_threads : WAITPOOL_THREADS;
	p->running_per_uid =
		running_per_uid ? running_per_uid : WAITPOOL_RUNNING_PER_UID;
	p->queued_per_uid =
		queued_per_uid ? queued_per_uid : WAITPOOL_QUEUED_PER_UID;
	return p;
}

static struct share *share_of(struct waitpool *p, uid_t uid, bool make)
{
	struct share *s;

	TAILQ_FOREACH (s, &p->shares, next)
		if (s->uid == uid)
			return s;
	if (!make || !(s = calloc(1, sizeof(*s))))
		return NULL;
	s->uid = uid;
	STAILQ_INIT(&s->jobs);
	TAILQ_INSERT_TAIL(&p->shares, s, next);
	return s;
}

static void share_drop_if_empty(struct waitpool *p, struct share *s)
{
	if (s->running == 0 && s->queued == 0) {
		TAILQ_REMOVE(&p->shares, s, next);
		free(s);
	}
}

/*
 * The next job to run, taken off its queue and counted as running, from
 * the first share in turn that may run one more; NULL when none may.
 * Called locked.
 */
static struct job *take_job(struct waitpool *p, struct share **from)
{
	struct share *s;
	struct job *j;

	TAILQ_FOREACH (s, &p->shares, next) {
		if (s->queued == 0 || s->running >= p->running_per_uid)
			continue;
		j = STAILQ_FIRST(&s->jobs);
		STAILQ_REMOVE_HEAD(&s->jobs, next);
		s->queued--;
		s->running++;
		p->queued--;
		p->running++;
		/* the others go first next time */
		TAILQ_REMOVE(&p->shares, s, next);
		TAILQ_INSERT_TAIL(&p->shares, s, next);
		*from = s;
		return j;
	}
	return NULL;
}

static void *worker_main(void *arg)
{
	struct waitpool *p = arg;
	struct share *s;
	struct job *j;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		j = take_job(p, &s);
		if (j) {
			pthread_mutex_unlock(&p->lock);
			j->fn(j->arg, false);
			free(j);
			pthread_mutex_lock(&p->lock);
			s->running--;
			p->running--;
			share_drop_if_empty(p, s);
			/* a job of this uid may run now, on another thread */
			pthread_cond_signal(&p->work);
			continue;
		}
		if (p->stopping)
			break;
		struct timespec until;
		int ret;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += WAITPOOL_IDLE_S;
		p->idle++;
		ret = pthread_cond_timedwait(&p->work, &p->lock, &until);
		p->idle--;
		if (ret == ETIMEDOUT && p->queued == 0)
			break;
	}
	p->threads--;
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* A thread for a new job, unless an idle one takes it. Called locked. */
static int wake_or_start(struct waitpool *p)
{
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	if (p->idle > 0 || p->threads >= p->max_threads) {
		pthread_cond_signal(&p->work);
		return 0;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = -pthread_create(&t, &attr, worker_main, p);
	pthread_attr_destroy(&attr);
	if (ret == 0)
		p->threads++;
	/* with no thread at all the job could never run */
	return ret && p->threads == 0 ? ret : 0;
}

int waitpool_submit(struct waitpool *p, uid_t uid,
		    void (*fn)(void *arg, bool cancelled), void *arg)
{
	struct job *j = malloc(sizeof(*j));
	struct share *s;
	int ret = 0;

	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->arg = arg;
	pthread_mutex_lock(&p->lock);
	if (p->stopping) {
		ret = -ESHUTDOWN;
		goto out;
	}
	s = share_of(p, uid, true);
	if (!s) {
		ret = -ENOMEM;
		goto out;
	}
	if (s->queued >= p->queued_per_uid) {
		p->rejected++;
		ret = -EAGAIN;
		goto out;
	}
	STAILQ_INSERT_TAIL(&s->jobs, j, next);
	s->queued++;
	p->queued++;
	ret = wake_or_start(p);
	if (ret) {
		STAILQ_REMOVE(&s->jobs, j, job, next);
		s->queued--;
		p->queued--;
		share_drop_if_empty(p, s);
		goto out;
	}
	p->submitted++;
	j = NULL;
out:
	pthread_mutex_unlock(&p->lock);
	free(j);
	return ret;
}

void waitpool_counts(struct waitpool *p, struct waitpool_counts *out)
{
	pthread_mutex_lock(&p->lock);
	out->submitted = p->submitted;
	out->rejected = p->rejected;
	out->running = p->running;
	out->queued = p->queued;
	out->threads = p->threads;
	pthread_mutex_unlock(&p->lock);
}

void waitpool_free(struct waitpool *p)
{
	STAILQ_HEAD(, job) left = STAILQ_HEAD_INITIALIZER(left);
	struct share *s, *tmp;
	struct job *j;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	/* what never got a turn ends now, told so, outside the lock */
	TAILQ_FOREACH_SAFE (s, &p->shares, next, tmp) {
		STAILQ_CONCAT(&left, &s->jobs);
		p->queued -= s->queued;
		s->queued = 0;
		share_drop_if_empty(p, s);
	}
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	while ((j = STAILQ_FIRST(&left))) {
		STAILQ_REMOVE_HEAD(&left, next);
		j->fn(j->arg, true);
		free(j);
	}
	pthread_mutex_lock(&p->lock);
	while (p->threads > 0)
		pthread_cond_wait(&p->gone, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->gone);
	free(p);
}
