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

/* What the record beside a quarantined file says besides the file's own. */
struct quarantine_note {
	const char *share;     /* the backend's absolute path */
	const char *signature; /* as clamd named it */
	uid_t opener_uid;      /* whose open found it */
	int record_error;      /* out: 0, or why no record was written */
};

/*
 * Moves relpath (relative to backend_fd) into qdir_fd as
 * "<relpath>.<YYYYmmddTHHMMSSZ>" (".N" appended if that exists: never
 * overwrites). Copies and unlinks when the quarantine is on another
 * filesystem, keeping owner, mode and timestamps. dev/ino identify the
 * scanned file. With note, a record (qrecord.h) is written beside the
 * moved file; failing to write it does not undo the move (note->
 * record_error says why). On success writes the quarantine-relative
 * destination into dest. 0 or negative errno (-ESTALE: the name no longer
 * refers to the scanned file).
 */
int action_quarantine(int backend_fd, const char *relpath, dev_t dev, ino_t ino,
		      int qdir_fd, char *dest, size_t destlen,
		      struct stat *parent, struct quarantine_note *note);

/*
 * Copies the open regular file src (described by st) into a new file
 * dirfd/name (never replacing one), with st's owner, mode and timestamps,
 * synced. On failure nothing is left behind. 0 or negative errno.
 */
int action_copy_file(int src, const struct stat *st, int dirfd,
		     const char *name);

/*
 * Unlinks relpath if it still refers to dev/ino. 0 or negative errno.
 * Both actions fill *parent (when not NULL) with the stat of the
 * directory the name was removed from, so the caller can tell the kernel.
 */
int action_delete(int backend_fd, const char *relpath, dev_t dev, ino_t ino,
		  struct stat *parent);

#endif
