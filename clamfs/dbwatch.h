/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Signature update watch: asks clamd for its VERSION periodically and drops
 * every cached verdict when the database version or date changes. clamd
 * loaded with custom signatures only reports no database version; then
 * only the cache TTL bounds how long an old verdict lives.
 */
#ifndef CLAMFS_DBWATCH_H
#define CLAMFS_DBWATCH_H

#include <stddef.h>

#include "clamdproto.h"
#include "stats.h"
#include "vcache.h"

struct dbwatch;

/* interval_sec 0: no thread, returns 0 with *out NULL. */
int dbwatch_start(struct cdp_pool *pool, struct vcache *vc,
		  struct stats *stats, unsigned int interval_sec,
		  struct dbwatch **out);
void dbwatch_stop(struct dbwatch *w);

/*
 * Points the watch at another pool and cache (SIGHUP): the same thread
 * goes on, keeping the version it knows. w may be NULL.
 */
void dbwatch_retarget(struct dbwatch *w, struct cdp_pool *pool,
		      struct vcache *vc);

/*
 * What the last check saw, as "key=value\n" lines: clamd_up (0/1),
 * clamd_engine, clamd_db_version, clamd_db_date. w may be NULL.
 */
void dbwatch_describe(struct dbwatch *w, char *buf, size_t len);

#endif
