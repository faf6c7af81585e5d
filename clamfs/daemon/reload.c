// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Live reconfiguration (reload.h): the configuration read again, checked
 * by startup's rules, the objects it changes made anew, and the result
 * published as the generation in force.
 */
#include "reload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "cmdline.h"
#include "generation.h"
#include "log.h"
#include "sdnotify.h"
#include "optable.h"
#include "poolcfg.h"

struct reload {
	struct clamfs_fs *fs;
	struct generations *gens;
	const char *mountpoint;
	int argc;
	char **argv;
	char **argv_copy; /* argv with the config file made absolute */
	char *config_arg;
};

int reload_new(struct clamfs_fs *fs, struct generations *gens,
	       const char *mountpoint, int argc, char *argv[],
	       const char *config, struct reload **out)
{
	struct reload *r = calloc(1, sizeof(*r));
	char *escaped = NULL;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->fs = fs;
	r->gens = gens;
	r->mountpoint = mountpoint;
	r->argc = argc;
	r->argv = argv;
	/*
	 * The daemon's cwd is "/" by now: a relative config= on the command
	 * line is appended again as the absolute path cmdline_parse resolved;
	 * the last config= is the one read.
	 */
	if (config) {
		if (fuse_opt_add_opt_escaped(&escaped, config) == -1)
			goto nomem;
		if (asprintf(&r->config_arg, "config=%s", escaped) < 0) {
			r->config_arg = NULL;
			goto nomem;
		}
		r->argv_copy = calloc((size_t)argc + 3, sizeof(char *));
		if (!r->argv_copy)
			goto nomem;
		memcpy(r->argv_copy, argv, sizeof(char *) * (size_t)argc);
		r->argv_copy[argc] = "-o";
		r->argv_copy[argc + 1] = r->config_arg;
		r->argc = argc + 2;
		r->argv = r->argv_copy;
	}
	free(escaped);
	*out = r;
	return 0;
nomem:
	free(escaped);
	reload_free(r);
	return -ENOMEM;
}

void reload_free(struct reload *r)
{
	if (!r)
		return;
	free(r->argv_copy);
	free(r->config_arg);
	free(r);
}

void reload_drop_verdicts(struct clamfs_fs *fs, const char *why)
{
	struct generation *pin = fs_pin(fs);

	vcache_clear(fs_vcache(fs));
	/* after the cache: see maybe_cache() in gate.c */
	vstore_clear(fs->vstore);
	gen_unpin(pin);
	if (!why)
		return; /* the database watch counts and logs its own */
	stats_inc(&fs->stats, STAT_CACHE_CLEARS);
	log_info("%s: verdict cache dropped, every file is scanned again at "
		 "its next open",
		 why);
}

/*
 * The generation a reload would put in force in place of g: the
 * configuration read again (r's argv, so -o options still win over the
 * file), checked by startup's rules, and new objects for what changed
 * under them (the option table's reload column); what is unchanged stays
 * g's until publish moves it on. 0 and *out, or -errno and why in err.
 */
static int reload_build(struct reload *r, const struct generation *g,
			struct generation **out, enum scan_mode *mode,
			char *err, size_t err_len)
{
	const struct clamfs_opts *o = g->opts, *n;
	struct generation *next = generation_new();
	struct clamfs_fs *fs = r->fs;
	struct fuse_args fuse_args;
	int ret = -ENOMEM;

	snprintf(err, err_len, "no memory");
	if (!next)
		goto out;
	next->opts = calloc(1, sizeof(*next->opts));
	if (!next->opts)
		goto out;
	next->owns_opts = true; /* cmdline_parse empties it when it fails */
	n = next->opts;
	/* the libfuse arguments matter only at mount time */
	ret = cmdline_parse(r->argc, r->argv, next->opts, &fuse_args, err,
			    err_len);
	if (ret)
		goto out;
	fuse_opt_free_args(&fuse_args);
	ret = -EINVAL;
	if (config_check_mount(n, o, fs->backend_path, r->mountpoint, mode, err,
			       err_len) != 0)
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
					  r->mountpoint, &fs->stats);
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
static void publish(struct reload *r, struct generation *g,
		    struct generation *next, enum scan_mode mode)
{
	struct clamfs_fs *fs = r->fs;
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
	generations_publish(r->gens, next);
}

int reload_run(struct reload *r, const char *why, char *msg, size_t msg_len)
{
	struct generation *g, *next = NULL;
	char err[512] = "", changes[2048], remount[512];
	enum scan_mode mode = r->fs->scan_mode;
	int ret;

	/* only a reload changes current, and reloads run one at a time */
	g = generations_current(r->gens);
	ret = reload_build(r, g, &next, &mode, err, sizeof(err));
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
	publish(r, g, next, mode);
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
	return ret;
}

int reload_run_notified(struct reload *r, const char *why, char *msg,
			size_t msg_len)
{
	int ret;

	sdnotify_reloading();
	ret = reload_run(r, why, msg, msg_len);
	sdnotify_ready(ret ? "configuration rejected, the previous one stays"
			   : "configuration reloaded");
	return ret;
}
