/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's file descriptor budget: raising the soft RLIMIT_NOFILE to
 * the hard limit at start (systemd gives services 1024), and how many of
 * those fds the inode table may keep as O_PATH handles. No FUSE here.
 */
#ifndef CLAMFS_FDLIMIT_H
#define CLAMFS_FDLIMIT_H

#include <stddef.h>
#include <sys/resource.h>

struct fdlimit {
	rlim_t before; /* soft limit found at start */
	rlim_t soft;   /* soft limit in force now */
	rlim_t hard;
	int err; /* 0, or the errno of a failed getrlimit/setrlimit */
};

/*
 * Raises the soft fd limit to the hard limit and reports both in *out.
 * On failure the limit in force is left and reported, with out->err set.
 */
void fdlimit_raise(struct fdlimit *out);

/*
 * How many inodes (each one O_PATH fd) the table may hold with a soft
 * limit of soft: what is left after a reserve for opens, directory
 * streams, splice pipes, clamd connections and the like.
 */
size_t fdlimit_inode_budget(rlim_t soft);

/*
 * The most the table may hold while its evictor catches up: the budget
 * plus half of the reserve. Eviction aims at the budget, but it runs on
 * one thread, and on a loaded machine lookups can outpace it for a while;
 * the other half of the reserve stays for opens.
 */
size_t fdlimit_inode_cap(rlim_t soft);

#endif
