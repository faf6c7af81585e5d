/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The verdict store's directory: whoever may change it, or any directory
 * above it, could swap in a store that marks any file clean. So it must be
 * clamfs's user's own and writable by nobody else, and each directory
 * above must be that user's or root's and writable by nobody else (a
 * sticky directory of root's, like /tmp, only lets others change their
 * own entries). No FUSE here.
 */
#ifndef CLAMFS_VSTORE_DIR_H
#define CLAMFS_VSTORE_DIR_H

/*
 * Creates dir (mode 0700) when its parent exists, checks it and every
 * directory above, and returns an O_DIRECTORY descriptor of it; negative
 * errno, the reason logged: -EPERM for one others may change.
 */
int vstore_dir_open(const char *dir);

/*
 * 0 when the file name in dfd is absent or clamfs's own regular file;
 * otherwise removes it (logged) and returns 1; negative errno on failure.
 */
int vstore_dir_refuse_foreign(int dfd, const char *dir, const char *name);

#endif
