// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Evictor thread. Invalidating an entry takes the parent directory's lock,
 * which a lookup in that directory holds while a worker serves it: the
 * notifications must come from a thread that serves no request.
 */
#include "evict.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>

#include "log.h"

/* Names invalidated per round; a round ends with a pause (see below). */
#define EVICT_ROUND 1024
/* How often evict_stop looks for requests while waiting for the thread. */
#define EVICT_STOP_POLL_MS 50
/* After this long, evict_stop aborts the connection (see there). */
#define EVICT_STOP_ABORT_MS 2000

struct evictor {
	struct clamfs_fs *fs;
	char *mountpoint;
	pthread_t thread;
	struct itab_victim victims[EVICT_ROUND];
};

static void evict_one(struct clamfs_fs *fs, const struct itab_victim *v)
{
	struct inode *parent;

	/* the reference keeps the parent's node id valid while we use it */
	parent = itab_find_ref(fs->itab, v->parent_dev, v->parent_ino);
	if (!parent)
		return; /* the kernel forgot the directory, and so its names */
	/* -ENOENT: the kernel has no such entry any more; nothing to do */
	fuse_lowlevel_notify_inval_entry(fs->se, inode_nodeid(fs, parent),
					 v->name, strlen(v->name));
	itab_forget(fs->itab, parent, 1);
}

static void *evict_main(void *arg)
{
	struct evictor *ev = arg;
	struct clamfs_fs *fs = ev->fs;
	/* FORGETs arrive a little after the invalidations that cause them */
	const struct timespec pause = {.tv_nsec = 2 * 1000 * 1000};

	while (itab_wait_low(fs->itab)) {
		size_t n =
			itab_pick_victims(fs->itab, ev->victims, EVICT_ROUND);

		for (size_t i = 0; i < n; i++) {
			evict_one(fs, &ev->victims[i]);
			free(ev->victims[i].name);
		}
		if (n)
			log_debug("evicted %zu names, %zu inodes of room left",
				  n, itab_room(fs->itab));
		nanosleep(&pause, NULL);
	}
	return NULL;
}

struct evictor *evict_start(struct clamfs_fs *fs, const char *mountpoint)
{
	struct evictor *ev = calloc(1, sizeof(*ev));
	int ret;

	if (!ev)
		return NULL;
	ev->fs = fs;
	ev->mountpoint = strdup(mountpoint);
	if (!ev->mountpoint) {
		free(ev);
		return NULL;
	}
	ret = pthread_create(&ev->thread, NULL, evict_main, ev);
	if (ret) {
		free(ev->mountpoint);
		free(ev);
		errno = ret;
		return NULL;
	}
	return ev;
}

/*
 * After the FUSE loop, requests the kernel queued are read by nobody, and
 * a notification in flight may wait for a directory lock that such a
 * request holds (a lookup): serve requests here until the thread is done.
 * They are answered as usual, so the scanner threads must still run. An
 * exited session drops what it reads: the caller resets it first.
 */
static void serve_one(struct fuse_session *se)
{
	struct pollfd pfd = {.fd = fuse_session_fd(se), .events = POLLIN};
	struct fuse_buf buf = {0};

	if (poll(&pfd, 1, EVICT_STOP_POLL_MS) != 1)
		return;
	if (fuse_session_receive_buf(se, &buf) > 0)
		fuse_session_process_buf(se, &buf);
	free(buf.mem);
}

void evict_stop(struct evictor *ev)
{
	struct fuse_session *se = ev ? ev->fs->se : NULL;
	bool reset = false, aborted = false, busy = false;
	unsigned int waited = 0;
	struct timespec until;

	if (!ev)
		return;
	itab_stop_waiters(ev->fs->itab);
	for (;;) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += EVICT_STOP_POLL_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(ev->thread, NULL, &until) == 0)
			break;
		if (!reset && fuse_session_exited(se)) {
			fuse_session_reset(se);
			reset = true;
		}
		serve_one(se);
		/*
		 * libfuse's workers drop a request they read as the loop
		 * ends: its caller keeps the directory locked, and only an
		 * aborted connection lets the notification (and the caller)
		 * return. A forced unmount aborts it; we are stopping anyway.
		 */
		waited += 2 * EVICT_STOP_POLL_MS;
		if (waited >= EVICT_STOP_ABORT_MS && !aborted) {
			log_warn("evictor stuck on a dropped request: aborting "
				 "the connection to %s",
				 ev->mountpoint);
			busy = umount2(ev->mountpoint, MNT_FORCE) == -1 &&
			       errno == EBUSY;
			aborted = true;
		}
	}
	/*
	 * libfuse does not unmount a connection it finds aborted. Only when
	 * the forced unmount found the mount busy is it still ours on top.
	 */
	if (busy)
		umount2(ev->mountpoint, MNT_DETACH);
	if (reset)
		fuse_session_exit(se);
	free(ev->mountpoint);
	free(ev);
}
