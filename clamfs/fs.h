/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * State of one mounted clamfs and the helpers shared by the FUSE request
 * handlers (ops_*.c). Only FUSE-facing files include this header.
 */
#ifndef CLAMFS_FS_H
#define CLAMFS_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <time.h>

#include "dbwatch.h"
#include "detect.h"
#include "inode.h"
#include "outage.h"
#include "policy.h"
#include "scanq.h"
#include "stats.h"
#include "vcache.h"
#include "vstore.h"

struct runtime;
struct ahead;

struct clamfs_fs {
	struct fuse_session *se; /* for kernel cache notifications */
	struct inode_table *itab;
	double attr_timeout;
	double entry_timeout;
	double negative_timeout;
	bool default_permissions;
	bool passthrough_wanted; /* passthrough=auto */
	bool passthrough;	 /* negotiated at INIT (passthrough.h) */
	bool writeback_wanted;	 /* writeback_cache=yes */
	/*
	 * Negotiated at INIT: written data may sit in the kernel's page
	 * cache until written back (open.c flushes it before a scan).
	 */
	bool writeback;
	/*
	 * Scanner threads inside a kernel notification that waits for
	 * requests to be answered (a write-back, a directory's lock): after
	 * the session loop drain.c answers them until none does, and none
	 * starts once it has stopped notifying (open.c).
	 */
	atomic_int kernel_waits;
	atomic_bool notify_stopped;

	/* the scan gate (open.c) */
	const char *backend_path; /* realpath, as the administrator named it */
	/*
	 * What the kernel calls the backend root in /proc/self/fd links, for
	 * mount-relative names: backend_path, or "/" when it was opened
	 * beneath a dead mount (a copy of its mounts no namespace lists).
	 */
	const char *fd_root;
	size_t fd_root_len;
	enum scan_mode scan_mode;
	bool scan_on_close;
	bool scan_ahead;
	bool scan_ahead_dirs;
	struct ahead *ahead; /* directories read ahead (ahead.h) */
	int quarantine_fd;   /* -1 unless on_infected=quarantine */
	const struct policy *policy;
	struct vcache *vcache;
	struct vstore *vstore;	/* NULL without verdict_store= */
	unsigned int store_ttl; /* cache_ttl in force, for the store */
	struct scanq *scanq;
	struct detect *detect;
	struct dbwatch *dbwatch;
	struct stats stats;
	struct timespec started;    /* CLOCK_MONOTONIC */
	time_t started_wall;	    /* the same instant, since the epoch */
	struct outage clamd_outage; /* told once each, fs.h's readers */
	struct runtime *rt; /* the configurations in force (runtime.c) */
};

/*
 * A pin on the configuration in force: while it is held, nothing that
 * fs_policy(), fs_vcache() and fs_detect() return, nor the clamd pool a
 * scan runs on, is freed, however many SIGHUPs replace them (runtime.c).
 * A request pins once before its first such read and unpins after its
 * last, from any thread: a waiting scan carries its pin to the scanner
 * thread. fs_pin costs a short mutex and an atomic increment.
 */
struct generation;
struct generation *fs_pin(struct clamfs_fs *fs);
/* Drops a pin; may free retired configurations. NULL is a no-op. */
void fs_unpin(struct generation *pin);
/* The clamd backends of the pinned configuration; valid under the pin. */
struct cdp_fleet *fs_fleet(struct generation *pin);

/*
 * Settings a SIGHUP may replace while requests run: the current ones.
 * Only valid under a pin taken before the call.
 */
static inline const struct policy *fs_policy(struct clamfs_fs *fs)
{
	return __atomic_load_n(&fs->policy, __ATOMIC_ACQUIRE);
}

static inline struct vcache *fs_vcache(struct clamfs_fs *fs)
{
	return __atomic_load_n(&fs->vcache, __ATOMIC_ACQUIRE);
}

static inline struct detect *fs_detect(struct clamfs_fs *fs)
{
	return __atomic_load_n(&fs->detect, __ATOMIC_ACQUIRE);
}

static inline bool fs_scan_on_close(struct clamfs_fs *fs)
{
	return __atomic_load_n(&fs->scan_on_close, __ATOMIC_RELAXED);
}

static inline bool fs_scan_ahead(struct clamfs_fs *fs)
{
	return __atomic_load_n(&fs->scan_ahead, __ATOMIC_RELAXED);
}

static inline bool fs_scan_ahead_dirs(struct clamfs_fs *fs)
{
	return __atomic_load_n(&fs->scan_ahead_dirs, __ATOMIC_RELAXED);
}

/* The request table handed to fuse_session_new (ops.c). */
extern const struct fuse_lowlevel_ops clamfs_ops;

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

static inline fuse_ino_t inode_nodeid(struct clamfs_fs *fs, struct inode *in)
{
	(void)fs;
	return inode_hand_out(in);
}

/* The backend fd of an open file (fi->fh). */
static inline int fi_fd(const struct fuse_file_info *fi)
{
	return (int)fi->fh;
}

/* "/proc/self/fd/N": reaches an O_PATH fd's object for calls that need a
 * real path (open, chmod, truncate, xattrs) without naming it. */
#define PROC_FD_PATH_MAX 32
void proc_fd_path(char buf[PROC_FD_PATH_MAX], int fd);

/* Per-request identity (creds.h) taken from the FUSE request. */
struct req_identity {
	bool switched;
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

/*
 * The mount-relative path of the file open at fd (no leading slash), in
 * buf; NULL when it cannot be told (outside the backend, too long).
 */
const char *fs_fd_path(struct clamfs_fs *fs, int fd, char *buf, size_t len);

/*
 * Like fs_fd_path, but only when that path is provably the file's one and
 * only name right now (it resolves, without symlinks, to this very file,
 * which has a single link); NULL otherwise. What name rules judge by: a
 * stale, deleted or second name must never exempt a file from scanning.
 */
const char *fs_fd_only_name(struct clamfs_fs *fs, int fd, char *buf,
			    size_t len);

#endif
