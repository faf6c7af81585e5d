/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reporting a detection: one log line with the facts, and the optional
 * administrator's program run without a shell, facts in its environment,
 * rate-limited so a flood of detections cannot fork-bomb the host.
 */
#ifndef CLAMFS_DETECT_H
#define CLAMFS_DETECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "stats.h"

struct detect;

struct detection {
	const char *event;     /* "open" or "close" */
	const char *relpath;   /* mount-relative, NULL when unknown */
	const char *signature; /* as clamd named it */
	const char *action;    /* what was done: deny, log, quarantine... */
	const char *outcome;   /* details of the action, or NULL */
	pid_t pid;	       /* 0 when no process is involved */
	uid_t uid;
	gid_t gid;
	bool cached; /* verdict came from the cache */
};

/* hook may be NULL. Returns NULL on ENOMEM. */
struct detect *detect_new(const char *hook, unsigned int per_minute,
			  const char *mountpoint, struct stats *stats);
void detect_free(struct detect *d);

/*
 * May block (the user-name lookup can ask a directory server): d must stay
 * valid until it returns, which the caller ensures (a pin on the
 * configuration, fs.h).
 */
void detect_report(struct detect *d, const struct detection *det);

#endif
