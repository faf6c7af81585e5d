// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Objects whose permission checks come out the same whatever a caller's
 * supplementary groups are (groupfree.h).
 */
#include "groupfree.h"

#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>

#include "procfd.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif
#ifndef BTRFS_SUPER_MAGIC
#define BTRFS_SUPER_MAGIC 0x9123683e
#endif
#define EXT4_SUPER_MAGIC  0xef53
#define TMPFS_SUPER_MAGIC 0x01021994

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
	case TMPFS_SUPER_MAGIC:
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

bool groupfree_judged(int fd, uid_t uid, gid_t gid)
{
	struct stat st;
	bool owner;

	if (fstat(fd, &st) == -1 || !mode_and_posix_acl_only(fd))
		return false;
	if (!S_ISDIR(st.st_mode) && (st.st_mode & S_ISGID))
		return false;
	/* an ACL's owner entry is the owner's, whatever its groups */
	owner = st.st_uid == uid;
	if (owner)
		return true;
	if (has_access_acl(fd))
		return false;
	return st.st_gid == gid || ((st.st_mode >> 3) & 7) == (st.st_mode & 7);
}
