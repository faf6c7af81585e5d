// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The retry list (waitlist.h): jobs ordered by when they are due, one
 * thread that makes the attempts, started with the first job.
 */
#include "waitlist.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/queue.h>
#include <time.h>

struct job {
	TAILQ_ENTRY(job) next;
	const struct waitlist_job_ops *ops;
	void *arg;
	uid_t uid;
	int64_t due_ns;	 /* CLOCK_MONOTONIC */
	int64_t wait_ns; /* until the next attempt after this one */
	bool done;	 /* its last attempt got through */
};

TAILQ_HEAD(job_list, job);

/* A uid with jobs waiting; gone when it has none. */
struct uid_count {
	TAILQ_ENTRY(uid_count) next;
	uid_t uid;
	unsigned int n;
};

struct waitlist {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct job_list jobs; /* by due_ns */
	TAILQ_HEAD(, uid_count) uids;
	unsigned int per_uid;
	bool started, stopping;
	pthread_t thread;
	struct waitlist_counts c;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct waitlist *waitlist_new(unsigned int per_uid)
{
	struct waitlist *wl = calloc(1, sizeof(*wl));
	pthread_condattr_t ca;

	if (!wl)
		return NULL;
	pthread_mutex_init(&wl->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wl->wake, &ca);
	pthread_condattr_destroy(&ca);
	TAILQ_INIT(&wl->jobs);
	TAILQ_INIT(&wl->uids);
	wl->per_uid = per_uid ? per_uid : WAITLIST_PER_UID;
	return wl;
}

static struct uid_count *uid_count(struct waitlist *wl, uid_t uid, bool make)
{
	struct uid_count *u;

	TAILQ_FOREACH (u, &wl->uids, next)
		if (u->uid == uid)
			return u;
	if (!make || !(u = calloc(1, sizeof(*u))))
		return NULL;
	u->uid = uid;
	TAILQ_INSERT_TAIL(&wl->uids, u, next);
	return u;
}

/* One job of uid less; called locked. */
static void uid_done(struct waitlist *wl, uid_t uid)
{
	struct uid_count *u = uid_count(wl, uid, false);

	if (u && --u->n == 0) {
		TAILQ_REMOVE(&wl->uids, u, next);
		free(u);
	}
	wl->c.waiting--;
}

/* Into the list by due time; called locked. */
static void insert(struct waitlist *wl, struct job *j)
{
	struct job *at;

	TAILQ_FOREACH_REVERSE (at, &wl->jobs, job_list, next)
		if (at->due_ns <= j->due_ns)
			break;
	if (at)
		TAILQ_INSERT_AFTER(&wl->jobs, at, j, next);
	else
		TAILQ_INSERT_HEAD(&wl->jobs, j, next);
}

static void *attempts_main(void *arg)
{
	struct waitlist *wl = arg;
	struct job_list due;
	struct job *j;

	pthread_mutex_lock(&wl->lock);
	while (!wl->stopping) {
		int64_t now = now_ns();

		j = TAILQ_FIRST(&wl->jobs);
		if (!j) {
			pthread_cond_wait(&wl->wake, &wl->lock);
			continue;
		}
		if (j->due_ns > now) {
			struct timespec until = {j->due_ns / 1000000000,
						 j->due_ns % 1000000000};

			pthread_cond_timedwait(&wl->wake, &wl->lock, &until);
			continue;
		}
		/* the attempts are made unlocked: they answer requests */
		TAILQ_INIT(&due);
		while ((j = TAILQ_FIRST(&wl->jobs)) && j->due_ns <= now) {
			TAILQ_REMOVE(&wl->jobs, j, next);
			TAILQ_INSERT_TAIL(&due, j, next);
		}
		pthread_mutex_unlock(&wl->lock);
		TAILQ_FOREACH (j, &due, next)
			j->done = j->ops->attempt(j->arg);
		pthread_mutex_lock(&wl->lock);
		now = now_ns();
		while ((j = TAILQ_FIRST(&due))) {
			TAILQ_REMOVE(&due, j, next);
			wl->c.attempts++;
			if (j->done) {
				uid_done(wl, j->uid);
				free(j);
				continue;
			}
			j->due_ns = now + j->wait_ns;
			j->wait_ns *= 2;
			if (j->wait_ns > WAITLIST_MAX_MS * 1000000LL)
				j->wait_ns = WAITLIST_MAX_MS * 1000000LL;
			insert(wl, j);
		}
	}
	pthread_mutex_unlock(&wl->lock);
	return NULL;
}

int waitlist_add(struct waitlist *wl, uid_t uid,
		 const struct waitlist_job_ops *ops, void *arg)
{
	struct job *j = calloc(1, sizeof(*j));
	struct uid_count *u;
	int ret = 0;

	if (!j)
		return -ENOMEM;
	j->ops = ops;
	j->arg = arg;
	j->uid = uid;
	j->wait_ns = WAITLIST_FIRST_MS * 1000000LL;
	j->due_ns = now_ns() + j->wait_ns;
	pthread_mutex_lock(&wl->lock);
	if (wl->stopping) {
		ret = -ESHUTDOWN;
		goto out;
	}
	if (!wl->started) {
		ret = -pthread_create(&wl->thread, NULL, attempts_main, wl);
		if (ret)
			goto out;
		wl->started = true;
	}
	u = uid_count(wl, uid, true);
	if (!u) {
		ret = -ENOMEM;
		goto out;
	}
	if (u->n >= wl->per_uid) {
		wl->c.rejected++;
		ret = -EAGAIN;
		goto out;
	}
	u->n++;
	wl->c.waiting++;
	wl->c.added++;
	insert(wl, j);
	j = NULL;
	pthread_cond_signal(&wl->wake);
out:
	pthread_mutex_unlock(&wl->lock);
	free(j);
	return ret;
}

void waitlist_counts(struct waitlist *wl, struct waitlist_counts *out)
{
	pthread_mutex_lock(&wl->lock);
	*out = wl->c;
	pthread_mutex_unlock(&wl->lock);
}

void waitlist_free(struct waitlist *wl)
{
	struct uid_count *u;
	struct job *j;

	if (!wl)
		return;
	pthread_mutex_lock(&wl->lock);
	wl->stopping = true;
	pthread_cond_signal(&wl->wake);
	pthread_mutex_unlock(&wl->lock);
	/* after its round of attempts: every job is in the list again */
	if (wl->started)
		pthread_join(wl->thread, NULL);
	while ((j = TAILQ_FIRST(&wl->jobs))) {
		TAILQ_REMOVE(&wl->jobs, j, next);
		j->ops->end(j->arg, -ESHUTDOWN);
		free(j);
	}
	while ((u = TAILQ_FIRST(&wl->uids))) {
		TAILQ_REMOVE(&wl->uids, u, next);
		free(u);
	}
	pthread_mutex_destroy(&wl->lock);
	pthread_cond_destroy(&wl->wake);
	free(wl);
}
