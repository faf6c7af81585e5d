// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The backend watch's thread. Its notifications take directory locks that
 * a request being served may hold, so it serves none itself (as the
 * evictor). An event names a directory or an object by device and inode
 * number; the kernel only knows what the inode table holds, so anything
 * else is nothing to tell.
 */
#include "watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "fanwatch.h"
#include "join_serving.h"
#include "log.h"

/*
 * FUSE_NOTIFY_INC_EPOCH (Linux 6.16): every cached name is looked up again
 * before its next use. Not in libfuse 3.14's or 3.17's API: written as the
 * kernel reads any notification, a header with no unique id.
 */
#define NOTIFY_INC_EPOCH   8
#define EPOCH_KERNEL_MAJOR 6
#define EPOCH_KERNEL_MINOR 16

struct notify_header {
	uint32_t len;
	int32_t code; /* the "error" field of a reply */
	uint64_t unique;
};

struct backwatch {
	struct clamfs_fs *fs;
	struct fanwatch *fw;
	int stop_fd; /* an eventfd */
	pthread_t thread;
	char *mountpoint;
};

bool watch_kernel_ready(const char **why)
{
	struct utsname u;
	unsigned int major = 0, minor = 0;

	if (uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 &&
	    (major > EPOCH_KERNEL_MAJOR ||
	     (major == EPOCH_KERNEL_MAJOR && minor >= EPOCH_KERNEL_MINOR)))
		return true;
	*why = "this kernel cannot drop every cached name at once (Linux "
	       "6.16 can)";
	return false;
}

/* Every name the kernel caches is looked up again before its next use. */
static int drop_all_names(struct clamfs_fs *fs)
{
	struct notify_header h = {.len = sizeof(h), .code = NOTIFY_INC_EPOCH};
	ssize_t n = write(fuse_session_fd(fs->se), &h, sizeof(h));

	return n == (ssize_t)sizeof(h) ? 0 : n < 0 ? -errno : -EIO;
}

/*
 * Events were lost: names (a new epoch), and attributes, pages and
 * directory contents of every inode the kernel may know (an epoch does
 * not reach those on this kernel).
 */
static void invalidate_everything(struct clamfs_fs *fs)
{
	size_t max = itab_count(fs->itab) + 64, n;
	struct inode **all = calloc(max, sizeof(*all));
	int ret = drop_all_names(fs);

	if (ret)
		log_err("backend watch: events were lost and the kernel "
			"refused to drop its names (%s): what it caches may "
			"be stale for up to %.0f s",
			strerror(-ret), WATCH_CACHE_SECONDS);
	if (!all) {
		log_err("backend watch: events were lost and no memory to "
			"invalidate attributes");
		return;
	}
	n = itab_ref_all(fs->itab, all, max);
	for (size_t i = 0; i < n; i++) {
		/* -ENOENT: the kernel does not hold it; nothing to do */
		fuse_lowlevel_notify_inval_inode(fs->se, inode_id(all[i]), 0,
						 0);
		itab_forget(fs->itab, all[i], 1);
	}
	free(all);
	log_warn("backend watch: events were lost; invalidated %zu inodes", n);
}

static void on_event(void *ctx, const struct fanwatch_event *ev)
{
	struct clamfs_fs *fs = ctx;
	struct inode *in;

	if (ev->kind == FANWATCH_OVERFLOW) {
		stats_inc(&fs->stats, STAT_WATCH_OVERFLOWS);
		invalidate_everything(fs);
		return;
	}
	in = itab_find_ref(fs->itab, ev->dev, ev->ino);
	if (!in)
		return; /* the kernel cannot have it cached */
	stats_inc(&fs->stats, STAT_WATCH_EVENTS);
	switch (ev->kind) {
	case FANWATCH_NAME:
		fuse_lowlevel_notify_inval_entry(fs->se, inode_id(in), ev->name,
						 strlen(ev->name));
		/* the directory's attributes and its cached contents */
		fuse_lowlevel_notify_inval_inode(fs->se, inode_id(in), 0, 0);
		break;
	case FANWATCH_CONTENT:
		fuse_lowlevel_notify_inval_inode(fs->se, inode_id(in), 0, 0);
		break;
	case FANWATCH_ATTR:
		fuse_lowlevel_notify_inval_inode(fs->se, inode_id(in), -1, 0);
		break;
	case FANWATCH_OVERFLOW:
		break;
	}
	itab_forget(fs->itab, in, 1);
}

static void *watch_main(void *arg)
{
	struct backwatch *w = arg;
	struct pollfd pfd[2] = {
		{.fd = fanwatch_fd(w->fw), .events = POLLIN},
		{.fd = w->stop_fd, .events = POLLIN},
	};
	int ret;

	for (;;) {
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			log_err("backend watch: poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		ret = fanwatch_read(w->fw, on_event, w->fs);
		if (ret < 0) {
			/* what the kernel caches can no longer be kept true */
			log_err("backend watch: %s", strerror(-ret));
			invalidate_everything(w->fs);
			break;
		}
	}
	return NULL;
}

struct backwatch *watch_start(struct clamfs_fs *fs, int root_fd,
			      const char *mountpoint)
{
	struct backwatch *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return NULL;
	w->fs = fs;
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	w->mountpoint = strdup(mountpoint);
	ret = w->stop_fd == -1 || !w->mountpoint ? -errno : 0;
	if (ret == 0)
		ret = fanwatch_open(root_fd, &w->fw);
	if (ret == 0) {
		ret = -pthread_create(&w->thread, NULL, watch_main, w);
		if (ret)
			fanwatch_close(w->fw);
	}
	if (ret) {
		if (w->stop_fd != -1)
			close(w->stop_fd);
		free(w->mountpoint);
		free(w);
		errno = -ret;
		return NULL;
	}
	return w;
}

void watch_stop(struct backwatch *w)
{
	uint64_t one = 1;

	if (!w)
		return;
	if (write(w->stop_fd, &one, sizeof(one)) != sizeof(one))
		log_warn("backend watch: cannot stop it: %s", strerror(errno));
	join_serving(w->fs, w->thread, w->mountpoint, "backend watch");
	fanwatch_close(w->fw);
	close(w->stop_fd);
	free(w->mountpoint);
	free(w);
}
