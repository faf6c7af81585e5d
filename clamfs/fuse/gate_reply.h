/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The scan gate (gate.h) as FUSE requests reach it: an open or create is
 * handed to the gate with what it needs of the request, and the gate's
 * answer becomes the reply.
 */
#ifndef CLAMFS_GATE_REPLY_H
#define CLAMFS_GATE_REPLY_H

#include "fs.h"

/*
 * Replies to an open, or to a create when created is not NULL (the entry
 * to hand over), for the backend file open at fd: allowed, refused, or
 * later once scanned. Takes ownership of fd and, on refusal, of the entry
 * reference.
 */
void gate_reply_open(fuse_req_t req, struct inode *inode, int fd,
		     struct fuse_file_info *fi,
		     const struct fuse_entry_param *created);

/* How an open decided as a reader is then made as asked. */
struct gate_reply_asked {
	/*
	 * The file opened with fi's flags, as the request's caller, without
	 * waiting on a lease: a new fd, -EWOULDBLOCK, or -errno. Any thread.
	 */
	int (*open)(fuse_req_t req, struct inode *inode,
		    struct fuse_file_info *fi);
	/* The open made again, the usual way, once no lease holds it. */
	void (*later)(fuse_req_t req, fuse_ino_t ino,
		      const struct fuse_file_info *fi);
};

/*
 * Replies to a read-write open, decided as a reader's on ro_fd (read-only,
 * as the caller) and then opened as asked (gate.h). Takes ro_fd.
 */
void gate_reply_open_as_reader(fuse_req_t req, fuse_ino_t ino,
			       struct inode *inode, int ro_fd,
			       struct fuse_file_info *fi,
			       const struct gate_reply_asked *asked);

/* How the gate notifies the kernel's caches: set in clamfs_fs.kernel. */
extern const struct fs_kernel_ops gate_reply_kernel;

#endif
