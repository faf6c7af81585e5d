/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Requests whose backend call would wait on a lease another user holds
 * (an open or a truncate that breaks one waits up to the kernel's
 * lease-break time): tried again without waiting, on the mount's retry
 * list (waitlist.h), until the call gets through. No FUSE worker and no
 * other thread waits for them; the caller waits as natively, and is
 * answered EINTR when it is killed meanwhile.
 */
#ifndef CLAMFS_LEASE_RETRY_H
#define CLAMFS_LEASE_RETRY_H

#include <stdbool.h>
#include <stddef.h>

#include "fs.h"

/*
 * One attempt at a request's call, which must not block: true when it
 * answered the request, false when the call would still wait.
 */
typedef bool lease_attempt_fn(fuse_req_t req, void *data);

/*
 * Tries fn(req, copy of size bytes of data) again later, until it answers
 * the request. When it cannot, the request is answered here: EAGAIN when
 * the caller's uid has its share of waits already, EIO when the mount is
 * stopping (also for a request still waiting then), ENOMEM.
 */
void lease_retry(fuse_req_t req, lease_attempt_fn *fn, const void *data,
		 size_t size);

#endif
