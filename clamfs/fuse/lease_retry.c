// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests tried again while a lease is broken (lease_retry.h).
 */
#include "lease_retry.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
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

/*
 * Whether the caller (its thread pid) is being killed: SIGKILL pending.
 * The kernel sends an interrupt for any signal, but natively a lease
 * wait is restarted after a stop and continue, a tracer's stop, or a
 * handler with SA_RESTART, and an answer of EINTR would fail the call
 * instead; only a fatal signal ends it. A group exit marks SIGKILL
 * pending in every thread.
 */
static bool caller_killed(pid_t pid)
{
	char path[64], line[256];
	bool killed = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true; /* gone */
	while (!killed && fgets(line, sizeof(line), f)) {
		unsigned long long mask;

		if ((sscanf(line, "SigPnd: %llx", &mask) == 1 ||
		     sscanf(line, "ShdPnd: %llx", &mask) == 1) &&
		    (mask & (1ULL << (SIGKILL - 1))))
			killed = true;
	}
	fclose(f);
	return killed;
}

static bool attempt(void *arg)
{
	struct retry *r = arg;

	if (fuse_req_interrupted(r->req) &&
	    caller_killed(fuse_req_ctx(r->req)->pid)) {
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
		log_warn(
			"uid %u: a call that would wait on a lease refused "
			"with EAGAIN: as many of its calls wait already, or "
			"no thread could be started (%lu such lines held back)",
			(unsigned int)uid, held_back);
	fuse_reply_err(req, ret == -ESHUTDOWN ? EIO : -ret);
}
