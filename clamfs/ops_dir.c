// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Directory listing: readdir and readdirplus over a DIR stream per open
 * directory, resumable at the offsets the kernel hands back.
 */
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops.h"

struct dir_handle {
	DIR *dp;
	off_t offset;		/* telldir() cookie of the next entry */
	struct dirent *pending; /* read but not yet returned */
};

static struct dir_handle *fi_dir(const struct fuse_file_info *fi)
{
	return (struct dir_handle *)(uintptr_t)fi->fh;
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dir_handle *d = calloc(1, sizeof(*d));
	char path[PROC_FD_PATH_MAX];
	struct req_identity id;
	int fd = -1, ret;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ret = req_identity_enter(req, &id);
	if (ret)
		goto fail;
	/* openat(fd, ".") would also need search (x) permission */
	proc_fd_path(path, inode_fd(req_inode(req, ino)));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ret = fd == -1 ? -errno : 0;
	req_identity_leave(&id);
	if (ret)
		goto fail;
	d->dp = fdopendir(fd);
	if (!d->dp) {
		ret = -errno;
		close(fd);
		goto fail;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) != 0) {
		closedir(d->dp);
		free(d);
	}
	return;

fail:
	free(d);
	fuse_reply_err(req, -ret);
}

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/*
 * The entry for readdirplus. "." and ".." and names that cannot be looked
 * up (gone meanwhile, or no search right on the directory) get ino 0:
 * the kernel then lists the name without caching attributes for it.
 */
static bool plus_entry(fuse_req_t req, fuse_ino_t dir, const struct dirent *de,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr.st_ino = de->d_ino;
	e->attr.st_mode = (mode_t)de->d_type << 12;
	if (is_dot_or_dotdot(de->d_name))
		return false;
	return fs_lookup_entry(req_fs(req), req_inode(req, dir), de->d_name,
			       e) == 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t offset, struct fuse_file_info *fi, bool plus)
{
	struct dir_handle *d = fi_dir(fi);
	struct req_identity id;
	char *buf = NULL;
	size_t used = 0;
	int ret;

	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ret = plus ? req_identity_enter(req, &id) : 0;
	if (ret)
		goto out;
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->pending = NULL;
		d->offset = offset;
	}
	for (;;) {
		struct fuse_entry_param e;
		bool referenced = false;
		size_t need;
		off_t next;

		if (!d->pending) {
			errno = 0;
			d->pending = readdir(d->dp);
			if (!d->pending) {
				if (errno && used == 0)
					ret = -errno;
				break;
			}
		}
		next = telldir(d->dp);
		if (plus) {
			referenced = plus_entry(req, ino, d->pending, &e);
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used,
						      d->pending->d_name, &e,
						      next);
		} else {
			struct stat st = {
				.st_ino = d->pending->d_ino,
				.st_mode = (mode_t)d->pending->d_type << 12};

			need = fuse_add_direntry(req, buf + used, size - used,
						 d->pending->d_name, &st,
						 next);
		}
		if (need > size - used) {
			/* does not fit: undo its reference, resend it next */
			if (referenced)
				itab_forget(req_fs(req)->itab,
					    req_inode(req, e.ino), 1);
			break;
		}
		used += need;
		d->pending = NULL;
		d->offset = next;
	}
	if (plus)
		req_identity_leave(&id);
out:
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dir_handle *d = fi_dir(fi);

	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	int fd = dirfd(fi_dir(fi)->dp);
	int ret = datasync ? fdatasync(fd) : fsync(fd);

	fuse_reply_err(req, ret == -1 ? errno : 0);
}
