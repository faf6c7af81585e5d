// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Quarantine and delete of infected backend files, symlink-safe: every
 * directory is opened with O_NOFOLLOW relative to the previous one.
 */
#include "action.h"

#include <pwd.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#include "pathwalk.h"
#include "qrecord.h"

static int same_file_st(int dirfd, const char *name, dev_t dev, ino_t ino,
			struct stat *st)
{
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) == -1)
		return -errno;
	if (!S_ISREG(st->st_mode) || st->st_dev != dev || st->st_ino != ino)
		return -ESTALE;
	return 0;
}

static int same_file_at(int dirfd, const char *name, dev_t dev, ino_t ino)
{
	struct stat st;

	return same_file_st(dirfd, name, dev, ino, &st);
}

int action_delete(int backend_fd, const char *relpath, dev_t dev, ino_t ino,
		  struct stat *parent)
{
	char buf[PATH_MAX];
	const char *base;
	int dirfd, ret;

	dirfd = pathwalk_parent(backend_fd, relpath, 0, buf, sizeof(buf),
				&base);
	if (dirfd < 0)
		return dirfd;
	ret = same_file_at(dirfd, base, dev, ino);
	if (ret == 0 && unlinkat(dirfd, base, 0) == -1)
		ret = -errno;
	if (ret == 0 && parent && fstat(dirfd, parent) == -1)
		ret = -errno;
	close(dirfd);
	return ret;
}

int action_copy_file(int src, const struct stat *st, int dirfd,
		     const char *name)
{
	struct timespec times[2] = {st->st_atim, st->st_mtim};
	int dst, ret = 0;
	off_t off = 0;

	dst = openat(dirfd, name,
		     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		     0600);
	if (dst == -1)
		return -errno;
	for (;;) {
		/* copy_file_range refuses most cross-filesystem pairs */
		ssize_t n = sendfile(dst, src, &off, 1 << 20);

		if (n == 0)
			break;
		if (n == -1) {
			ret = -errno;
			break;
		}
	}
	/*
	 * Owner first: a chown clears set-id bits, which the chmod then
	 * puts back; the times last, since writing moved the mtime.
	 */
	if (ret == 0 && (fchown(dst, st->st_uid, st->st_gid) == -1 ||
			 fchmod(dst, st->st_mode & 07777) == -1 ||
			 futimens(dst, times) == -1))
		ret = -errno;
	if (ret == 0 && fsync(dst) == -1)
		ret = -errno;
	close(dst);
	if (ret)
		unlinkat(dirfd, name, 0);
	return ret;
}

static int move_across(int dirfd, const char *base, dev_t dev, ino_t ino,
		       int qdir, const char *name)
{
	struct stat st;
	int src, ret;

	src = openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (src == -1)
		return -errno;
	if (fstat(src, &st) == -1 || st.st_dev != dev || st.st_ino != ino) {
		close(src);
		return -ESTALE;
	}
	ret = action_copy_file(src, &st, qdir, name);
	close(src);
	if (ret)
		return ret;
	ret = same_file_at(dirfd, base, dev, ino);
	if (ret == 0 && unlinkat(dirfd, base, 0) == -1)
		ret = -errno;
	return ret;
}

/* Writes the record of qdir/name; returns 0 or why it could not. */
static int write_record(int qdir, const char *name, const char *relpath,
			const struct stat *st, time_t now,
			const struct quarantine_note *note)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];
	struct qrecord r = {
		.path = (char *)relpath,
		.share = (char *)note->share,
		.signature = (char *)note->signature,
		.when = now,
		.uid = st->st_uid,
		.gid = st->st_gid,
		.mode = st->st_mode,
		.size = (uint64_t)st->st_size,
		.mtime = st->st_mtim,
		.has_opener = true,
		.opener_uid = note->opener_uid,
	};

	/* may ask a directory server, as the detection log line does */
	if (getpwuid_r(note->opener_uid, &pw, tmp, sizeof(tmp), &res) == 0 &&
	    res)
		r.opener_name = res->pw_name;
	return qrecord_write_at(qdir, name, &r);
}

int action_quarantine(int backend_fd, const char *relpath, dev_t dev, ino_t ino,
		      int qdir_fd, char *dest, size_t destlen,
		      struct stat *parent, struct quarantine_note *note)
{
	char src_buf[PATH_MAX], dst_buf[PATH_MAX], stamp[32],
		name[NAME_MAX + 1];
	const char *base, *qbase;
	int dirfd, qdir = -1, ret;
	time_t now = time(NULL);
	struct stat st;
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	dirfd = pathwalk_parent(backend_fd, relpath, 0, src_buf,
				sizeof(src_buf), &base);
	if (dirfd < 0)
		return dirfd;
	ret = same_file_st(dirfd, base, dev, ino, &st);
	if (ret)
		goto out;
	qdir = pathwalk_parent(qdir_fd, relpath, PATHWALK_CREATE, dst_buf,
			       sizeof(dst_buf), &qbase);
	if (qdir < 0) {
		ret = qdir;
		goto out;
	}
	for (int n = 0; n < 1000; n++) {
		int len =
			n ? snprintf(name, sizeof(name), "%s.%s.%d", qbase,
				     stamp, n)
			  : snprintf(name, sizeof(name), "%s.%s", qbase, stamp);

		/* the record's temporary name must fit too */
		if (len < 0 ||
		    (size_t)len + QRECORD_NAME_RESERVE >= sizeof(name)) {
			ret = -ENAMETOOLONG;
			goto out;
		}
		ret = renameat2(dirfd, base, qdir, name, RENAME_NOREPLACE) == -1
			      ? -errno
			      : 0;
		/*
		 * The name may have been swapped between the check and the
		 * rename: the moved file must be the scanned one, or it goes
		 * back.
		 */
		if (ret == 0 && same_file_at(qdir, name, dev, ino) == -ESTALE) {
			renameat2(qdir, name, dirfd, base, RENAME_NOREPLACE);
			ret = -ESTALE;
		}
		if (ret == -EXDEV)
			ret = move_across(dirfd, base, dev, ino, qdir, name);
		if (ret != -EEXIST)
			break;
	}
	if (ret == 0 && parent && fstat(dirfd, parent) == -1)
		memset(parent, 0, sizeof(*parent));
	if (ret == 0 && note)
		note->record_error =
			write_record(qdir, name, relpath, &st, now, note);
	if (ret == 0) {
		const char *last = strrchr(relpath, '/');

		if (last)
			snprintf(dest, destlen, "%.*s/%s",
				 (int)(last - relpath), relpath, name);
		else
			snprintf(dest, destlen, "%s", name);
	}
out:
	if (qdir >= 0)
		close(qdir);
	close(dirfd);
	return ret;
}
