// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests on open files. fi->fh is the backend fd; data moves by splice
 * both ways, so file contents never pass through a userspace buffer.
 */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gate.h"
#include "gate_reply.h"
#include "groupfree.h"
#include "lease_retry.h"
#include "ops.h"
#include "passthrough.h"
#include "procfd.h"
#include "request.h"

/*
 * The kernel's __FMODE_EXEC: the open is an execve, which needs execute
 * permission, not read permission.
 */
#define OPEN_FLAG_EXEC 040

/*
 * Flags the kernel may pass that must not reach the backend open.
 * O_DIRECT stays with the kernel: libfuse's request buffers are not
 * aligned for the backend, and the kernel already bypasses its own cache.
 */
#define OPEN_FLAGS_DROP                                                        \
	(O_NOFOLLOW | O_CREAT | O_EXCL | O_NOCTTY | O_DIRECT | OPEN_FLAG_EXEC)

/*
 * On a regular file O_NONBLOCK only matters against a lease. Any user may
 * hold one on a file it owns, and an open that breaks it waits up to the
 * kernel's lease-break time: the open is only ever tried without waiting,
 * and one that would wait is tried again later (lease_retry.h), never
 * waited for on a worker that every user's requests share. The gate
 * itself takes a lease for an instant (writers.h): a caller's own
 * O_NONBLOCK open waits that instant out (NONBLOCK_TRIES) rather than
 * fail with EWOULDBLOCK.
 */
static int open_flags_drop(struct inode *inode)
{
	return OPEN_FLAGS_DROP |
	       (inode_type(inode) == S_IFREG ? O_NONBLOCK : 0);
}

#define NONBLOCK_TRIES	  3
#define NONBLOCK_PAUSE_NS 1000000

/*
 * With the write-back cache the kernel reads pages in to complete partial
 * writes, through any writer's handle, and keeps the file offset of
 * appends itself (from its own size): the backend file is opened
 * read-write and without O_APPEND. Where that open is refused but the
 * one asked for may not be (open_backend_file), the handle gets the
 * flags asked for and direct I/O, which bypasses the page cache.
 */
static int writeback_flags(struct clamfs_fs *fs, bool regular, int flags)
{
	if (!fs->writeback || !regular)
		return flags;
	flags &= ~O_APPEND;
	if ((flags & O_ACCMODE) == O_WRONLY)
		flags = (flags & ~O_ACCMODE) | O_RDWR;
	return flags;
}

/*
 * The flags to open with instead, with direct I/O, after the widened open
 * failed with err where the one asked for may not; -1 when it would fail
 * too. A writer who may not read (EACCES) appends at the kernel's offsets,
 * which count other handles' cached pages; an append-only file (EPERM
 * without O_APPEND) is appended to by the backend.
 */
static int narrow_flags(int err, int wide, int flags)
{
	if (wide == flags)
		return -1;
	if (err == EPERM && (flags & O_APPEND))
		return flags;
	if (err == EACCES && (wide & O_ACCMODE) != (flags & O_ACCMODE))
		return flags & ~O_APPEND;
	return -1;
}

/*
 * open(2) without waiting on a lease: -1 with EWOULDBLOCK where it would
 * wait. The fd of a regular file does not keep O_NONBLOCK (splice would
 * take it for its pipe's).
 */
static int open_nowait(const char *path, int flags, bool regular)
{
	int fd, ret;

	if (!regular)
		return open(path, flags);
	fd = open(path, flags | O_NONBLOCK);
	if (fd == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0)
		return fd;
	ret = errno;
	close(fd);
	errno = ret;
	return -1;
}

/*
 * Opens path with the flags asked for, widened for the write-back cache
 * where the caller may, without waiting on a lease; -errno on failure.
 */
static int open_backend_file(struct clamfs_fs *fs, struct inode *inode,
			     const char *path, int flags,
			     struct fuse_file_info *fi)
{
	bool regular = inode_type(inode) == S_IFREG;
	int wide = writeback_flags(fs, regular, flags), narrow, fd;

	fd = open_nowait(path, wide, regular);
	if (fd == -1 && (narrow = narrow_flags(errno, wide, flags)) != -1) {
		/* direct I/O: the kernel keeps no pages for this handle */
		fd = open_nowait(path, narrow, regular);
		if (fd != -1)
			fi->direct_io = 1;
	}
	return fd == -1 ? -errno : fd;
}

/* open_with_flags on a pinned inode */
static int open_pinned(fuse_req_t req, struct inode *inode, int flags,
		       struct fuse_file_info *fi)
{
	char path[PROC_FD_PATH_MAX];
	struct req_identity id;
	int pfd = inode_fd(inode);
	unsigned int direct_io = fi->direct_io;
	bool lost;
	int fd, ret;

	/*
	 * Through the /proc link only the file's own mode is checked, and
	 * an open is thrown away if the file changed meanwhile; a truncate
	 * is not undone: the groups first.
	 */
	ret = (flags & O_TRUNC) ? req_identity_enter(req, &id)
				: req_identity_enter_opening(req, &id, pfd);
	if (ret)
		return ret;
	proc_fd_path(path, pfd);
	for (;;) {
		/* an attempt thrown away leaves no direct I/O behind */
		fi->direct_io = direct_io;
		fd = open_backend_file(
			req_fs(req), inode, path,
			(flags & ~open_flags_drop(inode)) | O_CLOEXEC, fi);
		if (fd >= 0 && !req_identity_still_alike(req, &id, fd)) {
			/* its mode or ACL changed: judged again with groups */
			close(fd);
			fd = -EACCES;
		}
		if (fd >= 0 || !req_identity_widen(req, &id, -fd))
			break;
	}
	lost = id.lost;
	req_identity_leave(&id);
	/*
	 * An execute-only program (mode 0711) is run natively without read
	 * permission; the daemon reads it on the caller's behalf once the
	 * caller's execute right is established (by the kernel already
	 * under default_permissions).
	 */
	if (fd == -EACCES && !lost && (flags & OPEN_FLAG_EXEC) &&
	    (flags & O_ACCMODE) == O_RDONLY &&
	    (req_fs(req)->default_permissions ||
	     req_check_access(req, inode, X_OK) == 0)) {
		fd = open_nowait(path, O_RDONLY | O_CLOEXEC,
				 inode_type(inode) == S_IFREG);
		if (fd == -1)
			fd = -errno;
	}
	return fd;
}

/*
 * The backend file the request opens, with flags (fi->flags, or the
 * read-only open a read-write one is decided on), as its caller; fd or
 * -errno. Also called from a scanner thread, once a decision made as a
 * reader is in: the inode is pinned here, as the daemon.
 */
static int open_with_flags(fuse_req_t req, struct inode *inode, int flags,
			   struct fuse_file_info *fi)
{
	int fd = inode_pin(req_fs(req)->itab, inode);

	if (fd)
		return fd;
	fd = open_pinned(req, inode, flags, fi);
	inode_unpin(inode);
	return fd;
}

static int open_as_caller(fuse_req_t req, struct inode *inode,
			  struct fuse_file_info *fi)
{
	return open_with_flags(req, inode, fi->flags, fi);
}

/*
 * A read-write open of a regular file is decided on a read-only fd (as a
 * reader's: the verdict cache and store serve it, and its scan's verdict
 * is kept, which the opener's own writable fd would prevent), then made
 * as asked (gate.h). Not for O_TRUNC, which leaves nothing to decide on.
 * (smbd opens read-write with O_NONBLOCK.)
 */
static bool decided_as_reader(struct inode *inode, int flags)
{
	return inode_type(inode) == S_IFREG && (flags & O_ACCMODE) == O_RDWR &&
	       !(flags & (O_TRUNC | OPEN_FLAG_EXEC));
}

static void open_later(fuse_req_t req, fuse_ino_t ino,
		       const struct fuse_file_info *fi);

static const struct gate_reply_asked open_asked = {
	.open = open_as_caller,
	.later = open_later,
};

/*
 * One attempt at an open: true when it answered the request, false when
 * the open would wait on a lease (for a caller who did not ask for
 * O_NONBLOCK). as_reader: a read-write open may be decided as a reader.
 */
static bool open_attempt(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi, bool as_reader)
{
	struct timespec pause = {0, NONBLOCK_PAUSE_NS};
	struct inode *inode = req_inode(req, ino);
	int fd, flags, tries = 1;

	if (!inode) {
		fuse_reply_err(req, ESTALE);
		return true;
	}
	as_reader = as_reader && decided_as_reader(inode, fi->flags);
	flags = as_reader ? (fi->flags & ~(O_ACCMODE | O_APPEND)) | O_RDONLY
			  : fi->flags;
	fd = open_with_flags(req, inode, flags, fi);
	if (fd == -EWOULDBLOCK && !(fi->flags & O_NONBLOCK))
		return false;
	while (fd == -EWOULDBLOCK && tries++ < NONBLOCK_TRIES) {
		nanosleep(&pause, NULL);
		fd = open_with_flags(req, inode, flags, fi);
	}
	if (fd < 0)
		fuse_reply_err(req, -fd);
	else if (as_reader)
		gate_reply_open_as_reader(req, ino, inode, fd, fi, &open_asked);
	else
		gate_reply_open(req, inode, fd, fi, NULL);
	return true;
}

struct open_later {
	fuse_ino_t ino;
	struct fuse_file_info fi;
};

/*
 * Tried again once a lease is out of the way, the usual way: opened as
 * asked, then decided (a lease holder may take the lease again between
 * the two opens of a decision made as a reader).
 */
static bool open_again(fuse_req_t req, void *data)
{
	struct open_later *o = data;

	return open_attempt(req, o->ino, &o->fi, false);
}

static void open_later(fuse_req_t req, fuse_ino_t ino,
		       const struct fuse_file_info *fi)
{
	struct open_later later = {ino, *fi};

	/* answered at once, after its few tries, whatever they find */
	if (fi->flags & O_NONBLOCK)
		open_attempt(req, ino, &later.fi, false);
	else
		lease_retry(req, open_again, &later, sizeof(later));
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (!open_attempt(req, ino, fi, true))
		open_later(req, ino, fi);
}

static bool is_special(mode_t mode)
{
	return S_ISFIFO(mode) || S_ISCHR(mode) || S_ISBLK(mode) ||
	       S_ISSOCK(mode);
}

/*
 * The kernel sends CREATE only for a name it believes absent; when the
 * backend has a FIFO or device there (made behind the mount's back), a
 * plain open would block this worker (a FIFO without a peer) or touch a
 * device. ESTALE instead makes the VFS retry the open once with a fresh
 * lookup, and the kernel then opens the FIFO or device itself, blocking
 * the caller as natively. The open is non-blocking for the case that the
 * name is swapped between the check and the open.
 */
static int create_open(int dirfd, const char *name, int flags, mode_t mode)
{
	int oflags = (flags & ~(O_NOCTTY | O_DIRECT)) | O_CREAT | O_NOFOLLOW |
		     O_CLOEXEC;
	struct stat st;
	int fd, ret;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    is_special(st.st_mode))
		return -ESTALE;
	fd = openat(dirfd, name, oflags | O_NONBLOCK, mode);
	if (fd == -1) {
		ret = -errno;
		/* ENXIO: a FIFO opened for writing without a reader */
		if (ret == -ENXIO &&
		    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    is_special(st.st_mode))
			return -ESTALE;
		/* EWOULDBLOCK: an existing regular file's lease (op_create) */
		return ret;
	}
	ret = fstat(fd, &st) == -1 ? -errno : 0;
	if (ret == 0 && is_special(st.st_mode))
		ret = -ESTALE;
	if (ret) {
		close(fd);
		return ret;
	}
	if (!(flags & O_NONBLOCK) &&
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == -1) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * Whether the caller owns the file open at fd or is of its group: judged
 * alike whatever its groups, even if its mode changed during the open.
 */
static bool judged_alike(fuse_req_t req, int fd)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	return groupfree_as_owner_or_group(fd, ctx->uid, ctx->gid);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi)
{
	struct clamfs_fs *fs = req_fs(req);
	struct inode *dir = req_inode(req, parent);
	struct fuse_entry_param e;
	struct req_identity id;
	int fd, ret, wide, narrow, dirfd;

	dirfd = dir ? inode_fd(dir) : -1;
	/*
	 * The directory's mode judges a create; an existing file's own an
	 * open of it, which is looked at once open (it may appear between a
	 * look and the open): O_TRUNC would have changed it by then. S_ISGID
	 * is kept only for a member of the directory's group. Those two read
	 * the groups first.
	 */
	if (!dir)
		ret = -ESTALE;
	else if ((mode & S_ISGID) || (fi->flags & O_TRUNC))
		ret = req_identity_enter_umask(req, &id);
	else
		ret = req_identity_enter_umask_on(req, &id, &dirfd, 1);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	wide = writeback_flags(fs, true, fi->flags);
	for (;;) {
		fd = create_open(dirfd, name, wide, mode);
		if (fd >= 0 && id.without_groups && !judged_alike(req, fd)) {
			/* another's file, that its group judges: again */
			close(fd);
			fd = -EACCES;
		}
		if (fd >= 0 || !req_identity_widen(req, &id, -fd))
			break;
	}
	/* an existing file the caller may write but not read, or append-only */
	if (fd < 0 && !id.lost &&
	    (narrow = narrow_flags(-fd, wide, fi->flags)) != -1) {
		fd = create_open(dirfd, name, narrow, mode);
		if (fd >= 0)
			fi->direct_io = 1;
	}
	ret = fd < 0 ? fd : fs_entry_from_fd(fs, fd, &e);
	req_identity_leave(&id);
	/*
	 * An existing file's lease: the kernel holds the directory locked
	 * for a CREATE, for every user's lookups there, so it is not waited
	 * for here. ESTALE has the VFS look the name up again and open the
	 * file it finds (an OPEN, outside the directory lock), which waits
	 * for the lease as any open does.
	 */
	if (ret == -EWOULDBLOCK)
		ret = -ESTALE;
	if (ret) {
		if (fd >= 0)
			close(fd);
		fuse_reply_err(req, -ret);
		return;
	}
	itab_note_name(fs->itab, req_inode(req, e.ino), dir, name);
	/* an existing non-empty file opened for reading is scanned too */
	gate_reply_open(req, req_inode(req, e.ino), fd, fi, &e);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = fi_fd(fi);
	buf.buf[0].pos = off;
	stats_inc(&req_fs(req)->stats, STAT_READS);
	fuse_reply_data(req, &buf, 0);
}

void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf,
		  off_t off, struct fuse_file_info *fi)
{
	size_t size = fuse_buf_size(in_buf);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);
	struct inode *inode = req_inode(req, ino);
	bool switched;
	ssize_t n;

	/* a write nobody notes could land in a cached verdict: refuse it */
	if (!inode) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = fi_fd(fi);
	out.buf[0].pos = off;
	stats_inc(&req_fs(req)->stats, STAT_WRITES);
	gate_note_write(req_fs(req), inode);
	switched = req_writer_enter(req, fi_fd(fi));
	n = fuse_buf_copy(&out, in_buf, 0);
	/*
	 * Write-back of the page cache (a shared mapping) takes only an
	 * error as failure: the kernel ignores the count of its reply, so a
	 * short write (a full backend) would be a loss nobody is told about,
	 * not msync, not fsync. The rest is retried, which either completes
	 * it or names the error. A write(2) keeps its short count, which the
	 * kernel hands to the caller as a native write would.
	 */
	while (fi->writepage && n > 0 && (size_t)n < size) {
		ssize_t more = fuse_buf_copy(&out, in_buf, 0);

		if (more <= 0) {
			n = more < 0 ? more : -EIO;
			break;
		}
		n += more;
	}
	req_writer_leave(switched);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/*
	 * Closing a duplicate reports what a close of the caller's fd would
	 * (write-back errors of NFS or CIFS backends) and drops the caller's
	 * POSIX locks, while the fd itself lives on until release.
	 */
	int dup_fd = fcntl(fi_fd(fi), F_DUPFD_CLOEXEC, 0);
	int err = 0;

	if (dup_fd == -1 || close(dup_fd) == -1)
		err = errno;
	fuse_reply_err(req, err);
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct inode *inode = req_inode(req, ino);

	if (inode) {
		if (inode_type(inode) == S_IFREG)
			passthrough_release(req_fs(req), inode);
		gate_release(req_fs(req), inode, fi_fd(fi), fi->flags);
	} else
		close(fi_fd(fi)); /* cannot happen: the kernel holds it */
	fuse_reply_err(req, 0);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	int ret = datasync ? fdatasync(fi_fd(fi)) : fsync(fi_fd(fi));

	fuse_reply_err(req, ret == -1 ? errno : 0);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		  off_t length, struct fuse_file_info *fi)
{
	struct inode *inode = req_inode(req, ino);
	bool switched;
	int ret;

	if (!inode) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	gate_note_write(req_fs(req), inode);
	switched = req_writer_enter(req, fi_fd(fi));
	ret = fallocate(fi_fd(fi), mode, offset, length);
	if (ret == -1)
		ret = -errno;
	req_writer_leave(switched);
	fuse_reply_err(req, -ret);
}

void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			off_t off_out, struct fuse_file_info *fi_out,
			size_t len, int flags)
{
	struct inode *out = req_inode(req, ino_out);
	bool switched;
	ssize_t n;
	int err;

	if (!out) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	gate_note_write(req_fs(req), out);
	switched = req_writer_enter(req, fi_fd(fi_out));
	n = copy_file_range(fi_fd(fi_in), &off_in, fi_fd(fi_out), &off_out, len,
			    (unsigned int)flags);
	err = errno;
	req_writer_leave(switched);

	if (n == -1)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, (size_t)n);
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
	      struct fuse_file_info *fi)
{
	off_t res = lseek(fi_fd(fi), off, whence);

	if (res == -1)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, res);
}
