/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Removing an infected file from the backend: quarantine (move it into a
 * directory outside the backend, under its relative path, with a
 * timestamp) or delete. Both walk from the backend root fd without
 * following any symlink and act only if the name still refers to the very
 * file that was scanned. No FUSE here.
 */
#ifndef CLAMFS_ACTION_H
#define CLAMFS_ACTION_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * Moves relpath (relative to backend_fd) into qdir_fd as
 * "<relpath>.<YYYYmmddTHHMMSSZ>" (".N" appended if that exists: never
 * overwrites). Copies and unlinks when the quarantine is on another
 * filesystem. dev/ino identify the scanned file. On success writes the
 * quarantine-relative destination into dest. 0 or negative errno
 * (-ESTALE: the name no longer refers to the scanned file).
 */
int action_quarantine(int backend_fd, const char *relpath, dev_t dev,
		      ino_t ino, int qdir_fd, char *dest, size_t destlen,
		      struct stat *parent);

/*
 * Unlinks relpath if it still refers to dev/ino. 0 or negative errno.
 * Both actions fill *parent (when not NULL) with the stat of the
 * directory the name was removed from, so the caller can tell the kernel.
 */
int action_delete(int backend_fd, const char *relpath, dev_t dev, ino_t ino,
		  struct stat *parent);

#endif
