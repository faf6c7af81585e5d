// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuser -m for the backend beneath an in-place mount, from /proc.
 */
#include "holders.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

struct scan {
	const char *backend;
	size_t backend_len;
	uint64_t fuse_mnt_id;
	dev_t backend_dev;
};

static bool beneath(const struct scan *s, const char *path)
{
	return strncmp(path, s->backend, s->backend_len) == 0 &&
	       (path[s->backend_len] == '\0' || path[s->backend_len] == '/');
}

static void note(struct holder *h, const char *path)
{
	if (!h->example[0])
		strlcpy(h->example, path, sizeof(h->example));
}

/* The target of a /proc magic link (dir, name), or false. */
static bool link_target(int dir, const char *name, char *buf, size_t len)
{
	ssize_t n = readlinkat(dir, name, buf, len - 1);

	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/*
 * Whether what a /proc magic link leads to is the backend's file system
 * seen other than through our mount. The cached attributes only: never a
 * request to a file system (ours, or a hung NFS server).
 */
static bool link_is_raw(const struct scan *s, int dir, const char *name)
{
	struct statx stx;

	if (statx(dir, name, AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) != 0 ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return false;
	/*
	 * The device too: a dead clamfs mount left beneath or below ours,
	 * or another namespace's file system at the same path, is not the
	 * backend (nor, so, is a file system mounted below the backend).
	 */
	return stx.stx_mnt_id != s->fuse_mnt_id &&
	       makedev(stx.stx_dev_major, stx.stx_dev_minor) == s->backend_dev;
}

/* A path beneath the backend, on its file system, not through our mount. */
static bool raw_link(const struct scan *s, int dir, const char *name,
		     char *target, size_t len)
{
	return link_target(dir, name, target, len) && beneath(s, target) &&
	       link_is_raw(s, dir, name);
}

static void scan_dirs(const struct scan *s, int pid_dir, struct holder *h)
{
	static const char *const which[] = {"cwd", "root"};
	char target[PATH_MAX];

	for (size_t i = 0; i < sizeof(which) / sizeof(which[0]); i++) {
		if (raw_link(s, pid_dir, which[i], target, sizeof(target))) {
			h->dirs++;
			note(h, target);
		}
	}
}

static void scan_fds(const struct scan *s, int pid_dir, struct holder *h)
{
	char target[PATH_MAX];
	struct dirent *e;
	int fd_dir;
	DIR *d;

	fd_dir = openat(pid_dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd_dir < 0)
		return;
	d = fdopendir(fd_dir);
	if (!d) {
		close(fd_dir);
		return;
	}
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (raw_link(s, dirfd(d), e->d_name, target, sizeof(target))) {
			h->fds++;
			note(h, target);
		}
	}
	closedir(d);
}

/* Mappings name device and inode: a clamfs file is on the FUSE device. */
static void scan_maps(const struct scan *s, int pid_dir, struct holder *h)
{
	int fd = openat(pid_dir, "maps", O_RDONLY | O_CLOEXEC);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "re");
	unsigned int major, minor;
	char *line = NULL;
	size_t cap = 0;
	int off;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while (getline(&line, &cap, f) > 0) {
		char *file;

		line[strcspn(line, "\n")] = '\0';
		off = 0;
		if (sscanf(line, "%*s %*s %*s %x:%x %*u %n", &major, &minor,
			   &off) != 2 ||
		    off == 0)
			continue;
		file = line + off;
		if (makedev(major, minor) != s->backend_dev ||
		    !beneath(s, file))
			continue;
		h->maps++;
		note(h, file);
	}
	free(line);
	fclose(f);
}

static void read_comm(int pid_dir, struct holder *h)
{
	int fd = openat(pid_dir, "comm", O_RDONLY | O_CLOEXEC);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "re");

	if (!f && fd >= 0)
		close(fd);
	if (!f || !fgets(h->comm, sizeof(h->comm), f))
		snprintf(h->comm, sizeof(h->comm), "?");
	h->comm[strcspn(h->comm, "\n")] = '\0';
	if (f)
		fclose(f);
}

int holders_scan(const char *proc, const char *backend, uint64_t fuse_mnt_id,
		 dev_t backend_dev, pid_t skip_pid,
		 void (*found)(const struct holder *h, void *arg), void *arg)
{
	struct scan s = {
		.backend = backend,
		.backend_len = strlen(backend),
		.fuse_mnt_id = fuse_mnt_id,
		.backend_dev = backend_dev,
	};
	struct dirent *e;
	int count = 0, pid_dir;
	DIR *d;

	/* "/" would make every process a holder: not an in-place backend */
	if (s.backend_len < 2 || backend[0] != '/')
		return -EINVAL;
	d = opendir(proc);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct holder h = {0};
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0 || pid == (long)skip_pid)
			continue;
		h.pid = (pid_t)pid;
		pid_dir = openat(dirfd(d), e->d_name,
				 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pid_dir < 0)
			continue; /* gone meanwhile */
		scan_dirs(&s, pid_dir, &h);
		scan_fds(&s, pid_dir, &h);
		scan_maps(&s, pid_dir, &h);
		if (h.dirs || h.fds || h.maps) {
			read_comm(pid_dir, &h);
			count++;
			found(&h, arg);
		}
		close(pid_dir);
	}
	closedir(d);
	return count;
}

/*
 * The holders of an in-place backend, found by a thread of their own that
 * the mount's start waits for a moment: shared by the two, freed by the
 * last one.
 */
struct holders_job {
	char *backend;
	dev_t dev;
	int count;
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	bool done;
	int refs;
};

static void job_put(struct holders_job *job)
{
	bool last;

	pthread_mutex_lock(&job->lock);
	last = --job->refs == 0;
	pthread_mutex_unlock(&job->lock);
	if (!last)
		return;
	pthread_cond_destroy(&job->done_cond);
	pthread_mutex_destroy(&job->lock);
	free(job->backend);
	free(job);
}

#define HOLDERS_LOGGED 20

static void holder_found(const struct holder *h, void *arg)
{
	struct holders_job *job = arg;
	char example[sizeof(h->example) * 4 + 8], comm[80];

	if (++job->count > HOLDERS_LOGGED)
		return;
	log_quote(example, sizeof(example), h->example);
	log_quote(comm, sizeof(comm), h->comm);
	log_warn("in-place mount: pid %d process=%s still holds the unscanned "
		 "backend beneath the mount (directories=%u files=%u "
		 "mappings=%u, e.g. %s): it reads those files unscanned until "
		 "it lets go; restart it",
		 (int)h->pid, comm, h->dirs, h->fds, h->maps, example);
}

/*
 * After the mount is in place, so that what is found was there before it
 * (a session of the file server started earlier): the mount cannot take
 * it back, only say so.
 */
static void *holders_main(void *arg)
{
	struct holders_job *job = arg;
	struct statx stx;
	int n;

	if (statx(AT_FDCWD, job->backend, AT_STATX_DONT_SYNC, STATX_MNT_ID,
		  &stx) != 0 ||
	    !(stx.stx_mask & STATX_MNT_ID))
		goto out;
	n = holders_scan("/proc", job->backend, stx.stx_mnt_id, job->dev,
			 getpid(), holder_found, job);
	if (n > 0)
		log_warn("in-place mount: %d process%s opened files or "
			 "directories of the backend before the mount and "
			 "bypass the scan%s; restart the file server after "
			 "the mount (deploy.md)",
			 n, n == 1 ? "" : "es",
			 n > HOLDERS_LOGGED ? " (the first 20 are named)" : "");
out:
	pthread_mutex_lock(&job->lock);
	job->done = true;
	pthread_cond_signal(&job->done_cond);
	pthread_mutex_unlock(&job->lock);
	job_put(job);
	return NULL;
}

void holders_warn(const char *backend, dev_t dev, unsigned wait_ms)
{
	struct holders_job *job = calloc(1, sizeof(*job));
	pthread_condattr_t cattr;
	pthread_attr_t attr;
	pthread_t thread;
	struct timespec until;

	if (!job || !(job->backend = strdup(backend))) {
		free(job);
		return;
	}
	job->dev = dev;
	job->refs = 2;
	pthread_mutex_init(&job->lock, NULL);
	/* a clock step at boot must not stretch the wait */
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&job->done_cond, &cattr);
	pthread_condattr_destroy(&cattr);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, holders_main, job) != 0) {
		job->refs = 1;
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (long)(wait_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&job->lock);
	while (!job->done &&
	       pthread_cond_timedwait(&job->done_cond, &job->lock, &until) == 0)
		;
	pthread_mutex_unlock(&job->lock);
out:
	pthread_attr_destroy(&attr);
	job_put(job);
}
