/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The verdict cache: what clamd said about a file, keyed by backend inode
 * and trusted only while the file's size, mtime and ctime (nanoseconds)
 * are what they were when it was scanned. LRU with a capacity and a TTL,
 * sharded so that opens on many threads rarely meet on one lock. The clock
 * is injected so expiry can be tested without sleeping. No FUSE here.
 *
 * Memory, allocated up front: 80 bytes per entry of capacity plus 4 to 8
 * for its hash bucket (at most 88; 1,000,000 entries take 84-88 MB), and
 * the signature name of each cached infected verdict.
 */
#ifndef CLAMFS_VCACHE_H
#define CLAMFS_VCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct vcache;

enum vcache_verdict {
	VCACHE_MISS = 0,
	VCACHE_CLEAN,
	VCACHE_INFECTED,
};

/* What identifies a file's content: the cache key and the stamp. */
struct vcache_file {
	dev_t dev;
	ino_t ino;
	/*
	 * The file beyond dev and ino, which a filesystem may hand to
	 * another file (fileid.h): part of the stamp, so a snapshot that
	 * took over a removed subvolume's device number matches nothing.
	 * 0 where the filesystem gives no handle.
	 */
	uint64_t ident;
	off_t size;
	int64_t mtime_ns;
	int64_t ctime_ns;
};

struct vcache_counters {
	uint64_t hits;
	uint64_t misses;
	uint64_t evictions; /* dropped for room, not for staleness */
	uint64_t entries;   /* held now */
};

/* Monotonic seconds; the cache calls it on lookup and insert. */
typedef uint64_t (*vcache_clock_fn)(void *arg);

/*
 * capacity 0 or ttl 0 make a cache that holds nothing (every lookup
 * misses). clock NULL uses CLOCK_MONOTONIC. Returns NULL on ENOMEM.
 */
struct vcache *vcache_new(size_t capacity, unsigned int ttl_sec,
			  vcache_clock_fn clock, void *clock_arg);
void vcache_free(struct vcache *vc);

/* Fills f from a stat of the file (ident 0: the caller's to set). */
void vcache_file_from_stat(struct vcache_file *f, const struct stat *st);

/* Whether a and b are the same file with the same stamp. */
bool vcache_file_same(const struct vcache_file *a, const struct vcache_file *b);

/*
 * Looks the file up. A hit needs the same stamp, an unexpired entry and the
 * current generation; an entry failing any of these is dropped. For an
 * infected hit the signature name is copied into sig (may be NULL).
 */
enum vcache_verdict vcache_lookup(struct vcache *vc,
				  const struct vcache_file *f, char *sig,
				  size_t siglen);

/*
 * Whether the cache holds a verdict for the file as stamped, without
 * counting a hit or miss or touching the LRU order: for work that only
 * wants to know whether a scan would be wasted.
 */
bool vcache_knows(struct vcache *vc, const struct vcache_file *f);

/*
 * The verdict vcache_knows() finds (VCACHE_MISS: none), as quietly, and
 * its signature as vcache_lookup() gives it.
 */
enum vcache_verdict vcache_peek(struct vcache *vc, const struct vcache_file *f,
				char *sig, size_t siglen);

/*
 * Records a verdict obtained by a scan that started in generation gen.
 * Ignored when the cache was cleared since (the scan used old signatures)
 * or verdict is VCACHE_MISS. Replaces an older entry for the same inode.
 */
void vcache_insert(struct vcache *vc, const struct vcache_file *f,
		   enum vcache_verdict verdict, const char *sig, uint64_t gen);

/*
 * Whether a stamp taken at taken_ns (CLOCK_REALTIME, read before the stat)
 * proves anything: only when the file's ctime was already older than
 * window_ns then. A file changed within the same timestamp tick as an
 * earlier change keeps its size, mtime and ctime ("racily clean"), so a
 * verdict for a younger stamp could outlive the content it judged.
 * window_ns 0 trusts every stamp.
 */
bool vcache_stamp_settled(const struct vcache_file *f, int64_t taken_ns,
			  int64_t window_ns);

/* Forgets the inode's entry, whatever its stamp. */
void vcache_invalidate(struct vcache *vc, dev_t dev, ino_t ino);

/* The generation a scan must record before it starts. */
uint64_t vcache_generation(struct vcache *vc);

/*
 * Drops every verdict (signatures changed, or asked to); a verdict from a
 * scan that began before is not cached afterwards. O(capacity).
 */
void vcache_clear(struct vcache *vc);

void vcache_counters(struct vcache *vc, struct vcache_counters *out);

/* Bytes allocated for the cache's tables (signature names excluded). */
size_t vcache_memory_bytes(const struct vcache *vc);

#endif
