// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The VERSION polling thread.
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

struct dbwatch {
	struct dbwatch_source src;
	struct stats *stats;
	unsigned int interval;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	bool known;
	bool up;
	bool checked; /* up is known: a change of it is logged once */
	struct cdp_version last;
};

static bool version_differs(const struct cdp_version *a,
			    const struct cdp_version *b)
{
	return a->db_version != b->db_version ||
	       strcmp(a->db_date, b->db_date) != 0 ||
	       strcmp(a->engine, b->engine) != 0;
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
	if (w->checked && up == w->up)
		return;
	if (!up)
		log_err("clamd %s: %s: every open that needs a scan is refused "
			"(or served unscanned where on_error=allow) until it "
			"answers",
			w->checked ? "stopped answering" : "is not answering",
			res->text[0] ? res->text : cdp_errcat_name(res->cat));
	else if (w->checked)
		log_warn("clamd answers again (ClamAV %s, database version "
			 "%lu): scanning resumes",
			 ver->engine, ver->db_version);
}

static void check_once(struct dbwatch *w)
{
	struct cdp_result res = {0};
	struct cdp_version ver;
	struct cdp_pool *pool;
	void *pin;
	bool up;

	pool = w->src.pin_pool(w->src.arg, &pin);
	up = cdp_version(pool, &ver, &res) == 0;
	w->src.unpin(w->src.arg, pin);
	report_change(w, up, &ver, &res);
	pthread_mutex_lock(&w->lock);
	w->up = up;
	w->checked = true;
	pthread_mutex_unlock(&w->lock);
	if (!up)
		return; /* the scans report it, with their reason */
	if (w->known && version_differs(&w->last, &ver)) {
		w->src.drop_verdicts(w->src.arg);
		stats_inc(w->stats, STAT_CACHE_CLEARS);
		log_info("clamd database changed (%s/%lu -> %s/%lu): verdict "
			 "cache dropped",
			 w->last.engine, w->last.db_version, ver.engine,
			 ver.db_version);
	}
	pthread_mutex_lock(&w->lock);
	w->last = ver;
	w->known = true;
	pthread_mutex_unlock(&w->lock);
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
		 w->up ? 1 : 0, w->known ? w->last.engine : "unknown",
		 w->known ? w->last.db_version : 0UL,
		 w->known && w->last.db_date[0] ? w->last.db_date : "none");
	pthread_mutex_unlock(&w->lock);
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
		check_once(w);
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

int dbwatch_start(const struct dbwatch_source *src, struct stats *stats,
		  unsigned int interval_sec, struct dbwatch **out)
{
	pthread_condattr_t ca;
	struct dbwatch *w;
	int ret;

	*out = NULL;
	if (interval_sec == 0)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->src = *src;
	w->stats = stats;
	w->interval = interval_sec;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&w->thread, NULL, watch_main, w);
	if (ret) {
		free(w);
		return ret;
	}
	*out = w;
	return 0;
}

void dbwatch_stop(struct dbwatch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
