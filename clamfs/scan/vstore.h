/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The verdict store: clean verdicts kept across restarts in an LMDB file
 * (DIR/verdicts.mdb), so that a restarted daemon serves an unchanged,
 * already scanned file without scanning it again. No FUSE here.
 *
 * An entry is trusted only for the same file and stamp the in-memory
 * cache would trust (vcache.h: device, inode, size, mtime and ctime in
 * nanoseconds, a stamp that was settled when the file was scanned), the
 * same clamd database (engine, version and date as VERSION reported
 * them) and within the cache's TTL of the scan, by the wall clock. The
 * file is refused and rebuilt when it is not a store of this format or
 * was kept for another backend filesystem; the directory must be the
 * daemon's own (owned by it, writable by nobody else), or anybody who
 * could write it could mark a file clean.
 *
 * Writes are queued and committed by a thread of the store about once a
 * second (LMDB with MDB_NOMETASYNC: a crash loses at most the last
 * commit, never the file's consistency; a clear is committed at once);
 * lookups are LMDB read transactions on the memory map, from any thread.
 * The directory checks are vstore_dir.c's.
 */
#ifndef CLAMFS_VSTORE_H
#define CLAMFS_VSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vcache.h"

/* The database identity kept with each entry, NUL included. */
#define VSTORE_DB_ID_MAX 96

struct vstore;

struct vstore_counters {
	uint64_t hits;	      /* lookups that found a trusted verdict */
	uint64_t writes;      /* verdicts committed */
	uint64_t dropped;     /* verdicts not kept: the queue was full */
	uint64_t rebuilds;    /* files refused and started empty */
	uint64_t entries;     /* in the file, at the last commit */
	uint64_t write_fails; /* commits that failed (logged) */
};

/*
 * Whether dir (created if its parent exists) is safe for a store: before
 * the mount, so that an unsafe one fails it. Negative errno, the reason
 * logged: -EPERM when others may change it or a directory above.
 */
int vstore_check_dir(const char *dir);
/*
 * Opens (creating it) the store in dir for the backend whose root is
 * backend_fd, scanned by the clamd named clamd_id (their identities are
 * kept: another one's store is emptied). max_bytes bounds the file: a
 * store that fills up, or is bigger, starts again. Locks dir against
 * other clamfs processes (-EBUSY). Starts the writer thread, so call it
 * in the process that serves (after a daemonizing fork). Negative errno,
 * with the reason logged.
 */
int vstore_open(const char *dir, size_t max_bytes, int backend_fd,
		const char *clamd_id, struct vstore **out);
/* Commits what is queued and closes. NULL is a no-op. */
void vstore_close(struct vstore *vs);

/*
 * Whether a clean verdict is kept for f under database db_id, scanned no
 * longer than ttl_sec before now_ns (CLOCK_REALTIME). An unknown
 * database (db_id "") or ttl_sec 0 never hit.
 */
bool vstore_lookup_clean(struct vstore *vs, const struct vcache_file *f,
			 const char *db_id, unsigned int ttl_sec,
			 int64_t now_ns);

/* Queues a clean verdict scanned at scanned_ns under db_id (not ""). */
void vstore_put_clean(struct vstore *vs, const struct vcache_file *f,
		      const char *db_id, int64_t scanned_ns);
/*
 * Queues forgetting the inode when anything is kept or queued for it;
 * lookups miss it from now on. A forget that cannot be queued empties
 * the store.
 */
void vstore_forget(struct vstore *vs, dev_t dev, ino_t ino);
/*
 * Drops every verdict and commits that before it returns (a crash must
 * not bring them back); lookups miss from the call on. When the commit
 * fails the store is never trusted again and removed at its close.
 */
int vstore_clear(struct vstore *vs);
/* Commits what is queued, in the calling thread (tests, shutdown). */
int vstore_flush(struct vstore *vs);

void vstore_counters(struct vstore *vs, struct vstore_counters *out);

#endif
