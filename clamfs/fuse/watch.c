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
#include <stdatomic.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <time.h>
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

bool watch_covers(struct clamfs_fs *fs, dev_t dev)
{
	return atomic_load_explicit(&fs->watched, memory_order_relaxed) &&
	       dev == fs->watched_dev;
}

double watch_attr_timeout(struct clamfs_fs *fs, dev_t dev)
{
	return watch_covers(fs, dev) && fs->attr_timeout < WATCH_CACHE_SECONDS
		       ? WATCH_CACHE_SECONDS
		       : fs->attr_timeout;
}

double watch_entry_timeout(struct clamfs_fs *fs, dev_t dev)
{
	/* 0 without default_permissions stays 0 (see main) */
	return watch_covers(fs, dev) && fs->entry_timeout > 0 &&
			       fs->entry_timeout < WATCH_CACHE_SECONDS
		       ? WATCH_CACHE_SECONDS
		       : fs->entry_timeout;
}

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
 * From now on the kernel gets the configured timeouts and no cached
 * listings: what it caches can no longer be kept true.
 */
static void give_up_long_caches(struct clamfs_fs *fs, const char *why)
{
	if (!atomic_exchange(&fs->watched, false))
		return;
	stats_set_backend_watch(&fs->stats, false);
	log_err("backend watch: %s: the kernel's caches go back to the "
		"configured timeouts",
		why);
}

static size_t invalidate_all_inodes(struct clamfs_fs *fs)
{
	size_t max = itab_count(fs->itab) + 64, n;
	struct inode **all = calloc(max, sizeof(*all));

	if (!all)
		return 0;
	n = itab_ref_all(fs->itab, all, max);
	for (size_t i = 0; i < n; i++) {
		/* -ENOENT: the kernel does not hold it; nothing to do */
		fuse_lowlevel_notify_inval_inode(fs->se, inode_id(all[i]), 0,
						 0);
		itab_forget(fs->itab, all[i], 1);
	}
	free(all);
	return n;
}

/*
 * Events were lost: names (a new epoch), and attributes, pages and
 * directory contents of every inode the kernel may know (an epoch does
 * not reach those on this kernel).
 */
static void invalidate_everything(struct clamfs_fs *fs)
{
	static atomic_llong last_log_s;
	long long now = (long long)time(NULL);
	int ret = drop_all_names(fs);
	size_t n;

	if (ret) {
		log_err("backend watch: the kernel refused to drop its names "
			"(%s): those it caches may be stale for up to %.0f s",
			strerror(-ret), WATCH_CACHE_SECONDS);
		give_up_long_caches(fs, "cannot drop names");
	}
	n = invalidate_all_inodes(fs);
	/* anybody can fill the queue: once a minute in the log is plenty */
	if (now - atomic_exchange(&last_log_s, now) >= 60)
		log_warn("backend watch: events were lost; invalidated %zu "
			 "inodes (watch_overflows counts every time)",
			 n);
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
			ret = -errno;
			goto failed;
		}
		if (pfd[1].revents)
			break;
		ret = fanwatch_read(w->fw, on_event, w->fs);
		if (ret < 0)
			goto failed;
	}
	return NULL;
failed:
	give_up_long_caches(w->fs, strerror(-ret));
	invalidate_everything(w->fs);
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

void watch_stop(struct backwatch *w, unsigned long long mnt_id)
{
	uint64_t one = 1;

	if (!w)
		return;
	if (write(w->stop_fd, &one, sizeof(one)) != sizeof(one))
		log_warn("backend watch: cannot stop it: %s", strerror(errno));
	join_serving(w->fs, w->thread, w->mountpoint, mnt_id, "backend watch");
	fanwatch_close(w->fw);
	close(w->stop_fd);
	free(w->mountpoint);
	free(w);
}
