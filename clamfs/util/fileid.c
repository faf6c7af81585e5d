// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * File handles as identities (fileid.h).
 */
#include "fileid.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/random.h>
#include <time.h>

#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200 /* Linux 6.5, include/uapi/linux/fcntl.h */
#endif

/* FNV-1a, 64 bits: stable across runs, for the verdict store too. */
static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/*
 * AT_HANDLE_FID (Linux 6.5): a handle to tell files apart, which
 * filesystems that cannot open files by handle (overlayfs without its
 * index, some FUSE ones) give too. An older kernel refuses the flag
 * (EINVAL): it is asked for once, not at every call.
 */
static atomic_int fid_flag = AT_HANDLE_FID;

static int handle_of(int dirfd, const char *name, int flags,
		     struct file_handle *fh)
{
	int fid = atomic_load_explicit(&fid_flag, memory_order_relaxed);
	int mount_id;

	fh->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(dirfd, name, fh, &mount_id, flags | fid) == 0)
		return 0;
	if (errno != EINVAL || !fid)
		return -errno;
	atomic_store_explicit(&fid_flag, 0, memory_order_relaxed);
	fh->handle_bytes = MAX_HANDLE_SZ;
	return name_to_handle_at(dirfd, name, fh, &mount_id, flags) == 0
		       ? 0
		       : -errno;
}

uint64_t fileid_at(int dirfd, const char *name, int flags, int *err)
{
	union {
		struct file_handle fh;
		unsigned char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h;
	uint64_t id;
	int ret;

	ret = handle_of(dirfd, name, flags, &h.fh);
	if (ret) {
		if (err)
			*err = ret;
		return 0;
	}
	id = fnv1a(0xcbf29ce484222325ULL,
		   (const unsigned char *)&h.fh.handle_type,
		   sizeof(h.fh.handle_type));
	id = fnv1a(id, h.fh.f_handle, h.fh.handle_bytes);
	return id ? id : 1;
}

uint64_t fileid_unmatched(void)
{
	/*
	 * Each value once, from a random start: the verdict store outlives
	 * the process, so a counter from 0 would repeat a value it kept. A
	 * digest equals one by chance only (2^-64), and would also need the
	 * same device, inode, size and times to matter.
	 */
	static atomic_uint_fast64_t next;
	uint64_t v = atomic_load(&next), seed;

	if (v == 0) {
		if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
			seed = (uint64_t)time(NULL) << 20;
		seed |= 1;
		atomic_compare_exchange_strong(&next, &v, seed);
	}
	return 0x8000000000000000ULL | (uint64_t)atomic_fetch_add(&next, 1);
}
