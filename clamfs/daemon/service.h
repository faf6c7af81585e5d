/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's service threads: SIGHUP and `clamfs --reload` reload the
 * configuration (one at a time, on a thread of their own), SIGUSR1 drops
 * the verdict cache at once, every 10 s systemd's status line is
 * refreshed and a mount gone from this namespace (but alive in another)
 * is reported once.
 */
#ifndef CLAMFS_SERVICE_H
#define CLAMFS_SERVICE_H

#include "fs.h"
#include "reload.h"

struct service;

/*
 * Blocks SIGHUP and SIGUSR1 in the calling thread, so that every thread
 * created after it inherits the mask and only the signal thread takes
 * them. Call before libfuse installs its handlers.
 */
int service_block_signals(void);

/* Starts the threads for fs mounted on mountpoint; 0 or negative errno. */
int service_start(struct clamfs_fs *fs, struct reload *reload,
		  const char *mountpoint, struct service **out);

/*
 * Stops and joins the threads (after a reload under way); reloads still
 * queued are answered with -ESHUTDOWN. NULL is a no-op.
 */
void service_stop(struct service *sv);

/* How a posted reload ends: 0 or -errno, and reload's message. */
typedef void service_done_fn(void *ctx, int status, const char *msg);

/*
 * Has the reload thread read the configuration again (why names it in the
 * log), after the reloads queued before it, and then call done(ctx, ...)
 * there. So a reload never runs on a FUSE worker, and reloads never
 * overlap. Returns 0 when posted (done will be called exactly once), or
 * -ENOMEM or -ESHUTDOWN (stopping), and done is never called.
 */
int service_post_reload(struct service *sv, const char *why,
			service_done_fn *done, void *ctx);

#endif
