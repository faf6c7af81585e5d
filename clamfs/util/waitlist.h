/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Calls that would wait on something a user controls, tried again later
 * instead: an open or a truncate that breaks another user's lease waits
 * up to the kernel's lease-break time, so it is tried without waiting
 * (O_NONBLOCK) and, while it would wait, again and again on one thread, at
 * growing intervals, until it no longer would. Nothing blocks: any number
 * of such waits hold no thread, and each caller is answered as soon as
 * an attempt gets through. Each uid may have a bounded number waiting.
 */
#ifndef CLAMFS_WAITLIST_H
#define CLAMFS_WAITLIST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct waitlist;

/* The default bound on one uid's jobs waiting (waitlist_new's 0). */
#define WAITLIST_PER_UID 256
/* Attempts come after 1 ms, then twice as late each time, up to this. */
#define WAITLIST_FIRST_MS 1
#define WAITLIST_MAX_MS	  200

struct waitlist_job_ops {
	/*
	 * One attempt, which must not block: true when the job is done
	 * (it answered its caller), false to be tried again later.
	 */
	bool (*attempt)(void *arg);
	/*
	 * Ends a job that will not be tried again, with the reason
	 * (-ESHUTDOWN: the list is being freed).
	 */
	void (*end)(void *arg, int err);
};

/* NULL on ENOMEM. per_uid 0 takes WAITLIST_PER_UID. */
struct waitlist *waitlist_new(unsigned int per_uid);

/*
 * Adds a job for uid, first tried WAITLIST_FIRST_MS from now: 0; -EAGAIN
 * when uid has per_uid jobs waiting already, -ENOMEM, -ESHUTDOWN while
 * the list is being freed (then ops are not called).
 */
int waitlist_add(struct waitlist *wl, uid_t uid,
		 const struct waitlist_job_ops *ops, void *arg);

struct waitlist_counts {
	uint64_t added;
	uint64_t rejected; /* -EAGAIN: the uid had per_uid waiting */
	uint64_t attempts;
	unsigned int waiting;
};

void waitlist_counts(struct waitlist *wl, struct waitlist_counts *out);

/* Ends every job still waiting (end with -ESHUTDOWN), then frees. */
void waitlist_free(struct waitlist *wl);

#endif
