/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Signature update watch: asks each clamd backend for its VERSION
 * periodically and drops every cached verdict when a backend's database
 * version or date changes, or a backend first seen is newer than every
 * other. clamd loaded with custom signatures only reports no database
 * version; then only the cache TTL bounds how long an old verdict lives.
 */
#ifndef CLAMFS_DBWATCH_H
#define CLAMFS_DBWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "clamdproto.h"
#include "outage.h"
#include "stats.h"

struct dbwatch;

/*
 * Where the watch finds clamd and what it drops, supplied by its owner
 * (SIGHUP replaces both): each check pins the fleet in force for its
 * VERSION queries, which may take long, and unpins it after.
 */
struct dbwatch_source {
	void *arg;
	/* The backends to ask; *pin is handed back to unpin. */
	struct cdp_fleet *(*pin_fleet)(void *arg, void **pin);
	void (*unpin)(void *arg, void *pin);
	/* The database changed: drop every verdict in the cache in force. */
	void (*drop_verdicts)(void *arg);
	/*
	 * Optional: the outage the scan gate shares; a change of clamd's
	 * state is then logged only where it begins or ends one.
	 */
	struct outage *outage;
};

/*
 * interval_sec 0: no thread, returns 0 with *out NULL. src is copied.
 */
int dbwatch_start(const struct dbwatch_source *src, struct stats *stats,
		  unsigned int interval_sec, struct dbwatch **out);
/* A watch without a thread, checked by dbwatch_check() alone (tests). */
int dbwatch_new(const struct dbwatch_source *src, struct stats *stats,
		struct dbwatch **out);
/*
 * One check, in the calling thread: VERSION of every healthy backend
 * (of every backend when none is healthy), each bounded by its pool's
 * io_timeout_ms, one after the other, and of each that answered its
 * MaxThreads (cdp_fleet_learn_threads).
 */
void dbwatch_check(struct dbwatch *w);
void dbwatch_stop(struct dbwatch *w);

/*
 * What the last check saw, as "key=value\n" lines: clamd_up (0/1: any
 * backend answered), and of the newest database any backend reported:
 * clamd_engine, clamd_db_version, clamd_db_date. w may be NULL.
 */
void dbwatch_describe(struct dbwatch *w, char *buf, size_t len);

/*
 * The newest database any backend reported, as "engine/version/date",
 * into buf: what a verdict kept across restarts is trusted under, and in
 * *since_ns (CLOCK_REALTIME) when it was first known: a scan that began
 * earlier may have used a database the watch never saw (its first check
 * drops nothing). -EAGAIN until a backend has answered, and while the
 * backends that answered disagree (a verdict of one lagging behind would
 * carry the newer label); w NULL: -ENOENT.
 */
int dbwatch_db_identity(struct dbwatch *w, char *buf, size_t len,
			int64_t *since_ns);

/* 1 when a backend answered the last check, 0 when not, -1 not known yet. */
int dbwatch_up(struct dbwatch *w);

#endif
