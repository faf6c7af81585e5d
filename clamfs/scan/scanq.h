/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The scan queue: a pool of scanner threads that ask clamd about open
 * files, off the FUSE worker threads. Concurrent requests for the same file
 * content (same inode and stamp) share one scan ("single flight"), and a
 * scan nobody waits for any more is cancelled. No FUSE here: a waiter is a
 * callback the caller embeds in its own request state, and the scanner
 * itself is a callback too (clamd in the daemon, a fake in the tests).
 *
 * What a file server's users can rely on:
 * - Fairness: every user (the uid that opened the file) has a queue of
 *   their own, and the scanner threads serve the users round-robin, one
 *   job at a time. One user opening a thousand files delays another user
 *   by at most one scan per thread, not by a thousand.
 *   Work done for nobody in particular (scans at a writer's close, scans
 *   ahead) waits in shared queues of its own (scan_request.shared_queue),
 *   served in the same round as the users'.
 * - A small-file lane: files up to small_bytes (1 MiB) are "small". With
 *   two or more threads, one thread serves only small files (round-robin
 *   too), so at most threads - 1 big scans run at once and a small file
 *   never waits behind big ones. (With one thread there is nothing to
 *   reserve.)
 *   Keep scan_threads at or below clamd's MaxThreads, or clamd's own
 *   queue puts the small scan behind the big ones again.
 * - Single flight never costs a joiner: a waiter that joins another
 *   user's scan keeps its own place in its own queue (the scan gets a
 *   ticket in the queue of each uid waiting for it and starts at
 *   whichever comes first; the others leave their queues then) and its
 *   own deadline. A user with a long queue cannot delay, nor fail,
 *   another user's open of a file they share.
 * - Background scans (scan_request.background: nobody waits for them
 *   yet) come last: one runs only when no other scan is queued or
 *   running (clamd's CPU belongs to those somebody waits for), one at a
 *   time, never on the small-file thread, and only with two general
 *   threads or more (one is then always free for a user's big file): a
 *   user's open never waits behind a background scan. A user who opens
 *   the file joins it and gives it a ticket of their own. With fewer
 *   threads background scans are only made when someone joins them:
 *   callers should not ask (scanq_background_possible). One asked for
 *   a reader who waits on the scan of a file beside it (beside_one) may
 *   also start while a single waited-for scan runs and none is queued,
 *   given three general threads or more; two such at once with four or
 *   more.
 * - A bound: a user may have at most max_queued_per_uid scans waiting
 *   for a thread (a ticket of a scan joined counts too), and at most
 *   max_waiters_per_uid waiters in all, queued, joined or running: by
 *   default what max_queued_per_uid scans of distinct files and one per
 *   thread would give. Beyond either scanq_submit fails with -EAGAIN at
 *   once (counted in rejected, resp. rejected_waiters; a join is
 *   refused only for its waiters). Waiting instead would not be free:
 *   every waiting open holds a file descriptor and a FUSE request in the
 *   daemon, and one user could exhaust the daemon's descriptors for
 *   everybody, be it with many files or with one opened many times. The
 *   bound is generous (many hundreds of distinct unscanned files open at
 *   the same instant by one uid).
 * - Deadlines count from submission, per waiter: each waiter is
 *   answered by timeout_ms after its own submit, queueing included. A
 *   waiter whose deadline passes while its scan is queued gets
 *   CDP_ERR_TIMEOUT right then (a reaper thread watches the deadlines),
 *   with expired_queued set; the scan itself ends so only when no
 *   waiter's deadline is left. A scan is given the time to the latest
 *   deadline of its waiters; those whose deadline comes before that are
 *   answered at it (CDP_ERR_TIMEOUT) while the scan goes on for the
 *   others. A scan whose every waiter was interrupted ends as
 *   cancelled, also without waiting for a thread.
 * - An interrupted waiter is answered at once (cancelled), also while
 *   the scan it joined goes on for other waiters.
 * - No file is opened and nothing blocks under the queue's lock.
 *
 * Retries: this queue is the only layer that retries (clamdproto's pool
 * makes one attempt per call). A scan that fails with CDP_ERR_CONNECT or
 * CDP_ERR_PROTOCOL (clamd restarted, a pooled session it had closed, a
 * garbled reply) is run again at once, so a scan makes at most
 * SCANQ_SCAN_ATTEMPTS attempts for these; never after its cancel, nor
 * when less than a few milliseconds of its deadline are left. Each
 * attempt gets what is left of the latest deadline of the scan's waiters.
 * One more case: an attempt that timed out while a waiter that joined
 * during it has at least SCANQ_EXTEND_MIN_MS of its own deadline left is
 * followed by another (its own time: it must not fail before its
 * deadline; without the join it would have had a scan of its own). Such
 * a waiter may thus be told of a timeout up to SCANQ_EXTEND_MIN_MS early.
 * Every further attempt counts in scanq_counters.retries and is a retry to
 * the scanner (scanq_scan.attempt 1). The retry lives here, not
 * in the pool, because here is where the deadline is known (it counts from
 * submission, queueing included, and the retry must fit in what is left)
 * and where a retry can be sent elsewhere: a pool speaks to one clamd,
 * while the queue calls the scanner for each attempt (scanq_scan.attempt
 * says which), so with several clamd backends the retry can go to another
 * one within the same scan_timeout.
 */
#ifndef CLAMFS_SCANQ_H
#define CLAMFS_SCANQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "clamdproto.h"
#include "vcache.h"

enum scan_mode {
	SCAN_MODE_FDPASS, /* FILDES: clamd reads our fd */
	SCAN_MODE_STREAM, /* INSTREAM: we send the content */
	/* ClamFS's "fname": sent as fdpass or stream, never a path */
	SCAN_MODE_PATH,
};

struct scan_outcome {
	struct cdp_result res; /* verdict, signature or error */
	uint64_t gen;	       /* vcache generation the scan began in */
	uint64_t tag;	       /* as given to scanq_submit */
	/* time clamd took, retries included (0: it was not asked) */
	uint64_t usec;
	/*
	 * CLOCK_REALTIME when clamd was first asked, after prepare and
	 * confirm (0: it never was): what the scan read may be older than
	 * any stamp taken after this instant.
	 */
	int64_t started_ns;
	/*
	 * CLOCK_REALTIME just before the request's confirm() found the file
	 * still as stamped and nobody writing it (0: no confirm, or it said
	 * no): the stamp holds at this later instant too.
	 */
	int64_t confirmed_ns;
	/*
	 * The deadline passed before clamd was asked: nobody looked at the
	 * file. Not a clamd failure, so on_error=allow does not apply (else
	 * a user could flood their own queue to have files served unscanned).
	 */
	bool expired_queued;
	/*
	 * A background scan dropped before clamd was asked (its confirm()
	 * said no): the file changed. Counted as background_dropped, not as
	 * cancelled.
	 */
	bool dropped;
	/* The verdict came from known(): clamd was not asked (spared). */
	bool known;
};

struct scan_job;
struct scan_ticket;

/*
 * A party waiting for a verdict. The caller fills done() and owns the
 * memory; it must stay valid until done() has been called.
 */
struct scan_waiter {
	void (*done)(struct scan_waiter *w, const struct scan_outcome *o);
	/*
	 * Set by the caller: of the waiters of one scan, those answered first
	 * get done() before all others. For a request that holds a lock
	 * until answered which another waiter's done() may need (a FUSE
	 * CREATE holds its directory's lock; a quarantine's notification to
	 * the kernel takes it).
	 */
	bool answer_first;
	/* queue-private from here on */
	struct scan_waiter *next;
	struct scan_ticket *ticket; /* its uid's place in the scan's queues */
	uint64_t deadline_us;	    /* CLOCK_MONOTONIC: its own */
	_Atomic(struct scan_job *) job;
	atomic_bool interrupted;
	atomic_bool withdrawing; /* withdraw() ran (once) */
	atomic_bool withdrawn;	 /* the reaper may now detach and answer it */
};

/*
 * What the scanner notes about one attempt for the next: which backend of
 * a fleet it went to (so the retry goes elsewhere), and whether it was
 * given less than what was left of the deadline (so that its timeout is
 * worth a retry on another backend).
 */
struct scanq_attempt {
	int backend; /* -1: none yet */
	bool bounded;
};

/* One scan as the scanner callback sees it. */
struct scanq_scan {
	void *ctx;		    /* scanq_config.ctx */
	struct cdp_fleet *fleet;    /* as held when the scan started */
	struct scanq_attempt *note; /* the scanner's, across attempts */
	enum scan_mode mode;
	int fd;				/* a read-only reopening of the file */
	const struct vcache_file *file; /* identity and stamp at submit */
	int timeout_ms;			/* what is left of the deadline, > 0 */
	struct cdp_cancel *cancel; /* triggered when nobody waits any more */
	unsigned int attempt;	   /* 0, then 1 for the retry */
	bool small;		   /* of the small-file lane */
};

/*
 * Scans one file and fills res (a verdict or an error). Runs on a scanner
 * thread, never under the queue's lock; must return by the deadline or
 * soon after the cancel is triggered.
 */
typedef void scanq_scan_fn(const struct scanq_scan *s, struct cdp_result *res);

/*
 * Fills res with an error result of category cat (err a positive errno
 * or 0, text what the log says): for scanners, as the queue makes its own.
 */
void scanq_result_fail(struct cdp_result *res, enum cdp_errcat cat, int err,
		       const char *text);

/* A first attempt and one retry; see "Retries" above. */
#define SCANQ_SCAN_ATTEMPTS 2

/* A joiner's own attempt after a timeout needs at least this left. */
#define SCANQ_EXTEND_MIN_MS 100

#define SCANQ_SMALL_BYTES	 (1024 * 1024)
#define SCANQ_MAX_QUEUED_PER_UID 1024
/*
 * Background scans queued at once; each holds a descriptor (and its
 * caller's). More would not scan more: they run one at a time.
 */
#define SCANQ_MAX_QUEUED_BACKGROUND 64
/* The longest a background scan is held back for not_before_ns. */
#define SCANQ_NOT_BEFORE_MAX_MS 100

/*
 * What the queue calls back, each with scanq_config.ctx as its first
 * argument. scan and hold are required.
 */
struct scanq_hooks {
	/* the scan itself (scanq_scan.ctx is the queue's ctx) */
	scanq_scan_fn *scan;
	/*
	 * What a scan runs on: the fleet and mode into *fleet and *mode,
	 * taken after prepare and confirm, right before known and clamd,
	 * and held until the scan ends, also when every waiter gave up and
	 * was answered meanwhile (the daemon pins the configuration in
	 * force and scans with its clamds). Runs on the scanner thread
	 * under the queue's lock; its token goes to release() (a scan that
	 * ended before, e.g. dropped by confirm, takes none).
	 */
	void *(*hold)(void *ctx, struct cdp_fleet **fleet,
		      enum scan_mode *mode);
	void (*release)(void *ctx, void *token);
	/*
	 * Told how long each scan clamd was asked to do took (as
	 * scan_outcome.usec), once it ended, on the scanner thread and
	 * outside the queue's lock; also for a scan cancelled midway. So the
	 * number of calls equals scanq_counters.scans once the queue is idle.
	 */
	void (*observe)(void *ctx, uint64_t usec);
	/*
	 * For a request with prepare set, on the scanner thread right before
	 * the scan, with its prepare_key (e.g. to have the kernel write back
	 * a writer's dirty pages); a negative errno from it fails the scan
	 * (CDP_ERR_LOCAL) instead.
	 */
	int (*prepare)(void *ctx, uint64_t key);
	/*
	 * For a request with confirm set (handed over as how), on the
	 * scanner thread after prepare, right before clamd is asked: whether
	 * the file open at fd is still as stamped in f and nobody writes it
	 * (scan_outcome.confirmed_ns). A background scan it says no to ends
	 * as cancelled: the file changed since, and whoever changed it asks
	 * again.
	 */
	bool (*confirm)(void *ctx, unsigned int how, int fd,
			const struct vcache_file *f);
	/*
	 * For every scan, on the scanner thread after confirm, right before
	 * clamd is asked, with what hold() gave for the scan (held): whether
	 * the verdict for the file open at fd, stamped f, with tag, is known
	 * by now (filled in res), as surely as an open made at this instant
	 * would take it from the cache.
	 * Mostly a scan of the same file that ended just after the
	 * submitter looked at the cache, too early for it to join. Then
	 * clamd is not asked and every waiter gets that verdict, with
	 * scan_outcome.known set.
	 */
	bool (*known)(void *ctx, void *held, int fd,
		      const struct vcache_file *f, uint64_t tag,
		      struct cdp_result *res);
};

struct scanq_config {
	unsigned int threads; /* scanner threads, >= 1 */
	uint64_t small_bytes; /* the small-file lane; 0: SCANQ_SMALL_BYTES */
	unsigned int max_queued_per_uid; /* 0: SCANQ_MAX_QUEUED_PER_UID */
	/* 0: max_queued_per_uid + threads */
	unsigned int max_waiters_per_uid;
	struct scanq_hooks hooks;
	void *ctx; /* every hook's; must outlive the queue */
};

struct scanq;

/* Starts the scanner threads. 0 or negative errno. */
int scanq_new(const struct scanq_config *cfg, struct scanq **out);

/* Whether the queue runs background scans (see the top). */
bool scanq_background_possible(const struct scanq *q);

/*
 * Whether a background submit in uid's queue (or the shared queue
 * shared_queue, when not 0) would find room now (it may
 * not by the time it is made: a hint for callers that would rather wait
 * than have their scan dropped).
 */
bool scanq_background_room(struct scanq *q, uid_t uid,
			   unsigned int shared_queue);

/* Stops the threads; scans under way and queued ones end as cancelled. */
void scanq_free(struct scanq *q);

/* What to scan. */
struct scan_request {
	const struct vcache_file *file; /* identity and content stamp */
	uint64_t tag; /* must also match for two requests to share a scan
		       * (the count of writes made through the mount) */
	int fd;	      /* the file, open read-only (clamd is handed
		       * it); scanq_submit keeps a duplicate, so the
		       * caller may close fd once submit returns */
	uint64_t gen; /* vcache generation read before the scan */
	uid_t uid;    /* whose queue the scan waits in (the opener),
		       * unless shared_queue says another */
	/*
	 * The waiter's deadline from this submission, queueing and retry
	 * included, > 0 (the scan_timeout of the configuration the request
	 * was decided under).
	 */
	int timeout_ms;
	/*
	 * Not 0: the scan is nobody's in particular and waits in the shared
	 * queue of that number (the caller numbers them) instead of uid's,
	 * bounded and served as a user's queue is.
	 */
	unsigned int shared_queue;
	/*
	 * Have hooks.prepare(ctx, prepare_key) run right before the scan. A
	 * request with prepare joins only a scan that has not started yet
	 * (whose prepare, its own if the scan had none, runs after this
	 * submit); a request without joins such a scan too.
	 */
	bool prepare;
	uint64_t prepare_key;
	/* Not 0: have hooks.confirm(ctx, confirm, ...) run before the scan. */
	unsigned int confirm;
	/*
	 * Nobody waits for this scan yet (scanning ahead of a reader): it
	 * waits in its queue behind every other scan (see the top), at
	 * most SCANQ_MAX_QUEUED_BACKGROUND of them, and while nobody else
	 * joins it, it does not start before not_before_ns (CLOCK_REALTIME;
	 * held back SCANQ_NOT_BEFORE_MAX_MS at most).
	 */
	bool background;
	int64_t not_before_ns;
	/*
	 * A background scan for a reader who is waiting for the scan of a
	 * file beside it (ahead.h), rather than for a writer who is busy:
	 * it may start while one scan somebody waits for runs (never while
	 * a waited-for one is queued; two background scans at a time with
	 * four general threads or more, else one), using the clamd threads
	 * that reader leaves idle. Its queue (a shared one) should hold
	 * only such scans.
	 */
	bool beside_one;
};

/*
 * Asks for a verdict. Joins the scan in flight for the same file, stamp
 * and tag if there is one. Returns 0 (w->done will be called exactly once,
 * from a queue thread), -EINTR when w was interrupted before it could
 * join, -EAGAIN when r's queue (r->uid's, or the shared one) has
 * max_queued_per_uid scans queued (and
 * r starts a scan) or max_waiters_per_uid waiters already, or negative
 * errno. Never blocks.
 */
int scanq_submit(struct scanq *q, const struct scan_request *r,
		 struct scan_waiter *w);

/*
 * The waiter's caller gave up (the FUSE request was interrupted). Never
 * blocks and takes no lock, so it may run inside an interrupt callback.
 * done() is still called: promptly and with a cancelled outcome from the
 * queue's reaper thread; when no waiter of a scan is left, the scan is
 * cancelled too.
 * The caller must serialise it with done(): done() may not return while
 * scanq_interrupt(w) still runs (the scan, and what it points to, may be
 * freed right after done()), and no scanq_interrupt(w) may start once done()
 * has. The daemon gets both from libfuse: done() clears the request's
 * interrupt callback, which waits for a running one and stops later ones.
 */
void scanq_interrupt(struct scan_waiter *w);

/* Whether the waiter was interrupted (for done() to choose EINTR). */
bool scanq_waiter_interrupted(const struct scan_waiter *w);

struct scanq_counters {
	uint64_t scans;	  /* scans sent to clamd */
	uint64_t joined;  /* submits that joined a scan in flight */
	uint64_t retries; /* immediate retries after a broken connection or
			   * a protocol error */
	uint64_t cancelled;
	uint64_t expired;  /* deadline passed while still queued */
	uint64_t rejected; /* submits refused: the uid's queue was full */
	uint64_t rejected_waiters;   /* submits or joins refused: the uid had
				      * max_waiters_per_uid waiting already */
	uint64_t background;	     /* background scans clamd was asked for */
	uint64_t background_dropped; /* refused (queue full), the file
				      * changed before it could start, or
				      * its deadline passed while queued */
	uint64_t spared;     /* not sent to clamd: known() had the verdict */
	unsigned int queued; /* waiting for a scanner thread now */
	unsigned int live;   /* queued, running or being answered now: a
			      * submit for the same file may still join */
};

void scanq_counters(struct scanq *q, struct scanq_counters *out);

const char *scan_mode_name(enum scan_mode mode);

#endif
