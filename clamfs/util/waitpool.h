/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Threads for calls that may wait on something a user controls (an open
 * or a truncate that breaks another user's lease waits up to the kernel's
 * lease-break time): such a call runs here, not on a worker that every
 * user's requests share. Each uid has a share of the threads, served in
 * turn, so one user's waits delay only that user's waits.
 */
#ifndef CLAMFS_WAITPOOL_H
#define CLAMFS_WAITPOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct waitpool;

/* Defaults for waitpool_new's zero arguments. */
#define WAITPOOL_THREADS	 32
#define WAITPOOL_RUNNING_PER_UID 4
#define WAITPOOL_QUEUED_PER_UID	 256

/*
 * A pool of at most max_threads threads (started as jobs come, ended
 * after a while idle), running at most running_per_uid jobs of one uid at
 * once and holding at most queued_per_uid of its jobs waiting for a turn.
 * 0 takes the default above. NULL on ENOMEM.
 */
struct waitpool *waitpool_new(unsigned int max_threads,
			      unsigned int running_per_uid,
			      unsigned int queued_per_uid);

/*
 * Runs fn(arg, false) on a thread of the pool, in uid's share: 0; -EAGAIN
 * when uid has queued_per_uid jobs waiting already (fn is not called),
 * -ENOMEM, -ESHUTDOWN once waitpool_free has begun.
 */
int waitpool_submit(struct waitpool *p, uid_t uid,
		    void (*fn)(void *arg, bool cancelled), void *arg);

struct waitpool_counts {
	uint64_t submitted;
	uint64_t rejected; /* -EAGAIN: the uid's share was full */
	unsigned int running;
	unsigned int queued;
	unsigned int threads;
};

void waitpool_counts(struct waitpool *p, struct waitpool_counts *out);

/*
 * Ends the pool: jobs still waiting for a turn are called with cancelled
 * true (each must still end its work, e.g. answer its request), running
 * ones are waited for. NULL is ignored.
 */
void waitpool_free(struct waitpool *p);

#endif
