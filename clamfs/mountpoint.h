/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Checks run before mounting: is the mountpoint usable, and what is
 * already mounted there.
 */
#ifndef CLAMFS_MOUNTPOINT_H
#define CLAMFS_MOUNTPOINT_H

#include <stddef.h>

/*
 * Writes into fstype the type of the topmost mount at the absolute path
 * dir according to the mountinfo file given (normally
 * /proc/self/mountinfo). Returns 1 when dir is a mountpoint, 0 when not,
 * negative errno on failure.
 */
int mountpoint_fstype(const char *mountinfo, const char *dir, char *fstype,
		      size_t len);

/*
 * Calls fn for every mount the mountinfo file lists, in its order (the
 * last one on a directory is the top one), with the unescaped mountpoint
 * and the type. Stops at the first non-zero return of fn and returns it;
 * 0 after the last mount, negative errno when the file cannot be read.
 */
int mountpoint_each(const char *mountinfo,
		    int (*fn)(const char *dir, const char *fstype, void *arg),
		    void *arg);

/*
 * A clamfs that died leaves its mount behind, answering ENOTCONN, and a
 * restart would fail on it. When given is such a dead mount of type
 * fstype (the top one on it), detaches it and writes its absolute name
 * into dir. Returns 1 when it did, 0 when given is not a dead mount of
 * that type (anything else is left alone), negative errno on failure.
 */
int mountpoint_remove_stale(const char *mountinfo, const char *given,
			    const char *fstype, char *dir, size_t len);

#endif
