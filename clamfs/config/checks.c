// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The rules a configuration must pass to be put in force beyond those of
 * each option (checks.h).
 */
#include "checks.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poolcfg.h"

bool config_str_differs(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/*
 * dir's real path; dir itself may not exist yet (startup creates it), its
 * parent must. NULL with errno set.
 */
static char *real_dir_path(const char *dir)
{
	char *real = realpath(dir, NULL), *a = NULL, *b = NULL, *parent;
	int saved;

	if (real || errno != ENOENT)
		return real;
	a = strdup(dir);
	b = strdup(dir);
	if (!a || !b)
		goto out;
	parent = realpath(dirname(a), NULL);
	if (parent &&
	    asprintf(&real, "%s/%s", strcmp(parent, "/") ? parent : "",
		     basename(b)) < 0)
		real = NULL;
	free(parent);
out:
	saved = errno;
	free(a);
	free(b);
	errno = saved;
	return real;
}

/* Quarantined files inside the backend would still be served. */
static int check_quarantine_dir(const char *dir, const char *backend, char *err,
				size_t errlen)
{
	size_t blen = strlen(backend);
	char *real = real_dir_path(dir);
	int ret = 0;

	if (!real) {
		snprintf(err, errlen, "quarantine_dir %s: %s", dir,
			 strerror(errno));
		return -1;
	}
	if (strncmp(real, backend, blen) == 0 &&
	    (real[blen] == '/' || real[blen] == '\0' || blen == 1)) {
		snprintf(err, errlen,
			 "quarantine_dir %s: must be outside the backend %s",
			 dir, backend);
		ret = -1;
	}
	free(real);
	return ret;
}

int config_check_mount(const struct clamfs_opts *opts,
		       const struct clamfs_opts *running, const char *backend,
		       const char *mountpoint, enum scan_mode *mode, char *err,
		       size_t errlen)
{
	if (poolcfg_check(opts, mode, err, errlen) != 0)
		return -1;
	/*
	 * clamd's open of the path would come back through the mount (a
	 * deadlock), and our stat of it sees the mount's file, never the one
	 * scanned: every open would fail.
	 */
	if (*mode == SCAN_MODE_PATH && strcmp(backend, mountpoint) == 0) {
		snprintf(err, errlen,
			 "scan_mode=path cannot scan a backend mounted over "
			 "itself; use fdpass or stream");
		return -1;
	}
	if (opts->policy.on_infected == INFECTED_QUARANTINE &&
	    (!running ||
	     config_str_differs(running->quarantine_dir, opts->quarantine_dir)))
		return check_quarantine_dir(opts->quarantine_dir, backend, err,
					    errlen);
	return 0;
}

unsigned int config_store_ttl(const struct clamfs_opts *opts)
{
	return opts->cache_entries ? opts->cache_ttl : 0;
}
