// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests handed to the wait pool (offload.h).
 */
#include "offload.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "request.h"
#include "waitpool.h"

struct offload {
	fuse_req_t req;
	offload_fn *fn;
	max_align_t data[]; /* the handler's copy, suitably aligned */
};

static void run(void *arg, bool cancelled)
{
	struct offload *o = arg;

	if (cancelled)
		fuse_reply_err(o->req, EIO);
	else
		o->fn(o->req, o->data);
	free(o);
}

void offload_request(fuse_req_t req, offload_fn *fn, const void *data,
		     size_t size)
{
	struct clamfs_fs *fs = req_fs(req);
	struct offload *o = malloc(sizeof(*o) + size);
	static struct log_limit refusals;
	uid_t uid = fuse_req_ctx(req)->uid;
	unsigned long held_back;
	int ret;

	if (!o) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	o->req = req;
	o->fn = fn;
	memcpy(o->data, data, size);
	ret = waitpool_submit(fs->waits, uid, run, o);
	if (ret == 0)
		return;
	free(o);
	if (ret == -EAGAIN && log_limit_pass(&refusals, &held_back))
		log_warn("uid %u has %u calls waiting on leases already: "
			 "refused one more with EAGAIN (%lu such lines held "
			 "back)",
			 (unsigned int)uid, WAITPOOL_QUEUED_PER_UID, held_back);
	fuse_reply_err(req, ret == -ESHUTDOWN ? EIO : -ret);
}
