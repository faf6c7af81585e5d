// SPDX-License-Identifier: GPL-2.0-or-later
#include "ahead.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "creds.h"
#include "log.h"
#include "monotime.h"
#include "pathwalk.h"
#include "procfd.h"
#include "fdpath.h"

/* Directories waiting for the thread; more are not read ahead. */
#define AHEAD_QUEUED 8
/*
 * Directories read ahead lately, and how long they stay so: a reader
 * waiting for a scan in one of them again (a file beyond the bounds
 * below, or one changed since) does not have it walked again.
 */
#define AHEAD_RECENT	32
#define AHEAD_RECENT_NS (60LL * 1000000000)
/* Bounds of one walk: entries looked at, scans asked for, their bytes. */
#define AHEAD_MAX_ENTRIES 20000
#define AHEAD_MAX_FILES	  1024
#define AHEAD_MAX_BYTES	  (256LL * 1024 * 1024)
/* How long the walk waits before asking a full queue again. */
#define AHEAD_FULL_WAIT_MS 20

/* A directory to walk, the file whose wait asked for it, and who waited. */
struct walk_job {
	char *rel; /* backend-relative, "" the root */
	dev_t dev;
	ino_t ino;
	uid_t uid;
	gid_t gid;
};

struct recent_dir {
	char *rel;
	int64_t at_ns; /* CLOCK_MONOTONIC */
};

struct ahead {
	struct clamfs_fs *fs;
	ahead_scan_entry_fn scan_entry;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
	bool stopping;
	struct walk_job queued[AHEAD_QUEUED];
	unsigned int nqueued;
	struct recent_dir recent[AHEAD_RECENT];
	unsigned int recent_next;
};

/* Under a->lock: whether rel was queued or walked lately. */
static bool seen_lately(struct ahead *a, const char *rel, int64_t now)
{
	for (unsigned int i = 0; i < AHEAD_RECENT; i++) {
		const struct recent_dir *r = &a->recent[i];

		if (r->rel && now - r->at_ns < AHEAD_RECENT_NS &&
		    strcmp(r->rel, rel) == 0)
			return true;
	}
	return false;
}

/* Under a->lock: remembers rel (a copy) in place of the oldest. */
static void remember(struct ahead *a, const char *rel, int64_t now)
{
	struct recent_dir *r = &a->recent[a->recent_next];
	char *copy = strdup(rel);

	if (!copy)
		return; /* walked again the next time: harmless */
	free(r->rel);
	r->rel = copy;
	r->at_ns = now;
	a->recent_next = (a->recent_next + 1) % AHEAD_RECENT;
}

/* Whether a walk could give a verdict anybody keeps, as pin says. */
static bool walk_useful(struct clamfs_fs *fs, struct generation *pin)
{
	return config_store_ttl(gen_opts(pin)) &&
	       scanq_background_possible(fs->scanq);
}

/* rel may be walked again at once: this reader could not list it. */
static void forget_recent(struct ahead *a, const char *rel)
{
	pthread_mutex_lock(&a->lock);
	for (unsigned int i = 0; i < AHEAD_RECENT; i++) {
		struct recent_dir *r = &a->recent[i];

		if (r->rel && strcmp(r->rel, rel) == 0) {
			free(r->rel);
			r->rel = NULL;
		}
	}
	pthread_mutex_unlock(&a->lock);
}

void ahead_note_wait(struct ahead *a, struct generation *pin, int fd,
		     const struct stat *st, uid_t uid, gid_t gid)
{
	char buf[PATH_MAX], *slash, *copy;
	const char *rel;
	int64_t now;

	if (!a || !walk_useful(a->fs, pin))
		return;
	rel = fs_fd_path(a->fs, fd, buf, sizeof(buf));
	if (!rel)
		return;
	/* the directory: what comes before the last slash */
	slash = strrchr(rel, '/');
	if (slash)
		*slash = '\0';
	else
		rel = "";
	now = mono_ns();
	pthread_mutex_lock(&a->lock);
	if (a->stopping || seen_lately(a, rel, now))
		goto out;
	copy = strdup(rel);
	if (!copy)
		goto out;
	remember(a, rel, now);
	/* full: the oldest goes, the reader has left it behind */
	if (a->nqueued == AHEAD_QUEUED) {
		free(a->queued[0].rel);
		memmove(&a->queued[0], &a->queued[1],
			sizeof(a->queued[0]) * (AHEAD_QUEUED - 1));
		a->nqueued--;
	}
	a->queued[a->nqueued++] = (struct walk_job){.rel = copy,
						    .dev = st->st_dev,
						    .ino = st->st_ino,
						    .uid = uid,
						    .gid = gid};
	pthread_cond_signal(&a->wake);
out:
	pthread_mutex_unlock(&a->lock);
}

/*
 * openat() for reading a directory, without moving its access time where
 * the caller may ask for that (the owner, or the daemon itself).
 */
static int open_dir_at(int at, const char *name)
{
	int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd;

	fd = openat(at, name, flags | O_NOATIME);
	if (fd == -1 && errno == EPERM)
		fd = openat(at, name, flags);
	return fd;
}

/*
 * Opens the backend directory rel for reading, as who (a directory the
 * reader may not list is not read for them), walking down from the root
 * without following a symlink (a client may have swapped one in since the
 * reader's open); -errno on failure.
 */
static int open_dir(struct clamfs_fs *fs, const char *rel,
		    const struct creds *who)
{
	int root_fd = inode_fd(itab_root(fs->itab));
	char link[PROC_FD_PATH_MAX], buf[PATH_MAX];
	const char *base = NULL;
	int pfd = -1, fd, ret;

	if (!*rel) {
		proc_fd_path(link, root_fd);
	} else {
		pfd = pathwalk_parent(root_fd, rel, 0, buf, sizeof(buf), &base);
		if (pfd < 0)
			return pfd;
	}
	ret = creds_assume(who);
	if (ret)
		goto out;
	/* the root by its /proc link: a magic link O_NOFOLLOW would refuse */
	fd = pfd < 0 ? open(link, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
		     : open_dir_at(pfd, base);
	ret = fd == -1 ? -errno : fd;
	creds_restore();
out:
	if (pfd >= 0)
		close(pfd);
	return ret;
}

/* Waits up to ms (less if stopped); returns whether still running. */
static bool pause_ms(struct ahead *a, unsigned int ms)
{
	struct timespec until;
	bool running;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)ms * 1000000;
	until.tv_sec += until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	pthread_mutex_lock(&a->lock);
	if (!a->stopping)
		pthread_cond_timedwait(&a->wake, &a->lock, &until);
	running = !a->stopping;
	pthread_mutex_unlock(&a->lock);
	return running;
}

/*
 * Whether the walk goes on. A reload that turned walks off, or the cache
 * off, ends it through scan_entry (-ENOTSUP), which reads the
 * configuration in force for each entry anyway.
 */
static bool still_wanted(struct ahead *a)
{
	bool stopping;

	pthread_mutex_lock(&a->lock);
	stopping = a->stopping;
	pthread_mutex_unlock(&a->lock);
	return !stopping && scanq_background_possible(a->fs->scanq);
}

/* Asks for the scans of one directory's files, within the bounds. */
static void walk(struct ahead *a, const struct walk_job *job)
{
	unsigned int entries = 0, files = 0;
	long long bytes = 0;
	struct dirent *de;
	struct stat dst;
	dev_t dir_dev;
	struct creds who = {.uid = job->uid, .gid = job->gid, .ngroups = 0};
	DIR *dp;
	int fd;

	fd = open_dir(a->fs, job->rel, &who);
	if (fd < 0) {
		forget_recent(a, job->rel);
		return;
	}
	if (fstat(fd, &dst) == -1) {
		close(fd);
		return;
	}
	dir_dev = dst.st_dev;
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return;
	}
	while (entries < AHEAD_MAX_ENTRIES && files < AHEAD_MAX_FILES &&
	       bytes < AHEAD_MAX_BYTES && (de = readdir(dp))) {
		off_t size = 0;
		int ret;

		entries++;
		if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
			continue;
		/* its reader's own scan is under way */
		if (de->d_ino == job->ino && job->dev == dir_dev)
			continue;
		for (;;) {
			if (!still_wanted(a))
				goto out;
			ret = a->scan_entry(a->fs, dirfd(dp), de->d_name,
					    &size);
			if (ret != -EAGAIN)
				break;
			/* the reader's own scans come first: wait for room */
			if (!pause_ms(a, AHEAD_FULL_WAIT_MS))
				goto out;
		}
		if (ret == -EMFILE || ret == -ENOTSUP)
			break;
		if (ret == 0) {
			files++;
			bytes += size;
		}
	}
out:
	closedir(dp);
	/* counted once walked, so that a count says the walk is over */
	stats_inc(&a->fs->stats, STAT_AHEAD_DIRS);
}

static void *ahead_main(void *arg)
{
	struct ahead *a = arg;
	struct walk_job job;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (!a->stopping && a->nqueued == 0)
			pthread_cond_wait(&a->wake, &a->lock);
		if (a->stopping)
			break;
		/* the newest first: where the reader is now */
		job = a->queued[--a->nqueued];
		pthread_mutex_unlock(&a->lock);
		walk(a, &job);
		free(job.rel);
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int ahead_start(struct clamfs_fs *fs, ahead_scan_entry_fn scan_entry,
		struct ahead **out)
{
	struct ahead *a = calloc(1, sizeof(*a));
	pthread_condattr_t attr;
	int ret;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->fs = fs;
	a->scan_entry = scan_entry;
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&a->wake, &attr);
	pthread_condattr_destroy(&attr);
	ret = -pthread_create(&a->thread, NULL, ahead_main, a);
	if (ret) {
		pthread_cond_destroy(&a->wake);
		pthread_mutex_destroy(&a->lock);
		free(a);
		return ret;
	}
	*out = a;
	return 0;
}

void ahead_stop(struct ahead *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stopping = true;
	pthread_cond_broadcast(&a->wake);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	for (unsigned int i = 0; i < a->nqueued; i++)
		free(a->queued[i].rel);
	for (unsigned int i = 0; i < AHEAD_RECENT; i++)
		free(a->recent[i].rel);
	pthread_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->lock);
	free(a);
}
