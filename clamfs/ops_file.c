// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests on open files. fi->fh is the backend fd; data moves by splice
 * both ways, so file contents never pass through a userspace buffer.
 */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops.h"

/* Flags the kernel may pass that must not reach the backend open. */
#define OPEN_FLAGS_DROP (O_NOFOLLOW | O_CREAT | O_EXCL | O_NOCTTY)

/*
 * Fills the reply flags of a successful open: the kernel may keep cached
 * pages only when the file is provably unchanged since the previous open.
 */
static void open_set_caching(struct inode *inode, int fd,
			     struct fuse_file_info *fi)
{
	struct stat st;

	fi->keep_cache = 0;
	if (inode_type(inode) == S_IFREG && fstat(fd, &st) == 0)
		fi->keep_cache = inode_stamp_unchanged(inode, &st);
	/* nothing to flush on close for a reader; spares a round trip */
	fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct inode *inode = req_inode(req, ino);
	char path[PROC_FD_PATH_MAX];
	struct req_identity id;
	int fd, ret;

	ret = req_identity_enter(req, &id);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	proc_fd_path(path, inode_fd(inode));
	fd = open(path, (fi->flags & ~OPEN_FLAGS_DROP) | O_CLOEXEC);
	ret = fd == -1 ? -errno : 0;
	req_identity_leave(&id);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	open_set_caching(inode, fd, fi);
	fi->fh = (uint64_t)fd;
	/* an interrupted open gets no release: the fd would leak */
	if (fuse_reply_open(req, fi) != 0)
		close(fd);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi)
{
	struct clamfs_fs *fs = req_fs(req);
	struct fuse_entry_param e;
	struct req_identity id;
	int fd, ret;

	ret = req_identity_enter_umask(req, &id);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fd = openat(inode_fd(req_inode(req, parent)), name,
		    (fi->flags & ~(O_NOFOLLOW | O_NOCTTY)) | O_CREAT |
			    O_CLOEXEC,
		    mode);
	if (fd == -1)
		ret = -errno;
	else
		ret = fs_entry_from_fd(fs, fd, &e);
	req_identity_leave(&id);
	if (ret) {
		if (fd != -1)
			close(fd);
		fuse_reply_err(req, -ret);
		return;
	}
	open_set_caching(req_inode(req, e.ino), fd, fi);
	fi->fh = (uint64_t)fd;
	if (fuse_reply_create(req, &e, fi) != 0) {
		close(fd);
		itab_forget(fs->itab, req_inode(req, e.ino), 1);
	}
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = fi_fd(fi);
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, 0);
}

void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf,
		  off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
	ssize_t n;

	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = fi_fd(fi);
	out.buf[0].pos = off;
	n = fuse_buf_copy(&out, in_buf, 0);
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
	int dup_fd = dup(fi_fd(fi));
	int err = 0;

	if (dup_fd == -1 || close(dup_fd) == -1)
		err = errno;
	fuse_reply_err(req, err);
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	close(fi_fd(fi));
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
	int ret = fallocate(fi_fd(fi), mode, offset, length);

	fuse_reply_err(req, ret == -1 ? errno : 0);
}

void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			off_t off_out, struct fuse_file_info *fi_out,
			size_t len, int flags)
{
	ssize_t n = copy_file_range(fi_fd(fi_in), &off_in, fi_fd(fi_out),
				    &off_out, len, (unsigned int)flags);

	if (n == -1)
		fuse_reply_err(req, errno);
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

void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      int op)
{
	int ret = flock(fi_fd(fi), op);

	fuse_reply_err(req, ret == -1 ? errno : 0);
}
