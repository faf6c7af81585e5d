/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "vstore_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static bool writable_by_others(const struct stat *st)
{
	if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
		return false;
	/* others may only rename or remove what they own in there */
	return !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) &&
		 st->st_uid == 0);
}

static int check_own(const char *dir, const struct stat *st)
{
	if (st->st_uid != geteuid()) {
		log_err("verdict store: directory %s is owned by uid %u, not "
			"by clamfs (uid %u): not used",
			dir, (unsigned int)st->st_uid, (unsigned int)geteuid());
		return -EPERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		log_err("verdict store: directory %s is writable by others "
			"(mode %04o): not used, anybody who may write it could "
			"mark a file clean",
			dir, (unsigned int)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* Up to the root: each directory above must not be others' to change. */
static int check_above(int fd, const char *dir)
{
	struct stat st, up;
	int cur = dup(fd), parent, ret = 0;

	if (cur == -1)
		return -errno;
	for (;;) {
		parent = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (parent == -1 || fstat(cur, &st) == -1 ||
		    fstat(parent, &up) == -1) {
			ret = -errno;
			break;
		}
		close(cur);
		cur = parent;
		if (up.st_dev == st.st_dev && up.st_ino == st.st_ino)
			break; /* the root */
		if ((up.st_uid != 0 && up.st_uid != geteuid()) ||
		    writable_by_others(&up)) {
			log_err("verdict store: a directory above %s (uid %u, "
				"mode %04o) may be changed by others: not "
				"used, they could put another store in its "
				"place",
				dir, (unsigned int)up.st_uid,
				(unsigned int)(up.st_mode & 07777));
			ret = -EPERM;
			break;
		}
	}
	close(cur);
	return ret;
}

int vstore_dir_open(const char *dir)
{
	struct stat st;
	int fd, ret;

	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		ret = -errno;
		log_err("verdict store: cannot create %s: %s", dir,
			strerror(-ret));
		return ret;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		ret = -errno;
		log_err("verdict store: cannot open %s: %s", dir,
			strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) == -1) {
		ret = -errno;
		goto fail;
	}
	ret = check_own(dir, &st);
	if (ret == 0)
		ret = check_above(fd, dir);
	if (ret == 0)
		return fd;
fail:
	close(fd);
	return ret;
}

int vstore_dir_refuse_foreign(int dfd, const char *dir, const char *name)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & (S_IWGRP | S_IWOTH)))
		return 0;
	log_err("verdict store: %s/%s is not clamfs's own file (uid %u, mode "
		"%06o): removed, the store starts empty",
		dir, name, (unsigned int)st.st_uid, (unsigned int)st.st_mode);
	if (unlinkat(dfd, name, 0) == -1)
		return -errno;
	return 1;
}
