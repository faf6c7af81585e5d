/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whether a request may be carried out without the caller's
 * supplementary groups, which cost a read of the caller's /proc status
 * file (the largest cost of a request by an ordinary user). It may where
 * the objects that judge it would judge the caller the same with the
 * groups as without: the caller owns the object, or its primary group is
 * the object's, or the group bits give exactly what the other bits give,
 * with no access ACL (which may name groups) unless the caller owns it,
 * on a local filesystem judged by mode bits and POSIX ACLs only (a
 * network filesystem's server may deny by a group no mode shows), and
 * not a file with S_ISGID (kept through a truncate or chmod only by a
 * member of its group, without an error to tell).
 */
#ifndef CLAMFS_GROUPFREE_H
#define CLAMFS_GROUPFREE_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * Whether the permission check of the object open at fd (any fd, O_PATH
 * too) for a caller of fsuid uid and fsgid gid comes out the same
 * whatever supplementary groups the caller has.
 */
bool groupfree_judged(int fd, uid_t uid, gid_t gid);

#endif
