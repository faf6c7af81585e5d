/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reading a directory ahead of its reader: when an open has to wait for
 * a scan, the other small files of the same directory are likely next
 * (grep -r, cp -r, a Samba client copying a folder), so they are scanned
 * in the background (through the scan_entry callback) while the reader
 * works. One
 * thread walks the directories, a few at a time, as the reader who
 * waited (a directory they may not list is not walked), none of the 32
 * walked last again within a minute, each to a bounded count and size of
 * files; it waits while the background queue is full rather than have
 * its scans dropped.
 */
#ifndef CLAMFS_AHEAD_H
#define CLAMFS_AHEAD_H

#include <sys/stat.h>
#include <sys/types.h>

#include "mount_state.h"

struct ahead;

/*
 * Asks for a background scan of dir_fd's entry name and puts its size in
 * *bytes: 0 when asked, -EAGAIN when the background queue is full (the
 * walk waits and asks again), -EMFILE or -ENOTSUP to end the walk of this
 * directory, another negative errno to skip the entry. The gate's
 * gate_scan_ahead_entry is the one the daemon passes.
 */
typedef int (*ahead_scan_entry_fn)(struct clamfs_fs *fs, int dir_fd,
				   const char *name, off_t *bytes);

/* Starts the thread for fs; -errno on failure. */
int ahead_start(struct clamfs_fs *fs, ahead_scan_entry_fn scan_entry,
		struct ahead **out);

/*
 * Stops and joins the thread (directories not yet walked are dropped),
 * before the scan queue goes. NULL is a no-op.
 */
void ahead_stop(struct ahead *a);

/*
 * The reader uid/gid waits for the scan of the file open at fd (stat
 * st): its directory is queued to be read ahead, unless it was lately or
 * the walk could not help under the reader's configuration pin (no
 * cache, too few scanner threads). Never blocks on the walk; costs a
 * readlink.
 */
void ahead_note_wait(struct ahead *a, struct generation *pin, int fd,
		     const struct stat *st, uid_t uid, gid_t gid);

#endif
