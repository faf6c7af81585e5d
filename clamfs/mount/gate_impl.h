/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the scan gate's files share and no other module sees: a file's
 * stamp, the kinds of request that wait for a verdict, and each file's
 * functions the others call. The files, by job:
 * - gate.c: open and release decisions, and acting on an open's verdict;
 * - gate_trust.c: when a stamp vouches for content and a verdict may be
 *   trusted, kept in the cache or the store, or taken from them;
 * - gate_act.c: what is done with an infected or over-limits file, or a
 *   scan that failed;
 * - gate_background.c: the scans nobody waits for (at a writer's close,
 *   ahead of a reader);
 * - gate_request.c: a request of each kind, and its submission.
 */
#ifndef CLAMFS_GATE_IMPL_H
#define CLAMFS_GATE_IMPL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "gate.h"

/*
 * A file's stat and the wall-clock time read just before it: whether the
 * stat can vouch for the content depends on how old its ctime was then.
 */
struct stamp {
	struct stat st;
	uint64_t ident;	   /* stamp_file_ident() */
	int64_t taken_ns;  /* CLOCK_REALTIME */
	int64_t window_ns; /* the racy window for this file (tsgrain.h) */
	/*
	 * Nobody held the file open for writing, through the mount or not,
	 * right after the stat: no mapping could store into it without
	 * moving its timestamps, so the stat vouches for what a scan reads.
	 */
	bool quiet;
};

/* Who waits for a verdict, and what is done with it. */
enum gate_kind {
	/* an opener waits, and its open is answered by the verdict */
	GATE_OPEN,
	/* scan_on_close: a writer closed, the verdict is acted on */
	GATE_CLOSE,
	/* a writer closed: scanned ahead for the next reader, who acts */
	GATE_AHEAD,
	/* a file beside one a reader waits for (ahead.h): as GATE_AHEAD */
	GATE_AHEAD_BESIDE,
};

/* A request waiting for its verdict. */
struct pending {
	struct scan_waiter w; /* first: the queue hands it back */
	struct clamfs_fs *fs;
	enum gate_kind kind;
	struct gate_open *open; /* GATE_OPEN: the open kept to answer */
	struct inode *inode;
	int fd;
	struct stamp stamp;
	uint64_t write_seq;
	struct stat removed_from; /* parent dir of a quarantined/deleted name */
	char removed_name[NAME_MAX + 1];
	pid_t pid;
	uid_t uid;
	gid_t gid;
	struct generation *pin; /* held until the verdict is acted on */
};

/* --- gate.c --- */

/* Scanner thread: the verdict for one waiter of any kind. */
void gate_scanned(struct scan_waiter *w, const struct scan_outcome *o);

/* --- gate_trust.c --- */

/* What a look at whether a file is written found (stamp_writes_now). */
enum quiet_state {
	QUIET,		   /* nobody writes it */
	QUIET_NOT,	   /* written through the mount, or cannot be told */
	QUIET_WRITER_OPEN, /* a descriptor or mapping outside the mount's
			    * count may write it */
};

uint64_t stamp_file_ident(struct clamfs_fs *fs, int dirfd, const char *name,
			  int flags, dev_t dev);
int stamp_fd(struct clamfs_fs *fs, const struct policy *pol, int fd,
	     struct stamp *s);
void stamp_key(const struct stamp *s, struct vcache_file *f);
bool stamp_settled(const struct stamp *s);
bool stamp_quiet(struct inode *inode, int fd, const struct stat *st);
bool stamp_unmoved(int fd, const struct stamp *st);
bool stamp_store_hit(struct clamfs_fs *fs, struct generation *pin, int fd,
		     const struct vcache_file *f, const struct stamp *st);
/* Keeps a fresh verdict in the cache (and store) where trusted. */
bool stamp_keep_verdict(struct pending *p, const struct scan_outcome *o);
/*
 * The scan queue's hooks (scanq.h), ctx the mount: confirm for a scan
 * ahead and for a close scan, known for every scan (held: the pinned
 * generation the scan runs on, gate_request.c's hold).
 */
bool stamp_still_quiet(void *ctx, int fd, const struct vcache_file *f);
bool stamp_close_quiet(void *ctx, int fd, const struct vcache_file *f);
bool stamp_verdict_known(void *ctx, void *held, int fd,
			 const struct vcache_file *f, uint64_t tag,
			 struct cdp_result *res);

/* --- gate_act.c --- */

/* Whether the verdict is clamd giving up at a limit, as pol tells apart. */
bool act_is_limits(const struct policy *pol, const char *sig);
/* Whether the on_infected action moves the file out of the way. */
bool act_removes_file(enum infected_action a);
/* Each returns the errno to refuse with, or 0 to go ahead. */
int act_on_infected(struct clamfs_fs *fs, struct generation *cur,
		    struct pending *p, const char *event, const char *sig,
		    bool cached);
int act_on_limits(struct clamfs_fs *fs, struct generation *cur,
		  struct pending *p, const char *event, const char *sig,
		  bool cached);
/* Whether a failed scan lets the open through (on_error=allow). */
bool act_allow_after_error(struct clamfs_fs *fs, struct generation *cur,
			   struct pending *p, const struct scan_outcome *o);
/* Has the kernel forget the name a quarantine or delete removed. */
void act_forget_removed_name(struct clamfs_fs *fs, struct pending *p);

/* --- gate_background.c --- */

/*
 * A writer's last close of a regular file: its close scan or scan ahead,
 * if one is wanted. Takes fd.
 */
void background_after_close(struct clamfs_fs *fs, struct inode *inode, int fd);
/* The verdict of a request nobody waits for; frees nothing. */
void background_scanned(struct pending *p, struct generation *cur,
			const struct scan_outcome *o, bool cached);

/* --- gate_request.c --- */

struct pending *pending_new(struct clamfs_fs *fs, struct generation *pin,
			    enum gate_kind kind, struct inode *inode, int fd,
			    const struct stamp *st);
void pending_free(struct pending *p);
/* Hands p to the scan queue as its kind says. 0 or -errno. */
int pending_submit(struct pending *p);
/*
 * Whether the kernel may hold written data of the file that the backend
 * has not seen yet (the write-back cache with a writer open).
 */
bool unwritten_data_possible(struct clamfs_fs *fs, struct inode *inode,
			     int flags, bool is_create);
/* Whether a background submit of kind would find room now. */
bool pending_room(struct clamfs_fs *fs, enum gate_kind kind);

#endif
