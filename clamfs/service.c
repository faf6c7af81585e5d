// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The service thread (service.h): signals, systemd's status line, and
 * noticing that the mount went away here while it lives on elsewhere.
 */
#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "mountpoint.h"
#include "notify.h"

struct service {
	struct clamfs_fs *fs;
	struct reload *reload;
	const char *mountpoint;
	unsigned long long mount_id; /* ours, 0 when not known */
	bool said_unmounted;
	pthread_t thread;
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
	 * turning SIGHUP into an unmount; blocked, the signal waits for
	 * sigwait() in the signal thread and the handler never runs. It
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

static void *signal_main(void *arg)
{
	const struct timespec status_every = {STATUS_SECONDS, 0};
	struct service *sv = arg;
	char msg[2048];
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGQUIT); /* service_stop's wake-up call */
	for (;;) {
		sig = sigtimedwait(&set, NULL, &status_every);
		if (sig == -1) {
			if (errno == EAGAIN) {
				notify_live_status(sv);
				say_if_unmounted_here(sv);
			}
			continue;
		}
		if (sig == SIGQUIT)
			return NULL;
		if (sig == SIGUSR1)
			reload_drop_verdicts(sv->fs, "SIGUSR1");
		else
			reload_run_notified(sv->reload, "SIGHUP", msg,
					    sizeof(msg));
	}
}

int service_start(struct clamfs_fs *fs, struct reload *reload,
		  const char *mountpoint, struct service **out)
{
	struct service *sv = calloc(1, sizeof(*sv));
	sigset_t quit;
	int ret;

	*out = NULL;
	if (!sv)
		return -ENOMEM;
	sv->fs = fs;
	sv->reload = reload;
	sv->mountpoint = mountpoint;
	if (mountpoint_top_id(MOUNTINFO_SELF, mountpoint, &sv->mount_id) != 1)
		sv->mount_id = 0;
	/* only the service thread takes SIGQUIT: service_stop's call */
	sigemptyset(&quit);
	sigaddset(&quit, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &quit, NULL);
	ret = -pthread_create(&sv->thread, NULL, signal_main, sv);
	pthread_sigmask(SIG_UNBLOCK, &quit, NULL);
	if (ret) {
		free(sv);
		return ret;
	}
	*out = sv;
	return 0;
}

void service_stop(struct service *sv)
{
	if (!sv)
		return;
	pthread_kill(sv->thread, SIGQUIT);
	pthread_join(sv->thread, NULL);
	free(sv);
}
