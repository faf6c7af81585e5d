/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live reconfiguration: SIGHUP and `clamfs --reload` read the
 * configuration again and put what changed in force without a remount;
 * SIGUSR1, `clamfs --drop-cache` and a signature update forget every
 * cached verdict. Reloads must run one at a time: the daemon runs them all
 * on its reload thread (service.h), which holds no lock meanwhile.
 */
#ifndef CLAMFS_RELOAD_H
#define CLAMFS_RELOAD_H

#include <stddef.h>

#include "fs.h"

struct reload;

/*
 * Reloads of fs's configurations gens, mounted on mountpoint, read again
 * from argv (-o options still win over the file); config is the file the
 * first reading resolved (an absolute path), or NULL. 0 or -ENOMEM.
 */
int reload_new(struct clamfs_fs *fs, struct generations *gens,
	       const char *mountpoint, int argc, char *argv[],
	       const char *config, struct reload **out);
void reload_free(struct reload *r);

/*
 * SIGHUP's work, also asked for by `clamfs --reload` (why names the
 * trigger in the log): the configuration is read again and checked by the
 * rules startup applies; one they refuse is logged and changes nothing.
 * What changed is put in force as the option table's reload column says,
 * and what needs a remount is named. What it replaces is freed once the
 * last request pinning it (fs_pin) lets go. Returns 0 when the
 * configuration is in force (msg says what changed), -EINVAL when it was
 * rejected or -ENOMEM (msg says why).
 */
int reload_run(struct reload *r, const char *why, char *msg, size_t msg_len);

/* The same, telling systemd (RELOADING=1, then READY=1 and a status). */
int reload_run_notified(struct reload *r, const char *why, char *msg,
			size_t msg_len);

/*
 * Forgets every cached verdict, in memory and in the store: every file
 * is scanned again at its next open. why names the cause in the log and
 * counts a cache clear; NULL for a caller that does both itself.
 */
void reload_drop_verdicts(struct clamfs_fs *fs, const char *why);

#endif
