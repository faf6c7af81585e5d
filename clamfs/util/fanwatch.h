/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A watch on a whole backend filesystem (fanotify, FAN_MARK_FILESYSTEM,
 * reporting directory handles and names): what changed there, by anyone
 * but this process, as (device, inode number) pairs and names. For the
 * kernel caches a FUSE mount may then keep for long (fuse/watch.h). Needs
 * CAP_SYS_ADMIN and a local filesystem that has file handles. No FUSE here.
 */
#ifndef CLAMFS_FANWATCH_H
#define CLAMFS_FANWATCH_H

#include <stdbool.h>
#include <sys/types.h>

struct fanwatch;

enum fanwatch_kind {
	FANWATCH_NAME,	   /* a name in directory (dev, ino) came or went */
	FANWATCH_CONTENT,  /* object (dev, ino) was written or truncated */
	FANWATCH_ATTR,	   /* object (dev, ino) changed mode, owner, times,
			    * links (a directory too) */
	FANWATCH_OVERFLOW, /* events were lost: anything may have changed */
};

struct fanwatch_event {
	enum fanwatch_kind kind;
	dev_t dev;
	ino_t ino;
	const char *name; /* FANWATCH_NAME: the name in that directory */
};

/*
 * Watches the filesystem of the directory open at root_fd (an O_PATH
 * descriptor will do). 0, or a negative errno: -EPERM
 * without CAP_SYS_ADMIN, -EINVAL/-ENODEV/-EOPNOTSUPP/-EXDEV where the
 * kernel or the filesystem cannot watch it so; -EOPNOTSUPP for any
 * filesystem but ext2/3/4, xfs, btrfs and tmpfs (network, cluster and FUSE
 * filesystems change behind this kernel's back).
 */
int fanwatch_open(int root_fd, struct fanwatch **out);

/* To poll for input (POLLIN: fanwatch_read has events). */
int fanwatch_fd(const struct fanwatch *w);

/*
 * Reads what is queued (at most one buffer, so that a busy filesystem
 * cannot keep the caller here) and calls each(ctx, event) for every change
 * made by another process; objects that are gone (handles that no longer
 * open) are skipped, since their names' events tell the rest. Returns how
 * many events were handed on, 0 when none was queued, or a negative errno.
 */
int fanwatch_read(struct fanwatch *w,
		  void (*each)(void *ctx, const struct fanwatch_event *ev),
		  void *ctx);

void fanwatch_close(struct fanwatch *w);

#endif
