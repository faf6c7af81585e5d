// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Directory listing: readdir and readdirplus over a DIR stream per open
 * directory, resumable at the offsets the kernel hands back.
 */
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/queue.h>
#include <string.h>
#include <unistd.h>

#include "ops.h"
#include "procfd.h"
#include "request.h"
#include "watch.h"

struct dir_handle {
	DIR *dp;
	off_t offset;		/* telldir() cookie of the next entry */
	struct dirent *pending; /* read but not yet returned */
	LIST_ENTRY(dir_handle) open_link;
};

/*
 * Every open directory handle: at unmount the kernel may end the session
 * with RELEASEDIRs still queued (seen with libfuse 3.17), and those
 * handles are closed by ops_dir_close_all. One mount per process.
 */
static pthread_mutex_t open_dirs_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(, dir_handle) open_dirs = LIST_HEAD_INITIALIZER(open_dirs);

static void dir_free(struct dir_handle *d)
{
	pthread_mutex_lock(&open_dirs_lock);
	LIST_REMOVE(d, open_link);
	pthread_mutex_unlock(&open_dirs_lock);
	closedir(d->dp);
	free(d);
}

void ops_dir_close_all(void)
{
	struct dir_handle *d;

	while ((d = LIST_FIRST(&open_dirs)))
		dir_free(d);
}

static struct dir_handle *fi_dir(const struct fuse_file_info *fi)
{
	return (struct dir_handle *)(uintptr_t)fi->fh;
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dir_handle *d = calloc(1, sizeof(*d));
	struct inode *dir = req_inode(req, ino);
	char path[PROC_FD_PATH_MAX];
	struct req_identity id;
	int fd = -1, ret, dirfd;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	dirfd = dir ? inode_fd(dir) : -1;
	/* judged by its own mode; thrown away if that changed meanwhile */
	ret = dir ? req_identity_enter_opening(req, &id, dirfd) : -ESTALE;
	if (ret)
		goto fail;
	/* openat(fd, ".") would also need search (x) permission */
	proc_fd_path(path, dirfd);
	for (;;) {
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ret = fd == -1 ? -errno : 0;
		if (ret == 0 && !req_identity_still_alike(req, &id, fd)) {
			close(fd);
			fd = -1;
			ret = -EACCES;
		}
		if (ret == 0 || !req_identity_widen(req, &id, -ret))
			break;
	}
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
	pthread_mutex_lock(&open_dirs_lock);
	LIST_INSERT_HEAD(&open_dirs, d, open_link);
	pthread_mutex_unlock(&open_dirs_lock);
	/*
	 * Kept across opens until the directory changes: through the mount
	 * the kernel sees that itself, behind it the watch tells it. Without
	 * the watch every read goes to the backend: a cached listing would
	 * cost a lookup per name once the entries expire (READDIRPLUS
	 * refreshes them by the dozen).
	 */
	fi->cache_readdir = watch_covers(req_fs(req), inode_dev(dir));
	fi->keep_cache = fi->cache_readdir;
	if (fuse_reply_open(req, fi) != 0)
		dir_free(d);
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
 * up (gone meanwhile, no search right on the directory, no fd left) get
 * ino 0: the kernel then lists the name without caching attributes for
 * it, and a stat of it becomes a lookup of its own. Returns 0 when e holds
 * an inode reference, else negative errno.
 */
static int plus_entry(fuse_req_t req, struct inode *dir,
		      const struct dirent *de, bool lookup,
		      struct fuse_entry_param *e)
{
	int ret;

	if (!lookup || !dir || is_dot_or_dotdot(de->d_name))
		ret = -EINVAL;
	else
		ret = fs_lookup_entry(req_fs(req), dir, de->d_name, e);
	if (ret) {
		memset(e, 0, sizeof(*e));
		e->attr.st_ino = de->d_ino;
		e->attr.st_mode = (mode_t)de->d_type << 12;
	}
	return ret;
}

/* The inodes a readdirplus reply hands over, for undoing them. */
struct plus_refs {
	struct inode **inodes;
	size_t n, cap;
};

/*
 * Every direntplus record takes more than 128 bytes (the entry, the
 * dirent header, the padded name): a reply of size bytes holds fewer
 * than size / 128 + 1 of them.
 */
static int plus_refs_init(struct plus_refs *r, size_t size)
{
	r->n = 0;
	r->cap = size / 128 + 1;
	r->inodes = calloc(r->cap, sizeof(*r->inodes));
	return r->inodes ? 0 : -ENOMEM;
}

/* The kernel never got them: give back what it will never forget. */
static void plus_refs_undo(struct clamfs_fs *fs, struct plus_refs *r)
{
	for (size_t i = 0; i < r->n; i++)
		itab_forget(fs->itab, r->inodes[i], 1);
	r->n = 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t offset, struct fuse_file_info *fi, bool plus)
{
	struct clamfs_fs *fs = req_fs(req);
	struct dir_handle *d = fi_dir(fi);
	struct inode *dir = req_inode(req, ino);
	struct plus_refs refs = {0};
	struct req_identity id;
	bool entered = false;
	/*
	 * A plus reply hands inodes over only while the table has room:
	 * listing a big directory must not take the fds that lookups, opens
	 * and scans need. Once the table runs low or a lookup finds no fd,
	 * the rest of the reply is names only, rather than a mix of names
	 * that failed and names that took the fds freed meanwhile.
	 */
	bool attach = plus && dir && !itab_low(fs->itab);
	char *buf = NULL;
	size_t used = 0;
	int ret;

	buf = malloc(size);
	ret = buf ? 0 : -ENOMEM;
	if (ret == 0 && attach)
		ret = plus_refs_init(&refs, size);
	if (ret)
		goto out_free;
	if (attach) {
		int dirfd = inode_fd(dir);

		/*
		 * Only the directory's search right is checked; an entry
		 * refused for all that (its mode changed meanwhile) is
		 * named only, and the kernel looks it up itself.
		 */
		ret = req_identity_enter_on(req, &id, &dirfd, 1);
		if (ret)
			goto out;
		entered = true;
	}
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
		int err;

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
			err = plus_entry(req, dir, d->pending,
					 attach && refs.n < refs.cap, &e);
			referenced = err == 0;
			if (err == -EMFILE || err == -ENFILE ||
			    (referenced && itab_low(fs->itab)))
				attach = false;
			need = fuse_add_direntry_plus(
				req, buf + used, size - used,
				d->pending->d_name, &e, next);
		} else {
			struct stat st = {.st_ino = d->pending->d_ino,
					  .st_mode = (mode_t)d->pending->d_type
						     << 12};

			need = fuse_add_direntry(req, buf + used, size - used,
						 d->pending->d_name, &st, next);
		}
		if (need > size - used) {
			/* does not fit: undo its reference, resend it next */
			if (referenced)
				itab_forget(fs->itab, req_inode(req, e.ino), 1);
			break;
		}
		if (referenced) {
			refs.inodes[refs.n++] = req_inode(req, e.ino);
			itab_note_name(fs->itab, req_inode(req, e.ino), dir,
				       d->pending->d_name);
		}
		used += need;
		d->pending = NULL;
		d->offset = next;
	}
	if (entered)
		req_identity_leave(&id);
out:
	if (ret) {
		plus_refs_undo(fs, &refs);
		fuse_reply_err(req, -ret);
	} else if (fuse_reply_buf(req, buf, used) != 0) {
		plus_refs_undo(fs, &refs);
	}
	free(refs.inodes);
	free(buf);
	return;

out_free:
	free(refs.inodes);
	free(buf);
	fuse_reply_err(req, -ret);
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
	dir_free(fi_dir(fi));
	fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	int fd = dirfd(fi_dir(fi)->dp);
	int ret = datasync ? fdatasync(fd) : fsync(fd);

	fuse_reply_err(req, ret == -1 ? errno : 0);
}
