/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Who still holds the raw backend after an in-place mount: a process whose
 * working or root directory, open file or file mapping is beneath the
 * backend directory and on the backend's own mount, not on the clamfs
 * mount that now covers it (an smbd session opened before the mount, a
 * shell cd'ed into the share). Such a process reads the unscanned files
 * until it lets go; the mount cannot take that back, so it says who, as
 * fuser(1) would. Read from /proc: nothing is opened beneath the backend
 * and no file is asked for fresh attributes (AT_STATX_DONT_SYNC), so a
 * hung network file system or the mount's own requests cannot block it.
 */
#ifndef CLAMFS_HOLDERS_H
#define CLAMFS_HOLDERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What one process holds beneath the backend. */
struct holder {
	pid_t pid;
	char comm[17];	   /* its name, as /proc/PID/comm */
	unsigned int fds;  /* open files and directories */
	unsigned int maps; /* mapped files */
	unsigned int dirs; /* 1 for its cwd, 1 for its root */
	char example[256]; /* one of the paths it holds */
};

/*
 * Calls found for each process other than skip_pid (ourselves) that holds
 * something beneath backend (an absolute path without a trailing '/') that
 * is on device backend_dev and not on the mount with id fuse_mnt_id
 * (statx's stx_mnt_id; the clamfs mount, on top of it).
 * proc is "/proc" but for tests. Returns how many such processes there
 * are, or negative errno when proc cannot be read.
 */
int holders_scan(const char *proc, const char *backend, uint64_t fuse_mnt_id,
		 dev_t backend_dev, pid_t skip_pid,
		 void (*found)(const struct holder *h, void *arg), void *arg);

/*
 * For an in-place mount, before it serves: scans in a thread of its own
 * and logs a warning per holder (the first 20) and one in all, naming
 * them as the administrator needs to restart them. Waits up to wait_ms
 * for the scan, so that what it finds is what was there before the mount
 * (not the descriptors the mount's own first scans hand to clamd); should
 * the scan itself need the mount (a holder's file on it), serving starts
 * after wait_ms and the scan finishes on its own.
 */
void holders_warn(const char *backend, dev_t dev, unsigned wait_ms);

#endif
