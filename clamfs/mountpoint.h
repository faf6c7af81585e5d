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

#endif
