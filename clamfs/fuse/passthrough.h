/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Kernel FUSE passthrough (Linux >= 6.9, libfuse >= 3.17): once the gate
 * allows an open, the kernel reads and writes the backend file itself,
 * without a request to the daemon. Compiled in only where libfuse has the
 * API; used only where the kernel offers it and the option allows.
 *
 * The kernel lets an inode's open files use one backing file, or none:
 * an open in the other mode fails (EBUSY, ETXTBSY). So the first open of
 * an inode decides for every open that overlaps it, and all of them share
 * one backing id, closed when the last is released.
 */
#ifndef CLAMFS_PASSTHROUGH_H
#define CLAMFS_PASSTHROUGH_H

#include "fs.h"

/* Whether this build can use passthrough at all (libfuse >= 3.17). */
bool passthrough_compiled(void);

/*
 * At INIT: asks the kernel for passthrough when fs->passthrough_wanted and
 * it is offered, records the outcome in fs->passthrough and logs it.
 */
void passthrough_negotiate(struct clamfs_fs *fs, struct fuse_conn_info *conn);

/*
 * Before the reply that allows an open (or create) of a regular file open
 * at fd: joins the inode's open files (and pins it: inode_pin_open) and,
 * when they use passthrough (or this is the first open and passthrough
 * works), sets fi->backing_id.
 * Must be undone with passthrough_release when the reply fails, as for a
 * release.
 */
void passthrough_open(struct clamfs_fs *fs, fuse_req_t req, struct inode *inode,
		      int fd, struct fuse_file_info *fi);

/* A regular file's open handle is gone (release, or a failed reply). */
void passthrough_release(struct clamfs_fs *fs, struct inode *inode);

#endif
