/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Requests whose backend call may wait on something another user holds
 * (a lease: an open or truncate that breaks one waits up to the kernel's
 * lease-break time): their handler is run again on the mount's wait pool
 * (waitpool.h), in the caller's uid's share, where it may block, so that
 * no FUSE worker waits for it.
 */
#ifndef CLAMFS_OFFLOAD_H
#define CLAMFS_OFFLOAD_H

#include <stddef.h>

#include "fs.h"

/* A request's handler, run on the pool with its own copy of data. */
typedef void offload_fn(fuse_req_t req, void *data);

/*
 * Runs fn(req, copy of size bytes of data) on the wait pool, which then
 * owns the request. When it cannot, the request is answered here: EAGAIN
 * when the caller's uid has its share of waits queued already, EIO when
 * the mount is stopping (also for a request still queued then), ENOMEM.
 */
void offload_request(fuse_req_t req, offload_fn *fn, const void *data,
		     size_t size);

#endif
