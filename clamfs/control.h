/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Commands to a running mount, given as extended attributes of its root:
 * `clamfs --reload` and `clamfs --drop-cache` set them, and read back the
 * outcome. No socket or port to secure: the kernel lets only a caller
 * with CAP_SYS_ADMIN read or write trusted.* names, and the daemon also
 * insists on uid 0.
 *
 *   trusted.clamfs.reload      set: reload the configuration now; the
 *                              reply is 0 or EINVAL (rejected). The value
 *                              is a token of up to CONTROL_TOKEN_MAX
 *                              letters, digits or '-' (or empty).
 *   trusted.clamfs.reload.TOKEN
 *                              get: the outcome, one text, of the reload
 *                              set with TOKEN: two administrators reloading
 *                              at once each read their own. The last
 *                              CONTROL_OUTCOMES outcomes are kept.
 *   trusted.clamfs.reload      get: the last reload's outcome.
 *   trusted.clamfs.drop_cache  set: forget every cached verdict.
 *   trusted.clamfs.pid         get: the daemon's process id, so that a
 *                              command given a PID finds its mount.
 *   trusted.clamfs.stats       get: the live statistics (stats.h), also
 *                              for CAP_SYS_ADMIN callers that are not
 *                              uid 0 (read only).
 */
#ifndef CLAMFS_CONTROL_H
#define CLAMFS_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "fs.h"

#define CONTROL_RELOAD	   "trusted.clamfs.reload"
#define CONTROL_DROP_CACHE "trusted.clamfs.drop_cache"
#define CONTROL_PID	   "trusted.clamfs.pid"
#define CONTROL_STATS	   "trusted.clamfs.stats"

#define CONTROL_TOKEN_MAX 40
#define CONTROL_OUTCOMES  16

/*
 * Whether name is in the daemon's own trusted.clamfs. namespace, which
 * never reaches the backend: a command given the wrong directory must
 * not leave an attribute on a user's file.
 */
bool control_is_command(const char *name);

/* Carries out a set of name to value (size bytes) on ino; replies to req. */
void control_set(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size);

/* Answers a get of name on ino (size 0: the length) and replies. */
void control_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);

#endif
