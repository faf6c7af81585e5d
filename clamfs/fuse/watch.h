/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The backend watch (watch_backend=yes): a thread that tells the kernel
 * about every change made to the backend behind the mount (fanwatch.h), so
 * that it may keep names, attributes and directory contents for an hour
 * instead of a second. Changes through the mount need nothing: the kernel
 * made them (the daemon's own backend calls are not reported; data written
 * by kernel passthrough is, in the writer's name, and costs a needless
 * invalidation). Events lost to a full queue invalidate everything the kernel
 * may hold. Scanning does not depend on any of it: an open is decided on
 * the opened file's own stamp.
 */
#ifndef CLAMFS_WATCH_H
#define CLAMFS_WATCH_H

#include "fs.h"

/* How long the kernel may keep what the watch keeps true, in seconds. */
#define WATCH_CACHE_SECONDS 3600.0

/*
 * Whether what the kernel caches of an inode on device dev is kept true
 * by the watch: the backend's own filesystem, while the watch works (a
 * filesystem mounted inside the backend is not watched).
 */
bool watch_covers(struct clamfs_fs *fs, dev_t dev);
/* The timeouts to give the kernel for an inode on device dev. */
double watch_attr_timeout(struct clamfs_fs *fs, dev_t dev);
double watch_entry_timeout(struct clamfs_fs *fs, dev_t dev);

struct backwatch;

/*
 * Whether this kernel can be told to drop every name it caches at once
 * (FUSE_NOTIFY_INC_EPOCH, Linux 6.16), which an overflow needs; else
 * *why says what is missing.
 */
bool watch_kernel_ready(const char **why);

/*
 * Watches the backend whose root is open at root_fd, for fs mounted at
 * mountpoint; NULL with errno set when it cannot be watched.
 */
struct backwatch *watch_start(struct clamfs_fs *fs, int root_fd,
			      const char *mountpoint);

/* Stops and joins it once the FUSE loop has ended (as evict_stop). */
void watch_stop(struct backwatch *w, unsigned long long mnt_id);

#endif
