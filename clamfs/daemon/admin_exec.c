/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Hands clamfs's administrators' commands to clamfs-admin (admin_exec.h).
 */
#include "admin_exec.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ADMIN_NAME "clamfs-admin"

bool admin_exec_wanted(const char *arg)
{
	static const char *const verbs[] = {
		"--stats", "--reload", "--drop-cache", "--import-clamfs-xml"};

	for (size_t i = 0; i < sizeof(verbs) / sizeof(*verbs); i++)
		if (strcmp(arg, verbs[i]) == 0)
			return true;
	return false;
}

/*
 * The sibling of this executable, by the kernel's link rather than argv[0]
 * or PATH: what runs is always the one installed (or built) with it.
 */
static bool sibling_path(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return false;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return (size_t)snprintf(out, len, "%s/%s", self, ADMIN_NAME) < len;
}

int admin_exec(char *argv[])
{
	char path[PATH_MAX];
	int err = ENOENT;

	if (sibling_path(path, sizeof(path))) {
		execv(path, argv);
		err = errno;
		if (err != ENOENT)
			goto fail;
	}
	snprintf(path, sizeof(path), "%s", CLAMFS_ADMIN_PATH);
	execv(path, argv);
	err = errno;
fail:
	fprintf(stderr, "clamfs: %s needs %s: %s\n", argv[1], path,
		strerror(err));
	return 127;
}
