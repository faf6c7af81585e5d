// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The service thread (service.h): signals and posted commands, one at a
 * time; systemd's status line; noticing that the mount went away here
 * while it lives on elsewhere.
 */
#include "service.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "monotime.h"
#include "mountpoint.h"
#include "notify.h"

struct post;

struct service {
	struct clamfs_fs *fs;
	struct reload *reload;
	const char *mountpoint;
	unsigned long long mount_id; /* ours, 0 when not known */
	bool said_unmounted;
	pthread_t thread;
	int sfd;	      /* signalfd: SIGHUP, SIGUSR1 */
	int efd;	      /* eventfd: posts, and the stop */
	pthread_mutex_t lock; /* posts, stopping */
	struct post *posts;   /* newest first */
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
	 * service thread's signalfd and the handler never runs. It
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
	notify_status(text);
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

/* A posted command, answered through done exactly once. */
struct post {
	enum service_cmd cmd;
	char why[64];
	service_done_fn *done;
	void *ctx;
	struct post *next;
};

/* Takes the queued posts, oldest first. */
static struct post *take_posts(struct service *sv, bool *stopping)
{
	struct post *list, *rev = NULL;

	pthread_mutex_lock(&sv->lock);
	list = sv->posts;
	sv->posts = NULL;
	*stopping = sv->stopping;
	pthread_mutex_unlock(&sv->lock);
	while (list) {
		struct post *next = list->next;

		list->next = rev;
		rev = list;
		list = next;
	}
	return rev;
}

static void run_post(struct service *sv, struct post *p, bool stopping)
{
	char msg[2048] = "";
	int ret;

	if (stopping) {
		snprintf(msg, sizeof(msg), "clamfs is stopping: not done");
		ret = -ESHUTDOWN;
	} else if (p->cmd == SERVICE_RELOAD) {
		ret = reload_run_notified(sv->reload, p->why, msg, sizeof(msg));
	} else {
		reload_drop_verdicts(sv->fs, p->why);
		ret = 0;
	}
	p->done(p->ctx, ret, msg);
	free(p);
}

static void take_signal(struct service *sv)
{
	struct signalfd_siginfo si;
	char msg[2048];

	if (read(sv->sfd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGUSR1)
		reload_drop_verdicts(sv->fs, "SIGUSR1");
	else if (si.ssi_signo == SIGHUP)
		reload_run_notified(sv->reload, "SIGHUP", msg, sizeof(msg));
}

static void *service_main(void *arg)
{
	struct service *sv = arg;
	struct pollfd pfd[2] = {{.fd = sv->sfd, .events = POLLIN},
				{.fd = sv->efd, .events = POLLIN}};
	long long next_status = mono_ms() + STATUS_SECONDS * 1000;
	bool stopping = false;

	while (!stopping) {
		long long now = mono_ms();
		uint64_t n;

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
		if (pfd[1].revents & POLLIN) {
			struct post *p = NULL;

			if (read(sv->efd, &n, sizeof(n)) != sizeof(n))
				n = 0;
			p = take_posts(sv, &stopping);
			while (p) {
				struct post *next = p->next;

				run_post(sv, p, stopping);
				p = next;
			}
		}
	}
	return NULL;
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
	sv->sfd = sv->efd = -1;
	pthread_mutex_init(&sv->lock, NULL);
	if (mountpoint_top_id(MOUNTINFO_SELF, mountpoint, &sv->mount_id) != 1)
		sv->mount_id = 0;
	/* blocked everywhere (service_block_signals): read here */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sv->sfd = signalfd(-1, &set, SFD_CLOEXEC);
	sv->efd = eventfd(0, EFD_CLOEXEC);
	if (sv->sfd == -1 || sv->efd == -1) {
		ret = -errno;
		goto fail;
	}
	ret = -pthread_create(&sv->thread, NULL, service_main, sv);
	if (ret)
		goto fail;
	*out = sv;
	return 0;
fail:
	if (sv->sfd != -1)
		close(sv->sfd);
	if (sv->efd != -1)
		close(sv->efd);
	pthread_mutex_destroy(&sv->lock);
	free(sv);
	return ret;
}

static void wake(struct service *sv)
{
	uint64_t one = 1;

	/* a full counter already wakes the thread */
	if (write(sv->efd, &one, sizeof(one)) != sizeof(one))
		return;
}

int service_post(struct service *sv, enum service_cmd cmd, const char *why,
		 service_done_fn *done, void *ctx)
{
	struct post *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->cmd = cmd;
	snprintf(p->why, sizeof(p->why), "%s", why);
	p->done = done;
	p->ctx = ctx;
	pthread_mutex_lock(&sv->lock);
	if (sv->stopping) {
		pthread_mutex_unlock(&sv->lock);
		free(p);
		return -ESHUTDOWN;
	}
	p->next = sv->posts;
	sv->posts = p;
	pthread_mutex_unlock(&sv->lock);
	wake(sv);
	return 0;
}

void service_stop(struct service *sv)
{
	if (!sv)
		return;
	pthread_mutex_lock(&sv->lock);
	sv->stopping = true;
	pthread_mutex_unlock(&sv->lock);
	wake(sv);
	/* the thread answers what was posted before it ends */
	pthread_join(sv->thread, NULL);
	close(sv->sfd);
	close(sv->efd);
	pthread_mutex_destroy(&sv->lock);
	free(sv);
}
