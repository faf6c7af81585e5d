// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The service threads (service.h): one takes the signals, refreshes
 * systemd's status line and notices that the mount went away here while
 * it lives on elsewhere; the other runs the reloads, one at a time, so
 * that a slow one holds up neither a SIGUSR1 nor the status.
 */
#include "service.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "monotime.h"
#include "mountpoint.h"
#include "sdnotify.h"

struct post;

struct service {
	struct clamfs_fs *fs;
	struct reload *reload;
	const char *mountpoint;
	unsigned long long mount_id; /* ours, 0 when not known */
	bool said_unmounted;
	pthread_t signal_thread; /* signals, the status line */
	pthread_t reload_thread; /* the reloads, one at a time */
	int sfd;		 /* signalfd: SIGHUP, SIGUSR1 */
	int efd;		 /* eventfd: the stop, for the signal thread */
	pthread_mutex_t lock;	 /* what follows */
	pthread_cond_t more;	 /* a post, or the stop */
	struct post *posts;	 /* oldest first */
	struct post **posts_tail;
	bool hup_queued; /* a SIGHUP's reload waits in posts */
	bool stopping;
};

static void never_runs(int sig)
{
	(void)sig;
}

int service_block_signals(void)
{
	struct sigaction sa = {.sa_handler = never_runs};
	sigset_t set;

	/*
	 * A handler that is not SIG_DFL keeps fuse_set_signal_handlers from
	 * turning SIGHUP into an unmount; blocked, the signal waits for the
	 * signal thread's signalfd and the handler never runs. It
	 * cannot be SIG_IGN itself: ignored signals are discarded.
	 */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -EINVAL;
	if (sigaction(SIGHUP, &sa, NULL) == -1 ||
	    sigaction(SIGUSR1, &sa, NULL) == -1)
		return -errno;
	return 0;
}

/*
 * What `systemctl status clamfs@share` shows under the unit, refreshed
 * every STATUS_SECONDS: is clamd there, and what the gate has done.
 */
#define STATUS_SECONDS 10

static void notify_live_status(struct service *sv)
{
	struct stats *st = &sv->fs->stats;
	char text[512];
	int up = dbwatch_up(sv->fs->dbwatch);

	snprintf(text, sizeof(text),
		 "clamd %s; %llu opens checked, %llu scanned, %llu from "
		 "cache, %llu infected, %llu refused for scan errors",
		 up > 0	   ? "up"
		 : up == 0 ? "DOWN"
			   : "not watched",
		 (unsigned long long)stats_get(st, STAT_OPENS_CHECKED),
		 (unsigned long long)stats_get(st, STAT_SCANS_WAITED),
		 (unsigned long long)stats_get(st, STAT_CACHE_HITS),
		 (unsigned long long)stats_get(st, STAT_INFECTED),
		 (unsigned long long)stats_get(st, STAT_ERRORS_DENIED));
	sdnotify_status(text);
}

/*
 * The FUSE loop ends when the connection's last mount goes, in every mount
 * namespace (clamfs.8, SIGNALS): a namespace made after mounting holds a
 * copy, and clamfs serves it on; so does a lazy unmount while files are
 * open. Whoever unmounted the share and still sees clamfs running learns
 * why, once.
 */
static void say_if_unmounted_here(struct service *sv)
{
	/* an unmount that ends the connection ends the loop within moments */
	const struct timespec settle = {0, 500 * 1000 * 1000};

	if (!sv->mount_id || sv->said_unmounted ||
	    mountpoint_id_listed(MOUNTINFO_SELF, sv->mount_id) != 0)
		return;
	nanosleep(&settle, NULL);
	if (fuse_session_exited(sv->fs->se))
		return;
	sv->said_unmounted = true;
	log_warn("%s is no longer mounted here, but the mount is still in use: "
		 "a copy lives on in another mount namespace, or a lazy "
		 "unmount (umount -l) waits for files still open; serving it "
		 "until it goes (SIGTERM ends clamfs)",
		 sv->mountpoint);
}

/*
 * A reload to run: posted through the mount (answered through done
 * exactly once), or for SIGHUP (done NULL: the log says it all).
 */
struct post {
	char why[64];
	service_done_fn *done;
	void *ctx;
	struct post *next;
};

/* Under sv->lock: queues p last; false (p not taken) when stopping. */
static bool enqueue_locked(struct service *sv, struct post *p)
{
	if (sv->stopping)
		return false;
	*sv->posts_tail = p;
	sv->posts_tail = &p->next;
	pthread_cond_signal(&sv->more);
	return true;
}

static void run_post(struct service *sv, struct post *p, bool stopping)
{
	char msg[2048] = "";
	int ret;

	if (stopping) {
		snprintf(msg, sizeof(msg), "clamfs is stopping: not done");
		ret = -ESHUTDOWN;
	} else {
		ret = reload_run_notified(sv->reload, p->why, msg, sizeof(msg));
	}
	if (p->done)
		p->done(p->ctx, ret, msg);
	free(p);
}

/* Runs the reloads one at a time; at stop, answers what is left. */
static void *reload_main(void *arg)
{
	struct service *sv = arg;

	pthread_mutex_lock(&sv->lock);
	for (;;) {
		struct post *p;
		bool stopping;

		while (!sv->posts && !sv->stopping)
			pthread_cond_wait(&sv->more, &sv->lock);
		p = sv->posts;
		if (!p)
			break; /* stopping, and nothing left to answer */
		sv->posts = p->next;
		if (!sv->posts)
			sv->posts_tail = &sv->posts;
		if (!p->done)
			sv->hup_queued = false;
		stopping = sv->stopping;
		pthread_mutex_unlock(&sv->lock);
		run_post(sv, p, stopping);
		pthread_mutex_lock(&sv->lock);
	}
	pthread_mutex_unlock(&sv->lock);
	return NULL;
}

/*
 * SIGHUP: one reload queued at most, as the kernel keeps one pending
 * signal: a burst while a reload runs gives one more, which reads the
 * file as it is by then.
 */
static void queue_sighup(struct service *sv)
{
	struct post *p = calloc(1, sizeof(*p));
	bool queued = false;

	if (!p) {
		log_err("SIGHUP: out of memory, not reloaded");
		return;
	}
	snprintf(p->why, sizeof(p->why), "SIGHUP");
	pthread_mutex_lock(&sv->lock);
	if (!sv->hup_queued && enqueue_locked(sv, p)) {
		sv->hup_queued = true;
		queued = true;
	}
	pthread_mutex_unlock(&sv->lock);
	if (!queued)
		free(p);
}

static void take_signal(struct service *sv)
{
	struct signalfd_siginfo si;

	if (read(sv->sfd, &si, sizeof(si)) != sizeof(si))
		return;
	/* never behind a reload: a signature update must not wait */
	if (si.ssi_signo == SIGUSR1)
		reload_drop_verdicts(sv->fs, "SIGUSR1");
	else if (si.ssi_signo == SIGHUP)
		queue_sighup(sv);
}

static bool is_stopping(struct service *sv)
{
	bool stop;

	pthread_mutex_lock(&sv->lock);
	stop = sv->stopping;
	pthread_mutex_unlock(&sv->lock);
	return stop;
}

static void *service_main(void *arg)
{
	struct service *sv = arg;
	struct pollfd pfd[2] = {{.fd = sv->sfd, .events = POLLIN},
				{.fd = sv->efd, .events = POLLIN}};
	long long next_status = mono_ms() + STATUS_SECONDS * 1000;

	while (!is_stopping(sv)) {
		long long now = mono_ms();

		if (now >= next_status) {
			notify_live_status(sv);
			say_if_unmounted_here(sv);
			next_status = mono_ms() + STATUS_SECONDS * 1000;
			continue;
		}
		if (poll(pfd, 2, (int)(next_status - now)) <= 0)
			continue;
		if (pfd[0].revents & POLLIN)
			take_signal(sv);
		/* pfd[1]: the stop, seen at the top of the loop */
	}
	return NULL;
}

static void service_free(struct service *sv)
{
	if (sv->sfd != -1)
		close(sv->sfd);
	if (sv->efd != -1)
		close(sv->efd);
	pthread_cond_destroy(&sv->more);
	pthread_mutex_destroy(&sv->lock);
	free(sv);
}

/* Joins the threads started; queued posts are answered first. */
static void stop_threads(struct service *sv, bool signals, bool reloads)
{
	uint64_t one = 1;

	pthread_mutex_lock(&sv->lock);
	sv->stopping = true;
	pthread_cond_signal(&sv->more);
	pthread_mutex_unlock(&sv->lock);
	/* a full counter already wakes the thread */
	if (write(sv->efd, &one, sizeof(one)) != sizeof(one))
		log_debug("service: wake-up not written: %s", strerror(errno));
	if (signals)
		pthread_join(sv->signal_thread, NULL);
	if (reloads)
		pthread_join(sv->reload_thread, NULL);
}

int service_start(struct clamfs_fs *fs, struct reload *reload,
		  const char *mountpoint, struct service **out)
{
	struct service *sv = calloc(1, sizeof(*sv));
	sigset_t set;
	int ret;

	*out = NULL;
	if (!sv)
		return -ENOMEM;
	sv->fs = fs;
	sv->reload = reload;
	sv->mountpoint = mountpoint;
	sv->posts_tail = &sv->posts;
	pthread_mutex_init(&sv->lock, NULL);
	pthread_cond_init(&sv->more, NULL);
	if (mountpoint_top_id(MOUNTINFO_SELF, mountpoint, &sv->mount_id) != 1)
		sv->mount_id = 0;
	/* blocked everywhere (service_block_signals): read here */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sv->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	sv->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sv->sfd == -1 || sv->efd == -1) {
		ret = -errno;
		service_free(sv);
		return ret;
	}
	ret = -pthread_create(&sv->reload_thread, NULL, reload_main, sv);
	if (ret) {
		service_free(sv);
		return ret;
	}
	ret = -pthread_create(&sv->signal_thread, NULL, service_main, sv);
	if (ret) {
		stop_threads(sv, false, true);
		service_free(sv);
		return ret;
	}
	*out = sv;
	return 0;
}

int service_post_reload(struct service *sv, const char *why,
			service_done_fn *done, void *ctx)
{
	struct post *p = calloc(1, sizeof(*p));
	bool queued;

	if (!p)
		return -ENOMEM;
	snprintf(p->why, sizeof(p->why), "%s", why);
	p->done = done;
	p->ctx = ctx;
	pthread_mutex_lock(&sv->lock);
	queued = enqueue_locked(sv, p);
	pthread_mutex_unlock(&sv->lock);
	if (!queued) {
		free(p);
		return -ESHUTDOWN;
	}
	return 0;
}

void service_stop(struct service *sv)
{
	if (!sv)
		return;
	stop_threads(sv, true, true);
	service_free(sv);
}
