/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A file's identity beyond its device and inode numbers, which some
 * filesystems hand out again to another file: btrfs gives each subvolume
 * an anonymous device number that the next subvolume or snapshot
 * receives once it is removed, and a snapshot keeps inode numbers, sizes
 * and every timestamp. The kernel's file handle (name_to_handle_at) names
 * what no filesystem recycles: on btrfs the subvolume's root id, the
 * inode and its generation; on ext4 and xfs the inode and its
 * generation. A 64-bit digest of it, the same across restarts.
 */
#ifndef CLAMFS_FILEID_H
#define CLAMFS_FILEID_H

#include <stdint.h>

/*
 * The digest of the handle of name at dirfd (flags as name_to_handle_at
 * takes them: AT_EMPTY_PATH for dirfd itself); never 0. 0 when the
 * filesystem gives no handle (-errno then in *err when err is not NULL).
 */
uint64_t fileid_at(int dirfd, const char *name, int flags, int *err);

/*
 * An identity that equals nothing, not even itself next time: for a file
 * whose filesystem gives no handle and whose device numbers may have been
 * another's (see the gate's use).
 */
uint64_t fileid_unmatched(void);

#endif
