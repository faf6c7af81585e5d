/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The evictor: a thread that, when the inode table nears its fd cap, tells
 * the kernel that the least recently looked-up names are stale, so that it
 * drops those dentries and sends FORGET for inodes nothing else uses.
 */
#ifndef CLAMFS_EVICT_H
#define CLAMFS_EVICT_H

#include "fs.h"

struct evictor;

/*
 * Starts the thread for fs mounted at mountpoint; NULL on failure (errno
 * set).
 */
struct evictor *evict_start(struct clamfs_fs *fs, const char *mountpoint);

/*
 * Stops and joins it, serving requests meanwhile if need be (a
 * notification can wait for one), and as a last resort aborting the
 * connection by a forced unmount of the mount with id mnt_id, if still on
 * top (join_serving.h): call it once the FUSE loop has ended, before the
 * scanner threads stop. NULL is fine.
 */
void evict_stop(struct evictor *ev, unsigned long long mnt_id);

#endif
