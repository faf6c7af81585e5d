/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's side of the commands to a running mount (cmdnames.h says
 * which extended attributes they are and who may use them): carrying out
 * a set, answering a get.
 */
#ifndef CLAMFS_CMD_XATTR_H
#define CLAMFS_CMD_XATTR_H

#include <stdbool.h>
#include <stddef.h>

#include "cmdnames.h"
#include "fs.h"

/*
 * Whether name is in the daemon's own trusted.clamfs. namespace, which
 * never reaches the backend: a command given the wrong directory must
 * not leave an attribute on a user's file.
 */
bool cmd_xattr_is_command(const char *name);

/* Carries out a set of name to value (size bytes) on ino; replies to req. */
void cmd_xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name,
		   const char *value, size_t size);

/* Answers a get of name on ino (size 0: the length) and replies. */
void cmd_xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name,
		   size_t size);

#endif
