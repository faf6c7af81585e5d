/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * "/proc/self/fd/N": reaches an O_PATH fd's object for calls that need a
 * real path (open, chmod, truncate, xattrs) without naming it.
 */
#ifndef CLAMFS_PROCFD_H
#define CLAMFS_PROCFD_H

#define PROC_FD_PATH_MAX 32

/* Writes "/proc/self/fd/<fd>" into buf. */
void proc_fd_path(char buf[PROC_FD_PATH_MAX], int fd);

/*
 * A new read-only descriptor of the file open at fd (O_CLOEXEC, plus
 * flags such as O_NOATIME), as whoever calls it is: a new fd or -errno.
 */
int proc_fd_reopen_readonly(int fd, int flags);

#endif
