// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Scanning runtime and live reconfiguration. Objects a reload replaces
 * (options, pools, caches, reporters) are kept until unmount: a request
 * that loaded the old pointer may still be using it.
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

#include "dbwatch.h"
#include "log.h"
#include "notify.h"

#define RUNTIME_MAX_GENERATIONS 64

/*
 * One configuration as loaded. The current generation owns the pool,
 * cache and reporter in use; a retired one keeps only what its successor
 * replaced, for requests that may still hold it, until a grace period
 * (its scan deadline and a margin) has passed.
 */
struct generation {
	struct clamfs_opts *opts;
	bool owns_opts; /* not the first: that one is main()'s */
	struct fuse_args args;
	struct cdp_pool *pool;
	struct vcache *vcache;
	struct detect *detect;
	time_t retired; /* CLOCK_MONOTONIC seconds; 0 while current */
};

struct runtime {
	struct clamfs_fs *fs;
	const char *mountpoint;
	int argc;
	char **argv;
	pthread_mutex_t lock; /* reloads against each other */
	struct generation gen[RUNTIME_MAX_GENERATIONS];
	int ngen; /* gen[ngen - 1] is current */
	struct dbwatch *dbwatch;
	pthread_t sig_thread;
	bool sig_thread_started;
	char **argv_copy; /* argv with the config file made absolute */
	char *config_arg;
};

static struct generation *current(struct runtime *rt)
{
	return &rt->gen[rt->ngen - 1];
}

static int open_quarantine(const char *dir, const char *backend)
{
	size_t blen = strlen(backend);
	char *real;
	int fd;

	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		fprintf(stderr, "clamfs: quarantine_dir %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	real = realpath(dir, NULL);
	if (!real) {
		fprintf(stderr, "clamfs: quarantine_dir %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	/* inside the backend, quarantined files would still be served */
	if (strncmp(real, backend, blen) == 0 &&
	    (real[blen] == '/' || real[blen] == '\0' || blen == 1)) {
		fprintf(stderr,
			"clamfs: quarantine_dir %s: must be outside the "
			"backend %s\n",
			dir, backend);
		free(real);
		return -1;
	}
	fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		fprintf(stderr, "clamfs: quarantine_dir %s: %s\n", dir,
			strerror(errno));
	free(real);
	return fd;
}

/* A pool for opts' clamd; NULL with a one-line reason in err. */
static struct cdp_pool *pool_for(const struct clamfs_opts *opts,
				 enum scan_mode *mode, char *err,
				 size_t errlen)
{
	struct cdp_pool *pool = NULL;
	struct cdp_config cfg;
	bool unix_socket;
	int ret;

	/* the daemon runs from "/" once in the background */
	if (opts->clamd[0] != '/' && strncmp(opts->clamd, "tcp://", 6) != 0) {
		snprintf(err, errlen,
			 "clamd=%s: want an absolute socket path or "
			 "tcp://HOST:PORT",
			 opts->clamd);
		return NULL;
	}
	cdp_config_init(&cfg);
	cfg.addr = opts->clamd;
	cfg.max_conns = opts->clamd_connections ? opts->clamd_connections
						: opts->scan_threads;
	cfg.scan_timeout_ms = (int)opts->scan_timeout * 1000;
	ret = cdp_pool_new(&cfg, &pool);
	if (ret) {
		snprintf(err, errlen, "clamd=%s: %s", opts->clamd,
			 ret == -EINVAL ? "not a socket path or tcp://HOST:PORT"
					: strerror(-ret));
		return NULL;
	}
	unix_socket = cdp_addr_kind(cdp_pool_addr(pool)) == CDP_ADDR_UNIX;
	*mode = opts->scan_mode >= 0 ? (enum scan_mode)opts->scan_mode
		: unix_socket	     ? SCAN_MODE_FDPASS
				     : SCAN_MODE_STREAM;
	if (*mode == SCAN_MODE_FDPASS && !unix_socket) {
		snprintf(err, errlen,
			 "scan_mode=fdpass needs clamd on a UNIX socket; use "
			 "scan_mode=stream over TCP");
		cdp_pool_free(pool);
		return NULL;
	}
	return pool;
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
	rt->ngen = 1;
	g = current(rt);
	g->opts = (struct clamfs_opts *)opts; /* the caller's */
	g->pool = pool_for(opts, &fs->scan_mode, err, sizeof(err));
	if (!g->pool) {
		fprintf(stderr, "clamfs: %s\n", err);
		goto fail;
	}
	/* clamd's open would come back through the mount: a deadlock */
	if (fs->scan_mode == SCAN_MODE_PATH &&
	    strcmp(fs->backend_path, mountpoint) == 0) {
		fprintf(stderr, "clamfs: scan_mode=path cannot scan a backend "
				"mounted over itself; use fdpass or stream\n");
		goto fail;
	}
	fs->policy = &opts->policy;
	fs->scan_on_close = opts->scan_on_close;
	fs->quarantine_fd = -1;
	if (opts->policy.on_infected == INFECTED_QUARANTINE) {
		fs->quarantine_fd =
			open_quarantine(opts->quarantine_dir, fs->backend_path);
		if (fs->quarantine_fd < 0)
			goto fail;
	}
	g->vcache = fs->vcache =
		vcache_new(opts->cache_entries, opts->cache_ttl, NULL, NULL);
	g->detect = fs->detect =
		detect_new(opts->infected_cmd, opts->infected_cmd_rate,
			   mountpoint, &fs->stats);
	if (!fs->vcache || !fs->detect)
		goto nomem;
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
		if (cdp_ping(current(rt)->pool, &res) == 0) {
			if (said)
				log_info("clamd answers; going ahead");
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= (time_t)seconds) {
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

static void drop_cache(struct runtime *rt)
{
	vcache_clear(fs_vcache(rt->fs));
	stats_inc(&rt->fs->stats, STAT_CACHE_CLEARS);
	log_info("SIGUSR1: verdict cache dropped, every file is scanned "
		 "again at its next open");
}

static void *signal_main(void *arg)
{
	struct runtime *rt = arg;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGQUIT); /* runtime_free's wake-up call */
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGQUIT)
			return NULL;
		if (sig == SIGUSR1) {
			drop_cache(rt);
		} else {
			notify_reloading();
			runtime_reload(rt);
			notify_ready("configuration reloaded");
		}
	}
}

int runtime_start(struct runtime *rt, int argc, char *argv[])
{
	struct scanq_config qcfg = {0};
	struct clamfs_opts *opts = current(rt)->opts;
	sigset_t quit;
	int ret;

	rt->argc = argc;
	rt->argv = argv;
	/*
	 * The daemon's cwd is "/" by now: a relative config= on the command
	 * line is appended again as the absolute path opts_parse resolved;
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
	qcfg.pool = current(rt)->pool;
	qcfg.mode = rt->fs->scan_mode;
	qcfg.threads = opts->scan_threads;
	qcfg.timeout_ms = (int)opts->scan_timeout * 1000;
	qcfg.scan = scanq_scan_clamd;
	ret = scanq_new(&qcfg, &rt->fs->scanq);
	if (ret)
		return ret;
	ret = dbwatch_start(current(rt)->pool, rt->fs->vcache, &rt->fs->stats,
			    opts->version_check, &rt->dbwatch);
	if (ret)
		return ret;
	rt->fs->dbwatch = rt->dbwatch;
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

static void generation_free(struct generation *g)
{
	cdp_pool_free(g->pool);
	vcache_free(g->vcache);
	detect_free(g->detect);
	if (g->owns_opts) {
		fuse_opt_free_args(&g->args);
		opts_free(g->opts);
		free(g->opts);
	}
	memset(g, 0, sizeof(*g));
}

static time_t monotonic_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* Frees retired generations no request can still be using. */
static void reclaim(struct runtime *rt)
{
	time_t now = monotonic_now();
	int kept = 0;

	for (int i = 0; i < rt->ngen; i++) {
		struct generation *g = &rt->gen[i];

		/*
		 * A replaced pool may carry scans up to their deadline; the
		 * rest is held only for the length of one call.
		 */
		time_t grace = g->pool ? (time_t)g->opts->scan_timeout + 30
				       : 5;

		if (i < rt->ngen - 1 && g->retired && now - g->retired > grace) {
			generation_free(g);
			continue;
		}
		if (kept != i) {
			rt->gen[kept] = *g;
			memset(g, 0, sizeof(*g));
		}
		kept++;
	}
	rt->ngen = kept;
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
	scanq_free(rt->fs->scanq);
	rt->fs->scanq = NULL;
	for (int i = 0; i < rt->ngen; i++)
		generation_free(&rt->gen[i]);
	if (rt->fs->quarantine_fd >= 0)
		close(rt->fs->quarantine_fd);
	rt->fs->quarantine_fd = -1;
	pthread_mutex_destroy(&rt->lock);
	free(rt->argv_copy);
	free(rt->config_arg);
	free(rt);
}

/* Appends "key old -> new" to a change list. */
static void note(char *buf, size_t len, const char *key, const char *from,
		 const char *to)
{
	size_t used = strlen(buf);

	snprintf(buf + used, len - used, "%s%s %s->%s", used ? ", " : "", key,
		 from, to);
}

static const char *num(char *buf, unsigned long v)
{
	snprintf(buf, 24, "%lu", v);
	return buf;
}

static bool str_differs(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* Settings that only a remount changes: named, not applied. */
static void note_remount_only(const struct clamfs_opts *o,
			      const struct clamfs_opts *n, char *buf,
			      size_t len)
{
	size_t used;

	buf[0] = '\0';
#define REMOUNT_IF(cond, name)                                                 \
	do {                                                                   \
		if (cond) {                                                    \
			used = strlen(buf);                                    \
			snprintf(buf + used, len - used, "%s%s",               \
				 used ? ", " : "", name);                      \
		}                                                              \
	} while (0)
	REMOUNT_IF(str_differs(o->backend, n->backend), "backend");
	REMOUNT_IF(str_differs(o->mountpoint, n->mountpoint), "mountpoint");
	REMOUNT_IF(str_differs(o->mount_options, n->mount_options), "options");
	REMOUNT_IF(o->threads != n->threads, "threads");
	REMOUNT_IF(o->clone_fd != n->clone_fd, "clone_fd");
	REMOUNT_IF(o->attr_timeout != n->attr_timeout, "attr_timeout");
	REMOUNT_IF(o->entry_timeout != n->entry_timeout, "entry_timeout");
	REMOUNT_IF(o->negative_timeout != n->negative_timeout,
		   "negative_timeout");
	REMOUNT_IF(o->default_permissions != n->default_permissions,
		   "no_default_permissions");
	REMOUNT_IF(str_differs(o->quarantine_dir, n->quarantine_dir) ||
			   (o->policy.on_infected == INFECTED_QUARANTINE) !=
				   (n->policy.on_infected ==
				    INFECTED_QUARANTINE),
		   "quarantine_dir");
	REMOUNT_IF(o->scan_threads != n->scan_threads, "scan_threads");
	REMOUNT_IF(o->version_check != n->version_check, "version_check");
#undef REMOUNT_IF
}

static bool strv_differs(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return true;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return true;
	return false;
}

static bool ids_differ(const unsigned int *a, size_t na, const unsigned int *b,
		       size_t nb)
{
	return na != nb || (na && memcmp(a, b, na * sizeof(*a)) != 0);
}

/* Names every setting a reload applies that differs. */
static void note_policy_changes(const struct clamfs_opts *o,
				const struct clamfs_opts *n, char *buf,
				size_t len)
{
	static const char *const levels[] = {"error", "warning", "info",
					     "debug"};
	const struct policy *op = &o->policy, *np = &n->policy;
	char a[24], b[24];

	if (op->on_infected != np->on_infected)
		note(buf, len, "on_infected",
		     infected_action_name(op->on_infected),
		     infected_action_name(np->on_infected));
	if (op->on_error_allow != np->on_error_allow)
		note(buf, len, "on_error", op->on_error_allow ? "allow" : "deny",
		     np->on_error_allow ? "allow" : "deny");
	if (op->deny_errno != np->deny_errno)
		note(buf, len, "deny_errno",
		     op->deny_errno == EPERM ? "EPERM" : "EACCES",
		     np->deny_errno == EPERM ? "EPERM" : "EACCES");
	if (op->max_scan_size != np->max_scan_size)
		note(buf, len, "max_scan_size", num(a, op->max_scan_size),
		     num(b, np->max_scan_size));
	if (op->oversize_allow != np->oversize_allow)
		note(buf, len, "oversize", op->oversize_allow ? "allow" : "deny",
		     np->oversize_allow ? "allow" : "deny");
	if (strv_differs(op->include, op->n_include, np->include,
			 np->n_include))
		note(buf, len, "include", num(a, op->n_include),
		     num(b, np->n_include));
	if (strv_differs(op->exclude, op->n_exclude, np->exclude,
			 np->n_exclude))
		note(buf, len, "exclude", num(a, op->n_exclude),
		     num(b, np->n_exclude));
	if (ids_differ(op->exempt_uids, op->n_exempt_uids, np->exempt_uids,
		       np->n_exempt_uids))
		note(buf, len, "exempt_uid", num(a, op->n_exempt_uids),
		     num(b, np->n_exempt_uids));
	if (ids_differ(op->exempt_gids, op->n_exempt_gids, np->exempt_gids,
		       np->n_exempt_gids))
		note(buf, len, "exempt_gid", num(a, op->n_exempt_gids),
		     num(b, np->n_exempt_gids));
	if (o->scan_on_close != n->scan_on_close)
		note(buf, len, "scan_on_close", o->scan_on_close ? "yes" : "no",
		     n->scan_on_close ? "yes" : "no");
	if (o->log_level != n->log_level)
		note(buf, len, "log_level", levels[o->log_level & 3],
		     levels[n->log_level & 3]);
}

void runtime_reload(struct runtime *rt)
{
	struct clamfs_opts *o, *n = calloc(1, sizeof(*n));
	struct generation *g, *next;
	struct clamfs_fs *fs = rt->fs;
	char err[512], changes[2048] = "", remount[512], a[24], b[24];
	enum scan_mode mode = fs->scan_mode;

	pthread_mutex_lock(&rt->lock);
	reclaim(rt);
	g = current(rt);
	o = g->opts;
	if (!n || rt->ngen == RUNTIME_MAX_GENERATIONS) {
		log_err("SIGHUP: not reloading: %s",
			n ? "too many reloads in a short time, try again in a "
			    "minute"
			  : "no memory");
		free(n);
		pthread_mutex_unlock(&rt->lock);
		return;
	}
	if (opts_parse(rt->argc, rt->argv, n, &rt->gen[rt->ngen].args, err,
		       sizeof(err)) != 0) {
		log_err("SIGHUP: configuration rejected, nothing changed: %s",
			err);
		goto out_free;
	}
	note_remount_only(o, n, remount, sizeof(remount));
	/* the quarantine fd stays: the action needs it as it was opened */
	if (n->policy.on_infected == INFECTED_QUARANTINE &&
	    fs->quarantine_fd < 0) {
		log_err("SIGHUP: on_infected=quarantine needs a remount "
			"(quarantine_dir was not open); nothing changed");
		goto out_args;
	}

	next = &rt->gen[rt->ngen];
	next->opts = n;
	next->owns_opts = true;
	if (str_differs(o->clamd, n->clamd) ||
	    o->clamd_connections != n->clamd_connections ||
	    o->scan_mode != n->scan_mode ||
	    o->scan_timeout != n->scan_timeout) {
		next->pool = pool_for(n, &mode, err, sizeof(err));
		if (!next->pool) {
			log_err("SIGHUP: %s; nothing changed", err);
			goto out_args;
		}
		if (str_differs(o->clamd, n->clamd))
			note(changes, sizeof(changes), "clamd", o->clamd,
			     n->clamd);
		if (o->scan_mode != n->scan_mode)
			note(changes, sizeof(changes), "scan_mode",
			     scan_mode_name(fs->scan_mode),
			     scan_mode_name(mode));
		if (o->scan_timeout != n->scan_timeout)
			note(changes, sizeof(changes), "scan_timeout",
			     num(a, o->scan_timeout), num(b, n->scan_timeout));
	}
	if (o->cache_entries != n->cache_entries ||
	    o->cache_ttl != n->cache_ttl) {
		next->vcache = vcache_new(n->cache_entries, n->cache_ttl, NULL,
					  NULL);
		if (!next->vcache) {
			log_err("SIGHUP: no memory for the new cache; nothing "
				"changed");
			cdp_pool_free(next->pool);
			next->pool = NULL;
			goto out_args;
		}
		if (o->cache_entries != n->cache_entries)
			note(changes, sizeof(changes), "cache_entries",
			     num(a, o->cache_entries),
			     num(b, n->cache_entries));
		if (o->cache_ttl != n->cache_ttl)
			note(changes, sizeof(changes), "cache_ttl",
			     num(a, o->cache_ttl), num(b, n->cache_ttl));
	}
	if (str_differs(o->infected_cmd, n->infected_cmd) ||
	    o->infected_cmd_rate != n->infected_cmd_rate) {
		next->detect = detect_new(n->infected_cmd,
					  n->infected_cmd_rate,
					  rt->mountpoint, &fs->stats);
		if (!next->detect) {
			log_err("SIGHUP: no memory for the new hook; nothing "
				"changed");
			cdp_pool_free(next->pool);
			vcache_free(next->vcache);
			next->pool = NULL;
			next->vcache = NULL;
			goto out_args;
		}
		note(changes, sizeof(changes), "infected_cmd",
		     o->infected_cmd ? o->infected_cmd : "none",
		     n->infected_cmd ? n->infected_cmd : "none");
	}

	note_policy_changes(o, n, changes, sizeof(changes));
	if (!changes[0] && !remount[0] && !next->pool && !next->vcache &&
	    !next->detect) {
		/* a reload that changes nothing keeps what is in place */
		log_info("SIGHUP: configuration reloaded (nothing changed)");
		next->opts = NULL;
		goto out_args;
	}

	/* from here on nothing fails: publish */
	rt->ngen++;
	if (next->pool) {
		fs->scan_mode = mode;
		scanq_reconfigure(fs->scanq, next->pool, mode,
				  (int)n->scan_timeout * 1000);
	}
	if (next->vcache)
		__atomic_store_n(&fs->vcache, next->vcache, __ATOMIC_RELEASE);
	if (next->detect)
		__atomic_store_n(&fs->detect, next->detect, __ATOMIC_RELEASE);
	if (next->pool) {
		/*
		 * Another clamd may have other signatures: verdicts of the
		 * old one are not trusted.
		 */
		vcache_clear(fs_vcache(fs));
		stats_inc(&fs->stats, STAT_CACHE_CLEARS);
	}
	/* the watch follows the current pool and cache */
	if (next->pool || next->vcache)
		dbwatch_retarget(rt->dbwatch, next->pool ? next->pool : g->pool,
				 fs_vcache(fs));
	/* what was not replaced moves on; g keeps what was, for a while */
	if (!next->pool) {
		next->pool = g->pool;
		g->pool = NULL;
	}
	if (!next->vcache) {
		next->vcache = g->vcache;
		g->vcache = NULL;
	}
	if (!next->detect) {
		next->detect = g->detect;
		g->detect = NULL;
	}
	g->retired = monotonic_now();
	__atomic_store_n(&fs->policy, &n->policy, __ATOMIC_RELEASE);
	__atomic_store_n(&fs->scan_on_close, n->scan_on_close,
			 __ATOMIC_RELAXED);
	/* said before a lower level could hide it */
	log_info("SIGHUP: configuration reloaded%s%s", changes[0] ? ": " : "",
		 changes[0] ? changes : " (nothing changed)");
	log_set_level((enum log_level)n->log_level);
	if (remount[0])
		log_warn("SIGHUP: changed but needs a remount, not applied: %s",
			 remount);
	pthread_mutex_unlock(&rt->lock);
	return;

out_args:
	fuse_opt_free_args(&rt->gen[rt->ngen].args);
	opts_free(n);
out_free:
	free(n);
	memset(&rt->gen[rt->ngen], 0, sizeof(rt->gen[0]));
	pthread_mutex_unlock(&rt->lock);
}
