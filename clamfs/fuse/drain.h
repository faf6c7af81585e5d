/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What a stopping daemon still owes the kernel once its session loop is
 * over: the write-back of what writers left in the page cache (the
 * write-back cache, shared mappings), and of the pages a scanner thread
 * waits for (gate_request.c). Both come as requests that no worker reads
 * any more.
 */
#ifndef CLAMFS_DRAIN_H
#define CLAMFS_DRAIN_H

#include "fs.h"

/*
 * Has the kernel write back the dirty pages of the mount at mnt, whose
 * mount id is mnt_id (nothing when the top mount there is another one, or
 * mnt_id is 0: an unmount came first), answering requests on this thread
 * until that and every scanner thread's kernel notification is done, then
 * stops those notifications (gate.h). When the kernel waits for requests
 * nobody will answer, the connection is aborted (a forced unmount).
 */
void drain_after_loop(struct clamfs_fs *fs, const char *mnt,
		      unsigned long long mnt_id);

#endif
