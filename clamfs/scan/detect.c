// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Detection reports: the log line and the rate-limited hook program.
 */
#include "detect.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"
#include "log.h"

struct detect {
	char *hook;
	char *mountpoint;
	struct stats *stats;
	pthread_mutex_t lock;
	double tokens; /* token bucket: per_minute, refilled continuously */
	double capacity;
	struct timespec last;
};

struct detect *detect_new(const char *hook, unsigned int per_minute,
			  const char *mountpoint, struct stats *stats)
{
	struct detect *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->hook = hook ? strdup(hook) : NULL;
	d->mountpoint = strdup(mountpoint ? mountpoint : "");
	if ((hook && !d->hook) || !d->mountpoint) {
		detect_free(d);
		return NULL;
	}
	d->stats = stats;
	d->capacity = per_minute ? per_minute : 1;
	d->tokens = d->capacity;
	clock_gettime(CLOCK_MONOTONIC, &d->last);
	pthread_mutex_init(&d->lock, NULL);
	return d;
}

void detect_free(struct detect *d)
{
	if (!d)
		return;
	free(d->hook);
	free(d->mountpoint);
	free(d);
}

static void process_name(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(buf, len, "?");
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0) {
		snprintf(buf, len, "?");
		return;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* A user without a passwd entry is named by number, never a failure. */
static void user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, len, "%s", res->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
}

static bool take_token(struct detect *d)
{
	struct timespec now;
	double elapsed;
	bool ok;

	pthread_mutex_lock(&d->lock);
	clock_gettime(CLOCK_MONOTONIC, &now);
	elapsed = (double)(now.tv_sec - d->last.tv_sec) +
		  (double)(now.tv_nsec - d->last.tv_nsec) / 1e9;
	d->last = now;
	d->tokens += elapsed * d->capacity / 60.0;
	if (d->tokens > d->capacity)
		d->tokens = d->capacity;
	ok = d->tokens >= 1.0;
	if (ok)
		d->tokens -= 1.0;
	pthread_mutex_unlock(&d->lock);
	return ok;
}

static void *reap_child(void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;

	while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
		;
	return NULL;
}

static void run_hook(struct detect *d, const struct detection *det,
		     const char *process)
{
	char env[8][PATH_MAX + 32];
	char *envp[9], *argv[2] = {d->hook, NULL};
	posix_spawnattr_t sattr;
	pthread_attr_t attr;
	pthread_t reaper;
	sigset_t none;
	pid_t pid;
	int ret;

	if (!take_token(d)) {
		static struct log_limit limit;
		unsigned long held_back;

		stats_inc(d->stats, STAT_HOOK_SUPPRESSED);
		if (log_limit_pass(&limit, &held_back))
			log_warn("infected_cmd suppressed: more than %.0f runs "
				 "a minute (and %lu more unlogged)",
				 d->capacity, held_back);
		return;
	}
	snprintf(env[0], sizeof(env[0]), "CLAMFS_EVENT=%s", det->event);
	snprintf(env[1], sizeof(env[1]), "CLAMFS_PATH=%s",
		 det->relpath ? det->relpath : "");
	snprintf(env[2], sizeof(env[2]), "CLAMFS_MOUNT=%s", d->mountpoint);
	snprintf(env[3], sizeof(env[3]), "CLAMFS_SIGNATURE=%s", det->signature);
	snprintf(env[4], sizeof(env[4]), "CLAMFS_ACTION=%s", det->action);
	snprintf(env[5], sizeof(env[5]), "CLAMFS_PID=%d", (int)det->pid);
	snprintf(env[6], sizeof(env[6]), "CLAMFS_UID=%u", (unsigned)det->uid);
	snprintf(env[7], sizeof(env[7]), "CLAMFS_PROCESS=%s", process);
	for (int i = 0; i < 8; i++)
		envp[i] = env[i];
	envp[8] = NULL;
	/* the daemon blocks SIGHUP and SIGUSR1: the program must not */
	posix_spawnattr_init(&sattr);
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&sattr, &none);
	posix_spawnattr_setflags(&sattr, POSIX_SPAWN_SETSIGMASK);
	ret = posix_spawn(&pid, d->hook, NULL, &sattr, argv, envp);
	posix_spawnattr_destroy(&sattr);
	if (ret) {
		log_err("infected_cmd %s: %s", d->hook, strerror(ret));
		return;
	}
	stats_inc(d->stats, STAT_HOOK_RUNS);
	/* a zombie per detection would pile up: reap it in the background */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&reaper, &attr, reap_child, (void *)(intptr_t)pid) !=
	    0)
		waitpid(pid, NULL, WNOHANG);
	pthread_attr_destroy(&attr);
}

/*
 * What clamd, clamdscan and clamonacc print, so rules written for them
 * match: "PATH: SIGNATURE FOUND", the path as seen through the mount,
 * escaped (never quoted: their PATH is not) so a name cannot end the line.
 */
static void found_form(char *buf, size_t len, const char *mountpoint,
		       const struct detection *det)
{
	FILE *f = fmemopen(buf, len, "w");

	if (!f) {
		snprintf(buf, len, "? FOUND");
		return;
	}
	/* leave room for ": ", " FOUND" and the NUL */
	escape_put(f, mountpoint, len / 2, 0, NULL);
	fputc('/', f);
	escape_put(f, det->relpath ? det->relpath : "?", len / 4, 0, NULL);
	fputs(": ", f);
	escape_put(f, det->signature, len / 8, 0, NULL);
	fputs(" FOUND", f);
	fclose(f);
}

void detect_report(struct detect *d, const struct detection *det)
{
	char path[PATH_MAX * 4 + 8], sig[512], proc[64], qproc[160], user[64],
		quser[160], found[LOG_TAIL_MAX], uid[16], pid[16],
		*file_path = NULL;

	process_name(det->pid, proc, sizeof(proc));
	user_name(det->uid, user, sizeof(user));
	log_quote(quser, sizeof(quser), user);
	log_quote(path, sizeof(path), det->relpath ? det->relpath : "?");
	log_quote(sig, sizeof(sig), det->signature);
	log_quote(qproc, sizeof(qproc), proc);
	found_form(found, sizeof(found), d->mountpoint, det);
	snprintf(uid, sizeof(uid), "%u", (unsigned)det->uid);
	snprintf(pid, sizeof(pid), "%d", (int)det->pid);
	if (det->relpath &&
	    asprintf(&file_path, "%s/%s", d->mountpoint, det->relpath) < 0)
		file_path = NULL;
	/* the journal's fields hold the bytes as they are, unescaped */
	const struct log_field fields[] = {
		{"SIGNATURE", det->signature},
		{"FILE_PATH", file_path},
		{"CLAMFS_ACTION", det->action},
		{"CLAMFS_EVENT", det->event},
		{"CLAMFS_CACHED", det->cached ? "yes" : "no"},
		{"USER_ID", uid},
		{"USER_NAME", user},
		{"PROCESS_ID", det->pid ? pid : NULL},
		{"PROCESS_NAME", det->pid ? proc : NULL},
	};
	log_event(LOG_LEVEL_WARN, LOG_ID_INFECTED, fields,
		  sizeof(fields) / sizeof(fields[0]), found,
		  "infected path=%s signature=%s action=%s%s%s event=%s "
		  "pid=%d process=%s uid=%u user=%s cached=%s",
		  path, sig, det->action, det->outcome ? " " : "",
		  det->outcome ? det->outcome : "", det->event, (int)det->pid,
		  qproc, (unsigned)det->uid, quser, det->cached ? "yes" : "no");
	free(file_path);
	stats_inc(d->stats, STAT_INFECTED);
	if (d->hook)
		run_hook(d, det, proc);
}
