/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The scan gate: every open that can read a non-empty regular file is
 * decided before it returns (cache, or a scan by clamd replied from a
 * scanner thread), and writes through the mount keep the cache honest.
 */
#ifndef CLAMFS_GATE_H
#define CLAMFS_GATE_H

#include "fs.h"

/*
 * Replies to an open, or to a create when created is not NULL (the entry
 * to hand over), for the backend file open at fd: allowed, refused, or
 * later once scanned. Takes ownership of fd and, on refusal, of the entry
 * reference.
 */
void gate_open(fuse_req_t req, struct inode *inode, int fd,
	       struct fuse_file_info *fi,
	       const struct fuse_entry_param *created);

/* A file handle is released: writer bookkeeping, scan_on_close. Takes fd. */
void gate_release(struct clamfs_fs *fs, struct inode *inode, int fd, int flags);

/*
 * Asks for a background scan of dir_fd's entry name (ahead.h), for the
 * next reader: only a regular file of up to 64 MiB that the policy would
 * scan, that no verdict is known for and that nobody writes. Its size
 * goes to *bytes. Returns 0 when asked, -EAGAIN when the background queue
 * is full (ask again later), -EMFILE when the inode table runs low, or
 * another negative errno when the entry is not worth a scan.
 */
int gate_scan_ahead_entry(struct clamfs_fs *fs, int dir_fd, const char *name,
			  off_t *bytes);

/* The file is being modified through the mount. */
void gate_note_write(struct clamfs_fs *fs, struct inode *inode);

/*
 * For a stop, once nobody answers the kernel's requests any more: no
 * scanner thread makes a kernel notification that waits for answers (a
 * write-back of a writer's pages, which then fails its scan, or a
 * directory's entry invalidated). gate_kernel_waits: whether one is
 * inside such a notification now.
 */
void gate_stop_notifying(struct clamfs_fs *fs);
bool gate_kernel_waits(struct clamfs_fs *fs);

#endif
