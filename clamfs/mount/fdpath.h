/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What a backend fd is called inside the mount: for log lines, and for
 * the policy's name rules, which must only ever see a file's one name.
 */
#ifndef CLAMFS_FDPATH_H
#define CLAMFS_FDPATH_H

#include <stddef.h>

#include "mount_state.h"

/*
 * The mount-relative path of the file open at fd (no leading slash), in
 * buf; NULL when it cannot be told (outside the backend, too long).
 */
const char *fs_fd_path(struct clamfs_fs *fs, int fd, char *buf, size_t len);

/*
 * Like fs_fd_path, but only when that path is provably the file's one and
 * only name right now (it resolves, without symlinks, to this very file,
 * which has a single link); NULL otherwise. What name rules judge by: a
 * stale, deleted or second name must never exempt a file from scanning.
 */
const char *fs_fd_only_name(struct clamfs_fs *fs, int fd, char *buf,
			    size_t len);

#endif
