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

/* The verdict caches of the live generations, each counted once more. */
struct caches {
	struct shared **held;
	size_t n, cap;
	bool short_of_memory;
};

static void hold_cache(struct generation *g, void *arg)
{
	struct caches *c = arg;
	struct shared **grown;

	for (size_t i = 0; i < c->n; i++)
		if (c->held[i] == g->vcache)
			return; /* kept by a reload: one object */
	if (c->n == c->cap) {
		grown = reallocarray(c->held, c->cap * 2 + 4, sizeof(*grown));
		if (!grown) {
			c->short_of_memory = true;
			return;
		}
		c->held = grown;
		c->cap = c->cap * 2 + 4;
	}
	c->held[c->n++] = shared_get(g->vcache);
}

/* Every verdict the mount holds, in each live cache and the store. */
static void clear_verdicts(struct clamfs_fs *fs)
{
	struct caches c = {0};

	/*
	 * Every cache a request may still read: one pinned before a reload
	 * that replaced the cache reads the old one. Cleared outside the
	 * set's lock, which every open takes to pin.
	 */
	generations_each(fs->gens, hold_cache, &c);
	for (size_t i = 0; i < c.n; i++) {
		vcache_clear(shared_obj(c.held[i]));
		shared_put(c.held[i]);
	}
	free(c.held);
	/* no room to hold an old cache: the one in force at least */
	if (c.short_of_memory) {
		struct generation *pin = fs_pin(fs);

		log_err("verdict caches of retired configurations not "
			"cleared: out of memory");
		vcache_clear(gen_vcache(pin));
		gen_unpin(pin);
	}
	/* after the caches: see stamp_keep_verdict() in gate_trust.c */
	vstore_clear(fs->vstore);
}

void reload_drop_verdicts(struct clamfs_fs *fs, const char *why)
{
	clear_verdicts(fs);
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
	const struct clamfs_opts *o = gen_opts(g), *n;
	struct generation *next = generation_new();
	struct clamfs_fs *fs = r->fs;
	struct clamfs_opts *parsed = NULL;
	struct fuse_args fuse_args;
	struct cdp_fleet *fleet;
	int ret = -ENOMEM;

	snprintf(err, err_len, "no memory");
	if (!next)
		goto out;
	parsed = calloc(1, sizeof(*parsed));
	if (!parsed)
		goto out;
	/* the libfuse arguments matter only at mount time */
	ret = cmdline_parse(r->argc, r->argv, parsed, &fuse_args, err, err_len);
	if (ret)
		goto out; /* cmdline_parse emptied it */
	fuse_opt_free_args(&fuse_args);
	ret = -ENOMEM;
	next->opts = gen_share_opts(parsed, true);
	parsed = NULL; /* next's, or freed */
	if (!next->opts)
		goto out;
	n = gen_opts(next);
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
	next->mode = g->mode;
	if (next->other_clamds || optable_differs(o, n, RELOAD_FLEET)) {
		ret = poolcfg_new(n, 0, mode, &fleet, err, err_len);
		if (ret)
			goto out;
		next->mode = *mode;
		next->fleet = gen_share_fleet(fleet);
		ret = -ENOMEM;
		if (!next->fleet)
			goto out;
		ret = cdp_fleet_start(fleet);
		if (ret) {
			snprintf(err, err_len, "cannot start the prober: %s",
				 strerror(-ret));
			goto out;
		}
	} else {
		next->fleet = shared_get(g->fleet);
	}
	ret = -ENOMEM;
	if (optable_differs(o, n, RELOAD_CACHE)) {
		next->vcache = gen_share_vcache(
			vcache_new(n->cache_entries, n->cache_ttl, NULL, NULL));
		if (!next->vcache) {
			snprintf(err, err_len, "no memory for the new cache");
			goto out;
		}
	} else {
		next->vcache = shared_get(g->vcache);
	}
	if (optable_differs(o, n, RELOAD_HOOK)) {
		next->detect = gen_share_detect(
			detect_new(n->infected_cmd, n->infected_cmd_rate,
				   r->mountpoint, &fs->stats));
		if (!next->detect) {
			snprintf(err, err_len, "no memory for the new hook");
			goto out;
		}
	} else {
		next->detect = shared_get(g->detect);
	}
	*out = next;
	next = NULL;
	ret = 0;
out:
	if (next)
		generation_free(next);
	free(parsed);
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
	const struct clamfs_opts *o = gen_opts(g), *n = gen_opts(next);
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
 * Puts next in force in place of g: requests pinned from now on read its
 * objects (those it kept from g are the same), and g is retired, to be
 * freed by its last unpin (maybe this one).
 */
static void publish(struct reload *r, struct generation *next)
{
	struct clamfs_fs *fs = r->fs;

	generations_publish(r->gens, next);
	if (next->other_clamds) {
		/*
		 * Another clamd may have other signatures: verdicts of the
		 * old one are not trusted. Only now: until next was in force
		 * a scan could start on the old clamd and keep its verdict
		 * in a cache cleared before. Every live cache, as a request
		 * pinned before may still scan on the old clamd and store.
		 */
		clear_verdicts(fs);
		stats_inc(&fs->stats, STAT_CACHE_CLEARS);
	}
}

int reload_run(struct reload *r, const char *why, char *msg, size_t msg_len)
{
	struct generation *g, *next = NULL;
	char err[512] = "", changes[2048], remount[512];
	enum scan_mode mode;
	int ret;

	/* only a reload changes current, and reloads run one at a time */
	g = generations_current(r->gens);
	mode = g->mode;
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
	publish(r, next);
	snprintf(msg, msg_len, "configuration reloaded%s%s",
		 changes[0] ? ": " : "",
		 changes[0] ? changes : " (nothing changed)");
	/* said before a lower level could hide it */
	log_info("%s: %s", why, msg);
	log_set_level(gen_opts(next)->log_level);
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
