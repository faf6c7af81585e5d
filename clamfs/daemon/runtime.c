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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ahead.h"
#include "checks.h"
#include "dbwatch.h"
#include "generation.h"
#include "log.h"
#include "gate.h"
#include "poolcfg.h"
#include "reload.h"
#include "scanner_clamd.h"
#include "service.h"
#include "waitlist.h"

struct runtime {
	struct clamfs_fs *fs;
	const char *mountpoint;
	struct generations *gens;
	struct reload *reload;
	struct dbwatch *dbwatch;
	struct service *service;
	bool use_store; /* verdict_store= passed the checks */
};

/* The scan queue reports each scan's duration for the histogram. */
static void observe_scan(void *fs, uint64_t usec)
{
	stats_observe_scan(&((struct clamfs_fs *)fs)->stats, usec);
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

struct runtime *runtime_prepare(struct clamfs_fs *fs, struct clamfs_opts *opts,
				const char *mountpoint)
{
	struct runtime *rt = calloc(1, sizeof(*rt));
	struct cdp_fleet *fleet;
	struct generation *g;
	char err[512];

	if (!rt)
		goto nomem;
	rt->fs = fs;
	rt->mountpoint = mountpoint;
	fs->quarantine_fd = -1;
	g = generation_new();
	if (!g)
		goto nomem;
	if (generations_new(g, &rt->gens) != 0) {
		generation_free(g);
		goto nomem;
	}
	fs->gens = rt->gens;
	g->opts = gen_share_opts(opts, false);
	if (!g->opts)
		goto nomem;
	if (config_check_mount(opts, NULL, fs->backend_path, mountpoint,
			       &g->mode, err, sizeof(err)) != 0) {
		fprintf(stderr, "clamfs: %s\n", err);
		goto fail;
	}
	poolcfg_tls_stamp(opts, &g->tls_stamp);
	if (poolcfg_new(opts, 0, &g->mode, &fleet, err, sizeof(err))) {
		fprintf(stderr, "clamfs: %s\n", err);
		goto fail;
	}
	g->fleet = gen_share_fleet(fleet);
	if (!g->fleet)
		goto nomem;
	if (g->mode == SCAN_MODE_PATH)
		log_warn("scan_mode=path: clamd is sent the opened file "
			 "(fdpass or stream), never its path, which users "
			 "could change during the scan");
	if (opts->policy.on_infected == INFECTED_QUARANTINE) {
		fs->quarantine_fd = open_quarantine(opts->quarantine_dir);
		if (fs->quarantine_fd < 0)
			goto fail;
	}
	g->vcache = gen_share_vcache(
		vcache_new(opts->cache_entries, opts->cache_ttl, NULL, NULL));
	g->detect = gen_share_detect(detect_new(opts->infected_cmd,
						opts->infected_cmd_rate,
						mountpoint, &fs->stats));
	if (!g->vcache || !g->detect)
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

int runtime_wait_clamd(struct runtime *rt, unsigned int seconds,
		       struct fuse_session *se)
{
	struct timespec start, now;
	struct cdp_result res;
	bool said = false;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if (ping_any(gen_fleet(generations_current(rt->gens)), &res) ==
		    0) {
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

/* The database watch's view of the configuration in force. */
static struct cdp_fleet *watch_pin_fleet(void *arg, void **pin)
{
	struct runtime *rt = arg;
	struct generation *g = fs_pin(rt->fs);

	*pin = g;
	return gen_fleet(g);
}

static void watch_unpin(void *arg, void *pin)
{
	(void)arg;
	gen_unpin(pin);
}

static void watch_drop_verdicts(void *arg)
{
	struct runtime *rt = arg;

	reload_drop_verdicts(rt->fs, NULL);
}

/* An administrator's command through the mount (cmd_xattr.c). */
static int command_reload(void *arg, const char *why,
			  void (*done)(void *ctx, int status, const char *msg),
			  void *ctx)
{
	struct runtime *rt = arg;

	return service_post_reload(rt->service, why, done, ctx);
}

static void command_drop_cache(void *arg, const char *why)
{
	struct runtime *rt = arg;

	reload_drop_verdicts(rt->fs, why);
}

/*
 * Without the version watch (version_check=0) nobody would notice a wrong
 * clamd address before the first refused open: one PING at start.
 */
static void say_if_clamd_silent(struct runtime *rt)
{
	struct cdp_result res = {0};

	if (ping_any(gen_fleet(generations_current(rt->gens)), &res) == 0)
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
	struct clamfs_opts *opts = gen_opts(generations_current(rt->gens));
	int ret;

	ret = reload_new(rt->fs, rt->gens, rt->mountpoint, argc, argv,
			 opts->config, &rt->reload);
	if (ret)
		return ret;
	qcfg.threads = opts->scan_threads;
	qcfg.hooks.scan = scanner_clamd_scan;
	qcfg.hooks.observe = observe_scan;
	gate_scanq_hooks(&qcfg.hooks);
	qcfg.ctx = rt->fs;
	ret = cdp_fleet_start(gen_fleet(generations_current(rt->gens)));
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
	rt->fs->waits = waitlist_new(0);
	if (!rt->fs->waits)
		return -ENOMEM;
	ret = service_start(rt->fs, rt->reload, rt->mountpoint, &rt->service);
	if (ret)
		return ret;
	rt->fs->commands = (struct fs_commands){
		.reload = command_reload,
		.drop_cache = command_drop_cache,
		.arg = rt,
	};
	return 0;
}

void runtime_free(struct runtime *rt)
{
	if (!rt)
		return;
	/* nothing serves requests now (the loop, drain, evictor are done) */
	rt->fs->commands = (struct fs_commands){0};
	service_stop(rt->service);
	dbwatch_stop(rt->dbwatch);
	rt->fs->dbwatch = NULL;
	/* calls waiting on a lease end; an attempt under way may scan */
	waitlist_free(rt->fs->waits);
	rt->fs->waits = NULL;
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
	 * frees it. A generation a leaked pin still held would stay, for the
	 * leak checker to name.
	 */
	generations_free(rt->gens);
	rt->fs->gens = NULL;
	if (rt->fs->quarantine_fd >= 0)
		close(rt->fs->quarantine_fd);
	rt->fs->quarantine_fd = -1;
	reload_free(rt->reload);
	free(rt);
}
