// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests on open files. fi->fh is the backend fd; data moves by splice
 * both ways, so file contents never pass through a userspace buffer.
 */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "open.h"
#include "ops.h"

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
	/*
	 * An execute-only program (mode 0711) is run natively without read
	 * permission; the daemon reads it on the caller's behalf once the
	 * caller's execute right is established (by the kernel already
	 * under default_permissions).
	 */
	if (ret == -EACCES && (fi->flags & OPEN_FLAG_EXEC) &&
	    (fi->flags & O_ACCMODE) == O_RDONLY &&
	    (req_fs(req)->default_permissions ||
	     req_check_access(req, inode, X_OK) == 0)) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		ret = fd == -1 ? -errno : 0;
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	gate_open(req, inode, fd, fi, NULL);
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
		    (fi->flags & ~(O_NOCTTY | O_DIRECT)) | O_CREAT |
			    O_NOFOLLOW | O_CLOEXEC,
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
	/* an existing non-empty file opened for reading is scanned too */
	gate_open(req, req_inode(req, e.ino), fd, fi, &e);
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
	bool switched;
	ssize_t n;

	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = fi_fd(fi);
	out.buf[0].pos = off;
	gate_note_write(req_fs(req), req_inode(req, ino));
	switched = req_writer_enter(req, fi_fd(fi));
	n = fuse_buf_copy(&out, in_buf, 0);
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
	int dup_fd = dup(fi_fd(fi));
	int err = 0;

	if (dup_fd == -1 || close(dup_fd) == -1)
		err = errno;
	fuse_reply_err(req, err);
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	gate_release(req_fs(req), req_inode(req, ino), fi_fd(fi), fi->flags);
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
	bool switched;
	int ret;

	gate_note_write(req_fs(req), req_inode(req, ino));
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
	bool switched;
	ssize_t n;
	int err;

	gate_note_write(req_fs(req), req_inode(req, ino_out));
	switched = req_writer_enter(req, fi_fd(fi_out));
	n = copy_file_range(fi_fd(fi_in), &off_in, fi_fd(fi_out), &off_out,
			    len, (unsigned int)flags);
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
