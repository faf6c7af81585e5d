/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * How fine a backend filesystem's timestamps are, from the files the gate
 * stamps (learnt once for the backend root's device). The racy window
 * (policy.h) exists for filesystems whose timestamps keep whole seconds or tick
 * in seconds (FAT, ext4 with 128-byte inodes, many NFS and CIFS servers): there
 * a same-size rewrite within one tick keeps size, mtime and ctime. A local
 * filesystem that keeps nanoseconds takes its stamps from this kernel's clock,
 * which ticks at least every 10 ms, so a rewrite made more than one tick after
 * a stamp always moves ctime: a window of a few ticks is enough there. No FUSE
 * here.
 */
#ifndef CLAMFS_TSGRAIN_H
#define CLAMFS_TSGRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* The window on a filesystem proven fine: two ticks of the slowest HZ. */
#define TSGRAIN_FINE_WINDOW_NS (20 * 1000 * 1000LL)

/* Whether a filesystem of this statfs type keeps nanosecond stamps from
 * this kernel's clock when its inodes can hold them: local ones only. */
bool tsgrain_type_may_be_fine(long f_type);

/*
 * Whether a store through a shared writable mapping of a file on this
 * filesystem type moves its stamps when the mapping is new: most
 * filesystems ask the kernel to be told of the first store into a clean
 * page (and update mtime and ctime then); tmpfs does not.
 */
bool tsgrain_type_sees_mapped_stores(long f_type);

/*
 * The same for the filesystem of the file open at fd on device dev,
 * remembered per device; false when it cannot be told.
 */
bool tsgrain_sees_mapped_stores(int fd, dev_t dev);

/* Whether this stamp's ctime keeps sub-seconds (its inode can hold them). */
bool tsgrain_stamp_is_fine(const struct stat *st);

/*
 * The racy window for a stamp st of the file open at fd: the fine window
 * when the stamp keeps sub-seconds and the file's filesystem is of a type
 * that takes them from this kernel's clock, coarse_ns otherwise (and when
 * it cannot be told). Remembers each device's type; thread-safe.
 */
int64_t tsgrain_window_ns(int fd, const struct stat *st, int64_t coarse_ns);

/*
 * Whether a stamp st of the file open at fd proves its content across a
 * restart: it keeps sub-seconds and its filesystem is a local one that
 * takes stamps from this kernel's clock, where nobody can set ctime
 * (network, FUSE and FAT-like backends may let a writer put it back).
 */
bool tsgrain_stamp_trusted(int fd, const struct stat *st);

/*
 * A device whose number cannot pass to another filesystem while this
 * process runs (the backend root's, which the mount holds open): its
 * type is learnt once. Any other device's is asked at every call.
 */
void tsgrain_hold_device(dev_t dev);

/* Forgets every device (tests). */
void tsgrain_reset(void);

#endif
