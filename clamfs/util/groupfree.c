// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Objects whose permission checks come out the same whatever a caller's
 * supplementary groups are (groupfree.h).
 */
#include "groupfree.h"

#include <errno.h>
#include <linux/magic.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>

#include "procfd.h"

/*
 * Local filesystems whose only access rules are the mode bits and POSIX
 * ACLs, both judged by this kernel. A network filesystem's server may
 * deny by a group (NFSv4 and CIFS ACLs), which no mode shows.
 */
static bool mode_and_posix_acl_only(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) == -1)
		return false;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC:
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		return true;
	default:
		return false;
	}
}

/*
 * An access ACL may deny a named group what others get, and its mode's
 * group bits are then the ACL's mask, not the owning group's rights.
 */
static bool has_access_acl(int fd)
{
	char path[PROC_FD_PATH_MAX];

	proc_fd_path(path, fd);
	if (getxattr(path, "system.posix_acl_access", NULL, 0) >= 0)
		return true;
	/* ENODATA: none; EOPNOTSUPP: ACLs are off on this filesystem */
	return errno != ENODATA && errno != EOPNOTSUPP;
}

/* Owner or primary group: 1; judged as other: 0; not here: -1. */
static int owner_or_group(int fd, uid_t uid, gid_t gid, struct stat *st)
{
	if (fstat(fd, st) == -1 || !mode_and_posix_acl_only(fd))
		return -1;
	if (!S_ISDIR(st->st_mode) && (st->st_mode & S_ISGID))
		return -1;
	/* an ACL's owner entry is the owner's, whatever its groups */
	if (st->st_uid == uid)
		return 1;
	/*
	 * Of the object's group: its entry is matched without the other
	 * groups, and a match grants when any matching entry grants.
	 */
	return st->st_gid == gid ? 1 : 0;
}

bool groupfree_as_owner_or_group(int fd, uid_t uid, gid_t gid)
{
	struct stat st;

	return owner_or_group(fd, uid, gid, &st) == 1;
}

bool groupfree_judged(int fd, uid_t uid, gid_t gid, struct timespec *ctime)
{
	struct stat st;
	int who = owner_or_group(fd, uid, gid, &st);

	if (who < 0)
		return false;
	if (ctime)
		*ctime = st.st_ctim;
	return who == 1 || (((st.st_mode >> 3) & 7) == (st.st_mode & 7) &&
			    !has_access_acl(fd));
}
