/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A scratch directory in the build tree (the working directory ctest runs
 * unit tests in: a real disk filesystem, unlike a tmpfs /tmp), for tests
 * of code that looks at the filesystem under it.
 */
#ifndef CLAMFS_TEST_SCRATCH_DIR_H
#define CLAMFS_TEST_SCRATCH_DIR_H

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Makes NAME.XXXXXX in the working directory, its path in dir (PATH_MAX
 * bytes); returns an O_PATH descriptor of it, or -1.
 */
static inline int scratch_dir_make(char *dir, const char *name)
{
	if (!getcwd(dir, PATH_MAX - strlen(name) - 9))
		return -1;
	strcat(dir, "/");
	strcat(dir, name);
	strcat(dir, ".XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* Closes fd and removes dir with everything in it: 0, or -1. */
static inline int scratch_dir_remove(const char *dir, int fd)
{
	char cmd[PATH_MAX + 16];

	close(fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
