// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The command attributes of the mount root (control.h).
 */
#include "control.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

/* the outcome of the last reload, for the `clamfs --reload` that asked */
static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_reload[2048] = "no reload asked for yet";

bool control_is_command(const char *name)
{
	return strncmp(name, "trusted.clamfs.", 15) == 0;
}

/* trusted.* already needs CAP_SYS_ADMIN; a command also needs uid 0 */
static bool from_root(fuse_req_t req)
{
	return fuse_req_ctx(req)->uid == 0;
}

void control_set(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct clamfs_fs *fs = req_fs(req);
	char msg[sizeof(last_reload)];
	int ret = 0;

	if (!from_root(req) || ino != FUSE_ROOT_ID) {
		ret = -EPERM;
	} else if (strcmp(name, CONTROL_RELOAD) == 0) {
		ret = runtime_reload_notified(fs->rt, "reload request", msg,
					      sizeof(msg));
		pthread_mutex_lock(&last_lock);
		memcpy(last_reload, msg, sizeof(last_reload));
		pthread_mutex_unlock(&last_lock);
	} else if (strcmp(name, CONTROL_DROP_CACHE) == 0) {
		runtime_drop_cache(fs->rt, "drop-cache request");
	} else {
		ret = -EPERM; /* the pid and the stats are read-only */
	}
	fuse_reply_err(req, -ret);
}

void control_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char text[sizeof(last_reload)];
	size_t n;

	if (!from_root(req) || ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (strcmp(name, CONTROL_RELOAD) == 0) {
		pthread_mutex_lock(&last_lock);
		memcpy(text, last_reload, sizeof(text));
		pthread_mutex_unlock(&last_lock);
	} else if (strcmp(name, CONTROL_PID) == 0) {
		snprintf(text, sizeof(text), "%ld", (long)getpid());
	} else {
		fuse_reply_err(req, ENODATA);
		return;
	}
	n = strlen(text);
	if (size == 0)
		fuse_reply_xattr(req, n);
	else if (size < n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, text, n);
}
