/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whether a request may first be carried out without the caller's
 * supplementary groups, which cost a read of the caller's /proc status
 * file (the largest cost of a request by an ordinary user). On an object
 * whose access is judged by its mode bits alone, and whose group class
 * has every right its other class has, a caller left without its
 * supplementary groups is judged as a member of the group or as other:
 * never granted more than with them. Such a call either ends as it would
 * with the groups, or fails with EACCES or EPERM and is made again with
 * them (request.h). An access ACL, a file with S_ISGID (kept through a
 * truncate or chmod only by a member of its group, silently), or a
 * filesystem that judges access by rules of its own (NFS, CIFS, FUSE,
 * ...), and the groups are read first.
 */
#ifndef CLAMFS_GROUPFREE_H
#define CLAMFS_GROUPFREE_H

#include <stdbool.h>

/*
 * Whether the permission check of the object open at fd (any fd, O_PATH
 * too) made without the caller's supplementary groups can only be
 * stricter than one made with them.
 */
bool groupfree_judged(int fd);

#endif
