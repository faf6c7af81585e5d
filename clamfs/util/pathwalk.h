/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one walk down a relative path below a directory fd without leaving
 * it: one component at a time, O_NOFOLLOW, no "", "." or ".." component,
 * so neither a symlink nor a hostile name (from a backend, a quarantine
 * record or a command line) leads outside. Used to quarantine, delete and
 * restore files.
 */
#ifndef CLAMFS_PATHWALK_H
#define CLAMFS_PATHWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

enum pathwalk_flags {
	PATHWALK_CREATE = 1 << 0, /* make missing directories (mode 0700) */
	/*
	 * Every directory, root_fd's included, must be root's alone (owner
	 * uid 0, not group or world writable), else -EPERM: what a user could
	 * have changed must not be trusted.
	 */
	PATHWALK_ROOT_ONLY = 1 << 1,
};

/* Owned by uid 0 and writable by nobody else: PATHWALK_ROOT_ONLY's rule. */
bool pathwalk_root_only(const struct stat *st);

/*
 * Opens the directory holding relpath's last component, walking from
 * root_fd. Returns the fd (O_PATH) and points *base at the last component
 * inside buf (a copy of relpath), or a negative errno.
 */
int pathwalk_parent(int root_fd, const char *relpath, unsigned int flags,
		    char *buf, size_t buflen, const char **base);

#endif
