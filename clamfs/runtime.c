// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scanning runtime and live reconfiguration. Each configuration loaded is
 * a generation with a reference count: requests pin the one in force
 * while they use its objects, and a generation a reload retired is freed
 * by its last unpin, whenever that comes.
 */
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ahead.h"
#include "checks.h"
#include "cmdline.h"
#include "dbwatch.h"
#include "generation.h"
#include "log.h"
#include "mountpoint.h"
#include "notify.h"
#include "open.h"
#include "optable.h"
#include "poolcfg.h"
#include "scanner_clamd.h"

struct runtime {
	struct clamfs_fs *fs;
	const char *mountpoint;
	int argc;
	char **argv;
	pthread_mutex_t lock; /* reloads against each other */
	struct generations *gens;
	struct dbwatch *dbwatch;
	pthread_t sig_thread;
	bool sig_thread_started;
	char **argv_copy; /* argv with the config file made absolute */
	char *config_arg;
	unsigned long long mount_id; /* ours, 0 when not known */
	bool use_store;		     /* verdict_store= passed the checks */
	bool said_unmounted;
};

/* The scan queue reports each scan's duration for the histogram. */
static void observe_scan(void *stats, uint64_t usec)
{
	stats_observe_scan(stats, usec);
}

/* The scan queue's hold on the pool a scan runs on (scanq_config). */
static void *hold_generation(void *fs)
{
	return fs_pin(fs);
}

static void release_generation(void *pin)
{
	fs_unpin(pin);
}

/* 0 when any backend answers PING, else the last one's failure. */
static int ping_any(struct cdp_fleet *fleet, struct cdp_result *res)
{
	int ret = -ENOENT;

	for (size_t i = 0; i < cdp_fleet_size(fleet); i++) {
		ret = cdp_ping(cdp_fleet_pool(fleet, i), res);
		if (ret == 0)
			break;
	}
	return ret;
}

/*
 * A directory others may write fails the mount (anybody who may write it
 * could mark files clean): checked here, before the mount. The store is
 * opened by runtime_start, in the process that serves.
 */
static int check_store(struct runtime *rt, const struct clamfs_opts *opts)
{
	int ret;

	rt->fs->store_ttl = config_store_ttl(opts);
	if (!opts->verdict_store)
		return 0;
	if (!opts->version_check) {
		log_warn("verdict_store needs version_check: without it no "
			 "database change would be noticed; not used");
		return 0;
	}
	ret = vstore_check_dir(opts->verdict_store);
	if (ret == -EPERM)
		return ret;
	if (ret)
		log_warn("verdict store %s not used: %s", opts->verdict_store,
			 strerror(-ret));
	rt->use_store = ret == 0;
	return 0;
}

/* Another store's verdicts only cost the rescans they would have saved. */
static void open_store(struct runtime *rt, const struct clamfs_opts *opts)
{
	struct clamfs_fs *fs = rt->fs;
	int ret;

	if (!rt->use_store)
		return;
	ret = vstore_open(opts->verdict_store,
			  (size_t)opts->verdict_store_size << 20,
			  inode_fd(itab_root(fs->itab)),
			  opts->clamd ? opts->clamd : "", &fs->vstore);
	if (ret)
		log_warn("verdict store %s not used: %s", opts->verdict_store,
			 strerror(-ret));
}

/* Creates (0700) and opens the checked quarantine directory; -1 if not. */
static int open_quarantine(const char *dir)
{
	int fd;

	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		fprintf(stderr, "clamfs: quarantine_dir %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		fprintf(stderr, "clamfs: quarantine_dir %s: %s\n", dir,
			strerror(errno));
	return fd;
}

struct runtime *runtime_prepare(struct clamfs_fs *fs,
				const struct clamfs_opts *opts,
				const char *mountpoint)
{
	struct runtime *rt = calloc(1, sizeof(*rt));
	struct generation *g;
	char err[512];

	if (!rt)
		goto nomem;
	rt->fs = fs;
	rt->mountpoint = mountpoint;
	pthread_mutex_init(&rt->lock, NULL);
	fs->rt = rt;
	fs->quarantine_fd = -1;
	g = generation_new();
	if (!g)
		goto nomem;
	if (generations_new(g, &rt->gens) != 0) {
		generation_free(g);
		goto nomem;
	}
	fs->gens = rt->gens;
	g->opts = (struct clamfs_opts *)opts; /* the caller's */
	if (config_check_mount(opts, NULL, fs->backend_path, mountpoint,
			       &fs->scan_mode, err, sizeof(err)) != 0) {
		fprintf(stderr, "clamfs: %s\n", err);
		goto fail;
	}
	poolcfg_tls_stamp(opts, &g->tls_stamp);
	if (poolcfg_new(opts, 0, &fs->scan_mode, &g->fleet, err, sizeof(err))) {
		fprintf(stderr, "clamfs: %s\n", err);
		goto fail;
	}
	g->owns_fleet = true;
	if (fs->scan_mode == SCAN_MODE_PATH)
		log_warn("scan_mode=path: clamd is sent the opened file "
			 "(fdpass or stream), never its path, which users "
			 "could change during the scan");
	fs->policy = &opts->policy;
	fs->scan_on_close = opts->scan_on_close;
	fs->scan_ahead = opts->scan_ahead;
	fs->scan_ahead_dirs = opts->scan_ahead_dirs;
	if (opts->policy.on_infected == INFECTED_QUARANTINE) {
		fs->quarantine_fd = open_quarantine(opts->quarantine_dir);
		if (fs->quarantine_fd < 0)
			goto fail;
	}
	g->vcache = fs->vcache =
		vcache_new(opts->cache_entries, opts->cache_ttl, NULL, NULL);
	g->owns_vcache = g->vcache != NULL;
	g->detect = fs->detect =
		detect_new(opts->infected_cmd, opts->infected_cmd_rate,
			   mountpoint, &fs->stats);
	g->owns_detect = g->detect != NULL;
	if (!fs->vcache || !fs->detect)
		goto nomem;
	if (check_store(rt, opts) != 0)
		goto fail;
	return rt;
nomem:
	fprintf(stderr, "clamfs: out of memory\n");
fail:
	runtime_free(rt);
	return NULL;
}

static void never_runs(int sig)
{
	(void)sig;
}

int runtime_block_signals(void)
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

int runtime_wait_clamd(struct runtime *rt, unsigned int seconds,
		       struct fuse_session *se)
{
	struct timespec start, now;
	struct cdp_result res;
	bool said = false;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if (ping_any(generations_current(rt->gens)->fleet, &res) == 0) {
			if (said)
				log_info("clamd answers; going ahead");
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		/* in ms: whole seconds alone gave up to 1 s early */
		if ((now.tv_sec - start.tv_sec) * 1000 +
			    (now.tv_nsec - start.tv_nsec) / 1000000 >=
		    (int64_t)seconds * 1000) {
			log_warn("clamd still not answering after %u s (%s): "
				 "mounting; opens fail until it answers",
				 seconds, res.text);
			return -ETIMEDOUT;
		}
		if (!said)
			log_info("waiting up to %u s for clamd: %s", seconds,
				 res.text);
		said = true;
		/* a stop request must not wait out the whole bound */
		for (int i = 0; i < 10; i++) {
			if (fuse_session_exited(se))
				return -EINTR;
			usleep(100 * 1000);
		}
	}
}

void runtime_drop_cache(struct runtime *rt, const char *why)
{
	struct generation *pin = fs_pin(rt->fs);

	vcache_clear(fs_vcache(rt->fs));
	/* after the cache: see maybe_cache() in open.c */
	vstore_clear(rt->fs->vstore);
	fs_unpin(pin);
	stats_inc(&rt->fs->stats, STAT_CACHE_CLEARS);
	log_info("%s: verdict cache dropped, every file is scanned again at "
		 "its next open",
		 why);
}

/*
 * What `systemctl status clamfs@share` shows under the unit, refreshed
 * every STATUS_SECONDS: is clamd there, and what the gate has done.
 */
#define STATUS_SECONDS 10

static void notify_live_status(struct runtime *rt)
{
	struct stats *st = &rt->fs->stats;
	char text[512];
	int up = dbwatch_up(rt->fs->dbwatch);

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
static void say_if_unmounted_here(struct runtime *rt)
{
	/* an unmount that ends the connection ends the loop within moments */
	const struct timespec settle = {0, 500 * 1000 * 1000};

	if (!rt->mount_id || rt->said_unmounted ||
	    mountpoint_id_listed(MOUNTINFO_SELF, rt->mount_id) != 0)
		return;
	nanosleep(&settle, NULL);
	if (fuse_session_exited(rt->fs->se))
		return;
	rt->said_unmounted = true;
	log_warn("%s is no longer mounted here, but the mount is still in use: "
		 "a copy lives on in another mount namespace, or a lazy "
		 "unmount (umount -l) waits for files still open; serving it "
		 "until it goes (SIGTERM ends clamfs)",
		 rt->mountpoint);
}

static void *signal_main(void *arg)
{
	const struct timespec status_every = {STATUS_SECONDS, 0};
	struct runtime *rt = arg;
	char msg[2048];
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGQUIT); /* runtime_free's wake-up call */
	for (;;) {
		sig = sigtimedwait(&set, NULL, &status_every);
		if (sig == -1) {
			if (errno == EAGAIN) {
				notify_live_status(rt);
				say_if_unmounted_here(rt);
			}
			continue;
		}
		if (sig == SIGQUIT)
			return NULL;
		if (sig == SIGUSR1)
			runtime_drop_cache(rt, "SIGUSR1");
		else
			runtime_reload_notified(rt, "SIGHUP", msg, sizeof(msg));
	}
}

/* The database watch's view of the configuration in force. */
static struct cdp_fleet *watch_pin_fleet(void *arg, void **pin)
{
	struct runtime *rt = arg;
	struct generation *g = fs_pin(rt->fs);

	*pin = g;
	return g->fleet;
}

static void watch_unpin(void *arg, void *pin)
{
	(void)arg;
	fs_unpin(pin);
}

static void watch_drop_verdicts(void *arg)
{
	struct runtime *rt = arg;
	struct generation *pin = fs_pin(rt->fs);

	vcache_clear(fs_vcache(rt->fs));
	vstore_clear(rt->fs->vstore);
	fs_unpin(pin);
}

/*
 * Without the version watch (version_check=0) nobody would notice a wrong
 * clamd address before the first refused open: one PING at start.
 */
static void say_if_clamd_silent(struct runtime *rt)
{
	struct cdp_result res = {0};

	if (ping_any(generations_current(rt->gens)->fleet, &res) == 0)
		return;
	log_err("clamd is not answering: %s: every open that needs a scan is "
		"refused (or served unscanned where on_error=allow) until it "
		"answers",
		res.text[0] ? res.text : cdp_errcat_name(res.cat));
}

int runtime_start(struct runtime *rt, int argc, char *argv[])
{
	struct dbwatch_source src = {
		.arg = rt,
		.pin_fleet = watch_pin_fleet,
		.unpin = watch_unpin,
		.drop_verdicts = watch_drop_verdicts,
		.outage = &rt->fs->clamd_outage,
	};
	struct scanq_config qcfg = {0};
	struct clamfs_opts *opts = generations_current(rt->gens)->opts;
	sigset_t quit;
	int ret;

	rt->argc = argc;
	rt->argv = argv;
	if (mountpoint_top_id(MOUNTINFO_SELF, rt->mountpoint, &rt->mount_id) !=
	    1)
		rt->mount_id = 0;
	/*
	 * The daemon's cwd is "/" by now: a relative config= on the command
	 * line is appended again as the absolute path cmdline_parse resolved;
	 * the last config= is the one read.
	 */
	if (opts->config) {
		char *escaped = NULL;

		if (fuse_opt_add_opt_escaped(&escaped, opts->config) == -1)
			return -ENOMEM;
		if (asprintf(&rt->config_arg, "config=%s", escaped) < 0) {
			free(escaped);
			return -ENOMEM;
		}
		free(escaped);
		rt->argv_copy = calloc((size_t)argc + 3, sizeof(char *));
		if (!rt->argv_copy)
			return -ENOMEM;
		memcpy(rt->argv_copy, argv, sizeof(char *) * (size_t)argc);
		rt->argv_copy[argc] = "-o";
		rt->argv_copy[argc + 1] = rt->config_arg;
		rt->argc = argc + 2;
		rt->argv = rt->argv_copy;
	}
	qcfg.fleet = generations_current(rt->gens)->fleet;
	qcfg.mode = rt->fs->scan_mode;
	qcfg.threads = opts->scan_threads;
	qcfg.timeout_ms = (int)opts->scan_timeout * 1000;
	qcfg.scan = scanner_clamd_scan;
	qcfg.hold = hold_generation;
	qcfg.release = release_generation;
	qcfg.hold_arg = rt->fs;
	qcfg.observe = observe_scan;
	qcfg.observe_arg = &rt->fs->stats;
	ret = cdp_fleet_start(generations_current(rt->gens)->fleet);
	if (ret)
		return ret;
	ret = scanq_new(&qcfg, &rt->fs->scanq);
	if (ret)
		return ret;
	ret = ahead_start(rt->fs, gate_scan_ahead_entry, &rt->fs->ahead);
	if (ret)
		return ret;
	open_store(rt, opts);
	ret = dbwatch_start(&src, &rt->fs->stats, opts->version_check,
			    &rt->dbwatch);
	if (ret)
		return ret;
	rt->fs->dbwatch = rt->dbwatch;
	if (!rt->dbwatch)
		say_if_clamd_silent(rt);
	sigemptyset(&quit);
	sigaddset(&quit, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &quit, NULL);
	ret = -pthread_create(&rt->sig_thread, NULL, signal_main, rt);
	pthread_sigmask(SIG_UNBLOCK, &quit, NULL);
	if (ret)
		return ret;
	rt->sig_thread_started = true;
	return 0;
}

void runtime_free(struct runtime *rt)
{
	if (!rt)
		return;
	if (rt->sig_thread_started) {
		pthread_kill(rt->sig_thread, SIGQUIT);
		pthread_join(rt->sig_thread, NULL);
	}
	dbwatch_stop(rt->dbwatch);
	rt->fs->dbwatch = NULL;
	/* it asks the queue for scans */
	ahead_stop(rt->fs->ahead);
	rt->fs->ahead = NULL;
	/* its last scans end here, and with them their pins */
	scanq_free(rt->fs->scanq);
	rt->fs->scanq = NULL;
	/* after the scans: the last verdicts are committed */
	vstore_close(rt->fs->vstore);
	rt->fs->vstore = NULL;
	/*
	 * Nothing else can hold a pin now: dropping the current generation
	 * frees the whole chain. A generation a leaked pin still held would
	 * stay, for the leak checker to name.
	 */
	generations_free(rt->gens);
	rt->fs->gens = NULL;
	rt->fs->rt = NULL;
	rt->fs->policy = NULL;
	rt->fs->vcache = NULL;
	rt->fs->detect = NULL;
	if (rt->fs->quarantine_fd >= 0)
		close(rt->fs->quarantine_fd);
	rt->fs->quarantine_fd = -1;
	pthread_mutex_destroy(&rt->lock);
	free(rt->argv_copy);
	free(rt->config_arg);
	free(rt);
}

/*
 * The generation a reload would put in force in place of g: the
 * configuration read again (rt's argv, so -o options still win over the
 * file), checked by startup's rules, and new objects for what changed
 * under them (the option table's reload column); what is unchanged stays
 * g's until publish moves it on. 0 and *out, or -errno and why in err.
 */
static int reload_build(struct runtime *rt, const struct generation *g,
			struct generation **out, enum scan_mode *mode,
			char *err, size_t err_len)
{
	const struct clamfs_opts *o = g->opts, *n;
	struct generation *next = generation_new();
	struct clamfs_fs *fs = rt->fs;
	int ret = -ENOMEM;

	snprintf(err, err_len, "no memory");
	if (!next)
		goto out;
	next->opts = calloc(1, sizeof(*next->opts));
	if (!next->opts)
		goto out;
	next->owns_opts = true; /* cmdline_parse empties it when it fails */
	n = next->opts;
	ret = cmdline_parse(rt->argc, rt->argv, next->opts, &next->args, err,
			    err_len);
	if (ret)
		goto out;
	ret = -EINVAL;
	if (config_check_mount(n, o, fs->backend_path, rt->mountpoint, mode,
			       err, err_len) != 0)
		goto out;
	/* the quarantine fd stays: the action needs it as it was opened */
	if (n->policy.on_infected == INFECTED_QUARANTINE &&
	    fs->quarantine_fd < 0) {
		snprintf(err, err_len,
			 "on_infected=quarantine needs a remount "
			 "(quarantine_dir was not open)");
		goto out;
	}
	/* the fleet it keeps, or the one made from the files as stamped */
	poolcfg_tls_stamp(n, &next->tls_stamp);
	next->other_clamds =
		optable_differs(o, n, RELOAD_POOL) ||
		memcmp(&next->tls_stamp, &g->tls_stamp, sizeof(g->tls_stamp));
	if (next->other_clamds || optable_differs(o, n, RELOAD_FLEET)) {
		ret = poolcfg_new(n, 0, mode, &next->fleet, err, err_len);
		if (ret)
			goto out;
		next->owns_fleet = true;
		ret = cdp_fleet_start(next->fleet);
		if (ret) {
			snprintf(err, err_len, "cannot start the prober: %s",
				 strerror(-ret));
			goto out;
		}
	}
	ret = -ENOMEM;
	if (optable_differs(o, n, RELOAD_CACHE)) {
		next->vcache =
			vcache_new(n->cache_entries, n->cache_ttl, NULL, NULL);
		if (!next->vcache) {
			snprintf(err, err_len, "no memory for the new cache");
			goto out;
		}
		next->owns_vcache = true;
	}
	if (optable_differs(o, n, RELOAD_HOOK)) {
		next->detect = detect_new(n->infected_cmd, n->infected_cmd_rate,
					  rt->mountpoint, &fs->stats);
		if (!next->detect) {
			snprintf(err, err_len, "no memory for the new hook");
			goto out;
		}
		next->owns_detect = true;
	}
	*out = next;
	next = NULL;
	ret = 0;
out:
	if (next)
		generation_free(next);
	return ret;
}

/*
 * What a reload from g to next changes, as "key old->new, ..." in changes
 * (from the option table, and TLS files replaced under the same name), and
 * the names of what it leaves for a remount in remount. Returns whether
 * anything differs.
 */
static bool reload_describe(const struct generation *g,
			    const struct generation *next, char *changes,
			    size_t len, char *remount, size_t remount_len)
{
	static const enum opt_reload applied[] = {RELOAD_POOL, RELOAD_FLEET,
						  RELOAD_CACHE, RELOAD_HOOK,
						  RELOAD_LIVE};
	const struct clamfs_opts *o = g->opts, *n = next->opts;
	bool quarantined = o->policy.on_infected == INFECTED_QUARANTINE;

	changes[0] = remount[0] = '\0';
	for (size_t i = 0; i < sizeof(applied) / sizeof(applied[0]); i++)
		optable_describe(o, n, applied[i], changes, len);
	/* a file replaced under a name that stayed the same */
	if (!optable_differs(o, n, RELOAD_POOL))
		poolcfg_tls_describe(&g->tls_stamp, &next->tls_stamp, changes,
				     len);
	optable_name_changes(o, n, RELOAD_REMOUNT, remount, remount_len);
	/* quarantine_dir is opened at mount: starting to use it needs one */
	if (quarantined != (n->policy.on_infected == INFECTED_QUARANTINE) &&
	    !config_str_differs(o->quarantine_dir, n->quarantine_dir))
		snprintf(remount + strlen(remount),
			 remount_len - strlen(remount), "%squarantine_dir",
			 remount[0] ? ", " : "");
	return changes[0] || remount[0];
}

/*
 * Puts next in force in place of g: what next did not replace moves on to
 * it, requests see its objects from now on, and g is retired, to be freed
 * by its last unpin (maybe this one).
 */
static void publish(struct runtime *rt, struct generation *g,
		    struct generation *next, enum scan_mode mode)
{
	struct clamfs_fs *fs = rt->fs;
	bool new_pool = next->fleet != NULL;

#define MOVE_ON(obj)                                                           \
	do {                                                                   \
		if (!next->obj) {                                              \
			next->obj = g->obj;                                    \
			next->owns_##obj = g->owns_##obj;                      \
			g->owns_##obj = false;                                 \
		}                                                              \
	} while (0)
	MOVE_ON(fleet);
	MOVE_ON(vcache);
	MOVE_ON(detect);
#undef MOVE_ON
	/*
	 * The queue takes the new pool before anybody can pin next: a scan
	 * runs on the pool of the generation its waiter pinned, or a newer.
	 */
	if (new_pool) {
		fs->scan_mode = mode;
		scanq_reconfigure_fleet(fs->scanq, next->fleet, mode,
					(int)next->opts->scan_timeout * 1000);
	}
	__atomic_store_n(&fs->vcache, next->vcache, __ATOMIC_RELEASE);
	__atomic_store_n(&fs->detect, next->detect, __ATOMIC_RELEASE);
	__atomic_store_n(&fs->policy, &next->opts->policy, __ATOMIC_RELEASE);
	__atomic_store_n(&fs->scan_on_close, next->opts->scan_on_close,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&fs->scan_ahead, next->opts->scan_ahead,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&fs->scan_ahead_dirs, next->opts->scan_ahead_dirs,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&fs->store_ttl, config_store_ttl(next->opts),
			 __ATOMIC_RELAXED);
	if (next->other_clamds) {
		/*
		 * Another clamd may have other signatures: verdicts of the
		 * old one are not trusted.
		 */
		vcache_clear(next->vcache);
		vstore_clear(fs->vstore);
		stats_inc(&fs->stats, STAT_CACHE_CLEARS);
	}
	generations_publish(rt->gens, next);
}

int runtime_reload(struct runtime *rt, const char *why, char *msg,
		   size_t msg_len)
{
	struct generation *g, *next = NULL;
	char err[512] = "", changes[2048], remount[512];
	enum scan_mode mode = rt->fs->scan_mode;
	int ret;

	pthread_mutex_lock(&rt->lock);
	/* only a reload changes current, and it holds rt->lock */
	g = generations_current(rt->gens);
	ret = reload_build(rt, g, &next, &mode, err, sizeof(err));
	if (ret) {
		snprintf(msg, msg_len,
			 "configuration rejected, nothing changed: %s", err);
		log_err("%s: %s", why, msg);
		goto out;
	}
	if (!reload_describe(g, next, changes, sizeof(changes), remount,
			     sizeof(remount))) {
		/* a reload that changes nothing keeps what is in place */
		generation_free(next);
		snprintf(msg, msg_len,
			 "configuration reloaded (nothing changed)");
		log_info("%s: %s", why, msg);
		goto out;
	}
	publish(rt, g, next, mode);
	snprintf(msg, msg_len, "configuration reloaded%s%s",
		 changes[0] ? ": " : "",
		 changes[0] ? changes : " (nothing changed)");
	/* said before a lower level could hide it */
	log_info("%s: %s", why, msg);
	log_set_level(next->opts->log_level);
	if (remount[0]) {
		log_warn("%s: changed but needs a remount, not applied: %s",
			 why, remount);
		snprintf(msg + strlen(msg), msg_len - strlen(msg),
			 "\nneeds a remount, not applied: %s", remount);
	}
out:
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

int runtime_reload_notified(struct runtime *rt, const char *why, char *msg,
			    size_t msg_len)
{
	int ret;

	notify_reloading();
	ret = runtime_reload(rt, why, msg, msg_len);
	notify_ready(ret ? "configuration rejected, the previous one stays"
			 : "configuration reloaded");
	return ret;
}
