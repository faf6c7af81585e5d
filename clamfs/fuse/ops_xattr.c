// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Extended attributes, POSIX ACLs among them, through the proc link of the
 * inode's O_PATH fd (the f*xattr calls refuse O_PATH fds).
 */
#include "fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "cmd_xattr.h"
#include "ops.h"
#include "procfd.h"
#include "request.h"

/*
 * The proc link of a symlink cannot be followed to the symlink itself by
 * the *xattr calls, and l*xattr would act on the proc link: no race-free
 * way exists, so symlinks have no xattrs through the mount.
 */
enum xattr_identity {
	XATTR_AS_DAEMON,
	/* reads, judged by the inode's mode (req_identity_enter_opening) */
	XATTR_AS_READER,
	/* user.* writes: as an owner or member of its group, no groups */
	XATTR_AS_USER_WRITER,
	/* other writes: an ACL's S_ISGID stays only for a group member */
	XATTR_AS_CALLER,
};

/*
 * Pins the inode (xattr_end lets it go) and enters the identity the call
 * is made as; path is the inode's proc link.
 */
static int xattr_begin_as(fuse_req_t req, fuse_ino_t ino,
			  struct req_identity *id, char path[PROC_FD_PATH_MAX],
			  enum xattr_identity as)
{
	struct inode *inode = req_inode(req, ino);
	int fd, ret;

	if (!inode)
		return -ESTALE;
	if (inode_type(inode) == S_IFLNK)
		return -ENOTSUP;
	ret = inode_pin(req_fs(req)->itab, inode);
	if (ret)
		return ret;
	fd = inode_fd(inode);
	proc_fd_path(path, fd);
	if (as == XATTR_AS_READER) {
		ret = req_identity_enter_opening(req, id, fd);
	} else if (as != XATTR_AS_DAEMON) {
		ret = req_identity_enter_on(req, id, &fd,
					    as == XATTR_AS_USER_WRITER ? 1 : 0);
	} else {
		/* what req_identity_leave undoes, still_alike asks: nothing */
		id->switched = false;
		id->without_groups = false;
		id->lost = false;
		id->groups = NULL;
	}
	if (ret)
		inode_unpin(inode);
	return ret;
}

/* Undoes a successful xattr_begin_as: before the reply (see inode_pin). */
static void xattr_end(fuse_req_t req, fuse_ino_t ino, struct req_identity *id)
{
	req_identity_leave(id);
	inode_unpin(req_inode(req, ino));
}

/*
 * Setting or removing a user.* name (Samba keeps DOS attributes in one
 * at every create) needs write permission on the file and changes
 * nothing else about it: judged alike, without the groups, for its owner
 * or a member of its group by the primary group. Other names
 * may change the mode (ACLs: S_ISGID stays for a group member only) or
 * are judged by capabilities.
 */
static enum xattr_identity xattr_writer(const char *name)
{
	return strncmp(name, "user.", 5) == 0 ? XATTR_AS_USER_WRITER
					      : XATTR_AS_CALLER;
}

/*
 * Before every write() the kernel asks for security.capability in the
 * writer's name (file_remove_privs: protocol 7.31 has no
 * HANDLE_KILLPRIV_V2), so this one read must be cheap. The answer does not
 * depend on who asks: the VFS checks no file permission for reading
 * security.* names, the proc link reaches the inode without walking the
 * backend's directories, an LSM judges the daemon's own label whatever its
 * fsuid, and the capability is converted for the daemon's user namespace
 * either way. So it is read as the daemon: no groups fetched from /proc, no
 * identity switched. Other security.* names stay with the general path: a
 * network backend may ask its server for a label with the caller's rights.
 */
static bool identity_free(const char *name)
{
	return strcmp(name, "security.capability") == 0;
}

/* Replies to a get/list call: size 0 asks for the length only. */
static void reply_xattr_value(fuse_req_t req, size_t size, ssize_t n, int err,
			      const char *buf)
{
	if (n == -1)
		fuse_reply_err(req, err);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[PROC_FD_PATH_MAX], *buf = NULL;
	struct inode *inode = req_inode(req, ino);
	struct req_identity id;
	ssize_t n = -1;
	int ret, err;

	if (cmd_xattr_is_command(name)) {
		cmd_xattr_get(req, ino, name, size);
		return;
	}
	ret = xattr_begin_as(req, ino, &id, path,
			     identity_free(name) ? XATTR_AS_DAEMON
						 : XATTR_AS_READER);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	if (size && !(buf = malloc(size))) {
		err = ENOMEM;
	} else {
		for (;;) {
			n = getxattr(path, name, buf, size);
			err = errno;
			/* the file's mode changed meanwhile: with the groups */
			if (n >= 0 && !req_identity_still_alike(
					      req, &id, inode_fd(inode))) {
				n = -1;
				err = EACCES;
			}
			if (n >= 0 || !req_identity_widen(req, &id, err))
				break;
		}
	}
	xattr_end(req, ino, &id);
	reply_xattr_value(req, size, n, err, buf);
	free(buf);
}

/*
 * Drops trusted.* names: the kernel hides them from callers without
 * CAP_SYS_ADMIN, but the worker thread listing them still has it.
 */
static size_t drop_trusted(char *names, size_t len)
{
	size_t in = 0, out = 0;

	while (in < len) {
		size_t n = strnlen(names + in, len - in) + 1;

		if (strncmp(names + in, "trusted.", 8) != 0) {
			memmove(names + out, names + in, n);
			out += n;
		}
		in += n;
	}
	return out;
}

/*
 * All the names of the file at path, into *buf (replaced): their length,
 * or -1 with errno. The whole list, even for a size query: filtering
 * changes it.
 */
static ssize_t list_names(const char *path, char **buf)
{
	ssize_t n;

	for (;;) {
		n = listxattr(path, NULL, 0);
		if (n <= 0)
			return n;
		free(*buf);
		*buf = malloc((size_t)n);
		if (!*buf) {
			errno = ENOMEM;
			return -1;
		}
		n = listxattr(path, *buf, (size_t)n);
		if (n >= 0 || errno != ERANGE)
			return n; /* ERANGE: it grew meanwhile, ask again */
	}
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct inode *inode = req_inode(req, ino);
	char path[PROC_FD_PATH_MAX], *buf = NULL;
	struct req_identity id;
	ssize_t n;
	int ret, err;

	if (!inode) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (inode_type(inode) == S_IFLNK) {
		/* no names rather than an error: ls -l and cp -a go on */
		if (size == 0)
			fuse_reply_xattr(req, 0);
		else
			fuse_reply_buf(req, NULL, 0);
		return;
	}
	ret = xattr_begin_as(req, ino, &id, path, XATTR_AS_READER);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	for (;;) {
		n = list_names(path, &buf);
		err = errno;
		/* the file's mode changed meanwhile: with the groups */
		if (n >= 0 &&
		    !req_identity_still_alike(req, &id, inode_fd(inode))) {
			n = -1;
			err = EACCES;
		}
		if (n >= 0 || !req_identity_widen(req, &id, err))
			break;
	}
	ret = n < 0 ? -err : 0;
	if (n > 0 && id.switched)
		n = (ssize_t)drop_trusted(buf, (size_t)n);
	xattr_end(req, ino, &id);
	if (ret)
		fuse_reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags)
{
	char path[PROC_FD_PATH_MAX];
	struct req_identity id;
	int ret;

	if (cmd_xattr_is_command(name)) {
		cmd_xattr_set(req, ino, name, value, size);
		return;
	}
	ret = xattr_begin_as(req, ino, &id, path, xattr_writer(name));
	if (ret == 0) {
		while (setxattr(path, name, value, size, flags) == -1) {
			ret = -errno;
			if (!req_identity_widen(req, &id, -ret))
				break;
			ret = 0;
		}
		xattr_end(req, ino, &id);
	}
	fuse_reply_err(req, -ret);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char path[PROC_FD_PATH_MAX];
	struct req_identity id;
	int ret;

	if (cmd_xattr_is_command(name)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	ret = xattr_begin_as(req, ino, &id, path, xattr_writer(name));
	if (ret == 0) {
		while (removexattr(path, name) == -1) {
			ret = -errno;
			if (!req_identity_widen(req, &id, -ret))
				break;
			ret = 0;
		}
		xattr_end(req, ino, &id);
	}
	fuse_reply_err(req, -ret);
}
