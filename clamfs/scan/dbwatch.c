// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The VERSION polling thread, over every backend of the fleet in force.
 */
#include "dbwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* What one backend, by address, answered last. */
struct seen {
	char *addr;
	bool known;
	struct cdp_version ver;
};

struct dbwatch {
	struct dbwatch_source src;
	struct stats *stats;
	unsigned int interval;
	bool threaded;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	bool known; /* newest is set */
	bool up;
	bool checked; /* up is known: a change of it is logged once */
	struct cdp_version newest; /* of what any backend answered */
	int64_t known_since_ns;	   /* CLOCK_REALTIME, when known was set */
	bool agree;		   /* every backend that answered has newest */
	/*
	 * Per backend of the fleet last asked, by index; only the checking
	 * thread touches them. Keyed by address, not by the fleet: a reload
	 * may have freed that, and its successor has the same clamds.
	 */
	size_t n;
	struct seen *seen;
	struct cdp_cancel *cancel; /* the VERSION under way, at stop */
};

static bool version_differs(const struct cdp_version *a,
			    const struct cdp_version *b)
{
	return a->db_version != b->db_version ||
	       strcmp(a->db_date, b->db_date) != 0 ||
	       strcmp(a->engine, b->engine) != 0;
}

/* Whether database a is newer than b (by version, then by date). */
static bool version_newer(const struct cdp_version *a,
			  const struct cdp_version *b)
{
	if (a->db_version != b->db_version)
		return a->db_version > b->db_version;
	return a->db_time > b->db_time;
}

/*
 * One line per change, not per failed scan: an administrator reading the
 * log sees when clamd went away and when it came back, and at start a
 * mount without a clamd says so at once rather than at the first open.
 */
static void report_change(struct dbwatch *w, bool up,
			  const struct cdp_version *ver,
			  const struct cdp_result *res)
{
	struct outage *o = w->src.outage;

	if (w->checked && up == w->up)
		return;
	if (!up && (!o || outage_begin(o)))
		log_event(LOG_LEVEL_ERR, LOG_ID_CLAMD_DOWN, NULL, 0, NULL,
			  "clamd %s: %s: every open that needs a scan is "
			  "refused (or served unscanned where on_error=allow) "
			  "until it answers",
			  w->checked ? "stopped answering" : "is not answering",
			  res->text[0] ? res->text : cdp_errcat_name(res->cat));
	else if (up && (o ? outage_end(o) : w->checked))
		log_event(LOG_LEVEL_NOTICE, LOG_ID_CLAMD_UP, NULL, 0, NULL,
			  "clamd answers again (ClamAV %s, database version "
			  "%lu): scanning resumes",
			  ver->engine, ver->db_version);
}

static void forget_all(struct seen *seen, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(seen[i].addr);
	free(seen);
}

static bool same_backends(const struct dbwatch *w,
			  const struct cdp_fleet *fleet, size_t n)
{
	if (n != w->n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(w->seen[i].addr, cdp_fleet_addr(fleet, i)) != 0)
			return false;
	return true;
}

/*
 * Another list of backends (a reload): what a clamd that stays on the list
 * answered last carries over, by address. Forgetting it would let a
 * rollout slip by: a clamd still on the old database keeps caching
 * verdicts, the reload forgets it, it updates, and its new database, no
 * newer than the newest seen, would drop nothing. 0 or -ENOMEM.
 */
static int remember_fleet(struct dbwatch *w, const struct cdp_fleet *fleet,
			  size_t n)
{
	struct seen *seen;

	if (same_backends(w, fleet, n))
		return 0;
	seen = calloc(n, sizeof(*seen));
	if (!seen)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		seen[i].addr = strdup(cdp_fleet_addr(fleet, i));
		if (!seen[i].addr) {
			forget_all(seen, n);
			return -ENOMEM;
		}
		for (size_t j = 0; j < w->n; j++)
			if (strcmp(w->seen[j].addr, seen[i].addr) == 0) {
				seen[i].known = w->seen[j].known;
				seen[i].ver = w->seen[j].ver;
			}
	}
	forget_all(w->seen, w->n);
	w->seen = seen;
	w->n = n;
	return 0;
}

static bool stopping(struct dbwatch *w)
{
	bool stop;

	pthread_mutex_lock(&w->lock);
	stop = w->stop;
	pthread_mutex_unlock(&w->lock);
	return stop;
}

/*
 * Whether backend i's answer makes the cached verdicts stale: its own
 * database changed (each backend's, not only the newest: during a
 * rollout a backend still on the old database caches verdicts after the
 * first one updated, and those must go when it updates too), or it is
 * seen for the first time with a database newer than any seen before.
 */
static bool stale_after(struct dbwatch *w, size_t i,
			const struct cdp_version *ver, const char *addr,
			char *why, size_t len)
{
	const struct seen *s = &w->seen[i];

	if (s->known && version_differs(&s->ver, ver)) {
		snprintf(why, len, "clamd %s: %s/%lu -> %s/%lu", addr,
			 s->ver.engine, s->ver.db_version, ver->engine,
			 ver->db_version);
		return true;
	}
	if (!s->known && w->known && version_newer(ver, &w->newest)) {
		snprintf(why, len, "clamd %s: %s/%lu, newer than %s/%lu", addr,
			 ver->engine, ver->db_version, w->newest.engine,
			 w->newest.db_version);
		return true;
	}
	return false;
}

/* Ejected backends are left to the prober, unless none is healthy. */
static bool ask_backend(struct cdp_fleet *fleet, size_t i, bool ask_all)
{
	struct cdp_backend_stats st;

	return ask_all ||
	       (cdp_fleet_backend_stats(fleet, i, &st) == 0 && st.healthy);
}

static bool any_healthy(struct cdp_fleet *fleet, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ask_backend(fleet, i, false))
			return true;
	return false;
}

void dbwatch_check(struct dbwatch *w)
{
	struct cdp_result res = {0};
	struct cdp_version answered = {0}, newest = {0};
	struct cdp_fleet *fleet;
	bool up = false, drop = false, known = false, agree = true, ask_all;
	char why[512] = "";
	void *pin;
	size_t n;

	fleet = w->src.pin_fleet(w->src.arg, &pin);
	n = cdp_fleet_size(fleet);
	if (remember_fleet(w, fleet, n) != 0) {
		w->src.unpin(w->src.arg, pin);
		log_warn("database watch: no memory, check skipped");
		return;
	}
	ask_all = !any_healthy(fleet, n);
	for (size_t i = 0; i < n; i++) {
		struct cdp_result r = {0};
		struct cdp_version ver;

		/* one VERSION per backend: a stop must not wait for them all */
		if (stopping(w)) {
			w->src.unpin(w->src.arg, pin);
			return;
		}
		if (!ask_backend(fleet, i, ask_all))
			continue;
		if (cdp_version_cancel(cdp_fleet_pool(fleet, i), w->cancel,
				       &ver, &r) != 0) {
			res = r; /* the last failure, for the log */
			continue;
		}
		/* a clamd restarted with another MaxThreads is seen here,
		 * not only at a readmission (the fleet logs a change) */
		cdp_fleet_learn_threads(fleet, i, w->cancel);
		if (!up || version_newer(&ver, &answered))
			answered = ver;
		up = true;
		if (!drop)
			drop = stale_after(w, i, &ver, cdp_fleet_addr(fleet, i),
					   why, sizeof(why));
		w->seen[i].known = true;
		w->seen[i].ver = ver;
	}
	w->src.unpin(w->src.arg, pin);
	/* the VERSION a stop cut short says nothing of clamd */
	if (stopping(w))
		return;
	report_change(w, up, &answered, &res);
	/* a backend not asked this time keeps what it answered last */
	for (size_t i = 0; i < n; i++)
		if (w->seen[i].known &&
		    (!known || version_newer(&w->seen[i].ver, &newest))) {
			newest = w->seen[i].ver;
			known = true;
		}
	for (size_t i = 0; i < n; i++)
		if (w->seen[i].known &&
		    version_differs(&w->seen[i].ver, &newest))
			agree = false;
	pthread_mutex_lock(&w->lock);
	w->up = up;
	w->checked = true;
	if (known) {
		if (!w->known) {
			struct timespec now;

			clock_gettime(CLOCK_REALTIME, &now);
			w->known_since_ns =
				(int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		}
		w->newest = newest;
		w->known = true;
	}
	w->agree = agree;
	pthread_mutex_unlock(&w->lock);
	if (drop) {
		w->src.drop_verdicts(w->src.arg);
		stats_inc(w->stats, STAT_CACHE_CLEARS);
		log_info("clamd database changed (%s): verdict cache dropped",
			 why);
	}
}

void dbwatch_describe(struct dbwatch *w, char *buf, size_t len)
{
	if (!w) {
		snprintf(buf, len, "clamd_up=unknown\n");
		return;
	}
	pthread_mutex_lock(&w->lock);
	snprintf(buf, len,
		 "clamd_up=%d\nclamd_engine=%s\nclamd_db_version=%lu\n"
		 "clamd_db_date=%s\n",
		 w->up ? 1 : 0, w->known ? w->newest.engine : "unknown",
		 w->known ? w->newest.db_version : 0UL,
		 w->known && w->newest.db_date[0] ? w->newest.db_date : "none");
	pthread_mutex_unlock(&w->lock);
}

int dbwatch_db_identity(struct dbwatch *w, char *buf, size_t len,
			int64_t *since_ns)
{
	int ret = -EAGAIN;

	if (!w)
		return -ENOENT;
	pthread_mutex_lock(&w->lock);
	if (w->known && w->agree) {
		snprintf(buf, len, "%s/%lu/%s", w->newest.engine,
			 w->newest.db_version, w->newest.db_date);
		*since_ns = w->known_since_ns;
		ret = 0;
	}
	pthread_mutex_unlock(&w->lock);
	return ret;
}

int dbwatch_up(struct dbwatch *w)
{
	int up;

	if (!w)
		return -1;
	pthread_mutex_lock(&w->lock);
	up = w->checked ? w->up : -1;
	pthread_mutex_unlock(&w->lock);
	return up;
}

static void *watch_main(void *arg)
{
	struct dbwatch *w = arg;
	struct timespec until;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		pthread_mutex_unlock(&w->lock);
		dbwatch_check(w);
		pthread_mutex_lock(&w->lock);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += w->interval;
		while (!w->stop && pthread_cond_timedwait(&w->wake, &w->lock,
							  &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int dbwatch_new(const struct dbwatch_source *src, struct stats *stats,
		struct dbwatch **out)
{
	pthread_condattr_t ca;
	struct dbwatch *w;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->src = *src;
	w->stats = stats;
	w->cancel = cdp_cancel_new();
	if (!w->cancel) {
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	*out = w;
	return 0;
}

int dbwatch_start(const struct dbwatch_source *src, struct stats *stats,
		  unsigned int interval_sec, struct dbwatch **out)
{
	struct dbwatch *w;
	int ret;

	*out = NULL;
	if (interval_sec == 0)
		return 0;
	ret = dbwatch_new(src, stats, &w);
	if (ret)
		return ret;
	w->interval = interval_sec;
	ret = -pthread_create(&w->thread, NULL, watch_main, w);
	if (ret) {
		dbwatch_stop(w);
		return ret;
	}
	w->threaded = true;
	*out = w;
	return 0;
}

void dbwatch_stop(struct dbwatch *w)
{
	if (!w)
		return;
	if (w->threaded) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		cdp_cancel_trigger(w->cancel);
		pthread_join(w->thread, NULL);
	}
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	forget_all(w->seen, w->n);
	cdp_cancel_free(w->cancel);
	free(w);
}
