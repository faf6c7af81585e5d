/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The inode table's insides, shared by its files: inode.c (the table,
 * its hashes and node ids, lookup counts and name eviction), park.c
 * (closing files' descriptors near the fd limit and reopening them by
 * handle) and inode_state.c (what a request records on an inode). Not
 * for anybody else: inode.h is the interface.
 */
#ifndef CLAMFS_INODE_IMPL_H
#define CLAMFS_INODE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>

#include "inode.h"
#include "nodeid.h"

struct inode {
	struct inode *hash_next;
	/*
	 * In the (dev, ino) hash: not once a parked inode's number went to a
	 * new file (it is then known by id alone, until forgotten).
	 */
	bool hashed;
	struct inode *id_next; /* in its id shard */
	uint64_t id;
	uint32_t generation;
	bool counted; /* a counted id: kept as a ghost once forgotten... */
	atomic_bool handed_out; /* ... if anybody was ever told it */
	struct nodeid_handle handle;
	mode_t type;
	dev_t dev;
	ino_t ino;
	uint64_t nlookup; /* under table->lock */

	/*
	 * The O_PATH fd, or -1 while parked: closed to spare the fd limit,
	 * reopened by handle when pinned again. Directories and whatever
	 * cannot be reopened (parkable false) hold theirs for life. fd and
	 * pins under fd_lock; held (the parking order) under table->lock.
	 */
	pthread_spinlock_t fd_lock;
	int fd;
	unsigned int pins;
	bool parkable; /* set before the inode is shared, then constant */
	bool on_held;
	atomic_bool recent; /* pinned since the parker last passed it */
	TAILQ_ENTRY(inode) held;

	/* the name it was last looked up by; under table->lock */
	TAILQ_ENTRY(inode) lru; /* linked while name is set */
	char *name;
	dev_t parent_dev;
	ino_t parent_ino;

	atomic_int writers;
	atomic_uint_fast64_t write_seq;

	pthread_mutex_t io_lock; /* held across attach: one decides */
	unsigned int io_opens;
	int io_backing_id;

	pthread_mutex_t stamp_lock;
	bool stamp_valid;
	off_t stamp_size;
	struct timespec stamp_mtime;
	struct timespec stamp_ctime;
};

#define ID_SHARDS		 16
#define ID_SHARD_INITIAL_BUCKETS 256

struct id_shard {
	pthread_mutex_t lock;
	struct inode **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
} __attribute__((aligned(64)));

struct inode_table {
	struct id_shard shards[ID_SHARDS];
	pthread_mutex_t lock;
	struct inode **buckets;
	size_t nbuckets; /* power of two */
	size_t count;	 /* inodes */
	size_t fds;	 /* O_PATH fds held: count less the parked */
	size_t max;	 /* cap on fds */
	size_t target;	 /* parking and eviction keep fds below this; <= max */
	struct inode *root;
	TAILQ_HEAD(, inode) lru;  /* named inodes, least recent first */
	TAILQ_HEAD(, inode) held; /* parkable with an fd, in parking order */
	bool can_reopen;	  /* open_by_handle_at works: parking may */
	bool park_failed;	  /* the last park found no inode unpinned */
	int root_mnt_id;   /* the backend root's mount: handles open there */
	size_t held_count; /* length of held */
	uint64_t reopens;
	pthread_cond_t low;  /* signalled when itab_low turns true */
	pthread_cond_t room; /* signalled when fds drops below max */
	bool stopping;

	/* node ids */
	bool handle_ids; /* a whole filesystem as backend: ids are handles */
	dev_t root_dev;
	int mount_fd;	  /* to open by handle; -1 if it could not be had */
	uint32_t epoch;	  /* the generation of counted ids: one per daemon */
	uint64_t counted; /* counted ids issued so far */
	struct ghosts *ghosts;
};

#define ITAB_INITIAL_BUCKETS 1024
/*
 * Forgotten ids kept for NFS clients that come back with them (about 100
 * bytes each): enough for the files a few clients hold open.
 */
#define ITAB_GHOSTS_MAX 32768
/* below this much room the table is low whatever its cap */
#define ITAB_LOW_ROOM 1024
/*
 * Inodes the parker passes over at most for one fd (pinned ones, recent
 * ones given a second chance): it runs under the table lock.
 */
#define PARK_LOOK_MAX	 64
#define PARK_LOOK_AT_CAP 4096

/* park.c */

/* Whether the fds held leave little room: time to park, or to evict. */
bool fds_short_locked(struct inode_table *table);
int park_one_locked(struct inode_table *table, bool at_cap,
		    const struct inode *spare);
int park_if_short_locked(struct inode_table *table, const struct inode *spare);
void held_add_locked(struct inode_table *table, struct inode *inode);
bool adopt_fd_locked(struct inode_table *table, struct inode *in, int fd);
bool parkable_in(struct inode_table *table, const struct inode *in, int mnt_id);
bool can_reopen(int mount_fd, int root_fd, int *root_mnt_id);
void close_if_open(int fd);

#endif
