// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests on names and inode metadata: lookup, forget, getattr, setattr,
 * readlink and the namespace changes (mknod, mkdir, symlink, link, unlink,
 * rmdir, rename). Each runs with the requester's identity.
 */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "creds.h"
#include "gate.h"
#include "lease_retry.h"
#include "ops.h"
#include "procfd.h"
#include "request.h"
#include "watch.h"

/* How long a lookup at the inode table's cap waits for FORGETs. */
#define LOOKUP_ROOM_WAIT_MS 50

/*
 * Hands a looked-up entry to the kernel: records the name it came by (so
 * the evictor can have the kernel forget it) and, when the reply does not
 * reach the kernel (the request was interrupted), drops the reference the
 * kernel will never forget.
 */
static void reply_new_entry(fuse_req_t req, struct inode *parent,
			    const char *name, const struct fuse_entry_param *e)
{
	struct clamfs_fs *fs = req_fs(req);
	struct inode *inode = req_inode(req, e->ino);

	itab_note_name(fs->itab, inode, parent, name);
	if (fuse_reply_entry(req, e) != 0)
		itab_forget(fs->itab, inode, 1);
}

/*
 * The parent of a directory, for the kernel reconnecting a directory an
 * NFS file handle named: never above the backend root, whose parent is
 * itself. No permission applies (nfsd asks as itself, and the VFS walks
 * ".." without asking either).
 */
static int lookup_dotdot(struct clamfs_fs *fs, struct inode *dir,
			 struct fuse_entry_param *e)
{
	struct inode *root = itab_root(fs->itab);
	int fd, ret;

	if (inode_type(dir) != S_IFDIR)
		return -ENOTDIR;
	if (dir == root)
		return fs_entry_from_fd(fs, inode_fd(root), e);
	fd = openat(inode_fd(dir), "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	if (!itab_dir_beneath_root(fs->itab, fd)) {
		close(fd);
		return -ESTALE; /* dir was moved out of the backend */
	}
	ret = fs_entry_from_fd(fs, fd, e);
	close(fd);
	return ret;
}

/*
 * "." and ".." come only from the kernel's export operations: "." to get
 * back an inode it evicted (the node id is taken from a file handle, so
 * it may be anything), ".." for the parent of a directory.
 */
static int lookup_dots(struct clamfs_fs *fs, fuse_ino_t parent,
		       const char *name, struct fuse_entry_param *e)
{
	struct inode *inode, *dir;
	struct stat st;
	int ret;

	if (name[1] == '.') {
		dir = itab_by_id(fs->itab, parent);
		return dir ? lookup_dotdot(fs, dir, e) : -ESTALE;
	}
	ret = itab_resolve_id(fs->itab, parent, &inode);
	if (ret)
		return ret;
	ret = inode_pin(fs->itab, inode);
	if (ret == 0) {
		if (fstatat(inode_fd(inode), "", &st,
			    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
			ret = -errno;
		inode_unpin(inode);
	}
	if (ret) {
		itab_forget(fs->itab, inode, 1);
		return ret;
	}
	fs_entry_fill(fs, inode, &st, e);
	return 0;
}

static bool is_dots(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct clamfs_fs *fs = req_fs(req);
	struct inode *dir = NULL;
	struct fuse_entry_param e;
	struct req_identity id;
	int ret, dirfd;

	if (is_dots(name)) {
		ret = lookup_dots(fs, parent, name, &e);
		if (ret)
			fuse_reply_err(req, -ret);
		else if (fuse_reply_entry(req, &e) != 0)
			itab_forget(fs->itab, req_inode(req, e.ino), 1);
		return;
	}
	dir = req_inode(req, parent);
	dirfd = dir ? inode_fd(dir) : -1;
	/* only the directory's search right is checked */
	ret = dir ? req_identity_enter_on(req, &id, &dirfd, 1) : -ESTALE;
	if (ret)
		goto out;
	do
		ret = fs_lookup_entry(fs, dir, name, &e);
	while (ret < 0 && req_identity_widen(req, &id, -ret));
	/*
	 * At the cap, the FORGETs of names just evicted may be on their way:
	 * a short wait spares the caller an EMFILE. Bounded, because this
	 * lookup holds the directory against invalidations in it.
	 */
	if (ret == -EMFILE && itab_room(fs->itab) == 0 &&
	    itab_wait_room(fs->itab, LOOKUP_ROOM_WAIT_MS))
		ret = fs_lookup_entry(fs, dir, name, &e);
	req_identity_leave(&id);
out:
	if (ret == -ENOENT && fs->negative_timeout > 0) {
		/* ino 0 with a timeout: the kernel caches the miss */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->negative_timeout;
		fuse_reply_entry(req, &e);
	} else if (ret) {
		fuse_reply_err(req, -ret);
	} else {
		reply_new_entry(req, dir, name, &e);
	}
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct inode *inode = req_inode(req, ino);

	if (inode)
		itab_forget(req_fs(req)->itab, inode, nlookup);
	fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets)
{
	struct clamfs_fs *fs = req_fs(req);

	for (size_t i = 0; i < count; i++) {
		struct inode *inode = req_inode(req, forgets[i].ino);

		if (inode)
			itab_forget(fs->itab, inode, forgets[i].nlookup);
	}
	fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct inode *inode = req_inode(req, ino);
	struct stat st;
	int ret;

	if (inode && fi && inode_type(inode) == S_IFREG) {
		/* fstat(2) of an open file: its own fd, unlinked or not */
		ret = fstat(fi_fd(fi), &st) == -1 ? -errno : 0;
		goto out;
	}
	ret = inode ? inode_pin(req_fs(req)->itab, inode) : -ESTALE;
	if (ret)
		goto out;
	/* an O_PATH fd needs no permission to stat: no identity switch */
	ret = fstatat(inode_fd(inode), "", &st,
		      AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1
		      ? -errno
		      : 0;
	inode_unpin(inode);
out:
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st,
				watch_attr_timeout(req_fs(req), st.st_dev));
}

/* UTIME_OMIT for what is not set; works on O_PATH fds of any type. */
static int setattr_times(struct inode *inode, const struct stat *attr,
			 int to_set)
{
	struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT},
				 {.tv_nsec = UTIME_OMIT}};

	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		tv[0].tv_nsec = UTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		tv[0] = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		tv[1].tv_nsec = UTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		tv[1] = attr->st_mtim;
	return utimensat(inode_fd(inode), "", tv,
			 AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
}

/*
 * A regular file opened for writing as truncate(2) checks it, without
 * waiting on a lease: any user may hold one on a file it owns, and
 * truncate(2) waits up to the kernel's lease-break time to break it. No
 * lease can be granted against the descriptor meanwhile, so truncating
 * through it never waits. The fd, or -errno (-EWOULDBLOCK: a lease).
 */
static int open_to_truncate(struct inode *inode)
{
	char path[PROC_FD_PATH_MAX];
	int fd;

	proc_fd_path(path, inode_fd(inode));
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	return fd == -1 ? -errno : fd;
}

/*
 * Applies the changes in the order chmod, chown, truncate, utimes, using
 * the open file when the kernel passes one (ftruncate on an fd opened for
 * writing must work even if the mode no longer allows opening it), else
 * tfd when the caller opened one to truncate through (open_to_truncate).
 * Each change done is cleared from *to_set. *lease is set when a truncate
 * by name would wait on a lease (-EWOULDBLOCK): the rest is then what
 * remains to be done.
 */
static int setattr_apply(struct clamfs_fs *fs, struct inode *inode,
			 const struct stat *attr, int *to_set,
			 struct fuse_file_info *fi, int tfd, bool *lease)
{
	int ofd = fi ? fi_fd(fi) : tfd, fd, ret;
	char path[PROC_FD_PATH_MAX];

	proc_fd_path(path, inode_fd(inode));
	if (*to_set & FUSE_SET_ATTR_MODE) {
		if ((fi ? fchmod(ofd, attr->st_mode)
			: chmod(path, attr->st_mode)) == -1)
			return -errno;
		*to_set &= ~FUSE_SET_ATTR_MODE;
	}
	if (*to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid =
			*to_set & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t gid =
			*to_set & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;

		if (fchownat(inode_fd(inode), "", uid, gid,
			     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
			return -errno;
		*to_set &= ~(FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID);
	}
	if (*to_set & FUSE_SET_ATTR_SIZE) {
		gate_note_write(fs, inode);
		fd = ofd;
		/* tfd could not be had first (a chmod above grants it) */
		if (fd < 0 && inode_type(inode) == S_IFREG) {
			fd = open_to_truncate(inode);
			*lease = fd == -EWOULDBLOCK;
			if (fd < 0)
				return fd;
		}
		ret = (fd >= 0 ? ftruncate(fd, attr->st_size)
			       : truncate(path, attr->st_size)) == -1
			      ? -errno
			      : 0;
		if (fd >= 0 && fd != ofd)
			close(fd);
		if (ret)
			return ret;
		*to_set &= ~FUSE_SET_ATTR_SIZE;
	}
	if (*to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		if (setattr_times(inode, attr, *to_set) == -1)
			return -errno;
	}
	return 0;
}

/*
 * Under the write-back cache the kernel keeps a file's mtime and ctime
 * itself and sends them as explicit times, marked by FUSE_SET_ATTR_CTIME:
 * at the close of a writer (any writer, or the next reader to close),
 * and for every time change it has allowed, a writer's "touch" too.
 * Explicit times need the owner's rights, which a writer or reader of
 * another user's file lacks, so they are set with the owner's rights; the
 * kernel checked the caller (writeback_cache needs default_permissions).
 * The time bits of to_set to set so, or 0.
 */
static int kernel_kept_times(struct clamfs_fs *fs, int to_set)
{
	const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
			  FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;

	if (!fs->writeback || !(to_set & FUSE_SET_ATTR_CTIME))
		return 0;
	return to_set & times;
}

/*
 * Sets the kernel's times as the file's owner, who may set any: not as
 * the daemon, whose root a backend may not honour (NFS root_squash).
 * -errno on failure.
 */
static int set_kernel_times(struct inode *inode, const struct stat *attr,
			    int times)
{
	struct creds owner = {.ngroups = 0};
	struct stat st;
	int ret;

	if (fstatat(inode_fd(inode), "", &st,
		    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		return -errno;
	owner.uid = st.st_uid;
	owner.gid = st.st_gid;
	ret = creds_assume(&owner);
	if (ret)
		return ret;
	ret = setattr_times(inode, attr, times) == -1 ? -errno : 0;
	creds_restore();
	return ret;
}

/*
 * Without HANDLE_KILLPRIV the kernel clears setuid/setgid bits after a
 * write by sending a chmod as the writer, who may not own the file: a
 * chmod that only drops those bits, by a caller allowed to write, is what
 * the kernel itself does natively. Returns 1 when it was done here.
 */
static int kill_suid_for_writer(fuse_req_t req, struct inode *inode,
				const struct stat *attr, int to_set)
{
	const mode_t priv = S_ISUID | S_ISGID;
	char path[PROC_FD_PATH_MAX];
	struct stat st;

	if (!(to_set & FUSE_SET_ATTR_MODE) ||
	    fstatat(inode_fd(inode), "", &st,
		    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		return 0;
	if ((attr->st_mode & ~priv & 07777) != (st.st_mode & ~priv & 07777) ||
	    (attr->st_mode & priv & ~st.st_mode) ||
	    /* the kernel drops S_ISGID only with group execute set */
	    ((st.st_mode & S_ISGID) && !(st.st_mode & S_IXGRP) &&
	     !(attr->st_mode & S_ISGID)) ||
	    (attr->st_mode & priv) == (st.st_mode & priv) ||
	    st.st_uid == fuse_req_ctx(req)->uid ||
	    req_check_access(req, inode, W_OK) != 0)
		return 0;
	proc_fd_path(path, inode_fd(inode));
	return chmod(path, attr->st_mode & 07777) == 0 ? 1 : 0;
}

/*
 * One attempt at a setattr: true when it answered the request, false when
 * a truncate by name would wait on a lease; *to_set is then what remains.
 */
static bool setattr_attempt(fuse_req_t req, fuse_ino_t ino,
			    const struct stat *attr, int *to_set,
			    struct fuse_file_info *fi)
{
	struct inode *inode = req_inode(req, ino);
	int ret, kernel_times, apply, tfd = -1;
	struct req_identity id;
	bool lease = false;
	struct stat st;

	ret = inode ? inode_pin(req_fs(req)->itab, inode) : -ESTALE;
	if (ret) {
		fuse_reply_err(req, -ret);
		return true;
	}
	/*
	 * A truncate by name: the file is opened for it before anything
	 * changes, so that a lease in the way is waited out (tried again
	 * later) with nothing done yet, as truncate(2) changes nothing
	 * before it has broken the lease.
	 */
	if ((*to_set & FUSE_SET_ATTR_SIZE) && !fi &&
	    inode_type(inode) == S_IFREG) {
		ret = req_identity_enter(req, &id);
		if (ret)
			goto out;
		tfd = open_to_truncate(inode);
		req_identity_leave(&id);
		if (tfd == -EWOULDBLOCK) {
			inode_unpin(inode);
			return false;
		}
	}
	if (kill_suid_for_writer(req, inode, attr, *to_set) == 1)
		*to_set &= ~FUSE_SET_ATTR_MODE;
	kernel_times = kernel_kept_times(req_fs(req), *to_set);
	ret = req_identity_enter(req, &id);
	if (ret)
		goto out;
	apply = *to_set & ~kernel_times;
	ret = setattr_apply(req_fs(req), inode, attr, &apply, fi, tfd, &lease);
	req_identity_leave(&id);
	if (lease) {
		/* only after a chmod granted the open: the rest, later */
		if (tfd >= 0)
			close(tfd);
		inode_unpin(inode);
		*to_set = apply | kernel_times;
		return false;
	}
	if (ret == 0 && kernel_times) {
		ret = set_kernel_times(inode, attr, kernel_times);
		/* the rest is done: only a change of times alone fails */
		if (*to_set & ~kernel_times & ~FUSE_SET_ATTR_CTIME)
			ret = 0;
	}
	if (ret)
		goto out;
	if (fstatat(inode_fd(inode), "", &st,
		    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		ret = -errno;
out:
	if (tfd >= 0)
		close(tfd);
	inode_unpin(inode);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st,
				watch_attr_timeout(req_fs(req), st.st_dev));
	return true;
}

struct setattr_later {
	fuse_ino_t ino;
	struct stat attr;
	int to_set;
};

static bool setattr_again(fuse_req_t req, void *data)
{
	struct setattr_later *s = data;

	return setattr_attempt(req, s->ino, &s->attr, &s->to_set, NULL);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi)
{
	struct setattr_later later;

	if (setattr_attempt(req, ino, attr, &to_set, fi))
		return;
	later = (struct setattr_later){ino, *attr, to_set};
	lease_retry(req, setattr_again, &later, sizeof(later));
}

void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct inode *inode = req_inode(req, ino);

	fuse_reply_err(req,
		       inode ? -req_check_access(req, inode, mask) : ESTALE);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct inode *inode = req_inode(req, ino);
	char buf[PATH_MAX + 1];
	ssize_t n;
	int ret;

	ret = inode ? inode_pin(req_fs(req)->itab, inode) : -ESTALE;
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	n = readlinkat(inode_fd(inode), "", buf, sizeof(buf));
	ret = errno;
	inode_unpin(inode);
	if (n == -1) {
		fuse_reply_err(req, ret);
		return;
	}
	if ((size_t)n == sizeof(buf)) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

/*
 * Ends a create-type request: looks the new name up while still acting as
 * the requester (who just proved search rights on parent), then replies.
 */
static void finish_new_entry(fuse_req_t req, struct inode *parent,
			     const char *name, int ret, struct req_identity *id)
{
	struct fuse_entry_param e;

	if (ret == 0)
		ret = fs_lookup_entry(req_fs(req), parent, name, &e);
	req_identity_leave(id);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_new_entry(req, parent, name, &e);
}

enum node_kind { NODE_MKNOD, NODE_MKDIR, NODE_SYMLINK };

/* Creates a node as the requester (with its umask) and replies. */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      enum node_kind kind, mode_t mode, dev_t rdev,
		      const char *target)
{
	struct inode *dir = req_inode(req, parent);
	struct req_identity id;
	int dirfd = dir ? inode_fd(dir) : -1, ret;
	/* only the directory's mode judges; S_ISGID needs the groups */
	size_t judged_on = (mode & S_ISGID) ? 0 : 1;

	/* a symlink's mode is fixed: the umask does not apply */
	if (!dir)
		ret = -ESTALE;
	else if (kind == NODE_SYMLINK)
		ret = req_identity_enter_on(req, &id, &dirfd, judged_on);
	else
		ret = req_identity_enter_umask_on(req, &id, &dirfd, judged_on);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	do {
		switch (kind) {
		case NODE_MKNOD:
			ret = mknodat(dirfd, name, mode, rdev);
			break;
		case NODE_MKDIR:
			ret = mkdirat(dirfd, name, mode);
			break;
		case NODE_SYMLINK:
			ret = symlinkat(target, dirfd, name);
			break;
		}
		ret = ret == -1 ? -errno : 0;
	} while (ret < 0 && req_identity_widen(req, &id, -ret));
	finish_new_entry(req, dir, name, ret, &id);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	      dev_t rdev)
{
	make_node(req, parent, name, NODE_MKNOD, mode, rdev, NULL);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, NODE_MKDIR, mode, 0, NULL);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name)
{
	make_node(req, parent, name, NODE_SYMLINK, 0, 0, link);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname)
{
	struct inode *inode = req_inode(req, ino);
	struct inode *dir = req_inode(req, newparent);
	struct req_identity id;
	char path[PROC_FD_PATH_MAX];
	int ret;

	ret = inode && dir ? inode_pin(req_fs(req)->itab, inode) : -ESTALE;
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	ret = req_identity_enter(req, &id);
	if (ret) {
		inode_unpin(inode);
		fuse_reply_err(req, -ret);
		return;
	}
	/*
	 * linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH, which a
	 * switched fsuid does not have; the proc link gives the same object
	 * with the ordinary checks (protected_hardlinks included).
	 */
	proc_fd_path(path, inode_fd(inode));
	if (linkat(AT_FDCWD, path, inode_fd(dir), newname, AT_SYMLINK_FOLLOW) ==
	    -1)
		ret = -errno;
	/* before the reply: once answered, the kernel may forget inode */
	inode_unpin(inode);
	finish_new_entry(req, dir, newname, ret, &id);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 int flags)
{
	struct inode *dir = req_inode(req, parent);
	int dirfd = dir ? inode_fd(dir) : -1;
	struct req_identity id;
	int ret;

	/* the directory's mode judges (and its sticky bit: owners only) */
	ret = dir ? req_identity_enter_on(req, &id, &dirfd, 1) : -ESTALE;
	if (ret == 0) {
		while (unlinkat(dirfd, name, flags) == -1) {
			ret = -errno;
			if (!req_identity_widen(req, &id, -ret))
				break;
			ret = 0;
		}
		req_identity_leave(&id);
	}
	fuse_reply_err(req, -ret);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, 0);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, AT_REMOVEDIR);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct inode *dir = req_inode(req, parent);
	struct inode *newdir = req_inode(req, newparent);
	struct req_identity id;
	int ret;

	ret = dir && newdir ? req_identity_enter(req, &id) : -ESTALE;
	if (ret == 0) {
		if (renameat2(inode_fd(dir), name, inode_fd(newdir), newname,
			      flags) == -1)
			ret = -errno;
		req_identity_leave(&id);
	}
	fuse_reply_err(req, -ret);
}
