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
#ifndef CLAMFS_CMDNAMES_H
#define CLAMFS_CMDNAMES_H

#define CONTROL_RELOAD	   "trusted.clamfs.reload"
#define CONTROL_DROP_CACHE "trusted.clamfs.drop_cache"
#define CONTROL_PID	   "trusted.clamfs.pid"
#define CONTROL_STATS	   "trusted.clamfs.stats"

#define CONTROL_TOKEN_MAX 40
#define CONTROL_OUTCOMES  16

#endif
