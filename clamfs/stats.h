/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Counters of what the scan gate did, bumped lock-free on the open path
 * and rendered as key=value text for `clamfs --stats` and the tests.
 */
#ifndef CLAMFS_STATS_H
#define CLAMFS_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clamdproto.h"

enum stat_counter {
	STAT_OPENS_CHECKED, /* opens that went through the gate */
	STAT_EMPTY,	    /* empty files, nothing to scan */
	STAT_CACHE_HITS,
	STAT_SCANS_WAITED,  /* opens that waited for a scan */
	STAT_INFECTED,	    /* detections (opens or closes) */
	STAT_DENIED,	    /* opens refused for a detection */
	STAT_EXCLUDED,	    /* opens let through by a path/user rule */
	STAT_OVERSIZE_ALLOWED,
	STAT_OVERSIZE_DENIED,
	STAT_ERRORS_DENIED, /* opens refused (EIO) for a scan error */
	STAT_ERRORS_ALLOWED, /* opens let through after a scan error */
	STAT_INTERRUPTED,
	STAT_CLOSE_SCANS,
	STAT_QUARANTINED,
	STAT_DELETED,
	STAT_HOOK_RUNS,
	STAT_HOOK_SUPPRESSED,
	STAT_CACHE_CLEARS,
	STAT_PASSTHROUGH_OPENS,	 /* opens the kernel serves itself */
	STAT_PASSTHROUGH_FAILED, /* passthrough refused: daemon I/O */
	STAT_READS,		 /* READ requests the daemon served */
	STAT_WRITES,		 /* WRITE requests the daemon served */
	STAT_COUNT
};

struct stats {
	atomic_uint_fast64_t c[STAT_COUNT];
	atomic_uint_fast64_t errors[CDP_ERR_LOCAL + 1]; /* by category */
	const char *_Atomic passthrough; /* "on", or "off (why)" */
};

static inline void stats_inc(struct stats *s, enum stat_counter c)
{
	atomic_fetch_add_explicit(&s->c[c], 1, memory_order_relaxed);
}

static inline uint64_t stats_get(struct stats *s, enum stat_counter c)
{
	return atomic_load_explicit(&s->c[c], memory_order_relaxed);
}

void stats_error(struct stats *s, enum cdp_errcat cat);

const char *stats_name(enum stat_counter c);

/* Whether opens use kernel passthrough; state must be a static string. */
void stats_set_passthrough(struct stats *s, const char *state);

/*
 * Renders every counter as "name=value\n" lines into buf, including the
 * extra lines in extra (may be NULL). Returns the length it needed.
 */
size_t stats_render(struct stats *s, const char *extra, char *buf,
		    size_t len);

#endif
