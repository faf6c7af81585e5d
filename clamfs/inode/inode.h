/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The inode table: every backend object the kernel knows about, keyed by
 * (st_dev, st_ino), each with one O_PATH fd so that no path is ever
 * rebuilt. Lookup counts follow the FUSE protocol: each reply that hands an
 * inode to the kernel adds one, forget removes n, and at zero the fd is
 * closed. Each inode has a node id (see nodeid.h for how they are made)
 * that the table maps back to it. No FUSE types here.
 *
 * So that the kernel may know more inodes than the fd limit allows, the
 * fd of a file that nobody pins is closed when the table runs low
 * ("parked") and reopened by its file handle when pinned again; the
 * least recently pinned go first. Directories, the root, and whatever
 * cannot be reopened by handle (another filesystem below the backend, a
 * daemon without CAP_DAC_READ_SEARCH) keep their fds; the kernel is made
 * to forget those when they fill the table (itab_pick_victims).
 */
#ifndef CLAMFS_INODE_H
#define CLAMFS_INODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct inode;
struct inode_table;

/* Takes ownership of root_fd (an O_PATH or O_DIRECTORY fd). NULL on ENOMEM. */
struct inode_table *itab_create(int root_fd, const struct stat *root_st);

/* Closes every fd the table still holds. */
void itab_destroy(struct inode_table *table);

/* The backend root; it is never freed by forget. */
struct inode *itab_root(struct inode_table *table);

/*
 * Returns the inode with this identity after adding one lookup reference,
 * or NULL when the table does not hold it. A parked inode's number may
 * have gone to another file since: to hand a file found by name to the
 * kernel, use itab_find_held_ref or itab_insert_ref (which compares the
 * handles).
 */
struct inode *itab_find_ref(struct inode_table *table, dev_t dev, ino_t ino);

/*
 * itab_find_ref, for an inode whose fd is held (or that is never parked):
 * its (dev, ino) is then its file's for sure. NULL for a parked one.
 */
struct inode *itab_find_held_ref(struct inode_table *table, dev_t dev,
				 ino_t ino);

/* One more lookup reference on an inode the caller already has. */
void itab_ref(struct inode_table *table, struct inode *inode);

/*
 * The inode with this node id, or NULL: for requests on an inode the
 * kernel holds (its reference keeps it alive), so no reference is taken.
 * One short mutex of the id's shard.
 */
struct inode *itab_by_id(struct inode_table *table, uint64_t id);

/*
 * The inode of a node id from a file handle (an NFS client's, possibly
 * forged), with a lookup reference: the one held, else the file reopened
 * by handle when the id is one of this table's making that it can tell
 * the handle of (see nodeid.h). Returns 0, -ESTALE when the id names
 * nothing (any more), or an error of itab_insert_ref.
 */
int itab_resolve_id(struct inode_table *table, uint64_t id, struct inode **out);

/*
 * Whether the directory open at dir_fd is the backend root or below it.
 * A directory moved out of the backend behind the mount keeps its inode
 * and its file handle: reopened by handle, or reached by "..", it would
 * lead a client of an NFS export to the rest of the host's files.
 */
bool itab_dir_beneath_root(struct inode_table *table, int dir_fd);

/*
 * Adds the object open at fd (identity from st) with one lookup reference.
 * Takes ownership of fd: when another thread inserted the same identity
 * first, fd is closed and that inode is referenced instead.
 * Returns 0 with *out set, -EMFILE when the table already holds its
 * maximum (see itab_set_max), or -ENOMEM (fd closed either way).
 */
int itab_insert_ref(struct inode_table *table, int fd, const struct stat *st,
		    struct inode **out);

/* Drops n lookup references; the last one closes the fd and frees. */
void itab_forget(struct inode_table *table, struct inode *inode, uint64_t n);

/* Number of inodes known, root included. */
size_t itab_count(struct inode_table *table);

/* Number of O_PATH fds held (itab_count less the parked ones). */
size_t itab_fds(struct inode_table *table);

/* How many times a parked inode was reopened by handle. */
uint64_t itab_reopens(struct inode_table *table);

/*
 * Caps the O_PATH fds the table keeps open (root included), so that it
 * never takes the fds that opens, directory streams and clamd connections
 * need: past max, inserting a new inode parks another, or fails with
 * -EMFILE when none can be parked, until the kernel forgets inodes.
 * Parking and eviction (itab_low) aim at target, a margin below max: the
 * evictor runs on a thread that a busy machine may not schedule for a
 * while, and lookups go on meanwhile. Unlimited until set; a target above
 * max is taken as max.
 */
void itab_set_max(struct inode_table *table, size_t target, size_t max);

/* How many more fds the table may take before reaching its cap. */
size_t itab_room(struct inode_table *table);

/*
 * Whether less than an eighth of the target (or less than 1024 fds) is
 * left with nothing more to park: time to have the kernel forget inodes,
 * and to stop handing out inodes nobody asked for.
 */
bool itab_low(struct inode_table *table);

/*
 * Waits at most ms milliseconds for the table to be below its cap again
 * (the kernel's FORGETs for evicted names arrive asynchronously); true
 * when it is.
 */
bool itab_wait_room(struct inode_table *table, unsigned int ms);

/*
 * Records that the kernel knows inode under name in parent, making it the
 * most recently used. Only named inodes can be evicted: the kernel drops
 * an inode when told that the name it came by is stale. Directories and
 * the root are not recorded, nor anything while the table has no cap.
 */
void itab_note_name(struct inode_table *table, struct inode *inode,
		    const struct inode *parent, const char *name);

/* A name to invalidate in the kernel so that it forgets the inode. */
struct itab_victim {
	dev_t parent_dev;
	ino_t parent_ino;
	char *name; /* owned by the caller */
};

/*
 * Parks up to n files nobody pins while the table is short of fds (those
 * pinned when they were last tried may be free now); how many.
 */
size_t itab_park_idle(struct inode_table *table, size_t n);

/*
 * Takes up to n least recently used names off the table (the inodes stay,
 * unnamed, until looked up again or forgotten). Returns how many.
 */
size_t itab_pick_victims(struct inode_table *table, struct itab_victim *v,
			 size_t n);

/*
 * Blocks until the table is low with names to evict (true) or until
 * itab_stop_waiters was called (false).
 */
bool itab_wait_low(struct inode_table *table);
void itab_stop_waiters(struct inode_table *table);

/*
 * Takes a reference on up to max of the table's inodes, the root among
 * them, into out; how many. Give each back with itab_forget(table, in, 1).
 */
size_t itab_ref_all(struct inode_table *table, struct inode **out, size_t max);

/* Whether ids are backend handles, i.e. survive a restart. */
bool itab_handle_ids(struct inode_table *table);

/* Forgotten ids still recorded (see ghosts_put). */
size_t itab_ghosts(struct inode_table *table);

/* The node id and its generation (the pair a FUSE file handle holds). */
uint64_t inode_id(const struct inode *inode);
/*
 * The node id, for the kernel: once handed out, a counted id is kept as
 * a ghost when the inode is forgotten (an NFS client may come back with
 * it). An inode only the daemon used (a file scanned ahead) leaves none.
 */
uint64_t inode_hand_out(struct inode *inode);
uint32_t inode_generation(const struct inode *inode);

/*
 * The inode's O_PATH fd. The root's and a directory's at any time; any
 * other inode's only between inode_pin and inode_unpin (else -EBADF: it
 * may be parked, or be parked and its number reused meanwhile).
 */
int inode_fd(const struct inode *inode);

/*
 * Keeps the inode's fd open until inode_unpin, reopening it by handle if
 * it was parked: call it as the daemon, before any identity switch (the
 * reopen needs CAP_DAC_READ_SEARCH). Pins nest. 0, -ESTALE when the file
 * is gone (the VFS then looks the name up afresh), or -EMFILE.
 */
int inode_pin(struct inode_table *table, struct inode *inode);
void inode_unpin(struct inode *inode);

/*
 * inode_pin for the life of an open file, file_fd: an unlinked open file
 * may open by handle nowhere, so its inode keeps an fd (reopened from
 * file_fd itself when it was parked meanwhile). Undo with inode_unpin at
 * its release.
 */
void inode_pin_open(struct inode_table *table, struct inode *inode,
		    int file_fd);
dev_t inode_dev(const struct inode *inode);
ino_t inode_ino(const struct inode *inode);
/* The S_IFMT bits; an inode never changes type while its fd is held. */
mode_t inode_type(const struct inode *inode);

/*
 * Records st's size, mtime and ctime as the file's content stamp and says
 * whether they equal the stamp recorded by the previous call: only then
 * may the kernel keep the pages it cached from that earlier open. A stamp
 * recorded with trusted false (too young to prove the content, see
 * vcache_stamp_settled) never matches: the next call says false.
 */
bool inode_stamp_unchanged(struct inode *inode, const struct stat *st,
			   bool trusted);
/*
 * Whether st is the content stamp the last inode_stamp_unchanged recorded,
 * and that one was trusted; records nothing.
 */
bool inode_stamp_still(struct inode *inode, const struct stat *st);

/*
 * Writers through the mount: while any is open, no cached verdict is
 * trusted for the file. inode_writers_add returns the new count.
 */
int inode_writers_add(struct inode *inode, int delta);
int inode_writers(const struct inode *inode);

/*
 * Counts modifications through the mount (write, truncate, fallocate,
 * copy into): a scan that saw the count change while it ran must not be
 * cached, whatever the stamp says (mtime may not move within a tick).
 */
void inode_note_write(struct inode *inode);
uint64_t inode_write_seq(const struct inode *inode);

/*
 * The I/O mode shared by the open regular files of the inode: the kernel
 * lets them all use one backing file (passthrough) or none. inode_io_join
 * counts an open; the first one calls attach(arg), which returns a
 * backing id (> 0) or 0 for I/O through the daemon, and that choice holds
 * for every open until the last has left. Returns the backing id in use
 * by the open, 0 for none.
 */
int inode_io_join(struct inode *inode, int (*attach)(void *arg), void *arg);

/*
 * An open has left: returns the backing id to close when it was the last
 * open and they used one, otherwise 0.
 */
int inode_io_leave(struct inode *inode);

#endif
