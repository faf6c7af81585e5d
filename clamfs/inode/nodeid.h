/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * FUSE node ids that outlive the kernel's inodes, for NFS export: backend
 * file handles (name_to_handle_at), the ids derived from them when the
 * backend is a whole filesystem, and the bounded record of ids the daemon
 * issued for inodes the kernel has since forgotten. No FUSE types here,
 * and no locking: the inode table (inode.c) serializes all of it.
 */
#ifndef CLAMFS_NODEID_H
#define CLAMFS_NODEID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* FUSE_ROOT_ID: the backend root's id, always. */
#define NODEID_ROOT 1

/* Larger handles (rare: none of ext4, xfs, btrfs, tmpfs) are not kept. */
#define NODEID_HANDLE_MAX 32

/* A backend object's file handle; len 0 when it has none that fits. */
struct nodeid_handle {
	int type;
	unsigned int len;
	unsigned char bytes[NODEID_HANDLE_MAX];
};

/*
 * Fills h with the handle of the object open at fd (an O_PATH fd will do);
 * returns the id of the mount fd is on (as in mountinfo), or -1 when it
 * has no handle.
 */
int nodeid_handle_of(int fd, struct nodeid_handle *h);

bool nodeid_handle_equal(const struct nodeid_handle *a,
			 const struct nodeid_handle *b);

/*
 * Opens the object h names on the filesystem of mount_fd (not an O_PATH
 * fd) as O_PATH; needs CAP_DAC_READ_SEARCH. fd or negative errno.
 */
int nodeid_handle_open(int mount_fd, const struct nodeid_handle *h);

/*
 * Whether the directory open at fd is the root of its filesystem (the
 * root of a mount that is not a bind of a subdirectory): only then may a
 * handle that nobody issued be decoded, since whatever it names is inside.
 */
bool nodeid_fs_root(int fd);

/*
 * The id a handle is, when ids are handles: ext4's and others' 8-byte
 * FILEID_INO32_GEN (inode number, generation). Such ids never have zero
 * low 32 bits (no inode 0), which leaves those for counted ids
 * (nodeid_counted). false when h is of another kind, or would be 1.
 */
bool nodeid_from_handle(const struct nodeid_handle *h, uint64_t *id);

/* The handle an id from nodeid_from_handle was made of. */
void nodeid_to_handle(uint64_t id, struct nodeid_handle *h);

/*
 * The n-th counted id (n >= 1): with handle ids in use, n << 32 so that
 * the two never meet; else n + 1 (1 is the root). 0 when n is past what
 * fits.
 */
uint64_t nodeid_counted(uint64_t n, bool handle_ids);

/*
 * Ids issued for inodes the kernel forgot: id -> (dev, ino, handle) to
 * reopen one by handle when an NFS client comes back with it, and
 * (dev, ino) -> id so that a lookup by name hands out the same id again.
 * Bounded: past max, the oldest is dropped (its NFS handles go stale).
 */
struct ghosts;

struct ghosts *ghosts_create(size_t max);
void ghosts_destroy(struct ghosts *g);

/* Records a forgotten id (h with len > 0); ENOMEM just drops it. */
void ghosts_put(struct ghosts *g, uint64_t id, dev_t dev, ino_t ino,
		const struct nodeid_handle *h);

/*
 * For a new inode (dev, ino) with handle h: when a ghost has that
 * identity and the same handle (a reused inode number has another), its
 * id is returned in *id and the ghost removed. A ghost of the identity
 * with another handle is removed too: that file is gone.
 */
bool ghosts_take(struct ghosts *g, dev_t dev, ino_t ino,
		 const struct nodeid_handle *h, uint64_t *id);

/* Copies what the ghost of id holds; false when there is none. */
bool ghosts_find(struct ghosts *g, uint64_t id, dev_t *dev, ino_t *ino,
		 struct nodeid_handle *h);

size_t ghosts_count(struct ghosts *g);

#endif
