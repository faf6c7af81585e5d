/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the scan queue's files share and no other module sees: its jobs,
 * tickets, users' queues and the queue itself, and each file's functions
 * the others call. The files, by job:
 * - scanq.c: the API, and a job's life from submit to its answers;
 * - scanq_lanes.c: users' queues, tickets, the two lanes and which job
 *   a scanner thread takes next (all under the queue's lock);
 * - scanq_run.c: the scanner threads (a job's scan, its retry and
 *   extension) and the reaper (deadlines, jobs nobody waits for).
 */
#ifndef CLAMFS_SCANQ_IMPL_H
#define CLAMFS_SCANQ_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "scanq.h"

#define SCANQ_BUCKETS	   256
#define SCANQ_USER_BUCKETS 64

enum lane { LANE_SMALL, LANE_BIG, LANES };

struct scanq_user;

/*
 * A scan's place in one user's queue, and the count of that user's
 * waiters on the scan. A scan has one ticket per uid waiting for it: a
 * waiter that joins a queued scan of another user keeps its own place
 * in its own queue, and the scan starts at whichever of its tickets
 * comes first. Freed with its scan.
 */
struct scan_ticket {
	struct scan_job *job;
	struct scanq_user *user; /* valid while waiters > 0 or queued */
	unsigned int waiters;
	bool queued;			    /* in user->lane[job->lane] */
	struct scan_ticket *next;	    /* the job's tickets */
	TAILQ_ENTRY(scan_ticket) lane_link; /* in user->lane[lane] */
};

struct scan_job {
	struct scanq *q;
	struct vcache_file file;
	uint64_t tag;
	bool prepare; /* set while queued */
	uint64_t prepare_key;
	unsigned int confirm; /* scan_request.confirm */
	bool background_only; /* nobody but background submits joined */
	bool counts_fg;	      /* running, and somebody waits for it */
	bool counts_bg;	      /* running as a background scan */
	int64_t not_before_ns;
	int fd;
	uint64_t gen;
	uint64_t deadline_us; /* its creator's; each waiter has its own */
	uint64_t run_until;   /* the running attempt's end (0: none yet) */
	struct cdp_cancel *cancel;
	atomic_uint interested; /* waiters not interrupted */
	struct scan_waiter *waiters;
	struct scan_ticket *tickets;
	bool in_map;
	bool queued;		 /* has a ticket in a user's queue */
	bool answering;		 /* scanned: its waiters are being answered */
	struct scan_job *reaped; /* the reaper's list of jobs to end */
	bool expired;		 /* reaped at its deadline (else abandoned) */
	enum lane lane;
	TAILQ_ENTRY(scan_job) live_link; /* in q->live until it ends */
	LIST_ENTRY(scan_job) map_link;
};

TAILQ_HEAD(ticket_queue, scan_ticket);
TAILQ_HEAD(job_queue, scan_job);
LIST_HEAD(job_list, scan_job);

/*
 * A queue (a uid's or a shared one) with tickets queued or waiters in
 * flight; freed when it has neither.
 */
struct scanq_user {
	uint64_t key;	      /* queue_key() */
	unsigned int queued;  /* tickets in its lanes */
	unsigned int waiters; /* its waiters on any scan, queued or running */
	bool background;      /* its scans come after everybody else's */
	bool beside_one; /* ... and may run beside one that is waited for */
	struct ticket_queue lane[LANES];
	bool in_ring, in_small_ring;
	TAILQ_ENTRY(scanq_user) ring_link;	 /* has any queued ticket */
	TAILQ_ENTRY(scanq_user) small_ring_link; /* has a small one */
	LIST_ENTRY(scanq_user) hash_link;
};

TAILQ_HEAD(user_ring, scanq_user);
LIST_HEAD(user_list, scanq_user);

struct scanner {
	struct scanq *q;
	bool small_only;
	pthread_t thread;
};

struct scanq {
	struct scanq_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake;	     /* general scanner threads */
	pthread_cond_t wake_small;   /* the small-file thread */
	struct user_ring ring;	     /* round-robin over users: any job */
	struct user_ring small_ring; /* round-robin over users: small jobs */
	struct user_list users[SCANQ_USER_BUCKETS];
	struct job_queue live; /* every job not ended yet, queued or running */
	struct job_list map[SCANQ_BUCKETS];
	bool stopping;
	struct scanner *scanners;
	unsigned int nthreads;
	int reap_fd;		 /* eventfd: wakes the reaper */
	atomic_bool withdrawals; /* a waiter gave up since the last reap */
	uint64_t reap_at;	 /* when the reaper wakes on its own */
	pthread_t reaper;
	bool reaper_started;
	struct scanq_counters counters; /* under lock */
	unsigned int ngeneral;		/* threads that take any scan */
	unsigned int running_fg; /* scans running that someone waits for */
	unsigned int running_bg; /* background scans running */
};

/* --- scanq.c --- */

void wake_reaper(struct scanq *q);
void waiter_answer(struct scan_waiter *w, const struct scan_outcome *o);
void waiters_answer_ordered(struct scan_waiter *list,
			    const struct scan_outcome *o);
void job_finish(struct scan_job *job, const struct scan_outcome *o);

/* --- scanq_lanes.c (all under q->lock) --- */

uint64_t queue_key(uid_t uid, unsigned int shared_queue);
struct user_list *user_bucket(struct scanq *q, uint64_t key);
struct scanq_user *user_get(struct scanq *q, uint64_t key);
void user_put(struct scanq_user *u);
void ticket_enqueue(struct scanq *q, struct scan_ticket *t);
struct scan_ticket *ticket_of(struct scan_job *job, uint64_t key);
void waiter_leave(struct scanq *q, struct scan_waiter *w);
struct scan_job *lanes_pick(struct scanq *q, bool small_only);
void lanes_wake_for(struct scanq *q, const struct scan_job *job,
		    const struct scanq_user *u);
void job_stopped(struct scanq *q, struct scan_job *job);
void job_unmap(struct scan_job *job);
void job_end(struct scanq *q, struct scan_job *job);
uint64_t job_latest_deadline(const struct scan_job *job);

/* --- scanq_run.c: the threads' bodies (arg: a struct scanner, the queue) */

void *scanner_main(void *arg);
void *reaper_main(void *arg);

#endif
