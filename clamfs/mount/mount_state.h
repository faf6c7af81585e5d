/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * State of one mounted clamfs, without libfuse's types: what the scan
 * gate, the read-ahead and the runtime share with the FUSE request
 * handlers, whose own helpers are in fs.h.
 */
#ifndef CLAMFS_MOUNT_STATE_H
#define CLAMFS_MOUNT_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dbwatch.h"
#include "detect.h"
#include "generation.h"
#include "inode.h"
#include "outage.h"
#include "policy.h"
#include "scanq.h"
#include "stats.h"
#include "vcache.h"
#include "vstore.h"

struct ahead;
struct clamfs_fs;
struct waitlist;
struct fuse_session; /* libfuse's, used only through fs.h */

/*
 * What an administrator's command through the mount (cmd_xattr.c) does:
 * set by the daemon's runtime, unset (NULL) before it runs and after.
 */
struct fs_commands {
	/*
	 * Has the configuration read again off the FUSE worker, then calls
	 * done(ctx, 0 or -errno, the outcome's text) from another thread.
	 * 0 when under way; else -errno and done is not called.
	 */
	int (*reload)(void *arg, const char *why,
		      void (*done)(void *ctx, int status, const char *msg),
		      void *ctx);
	/* forget every cached verdict */
	void (*drop_cache)(void *arg, const char *why);
	void *arg;
};

/*
 * The kernel's caches as the FUSE layer notifies them (gate_reply.h): an
 * inode's pages written back and dropped, a name forgotten. They may wait
 * for requests to be answered (kernel_waits).
 */
struct fs_kernel_ops {
	int (*inval_inode)(struct clamfs_fs *fs, uint64_t nodeid);
	int (*inval_entry)(struct clamfs_fs *fs, uint64_t parent,
			   const char *name, size_t len);
};

struct clamfs_fs {
	struct fuse_session *se;	    /* for kernel cache notifications */
	const struct fs_kernel_ops *kernel; /* set with se */
	struct inode_table *itab;
	double attr_timeout;
	double entry_timeout;
	double negative_timeout;
	bool default_permissions;
	bool passthrough_wanted; /* passthrough=auto */
	bool passthrough;	 /* negotiated at INIT (passthrough.h) */
	bool writeback_wanted;	 /* writeback_cache=yes */
	/*
	 * The backend's filesystem, device watched_dev, is watched
	 * (fuse/watch.h): its directories' contents are cached by the kernel,
	 * and its inodes' timeouts are long. Turned off for good if the watch
	 * fails.
	 */
	atomic_bool watched;
	dev_t watched_dev;
	/*
	 * Negotiated at INIT: written data may sit in the kernel's page
	 * cache until written back (gate_request.c flushes it before a scan).
	 */
	bool writeback;
	/*
	 * Scanner threads inside a kernel notification that waits for
	 * requests to be answered (a write-back, a directory's lock): after
	 * the session loop drain.c answers them until none does, and none
	 * starts once it has stopped notifying (gate_act.c, gate_request.c).
	 */
	atomic_int kernel_waits;
	atomic_bool notify_stopped;

	/* the scan gate (gate.c) */
	const char *backend_path; /* realpath, as the administrator named it */
	/*
	 * What the kernel calls the backend root in /proc/self/fd links, for
	 * mount-relative names: backend_path, or "/" when it was opened
	 * beneath a dead mount (a copy of its mounts no namespace lists).
	 */
	const char *fd_root;
	size_t fd_root_len;
	struct ahead *ahead;   /* directories read ahead (ahead.h) */
	int quarantine_fd;     /* -1 unless on_infected=quarantine */
	struct vstore *vstore; /* NULL without verdict_store= */
	struct scanq *scanq;
	struct waitlist *waits; /* calls retried past a lease (lease_retry.h) */
	struct dbwatch *dbwatch;
	struct stats stats;
	struct timespec started;    /* CLOCK_MONOTONIC */
	time_t started_wall;	    /* the same instant, since the epoch */
	struct outage clamd_outage; /* told once each, fs.h's readers */
	struct fs_commands commands;
	struct generations *gens; /* the configuration in force */
};

/*
 * A pin on the configuration in force (generation.h): what it holds
 * (gen_policy(), gen_vcache(), gen_detect()) stays valid until
 * gen_unpin().
 */
static inline struct generation *fs_pin(struct clamfs_fs *fs)
{
	return gen_pin(fs->gens);
}

#endif
