/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The scan queue: a pool of scanner threads that ask clamd about open
 * files, off the FUSE worker threads. Concurrent requests for the same file
 * content (same inode and stamp) share one scan ("single flight"), and a
 * scan nobody waits for any more is cancelled. No FUSE here: a waiter is a
 * callback the caller embeds in its own request state.
 */
#ifndef CLAMFS_SCANQ_H
#define CLAMFS_SCANQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "clamdproto.h"
#include "vcache.h"

enum scan_mode {
	SCAN_MODE_FDPASS, /* FILDES: clamd reads our fd */
	SCAN_MODE_STREAM, /* INSTREAM: we send the content */
	SCAN_MODE_PATH,   /* SCAN: clamd opens the path itself */
};

struct scan_outcome {
	struct cdp_result res; /* verdict, signature or error */
	uint64_t gen;	       /* vcache generation the scan began in */
	uint64_t usec;	       /* time clamd took, retries included */
	uint64_t tag;	       /* as given to scanq_submit */
};

struct scan_job;

/*
 * A party waiting for a verdict. The caller fills done() and owns the
 * memory; it must stay valid until done() has been called.
 */
struct scan_waiter {
	void (*done)(struct scan_waiter *w, const struct scan_outcome *o);
	/* queue-private from here on */
	struct scan_waiter *next;
	_Atomic(struct scan_job *) job;
	atomic_bool interrupted;
	atomic_bool withdrawn;
};

struct scanq_config {
	struct cdp_pool *pool;
	enum scan_mode mode;
	unsigned int threads; /* scanner threads, >= 1 */
	int timeout_ms;	      /* deadline of one scan, retry included */
};

struct scanq;

/* Starts the scanner threads. 0 or negative errno. */
int scanq_new(const struct scanq_config *cfg, struct scanq **out);

/*
 * Replaces pool, mode and timeout for scans that start from now on
 * (SIGHUP). Scans under way finish with the old ones; the caller keeps the
 * old pool alive until scanq_free.
 */
void scanq_reconfigure(struct scanq *q, struct cdp_pool *pool,
		       enum scan_mode mode, int timeout_ms);

enum scan_mode scanq_mode(struct scanq *q);

/* Stops the threads; queued scans end as cancelled. */
void scanq_free(struct scanq *q);

/* What to scan. */
struct scan_request {
	const struct vcache_file *file; /* identity and content stamp */
	uint64_t tag;	 /* must also match for two requests to share a scan
			  * (the count of writes made through the mount) */
	int fd;		 /* the open file; the queue scans a read-only
			  * reopening of it, so the caller may close fd */
	const char *path; /* absolute backend path, for SCAN_MODE_PATH */
	uint64_t gen;	 /* vcache generation read before the scan */
	/*
	 * Run on the scanner thread right before the scan (e.g. to have the
	 * kernel write back a writer's dirty pages); a request with one
	 * neither joins nor is joined by another.
	 */
	void (*prepare)(void *arg);
	void *prepare_arg;
};

/*
 * Asks for a verdict. Joins the scan in flight for the same file, stamp
 * and tag if there is one. Returns 0 (w->done will be called exactly once,
 * from a scanner thread), -EINTR when w was interrupted before it could
 * join, or negative errno.
 */
int scanq_submit(struct scanq *q, const struct scan_request *r,
		 struct scan_waiter *w);

/*
 * The waiter's caller gave up (the FUSE request was interrupted). Never
 * blocks and takes no lock, so it may run inside an interrupt callback.
 * done() is still called; when no waiter of a scan is left, the scan is
 * cancelled and finishes promptly.
 */
void scanq_interrupt(struct scan_waiter *w);

/* Whether the waiter was interrupted (for done() to choose EINTR). */
bool scanq_waiter_interrupted(const struct scan_waiter *w);

#define SCANQ_LATENCY_BUCKETS 40

struct scanq_counters {
	uint64_t scans;	  /* scans sent to clamd */
	uint64_t joined;  /* submits that joined a scan in flight */
	uint64_t retries; /* immediate retries after a broken connection */
	uint64_t cancelled;
	unsigned int queued; /* waiting for a scanner thread now */
	/* scans by duration: [i] counts those under 2^i microseconds */
	uint64_t latency_log2_us[SCANQ_LATENCY_BUCKETS];
};

/* The duration under which fraction q (0..1) of the scans finished, in
 * microseconds (an upper bound: a power of two); 0 when none ran. */
uint64_t scanq_latency_quantile(const struct scanq_counters *c, double q);

void scanq_counters(struct scanq *q, struct scanq_counters *out);

const char *scan_mode_name(enum scan_mode mode);

#endif
