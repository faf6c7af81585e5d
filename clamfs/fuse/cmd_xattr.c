// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The command attributes of the mount root (cmd_xattr.h).
 */
#include "cmd_xattr.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "request.h"

#define OUTCOME_MAX 2048

/*
 * The outcomes of the last reloads, each under the token its caller set,
 * so that `clamfs --reload` reads its own even when another one ran at the
 * same time. A ring: the oldest is replaced.
 */
struct outcome {
	char token[CONTROL_TOKEN_MAX + 1];
	char text[OUTCOME_MAX];
};

static pthread_mutex_t outcomes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct outcome outcomes[CONTROL_OUTCOMES];
static unsigned int outcomes_next;
static bool any_outcome;

bool cmd_xattr_is_command(const char *name)
{
	return strncmp(name, "trusted.clamfs.", 15) == 0;
}

/* trusted.* already needs CAP_SYS_ADMIN; a command also needs uid 0 */
static bool from_root(fuse_req_t req)
{
	return fuse_req_ctx(req)->uid == 0;
}

static bool token_valid(const char *t, size_t len)
{
	if (len > CONTROL_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') ||
		      (t[i] >= 'A' && t[i] <= 'Z') ||
		      (t[i] >= '0' && t[i] <= '9') || t[i] == '-'))
			return false;
	return true;
}

static void outcome_store(const char *token, size_t len, const char *text)
{
	struct outcome *o;

	pthread_mutex_lock(&outcomes_lock);
	o = &outcomes[outcomes_next++ % CONTROL_OUTCOMES];
	memcpy(o->token, token, len);
	o->token[len] = '\0';
	snprintf(o->text, sizeof(o->text), "%s", text);
	any_outcome = true;
	pthread_mutex_unlock(&outcomes_lock);
}

/* The outcome under token (NULL: the newest) into text; false if none. */
static bool outcome_find(const char *token, char *text, size_t len)
{
	bool found = false;

	pthread_mutex_lock(&outcomes_lock);
	for (unsigned int i = 1; any_outcome && i <= CONTROL_OUTCOMES; i++) {
		const struct outcome *o =
			&outcomes[(outcomes_next - i) % CONTROL_OUTCOMES];

		if (token && strcmp(o->token, token) != 0)
			continue;
		snprintf(text, len, "%s", o->text);
		found = true;
		break;
	}
	pthread_mutex_unlock(&outcomes_lock);
	return found;
}

/* A reload under way: whom to answer, and the outcome's token. */
struct reload_reply {
	fuse_req_t req;
	char token[CONTROL_TOKEN_MAX + 1];
	size_t token_len;
};

/* Called on the reload thread (service.h) when the reload is done. */
static void reload_done(void *ctx, int status, const char *msg)
{
	struct reload_reply *r = ctx;

	outcome_store(r->token, r->token_len, msg);
	fuse_reply_err(r->req, -status);
	free(r);
}

/*
 * The reload runs on the reload thread (service.h), never on this
 * worker; the request is answered from there when it is done.
 */
static int start_reload(fuse_req_t req, struct clamfs_fs *fs, const char *value,
			size_t size)
{
	struct reload_reply *r = malloc(sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->req = req;
	memcpy(r->token, value, size);
	r->token_len = size;
	ret = fs->commands.reload
		      ? fs->commands.reload(fs->commands.arg, "reload request",
					    reload_done, r)
		      : -EAGAIN;
	if (ret)
		free(r);
	return ret;
}

void cmd_xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name,
		   const char *value, size_t size)
{
	struct clamfs_fs *fs = req_fs(req);
	int ret = 0;

	if (!from_root(req) || ino != FUSE_ROOT_ID) {
		ret = -EPERM;
	} else if (strcmp(name, CONTROL_RELOAD) == 0) {
		if (!token_valid(value, size)) {
			ret = -EINVAL;
			goto out;
		}
		ret = start_reload(req, fs, value, size);
		if (ret == 0)
			return; /* answered when done */
		outcome_store(value, size,
			      ret == -ESHUTDOWN ? "clamfs is stopping"
			      : ret == -EAGAIN	? "not serving yet"
						: strerror(-ret));
	} else if (strcmp(name, CONTROL_DROP_CACHE) == 0) {
		if (fs->commands.drop_cache)
			fs->commands.drop_cache(fs->commands.arg,
						"drop-cache request");
	} else {
		ret = -EPERM; /* the pid and the stats are read-only */
	}
out:
	fuse_reply_err(req, -ret);
}

static void reply_text(fuse_req_t req, size_t size, const char *text, size_t n)
{
	if (size == 0)
		fuse_reply_xattr(req, n);
	else if (size < n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, text, n);
}

/*
 * Counters keep moving between a caller's size query and its read: the
 * text is rendered once, with room to grow, and the length reported to a
 * size query includes that room so the read that follows fits.
 */
static void reply_stats(fuse_req_t req, size_t size)
{
	struct clamfs_fs *fs = req_fs(req);
	struct cdp_backend_stats *backends = NULL;
	struct stats_sample x = {0};
	struct cdp_fleet *fleet;
	struct generation *pin;
	struct timespec now;
	char clamd[512], *buf = NULL;
	size_t cap, n;

	/* held to the end: the backends' addresses belong to their fleet */
	pin = fs_pin(fs);
	vcache_counters(gen_vcache(pin), &x.vc);
	vstore_counters(fs->vstore, &x.sc);
	fleet = gen_fleet(pin);
	if (fleet) {
		x.nbackends = cdp_fleet_size(fleet);
		backends = calloc(x.nbackends, sizeof(*backends));
		if (!backends) {
			fuse_reply_err(req, ENOMEM);
			goto out;
		}
		for (size_t i = 0; i < x.nbackends; i++)
			cdp_fleet_backend_stats(fleet, i, &backends[i]);
		x.backends = backends;
	}
	scanq_counters(fs->scanq, &x.qc);
	dbwatch_describe(fs->dbwatch, clamd, sizeof(clamd));
	x.clamd = clamd;
	x.inodes = itab_count(fs->itab);
	x.inode_fds = itab_fds(fs->itab);
	x.inode_reopens = itab_reopens(fs->itab);
	clock_gettime(CLOCK_MONOTONIC, &now);
	x.uptime_seconds = (long long)(now.tv_sec - fs->started.tv_sec);
	x.start_time_seconds = (long long)fs->started_wall;
	x.libfuse_version = fuse_pkgversion();
	cap = stats_render(&fs->stats, &x, NULL, 0) + 256;
	buf = malloc(cap);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		goto out;
	}
	/* x is a snapshot: only the atomic counters grow, by digits */
	n = stats_render(&fs->stats, &x, buf, cap);
	if (n >= cap) {
		fuse_reply_err(req, EAGAIN);
		goto out;
	}
	reply_text(req, size, buf, size == 0 ? cap : n);
out:
	free(buf);
	free(backends);
	gen_unpin(pin);
}

void cmd_xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name,
		   size_t size)
{
	char text[OUTCOME_MAX];
	const char *token = NULL;

	if (ino == FUSE_ROOT_ID && strcmp(name, CONTROL_STATS) == 0) {
		reply_stats(req, size);
		return;
	}
	if (!from_root(req) || ino != FUSE_ROOT_ID)
		goto none;
	if (strncmp(name, CONTROL_RELOAD ".", sizeof(CONTROL_RELOAD)) == 0) {
		token = name + sizeof(CONTROL_RELOAD);
		/* an empty token would match the ring's unused slots */
		if (!*token)
			goto none;
	}
	if (token || strcmp(name, CONTROL_RELOAD) == 0) {
		if (!outcome_find(token, text, sizeof(text))) {
			if (token)
				goto none;
			snprintf(text, sizeof(text), "no reload asked for yet");
		}
	} else if (strcmp(name, CONTROL_PID) == 0) {
		snprintf(text, sizeof(text), "%ld", (long)getpid());
	} else {
		goto none;
	}
	reply_text(req, size, text, strlen(text));
	return;
none:
	fuse_reply_err(req, ENODATA);
}
