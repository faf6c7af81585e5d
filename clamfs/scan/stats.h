/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Counters of what the scan gate did and the histogram of scan durations,
 * bumped lock-free on the open path and the scanner threads, and rendered
 * as key=value text for `clamfs --stats` (prom.c turns it into Prometheus
 * text) and the tests.
 */
#ifndef CLAMFS_STATS_H
#define CLAMFS_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clamdproto.h"
#include "scanq.h"
#include "vcache.h"
#include "vstore.h"

enum stat_counter {
	STAT_OPENS_CHECKED, /* opens that went through the gate */
	STAT_EMPTY,	    /* empty files, nothing to scan */
	STAT_CACHE_HITS,
	STAT_SCANS_WAITED, /* opens that waited for a scan */
	STAT_INFECTED,	   /* detections (opens or closes) */
	STAT_DENIED,	   /* opens refused for a detection */
	STAT_EXCLUDED,	   /* opens let through by a path/user rule */
	STAT_OVERSIZE_ALLOWED,
	STAT_OVERSIZE_DENIED,
	STAT_ERRORS_DENIED,  /* opens refused (EIO) for a scan error */
	STAT_ERRORS_ALLOWED, /* opens let through after a scan error */
	STAT_INTERRUPTED,
	STAT_CLOSE_SCANS,
	STAT_AHEAD_SCANS,     /* background scans asked for after a write */
	STAT_AHEAD_CACHED,    /* ... whose verdict the cache kept */
	STAT_AHEAD_DIRS,      /* directories read ahead of a reader */
	STAT_AHEAD_DIR_SCANS, /* background scans of their files */
	STAT_QUARANTINED,
	STAT_DELETED,
	STAT_HOOK_RUNS,
	STAT_HOOK_SUPPRESSED,
	STAT_CACHE_CLEARS,
	STAT_PASSTHROUGH_OPENS,	 /* opens the kernel serves itself */
	STAT_PASSTHROUGH_FAILED, /* passthrough refused: daemon I/O */
	STAT_READS,		 /* READ requests the daemon served */
	STAT_WRITES,		 /* WRITE requests the daemon served */
	STAT_LIMITS,		 /* clamd gave up at a scan limit */
	STAT_REDECIDED,		 /* read-write opens whose file moved between
				  * deciding and opening as asked (gate.h) */
	STAT_GROUPS_READ,     /* callers' groups read from /proc (request.h) */
	STAT_WATCH_EVENTS,    /* backend changes told to the kernel (watch.h) */
	STAT_WATCH_OVERFLOWS, /* ... lost, so everything was invalidated */
	STAT_COUNT
};

/*
 * Upper bounds of the scan duration buckets, in microseconds (0.5 ms to
 * 2 min: a small file over a UNIX socket takes about a millisecond, a big
 * archive up to the scan timeout), plus one bucket for longer scans.
 */
#define STATS_SCAN_BUCKETS 17

/* Whether opens use kernel passthrough, and why not. */
struct stats_passthrough {
	bool on;
	/* when off, one word for monitors ("option", "libfuse", "not-root",
	 * "overlayfs", "kernel"); "none" when on */
	const char *reason;
	const char *text; /* for people: "on", or "off (why)" */
};

struct stats {
	atomic_uint_fast64_t c[STAT_COUNT];
	/* scans by duration: [i] those up to bound i, [last] the longer */
	atomic_uint_fast64_t scan_le[STATS_SCAN_BUCKETS + 1];
	atomic_uint_fast64_t scan_sum_us;
	atomic_uint_fast64_t errors[CDP_ERR_LOCAL + 1]; /* by category */
	const struct stats_passthrough *_Atomic passthrough;
	atomic_bool writeback_cache; /* negotiated at INIT */
	atomic_bool backend_watch;   /* watch.h: the kernel caches for long */
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

/* Whether opens use kernel passthrough; state must be static. */
void stats_set_passthrough(struct stats *s,
			   const struct stats_passthrough *state);

/* Whether the backend is watched, so that the kernel caches for long. */
void stats_set_backend_watch(struct stats *s, bool on);

/* Whether the kernel's write-back cache is on (writeback_cache=yes). */
void stats_set_writeback_cache(struct stats *s, bool on);

/* One scan clamd was asked to do took usec microseconds. */
void stats_observe_scan(struct stats *s, uint64_t usec);

/*
 * The upper bound of scan duration bucket i (< STATS_SCAN_BUCKETS) in
 * microseconds.
 */
uint64_t stats_scan_bound_us(unsigned int i);

/*
 * The duration under which fraction q (0..1) of the scans finished, in
 * microseconds: the bound of the bucket it falls in (the largest bound
 * for longer scans); 0 when none ran.
 */
uint64_t stats_scan_quantile(struct stats *s, double q);

/* Figures other modules keep, sampled for one rendering. */
struct stats_sample {
	struct vcache_counters vc;
	struct vstore_counters sc; /* zeros without a verdict store */
	struct scanq_counters qc;
	size_t inodes;
	size_t inode_fds;	/* of them, those with an fd held */
	uint64_t inode_reopens; /* parked inodes reopened by handle */
	long long uptime_seconds;
	long long start_time_seconds; /* since the epoch, as at the start */
	const char *libfuse_version;  /* the library's at run time, or NULL */
	const char *clamd;	      /* dbwatch_describe()'s lines, or NULL */
	/* each clamd backend of the fleet in force, in configured order */
	const struct cdp_backend_stats *backends;
	size_t nbackends;
};

/*
 * Renders every figure as "name=value\n" lines into buf: the counters,
 * the scan duration histogram as cumulative counts ("scan_duration_le_B"
 * for each bound B in seconds and "scan_duration_le_+Inf"), its sum in
 * microseconds and its count, and what x holds (may be NULL): per
 * backend i, "backend_<i>_<field>" lines, the address with backslash and
 * newline escaped as in C. Returns the length it needed. Every key needs
 * a row in prom.c's table.
 */
size_t stats_render(struct stats *s, const struct stats_sample *x, char *buf,
		    size_t len);

#endif
