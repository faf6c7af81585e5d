/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Commands an administrator sends to a running mount (cmd_xattr.h is the
 * daemon's side): clamfs --reload TARGET and clamfs --drop-cache TARGET,
 * where TARGET is the mountpoint or the daemon's process id (what systemd
 * knows as $MAINPID).
 */
#ifndef CLAMFS_MOUNT_CMD_H
#define CLAMFS_MOUNT_CMD_H

#include <stdio.h>

/*
 * argv after "--reload": asks for a reload and waits for its outcome,
 * printed on out. Returns the exit status: 0 in force, EXIT_CONFIG
 * rejected, EXIT_NOT_MOUNTED no such mount (exitcode.h).
 */
int mount_cmd_reload(int argc, char *argv[], FILE *out);

/* argv after "--drop-cache"; the same statuses. */
int mount_cmd_drop_cache(int argc, char *argv[], FILE *out);

/*
 * The mountpoint TARGET names, into mnt: TARGET itself, or for a number
 * the clamfs mount whose daemon has that process id. 0 or negative errno
 * (-ESRCH: no clamfs mount of that process).
 */
int mount_cmd_target(const char *target, char *mnt, size_t len);

#endif
