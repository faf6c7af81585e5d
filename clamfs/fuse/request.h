/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What every request handler needs: the mount and inode a request names,
 * acting as the requester, and turning a backend name or fd into a FUSE
 * entry with its inode table reference (request.c).
 */
#ifndef CLAMFS_REQUEST_H
#define CLAMFS_REQUEST_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "fs.h"

static inline struct clamfs_fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * The inode a request names, or NULL (reply ESTALE): node ids are opaque,
 * looked up in the table, never trusted as addresses, since with export
 * support the kernel passes on ids from NFS file handles.
 */
static inline struct inode *req_inode(fuse_req_t req, fuse_ino_t ino)
{
	return itab_by_id(req_fs(req)->itab, ino);
}

/* The backend fd of an open file (fi->fh). */
static inline int fi_fd(const struct fuse_file_info *fi)
{
	return (int)fi->fh;
}

/* Per-request identity (creds.h) taken from the FUSE request. */
struct req_identity {
	bool switched;
	bool without_groups; /* switched, groups not read yet */
	bool lost; /* widening failed: acting as nobody, do nothing more */
	struct timespec judged_ctime; /* an opening's object, when judged */
	gid_t small_groups[64];
	gid_t *groups; /* small_groups, or heap when the caller has more */
};

/*
 * Whether the requester may access the inode in mode (R_OK, W_OK, X_OK),
 * by the backend's rules. 0 or negative errno.
 */
int req_check_access(fuse_req_t req, struct inode *inode, int mode);

/*
 * For a request that allocates space through an open file (write,
 * fallocate, copy_file_range): takes the fsuid and fsgid, with no
 * supplementary groups, of whoever the blocks are charged to, so the
 * backend's root reserve is not open to users (ext4 grants it to its
 * resuid, 0 by default, and to members of a non-zero resgid). Cheap: no
 * group lookup. Returns whether it switched; pass that to
 * req_writer_leave.
 */
bool req_writer_enter(fuse_req_t req, int fd);
void req_writer_leave(bool switched);

/* Switches the calling thread to the requester; 0 or negative errno. */
int req_identity_enter(fuse_req_t req, struct req_identity *id);
/* Same, and applies the requester's umask for a create-type request. */
int req_identity_enter_umask(fuse_req_t req, struct req_identity *id);
/*
 * The same for a call whose outcome the caller's supplementary groups
 * change only through the permission checks of the objects open at fds
 * (the directories a name is made, looked up or removed in): where the
 * caller owns each, or is of its group (groupfree.h), they are not read.
 * A call that then fails with EACCES or EPERM is made again after
 * req_identity_widen.
 */
int req_identity_enter_on(fuse_req_t req, struct req_identity *id,
			  const int *fds, size_t nfds);
int req_identity_enter_umask_on(fuse_req_t req, struct req_identity *id,
				const int *fds, size_t nfds);
/*
 * For a call judged only by the object open at fd whose result can be
 * thrown away (an open through its /proc link, a read of an attribute):
 * the groups are not read where the object judges the caller alike
 * whatever they are (either rule of groupfree.h); after the call,
 * req_identity_still_alike says whether its result may be kept, or
 * must be thrown away and the call made again after widening.
 */
int req_identity_enter_opening(fuse_req_t req, struct req_identity *id, int fd);
bool req_identity_still_alike(fuse_req_t req, struct req_identity *id, int fd);
/*
 * After a call failed with err (a positive errno): when that may be for
 * the groups left out, switches again with them and says to make the
 * call again. When the groups cannot be read the thread is back to the
 * daemon's identity and id->lost is set: the call's error stands and
 * nothing more may be done for the caller.
 */
bool req_identity_widen(fuse_req_t req, struct req_identity *id, int err);
void req_identity_leave(struct req_identity *id);

/*
 * Looks name up in parent and fills e, adding one lookup reference to the
 * inode it returns. 0 or negative errno.
 */
int fs_lookup_entry(struct clamfs_fs *fs, struct inode *parent,
		    const char *name, struct fuse_entry_param *e);

/* Fills e for inode, whose attributes are st (no reference taken). */
void fs_entry_fill(struct clamfs_fs *fs, struct inode *inode,
		   const struct stat *st, struct fuse_entry_param *e);

/* Fills e for the object open at fd (any kind of fd), with a reference. */
int fs_entry_from_fd(struct clamfs_fs *fs, int fd, struct fuse_entry_param *e);

#endif
