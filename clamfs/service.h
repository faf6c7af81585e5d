/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's service thread: SIGHUP reloads, SIGUSR1 drops the verdict
 * cache, every 10 s systemd's status line is refreshed and a mount gone
 * from this namespace (but alive in another) is reported once.
 */
#ifndef CLAMFS_SERVICE_H
#define CLAMFS_SERVICE_H

#include "fs.h"
#include "reload.h"

struct service;

/*
 * Blocks SIGHUP and SIGUSR1 in the calling thread, so that every thread
 * created after it inherits the mask and only the service thread takes
 * them. Call before libfuse installs its handlers.
 */
int service_block_signals(void);

/* Starts the thread for fs mounted on mountpoint; 0 or negative errno. */
int service_start(struct clamfs_fs *fs, struct reload *reload,
		  const char *mountpoint, struct service **out);

/* Stops and joins the thread; NULL is a no-op. */
void service_stop(struct service *sv);

#endif
