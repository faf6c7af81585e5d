/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whether a request may be carried out without the caller's
 * supplementary groups, which cost a read of the caller's /proc status
 * file (the largest cost of a request by an ordinary user): where the
 * objects that judge it would judge the caller the same with the groups
 * as without, on a local filesystem judged by mode bits and POSIX ACLs
 * only (a network filesystem's server may deny by a group no mode
 * shows), and not for a file with S_ISGID (kept through a truncate or
 * chmod only for a member of its group, with no error to tell).
 *
 * Two rules. A caller who owns the object, or whose primary group is the
 * object's group, is judged alike whatever its mode or ACL becomes
 * meanwhile: that rule holds for calls that change something (a name
 * made or removed in a directory). A caller judged as other is judged
 * alike only while the group bits give what the other bits give and no
 * access ACL names a group: a mode that changes between the look and the
 * call could then grant a member what its group is denied, so that rule
 * holds only for calls whose result is looked at again afterwards and
 * thrown away if the object changed (an open, a read of an attribute).
 */
#ifndef CLAMFS_GROUPFREE_H
#define CLAMFS_GROUPFREE_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

/*
 * The first rule, for the object open at fd (any fd, O_PATH too) and a
 * caller of fsuid uid and fsgid gid.
 */
bool groupfree_as_owner_or_group(int fd, uid_t uid, gid_t gid);

/*
 * Either rule; *ctime (when not NULL) gets the object's ctime, which a
 * chmod or an ACL change moves, to be compared after the call.
 */
bool groupfree_judged(int fd, uid_t uid, gid_t gid, struct timespec *ctime);

#endif
