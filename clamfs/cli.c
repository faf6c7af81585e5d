// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * --check (--stats is in cli_stats.c).
 */
#include "cli.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clamdproto.h"

static bool check_dir(FILE *out, const char *what, const char *path)
{
	struct stat st;

	if (stat(path, &st) == -1) {
		fprintf(out, "%s %s: %s\n", what, path, strerror(errno));
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(out, "%s %s: %s\n", what, path, strerror(ENOTDIR));
		return false;
	}
	fprintf(out, "%s %s: ok\n", what, path);
	return true;
}

static bool check_clamd(FILE *out, const struct clamfs_opts *opts)
{
	struct cdp_pool *pool = NULL;
	struct cdp_result res;
	struct cdp_version ver;
	struct cdp_config cfg;
	bool ok = false;
	int ret;

	cdp_config_init(&cfg);
	cfg.addr = opts->clamd;
	cfg.max_conns = 1;
	ret = cdp_pool_new(&cfg, &pool);
	if (ret) {
		fprintf(out, "clamd %s: bad address\n", opts->clamd);
		return false;
	}
	if (cdp_ping(pool, &res) != 0) {
		fprintf(out, "clamd %s: not answering: %s: %s\n", opts->clamd,
			cdp_errcat_name(res.cat), res.text);
		goto out;
	}
	if (cdp_version(pool, &ver, &res) != 0) {
		fprintf(out, "clamd %s: VERSION failed: %s\n", opts->clamd,
			res.text);
		goto out;
	}
	if (ver.db_version)
		fprintf(out,
			"clamd %s: ok, ClamAV %s, database version %lu (%s)\n",
			opts->clamd, ver.engine, ver.db_version, ver.db_date);
	else
		fprintf(out,
			"clamd %s: ok, ClamAV %s, no database version (custom "
			"signatures only: cache_ttl bounds old verdicts)\n",
			opts->clamd, ver.engine);
	if (opts->scan_mode == 0 &&
	    cdp_addr_kind(cdp_pool_addr(pool)) != CDP_ADDR_UNIX) {
		fprintf(out, "scan_mode=fdpass needs clamd on a UNIX socket\n");
		goto out;
	}
	ok = true;
out:
	cdp_pool_free(pool);
	return ok;
}

int cli_check(const struct clamfs_opts *opts, FILE *out)
{
	bool ok = true;

	if (opts->config)
		fprintf(out, "config %s: ok\n", opts->config);
	if (opts->backend)
		ok &= check_dir(out, "backend", opts->backend);
	if (opts->mountpoint)
		ok &= check_dir(out, "mountpoint", opts->mountpoint);
	if (opts->policy.on_infected == INFECTED_QUARANTINE &&
	    opts->quarantine_dir) {
		struct stat st;

		if (stat(opts->quarantine_dir, &st) == 0)
			ok &= check_dir(out, "quarantine_dir",
					opts->quarantine_dir);
		else
			fprintf(out,
				"quarantine_dir %s: will be created (0700)\n",
				opts->quarantine_dir);
	}
	ok &= check_clamd(out, opts);
	fprintf(out, "%s\n", ok ? "check passed" : "check FAILED");
	return ok ? 0 : 1;
}
