/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Joining a thread that sends the kernel notifications (the evictor, the
 * backend watch) once the FUSE loop is over: a notification may wait for a
 * directory lock that a request nobody reads any more holds.
 */
#ifndef CLAMFS_JOIN_SERVING_H
#define CLAMFS_JOIN_SERVING_H

#include <pthread.h>

#include "fs.h"

/*
 * Joins thread (told to stop already), answering the session's requests
 * on this thread meanwhile, and as a last resort aborting the connection
 * by a forced unmount of mountpoint, if the mount on top there is still
 * ours (mount id mnt_id; 0: unknown, never). who names the thread in the
 * log.
 */
void join_serving(struct clamfs_fs *fs, pthread_t thread,
		  const char *mountpoint, unsigned long long mnt_id,
		  const char *who);

#endif
