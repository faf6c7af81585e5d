// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The write-back a stopping daemon still owes (drain.h). A thread asks the
 * kernel for it (syncfs) while this one answers the requests it brings.
 */
#include "drain.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "monotime.h"
#include "mountpoint.h"
#include "gate.h"

/*
 * Once nothing is owed any more, requests are answered until none came
 * for QUIET_MS (write-backs the kernel queued beyond its background limit
 * come after syncfs returned, as soon as earlier ones are answered), or
 * for TAIL_MS at most on a busy mount.
 */
#define DRAIN_QUIET_MS 50
#define DRAIN_TAIL_MS  2000
/*
 * While something is owed: with nothing to answer for STUCK_MS, the
 * kernel waits for a request nobody will answer; after DEADLINE_MS it is
 * given up on either way.
 */
#define DRAIN_STUCK_MS	  3000
#define DRAIN_DEADLINE_MS 20000

/*
 * Shared by drain_after_loop and its thread; the last of the two to let
 * go frees it (the thread may outlive the drain when it cannot be ended).
 */
struct syncer {
	char *mnt;
	unsigned long long mnt_id;
	atomic_bool done;
	atomic_int refs;
};

static void syncer_put(struct syncer *s)
{
	if (atomic_fetch_sub(&s->refs, 1) == 1) {
		free(s->mnt);
		free(s);
	}
}

/* Whether the top mount at mnt is still the one with this id. */
static bool still_ours(const char *mnt, unsigned long long mnt_id)
{
	unsigned long long id;

	return mnt_id && mountpoint_top_id(MOUNTINFO_SELF, mnt, &id) == 1 &&
	       id == mnt_id;
}

/*
 * Thread: syncfs of the mount, if mnt still is it (its open and the
 * write-back are requests the caller answers).
 */
static void *sync_mount(void *arg)
{
	struct syncer *s = arg;
	int fd;

	if (!still_ours(s->mnt, s->mnt_id))
		goto out;
	fd = open(s->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		goto out;
	if (syncfs(fd) == -1)
		log_warn("writing back the page cache at stop: %s",
			 strerror(errno));
	close(fd);
out:
	atomic_store(&s->done, true);
	syncer_put(s);
	return NULL;
}

/* What serve_one did. */
enum served { SERVED_ONE, SERVED_NONE, SERVED_GONE };

/* Answers one request if one comes within timeout_ms. */
static enum served serve_one(struct fuse_session *se, struct fuse_buf *buf,
			     int timeout_ms)
{
	struct pollfd pfd = {.fd = fuse_session_fd(se), .events = POLLIN};
	int res;

	if (poll(&pfd, 1, timeout_ms) <= 0)
		return SERVED_NONE;
	if (pfd.revents & POLLERR)
		return SERVED_GONE;
	/* a second signal must not make libfuse drop what it reads */
	fuse_session_reset(se);
	res = fuse_session_receive_buf(se, buf);
	if (res == 0 || res == -EINTR || res == -EAGAIN)
		return SERVED_NONE;
	if (res < 0)
		return SERVED_GONE;
	fuse_session_process_buf(se, buf);
	return SERVED_ONE;
}

/*
 * libfuse's workers drop the requests they read once the loop is told to
 * end (a write-back among them), and the kernel waits for their answers
 * for ever. A forced unmount aborts the connection, which ends those
 * waits (what the dropped writes carried is lost, as it was already), and
 * the lazy one after it that the mount does not stay behind, dead. False
 * when it could not be aborted.
 */
static bool abort_connection(const char *mnt, unsigned long long mnt_id)
{
	if (!still_ours(mnt, mnt_id))
		return false;
	log_warn("stop: the kernel still waits for requests after %d s; "
		 "aborting the connection",
		 DRAIN_STUCK_MS / 1000);
	/* EBUSY: aborted all the same, before the busy check */
	if (umount2(mnt, MNT_FORCE | UMOUNT_NOFOLLOW) == -1 && errno != EBUSY) {
		log_warn("cannot abort the connection: %s", strerror(errno));
		return false;
	}
	if (still_ours(mnt, mnt_id))
		umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW);
	return true;
}

/* The syncer thread, or NULL when it cannot run or there is no mount. */
static struct syncer *start_syncer(const char *mnt, unsigned long long mnt_id,
				   pthread_t *tid)
{
	struct syncer *s;

	if (!mnt_id)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s)
		s->mnt = strdup(mnt);
	if (!s || !s->mnt)
		goto fail;
	s->mnt_id = mnt_id;
	atomic_init(&s->refs, 2);
	if (pthread_create(tid, NULL, sync_mount, s) == 0)
		return s;
fail:
	log_warn("cannot write back the page cache at stop: %s",
		 strerror(ENOMEM));
	if (s)
		free(s->mnt);
	free(s);
	return NULL;
}

void drain_after_loop(struct clamfs_fs *fs, const char *mnt,
		      unsigned long long mnt_id)
{
	struct fuse_buf buf = {.mem = NULL};
	long long start = mono_ms(), last = start, free_since = 0;
	bool stopped = false, aborted = false, stuck = false;
	pthread_t tid;
	struct syncer *s = start_syncer(mnt, mnt_id, &tid);

	for (;;) {
		enum served r;
		long long t;
		bool owed;

		/*
		 * Once the mount is written back, no more notifications: the
		 * readers of a busy mount would start them for ever.
		 */
		if (!stopped && !(s && !atomic_load(&s->done))) {
			gate_stop_notifying(fs);
			stopped = true;
		}
		owed = (s && !atomic_load(&s->done)) || gate_kernel_waits(fs);
		r = serve_one(fs->se, &buf, owed ? 100 : 10);
		t = mono_ms();
		if (r == SERVED_GONE)
			break;
		if (r == SERVED_ONE)
			last = t;
		if (owed) {
			free_since = 0;
			if (aborted) {
				/* its end shows as an error on the fd */
				stuck = t - start >=
					DRAIN_DEADLINE_MS + DRAIN_STUCK_MS;
			} else if (t - last >= DRAIN_STUCK_MS ||
				   t - start >= DRAIN_DEADLINE_MS) {
				aborted = abort_connection(mnt, mnt_id);
				stuck = !aborted;
			}
			if (stuck)
				break; /* what waits may never return */
			continue;
		}
		if (!free_since)
			free_since = t;
		if (t - last >= DRAIN_QUIET_MS ||
		    t - free_since >= DRAIN_TAIL_MS)
			break;
	}
	gate_stop_notifying(fs);
	if (s && !stuck)
		pthread_join(tid, NULL);
	else if (s)
		pthread_detach(tid);
	if (s)
		syncer_put(s);
	free(buf.mem);
}
