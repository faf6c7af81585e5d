// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests tried again while a lease is broken (lease_retry.h).
 */
#include "lease_retry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "request.h"
#include "waitlist.h"

struct retry {
	fuse_req_t req;
	lease_attempt_fn *fn;
	max_align_t data[]; /* the attempt's copy, suitably aligned */
};

static bool attempt(void *arg)
{
	struct retry *r = arg;

	/* the caller was interrupted (a signal, SIGKILL too): as natively */
	if (fuse_req_interrupted(r->req)) {
		fuse_reply_err(r->req, EINTR);
		free(r);
		return true;
	}
	if (!r->fn(r->req, r->data))
		return false;
	free(r);
	return true;
}

static void end(void *arg, int err)
{
	struct retry *r = arg;

	fuse_reply_err(r->req, err == -ESHUTDOWN ? EIO : -err);
	free(r);
}

static const struct waitlist_job_ops retry_ops = {attempt, end};

void lease_retry(fuse_req_t req, lease_attempt_fn *fn, const void *data,
		 size_t size)
{
	static struct log_limit refusals;
	struct clamfs_fs *fs = req_fs(req);
	struct retry *r = malloc(sizeof(*r) + size);
	uid_t uid = fuse_req_ctx(req)->uid;
	unsigned long held_back;
	int ret;

	if (!r) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	r->req = req;
	r->fn = fn;
	memcpy(r->data, data, size);
	ret = waitlist_add(fs->waits, uid, &retry_ops, r);
	if (ret == 0)
		return;
	free(r);
	if (ret == -EAGAIN && log_limit_pass(&refusals, &held_back))
		log_warn("uid %u has %u calls waiting on leases already: "
			 "refused one more with EAGAIN (%lu such lines held "
			 "back)",
			 (unsigned int)uid, WAITLIST_PER_UID, held_back);
	fuse_reply_err(req, ret == -ESHUTDOWN ? EIO : -ret);
}
