// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Evictor thread. Invalidating an entry takes the parent directory's lock,
 * which a lookup in that directory holds while a worker serves it: the
 * notifications must come from a thread that serves no request.
 */
#include "evict.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "join_serving.h"
#include "log.h"

/* Names invalidated per round; a round ends with a pause (see below). */
#define EVICT_ROUND 1024

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
		size_t n = 0;

		/* parking is enough when files pinned before are free now */
		itab_park_idle(fs->itab, EVICT_ROUND);
		if (itab_low(fs->itab))
			n = itab_pick_victims(fs->itab, ev->victims,
					      EVICT_ROUND);

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

void evict_stop(struct evictor *ev, unsigned long long mnt_id)
{
	if (!ev)
		return;
	itab_stop_waiters(ev->fs->itab);
	join_serving(ev->fs, ev->thread, ev->mountpoint, mnt_id, "evictor");
	free(ev->mountpoint);
	free(ev);
}
