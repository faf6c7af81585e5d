/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The mount's state (mount_state.h) as the FUSE request handlers see it:
 * libfuse's low-level API and node ids. Only FUSE-facing files include
 * this header.
 */
#ifndef CLAMFS_FS_H
#define CLAMFS_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "mount_state.h"

static inline fuse_ino_t inode_nodeid(struct clamfs_fs *fs, struct inode *in)
{
	(void)fs;
	return inode_hand_out(in);
}

#endif
