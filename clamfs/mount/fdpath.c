// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What a backend fd is called inside the mount, and whether that name is
 * the file's only one.
 */
#include "fdpath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procfd.h"

const char *fs_fd_path(struct clamfs_fs *fs, int fd, char *buf, size_t len)
{
	char link[PROC_FD_PATH_MAX];
	ssize_t n;

	proc_fd_path(link, fd);
	n = readlink(link, buf, len);
	if (n <= 0 || (size_t)n >= len)
		return NULL;
	buf[n] = '\0';
	if (strncmp(buf, fs->fd_root, fs->fd_root_len) != 0)
		return NULL;
	if (buf[fs->fd_root_len] == '\0')
		return buf + fs->fd_root_len;
	/* a root of "/" has its slash already */
	if (fs->fd_root_len == 1)
		return buf + 1;
	if (buf[fs->fd_root_len] != '/')
		return NULL;
	return buf + fs->fd_root_len + 1;
}

/*
 * Whether rel, resolved from the backend root without following any
 * symlink, is the very file st describes.
 */
static bool names_file(struct clamfs_fs *fs, const char *rel,
		       const struct stat *st)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
	};
	struct stat found;
	bool same;
	int fd;

	fd = (int)syscall(SYS_openat2, inode_fd(itab_root(fs->itab)), rel, &how,
			  sizeof(how));
	if (fd == -1)
		return false;
	same = fstat(fd, &found) == 0 && found.st_dev == st->st_dev &&
	       found.st_ino == st->st_ino;
	close(fd);
	return same;
}

const char *fs_fd_only_name(struct clamfs_fs *fs, int fd, char *buf, size_t len)
{
	const char *rel = fs_fd_path(fs, fd, buf, len);
	struct stat st;

	/*
	 * The kernel names an fd by the dentry it was opened through: after
	 * that name is unlinked it says "NAME (deleted)" and a second link
	 * goes unmentioned. So the name must resolve to this very file, and
	 * the file must have no other, checked in that order: a link added
	 * meanwhile shows in the count.
	 */
	if (!rel || !*rel || fstat(fd, &st) == -1 || st.st_nlink != 1 ||
	    !names_file(fs, rel, &st))
		return NULL;
	if (fstat(fd, &st) == -1 || st.st_nlink != 1)
		return NULL;
	return rel;
}
