/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What clamfs's exit status means, so that a unit, a script or
 * mount(8) can tell a typo from a dead clamd (clamfs(8), EXIT STATUS).
 */
#ifndef CLAMFS_EXITCODE_H
#define CLAMFS_EXITCODE_H

enum clamfs_exit {
	EXIT_OK = 0,
	/* a failure while running, or one that fits nothing below */
	EXIT_FAILED = 1,
	/* a bad option, configuration file or value; a rejected reload */
	EXIT_CONFIG = 2,
	/* clamd: not reachable, not answering, or unfit for the settings */
	EXIT_CLAMD = 3,
	/* the backend, the mountpoint or the FUSE mount itself */
	EXIT_MOUNT = 4,
	/* --stats, --reload, --drop-cache: no clamfs mount there */
	EXIT_NOT_MOUNTED = 5,
};

#endif
