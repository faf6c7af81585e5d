// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A walk down a relative path that cannot leave its root (pathwalk.h).
 */
#include "pathwalk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool plain_component(const char *c)
{
	return *c && strcmp(c, ".") != 0 && strcmp(c, "..") != 0;
}

bool pathwalk_root_only(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static int check_root_only(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == -1)
		return -errno;
	return pathwalk_root_only(&st) ? 0 : -EPERM;
}

int pathwalk_parent(int root_fd, const char *relpath, unsigned int flags,
		    char *buf, size_t buflen, const char **base)
{
	char *comp, *slash;
	int fd, next, ret;

	if (strlcpy(buf, relpath, buflen) >= buflen)
		return -ENAMETOOLONG;
	fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
	if (fd == -1)
		return -errno;
	for (comp = buf;; comp = slash + 1) {
		if ((flags & PATHWALK_ROOT_ONLY) && (ret = check_root_only(fd)))
			goto fail;
		slash = strchr(comp, '/');
		if (!slash)
			break;
		*slash = '\0';
		if (!plain_component(comp)) {
			ret = -EINVAL;
			goto fail;
		}
		if ((flags & PATHWALK_CREATE) &&
		    mkdirat(fd, comp, 0700) == -1 && errno != EEXIST) {
			ret = -errno;
			goto fail;
		}
		next = openat(fd, comp,
			      O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next == -1) {
			ret = -errno;
			goto fail;
		}
		close(fd);
		fd = next;
	}
	if (!plain_component(comp)) {
		ret = -EINVAL;
		goto fail;
	}
	*base = comp;
	return fd;
fail:
	close(fd);
	return ret;
}
