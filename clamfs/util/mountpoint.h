/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Checks run before mounting: is the mountpoint usable, and what is
 * already mounted there.
 */
#ifndef CLAMFS_MOUNTPOINT_H
#define CLAMFS_MOUNTPOINT_H

#include <stdbool.h>
#include <stddef.h>

/* The mountinfo file of this process's mount namespace. */
#define MOUNTINFO_SELF "/proc/self/mountinfo"

/*
 * Writes into fstype the type of the topmost mount at the absolute path
 * dir according to the mountinfo file given (normally
 * /proc/self/mountinfo). Returns 1 when dir is a mountpoint, 0 when not,
 * negative errno on failure.
 */
int mountpoint_fstype(const char *mountinfo, const char *dir, char *fstype,
		      size_t len);

/*
 * mountpoint_fstype, counting only a mount made by root (user_id=0 in its
 * superblock options): 1, 0 (none, or a user's), or negative errno.
 */
int mountpoint_root_fstype(const char *mountinfo, const char *dir, char *fstype,
			   size_t len);

/* One line of a mountinfo file, unescaped where the kernel escapes. */
struct mountinfo_entry {
	unsigned long long id;	   /* the mount id (statx's stx_mnt_id) */
	unsigned long long parent; /* the id of the mount it is on */
	const char *root;	   /* the mount's root within its filesystem */
	const char *dir;	   /* where it is mounted */
	const char *fstype;
	const char *superopts; /* the superblock options ("" when none) */
};

/*
 * Calls fn for every mount the mountinfo file lists, in its order (the
 * top one on a directory is the one no other there is on: the last one
 * listed, unless a mount was moved beneath it). Stops at the first non-zero
 * return of fn and returns it; 0 after the last mount, negative errno when
 * the file cannot be read.
 */
int mountpoint_each(const char *mountinfo,
		    int (*fn)(const struct mountinfo_entry *m, void *arg),
		    void *arg);

/*
 * The mount id of the top mount at the absolute path dir: 1 and *id, 0
 * when dir is no mountpoint, negative errno.
 */
int mountpoint_top_id(const char *mountinfo, const char *dir,
		      unsigned long long *id);

/* Whether the mount with this id is listed: 1, 0, or negative errno. */
int mountpoint_id_listed(const char *mountinfo, unsigned long long id);

/*
 * Whether a FUSE mount's superblock options (mountinfo) say root made it
 * (user_id=0): a user's fusermount3 mount says its own uid.
 */
bool mountpoint_opts_by_root(const char *superopts);

/*
 * A clamfs that died leaves its mount behind, answering ENOTCONN. When
 * given is such a dead mount of type fstype (the top one on it) that root
 * made, writes its absolute name into dir and returns 1; 0 when given is
 * not a dead mount of that type, negative errno on failure.
 */
int mountpoint_find_dead(const char *mountinfo, const char *given,
			 const char *fstype, char *dir, size_t len);

/*
 * Makes a directory to mount on and move the mount from: 0 and its name
 * in dir, or negative errno. It is the one entry of a 0700 directory of
 * root's (under /run, else /tmp) that is a private mount of its own, and
 * so reachable by root alone whatever is mounted on it: a mount attached
 * on the 0700 directory itself would be walked into with its own root's
 * permissions.
 */
int mountpoint_stage(char *dir, size_t len);

/*
 * Undoes mountpoint_stage, detaching whatever is still mounted on dir;
 * dir is the name mountpoint_stage gave.
 */
void mountpoint_unstage(const char *dir);

/*
 * Opens the absolute directory dir as it is beneath the top mount on it
 * (the backend a dead in-place mount hides, and any dead mount stacked
 * under that one): an O_PATH fd on the root of a copy of the mounts from
 * dir down, which no namespace lists and which lives as long as the fd.
 * Files under it are named from that root ("/x" for dir/x). Made through
 * a copy of the mounts from dir's parent down on a private stage, removed
 * before returning. Needs CAP_SYS_ADMIN. The fd, or negative errno
 * (nothing left behind).
 */
int mountpoint_open_beneath(const char *dir);

/*
 * Moves the mount on staged to target in place of the dead mount dead_id
 * on top there, which is detached only once the new mount covers the
 * directory: 1. Before Linux 6.5 the new mount goes on top of the old one,
 * which stays under it: 0. When the top mount is no longer dead_id
 * (somebody replaced it meanwhile) it is left alone, the new mount
 * beneath it: 2. Negative errno when nothing moved.
 */
int mountpoint_replace(const char *staged, const char *target,
		       unsigned long long dead_id);

#endif
