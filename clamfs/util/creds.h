/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Per-thread identity switching: a worker thread takes on the caller's
 * fsuid, fsgid, supplementary groups and umask for the duration of one
 * request, so the backend's own permission checks, ownership of new files,
 * setgid directories and default ACLs all apply as they would natively.
 */
#ifndef CLAMFS_CREDS_H
#define CLAMFS_CREDS_H

#include <stdbool.h>
#include <sys/types.h>

struct creds {
	uid_t uid;
	gid_t gid;
	int ngroups; /* -1: unknown, keep the daemon's groups */
	const gid_t *groups;
};

/*
 * Records the daemon's own identity; call once before any other thread
 * starts. Switching is only attempted when the daemon runs as root, which
 * then also gives up CAP_SYS_RESOURCE for good (reserved blocks, quotas).
 */
int creds_init(void);

/*
 * Makes this thread act as *who. Returns 0 or a negative errno, after which
 * the thread is back to the daemon's identity. Must be paired with
 * creds_restore() when it returned 0.
 */
int creds_assume(const struct creds *who);

/* Back to the daemon's identity. */
void creds_restore(void);

/*
 * access(2) of the object open at fd (any fd, O_PATH included) as *who,
 * with the backend's full rules (ACLs too), judged under the switched
 * fsuid/fsgid/groups: no real or saved id of the thread ever changes.
 * mode is R_OK|W_OK|X_OK or F_OK. 0 or negative errno. Call with the
 * daemon's identity (not between creds_assume and creds_restore).
 */
int creds_access(int fd, int mode, const struct creds *who);

/*
 * Sets the umask for this thread only, for a create-type request: the
 * backend applies it exactly when it would for a native caller (not when
 * the parent directory has a default ACL).
 */
int creds_set_umask(mode_t mask);

/* Whether requests from this uid/gid need switching at all. */
bool creds_need_switch(uid_t uid, gid_t gid);

#endif
