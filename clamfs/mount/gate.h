/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The scan gate: every open that can read a non-empty regular file is
 * decided before it returns (cache, or a scan by clamd replied from a
 * scanner thread), and writes through the mount keep the cache honest.
 */
#ifndef CLAMFS_GATE_H
#define CLAMFS_GATE_H

#include <fcntl.h>
#include <stdbool.h>
#include <sys/types.h>

#include "mount_state.h"

struct gate_open;

/*
 * How the FUSE layer (gate_reply.h) serves one open: the gate asks
 * through these and never sees a request.
 */
struct gate_open_ops {
	/*
	 * The opener's supplementary groups into buf: how many it has (more
	 * than cap: ask again with more room), or -errno.
	 */
	int (*groups)(struct gate_open *o, gid_t *buf, size_t cap);
	/* fd reopened read-only as the opener: a new fd, or -errno */
	int (*reopen_readonly)(struct gate_open *o, int fd);
	/*
	 * For an open decided as a reader (gate_open.as_reader): the file
	 * opened as asked, as the opener, without waiting on a lease. A new
	 * fd, -EWOULDBLOCK where a lease holds it, or -errno.
	 */
	int (*open_asked)(struct gate_open *o);
	/*
	 * The open waits for a scan, so it outlives gate_open's call: a copy
	 * to answer later, from a scanner thread (o itself when it is one
	 * already); NULL when out of memory.
	 */
	struct gate_open *(*keep)(struct gate_open *o);
	/*
	 * While the open waits, an interrupt of it calls scanq_interrupt(w);
	 * w NULL ends that, and once this returns no such call is running.
	 */
	void (*on_interrupt)(struct gate_open *o, struct scan_waiter *w);
	/*
	 * The answer, exactly once per open: refused with err, or allowed
	 * (err 0), the kernel's cached pages kept when keep_cache. Takes fd
	 * and, refused, a create's entry reference; frees a kept copy.
	 */
	void (*answer)(struct gate_open *o, struct inode *inode, int fd,
		       int err, bool keep_cache);
	/*
	 * Instead of an answer, for an open decided as a reader whose open
	 * as asked would wait on a lease: the FUSE layer opens it again, the
	 * usual way, once the lease is out of the way. Takes fd; frees a
	 * kept copy.
	 */
	void (*open_later)(struct gate_open *o, int fd);
};

/* One open of a file, as the gate judges it. */
struct gate_open {
	const struct gate_open_ops *ops;
	pid_t pid; /* the opener */
	uid_t uid;
	gid_t gid;
	int flags;	/* as open(2)'s */
	bool is_create; /* holds its directory's lock until answered */
	/*
	 * A read-write open handed to gate_open with a read-only fd of the
	 * file: decided as a reader's would be (the cache and store serve
	 * it, its scan's verdict is kept), then opened as asked (open_asked)
	 * and allowed if the file's stamp is still the one decided on, or
	 * decided again, on the fd opened as asked, if it moved.
	 */
	bool as_reader;
};

/* Whether an open with open(2)'s flags may read, or write, the file. */
static inline bool gate_may_read(int flags)
{
	return (flags & O_ACCMODE) != O_WRONLY;
}

static inline bool gate_may_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY;
}

/*
 * Decides an open, or a create, of the backend file open at fd: allowed,
 * refused, or later once scanned; the answer goes through o's ops. Takes
 * ownership of fd.
 */
void gate_open(struct clamfs_fs *fs, struct gate_open *o, struct inode *inode,
	       int fd);

/* A file handle is released: writer bookkeeping, scan_on_close. Takes fd. */
void gate_release(struct clamfs_fs *fs, struct inode *inode, int fd, int flags);

/*
 * Asks for a background scan of dir_fd's entry name (ahead.h), for the
 * next reader: only a regular file of up to 64 MiB that the policy would
 * scan, that no verdict is known for and that nobody writes. Its size
 * goes to *bytes. Returns 0 when asked, -EAGAIN when the background queue
 * is full (ask again later), -EMFILE when the inode table runs low,
 * -ENOTSUP when the configuration in force wants no walk (scan_ahead_dirs
 * off, or no verdict cache), or another negative errno when the entry is
 * not worth a scan.
 */
int gate_scan_ahead_entry(struct clamfs_fs *fs, int dir_fd, const char *name,
			  off_t *bytes);

/*
 * The scan queue's hooks that are the gate's (hold, release, prepare,
 * confirm, known), into hooks; the queue's ctx must be the mount
 * (struct clamfs_fs).
 */
void gate_scanq_hooks(struct scanq_hooks *hooks);

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
