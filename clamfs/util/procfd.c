// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * "/proc/self/fd/N" for an fd, cheaply.
 */
#include "procfd.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

/*
 * By hand: snprintf took about 730 instructions here, more than half of a
 * whole GETXATTR request's, and the kernel sends one before every write.
 */
void proc_fd_path(char buf[PROC_FD_PATH_MAX], int fd)
{
	static const char prefix[] = "/proc/self/fd/";
	unsigned int v = (unsigned int)fd;
	char digits[10];
	size_t n = 0, len = sizeof(prefix) - 1;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	memcpy(buf, prefix, len);
	while (n)
		buf[len++] = digits[--n];
	buf[len] = '\0';
}

int proc_fd_reopen_readonly(int fd, int flags)
{
	char link[PROC_FD_PATH_MAX];
	int rfd;

	proc_fd_path(link, fd);
	rfd = open(link, O_RDONLY | O_CLOEXEC | flags);
	return rfd == -1 ? -errno : rfd;
}
