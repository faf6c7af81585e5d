// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * --check (--stats is in stats_cmd.c).
 */
#include "check_cmd.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clamdconf.h"
#include "clamdproto.h"
#include "exitcode.h"
#include "mountpoint.h"
#include "poolcfg.h"

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

/*
 * A directory, and not one a clamfs (running, or dead) covers already:
 * mounting there again would stack a second mount on it. Said as a
 * warning, since a restart does just that. Another FUSE file system there
 * is fine: it may be the backend itself, protected in place.
 */
static bool check_mountpoint(FILE *out, const char *path)
{
	char real[PATH_MAX], fstype[64];
	struct stat st;

	if (stat(path, &st) == -1) {
		if (errno != ENOTCONN)
			return check_dir(out, "mountpoint", path);
		fprintf(out,
			"mountpoint %s: warning: a dead FUSE mount is there "
			"(a crashed daemon's): the mount replaces it\n",
			path);
		return true;
	}
	if (S_ISDIR(st.st_mode) && realpath(path, real) &&
	    mountpoint_fstype(MOUNTINFO_SELF, real, fstype, sizeof(fstype)) ==
		    1 &&
	    strcmp(fstype, "fuse.clamfs") == 0) {
		fprintf(out,
			"mountpoint %s: warning: %s is mounted there already; "
			"a second mount would cover it (clamfs --stats %s "
			"tells whether it is a clamfs)\n",
			path, fstype, path);
		return true;
	}
	return check_dir(out, "mountpoint", path);
}

static const char *size_text(uint64_t v, char *buf, size_t len)
{
	if (v == 0)
		snprintf(buf, len, "unlimited");
	else if (v % (1 << 20) == 0)
		snprintf(buf, len, "%" PRIu64 "M", v >> 20);
	else if (v % 1024 == 0)
		snprintf(buf, len, "%" PRIu64 "K", v >> 10);
	else
		snprintf(buf, len, "%" PRIu64, v);
	return buf;
}

/* Whether clamd's limit stops short of the files clamfs sends it. */
static bool below(uint64_t clamd_limit, uint64_t max_scan_size)
{
	return clamd_limit != 0 &&
	       (max_scan_size == 0 || clamd_limit < max_scan_size);
}

/* One of clamd's limits that must not be below max_scan_size. */
struct limit_check {
	const char *name;  /* as clamd.conf spells it */
	size_t offset;	   /* in struct clamd_limits */
	bool stream_only;  /* matters only when files are streamed */
	bool unless_alert; /* harmless under AlertExceedsMax yes */
	const char *why;
};

static const struct limit_check checks[] = {
	{"StreamMaxLength", offsetof(struct clamd_limits, stream_max_length),
	 true, false,
	 "clamd refuses to take files in between, and their opens fail "
	 "(on_error=deny) or are served unscanned (on_error=allow)"},
	{"MaxFileSize", offsetof(struct clamd_limits, max_file_size), false,
	 true,
	 "clamd skips larger files and answers OK, so they are served "
	 "unscanned and cached clean; raise MaxFileSize or set "
	 "AlertExceedsMax yes"},
	{"MaxScanSize", offsetof(struct clamd_limits, max_scan_size), false,
	 true,
	 "clamd stops scanning past it and answers OK; raise MaxScanSize or "
	 "set AlertExceedsMax yes"},
};

/*
 * clamd's own limits against max_scan_size: a file clamfs scans but
 * clamd will not is refused (INSTREAM) or, worse, skipped and answered
 * OK, then cached clean. Warnings only: the administrator may mean it.
 */
static unsigned int check_clamd_limits(FILE *out,
				       const struct clamfs_opts *opts,
				       const char *addr, bool stream)
{
	uint64_t ours = opts->policy.max_scan_size;
	struct clamd_limits l;
	char conf[4096], a[32], b[32];
	unsigned int bad_line = 0, warnings = 0;
	int ret;

	ret = clamdconf_find(addr, conf, sizeof(conf));
	if (ret == -EREMOTE) {
		fprintf(out, "clamd.conf: clamd is on another host; check its "
			     "MaxFileSize, MaxScanSize and StreamMaxLength "
			     "there\n");
		return 0;
	}
	clamdconf_defaults(&l);
	ret = clamdconf_read(conf, &l, &bad_line);
	if (ret == -EINVAL && bad_line) {
		fprintf(out,
			"clamd.conf %s: bad size on line %u, limits not "
			"checked\n",
			conf, bad_line);
		return 0;
	}
	if (ret) {
		fprintf(out, "clamd.conf %s: cannot be read: %s\n", conf,
			ret == -EINVAL ? "not a regular file of a sensible size"
				       : strerror(-ret));
		return 0;
	}
	size_text(ours, b, sizeof(b));
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		const struct limit_check *c = &checks[i];
		uint64_t theirs =
			*(const uint64_t *)((const char *)&l + c->offset);

		if ((c->stream_only && !stream) ||
		    (c->unless_alert && l.alert_exceeds_max) ||
		    !below(theirs, ours))
			continue;
		fprintf(out,
			"clamd.conf %s: warning: %s %s is below max_scan_size "
			"%s%s: %s\n",
			conf, c->name, size_text(theirs, a, sizeof(a)), b,
			c->unless_alert ? " and AlertExceedsMax is no" : "",
			c->why);
		warnings++;
	}
	if (!warnings)
		fprintf(out, "clamd.conf %s: limits ok for max_scan_size %s\n",
			conf, b);
	/*
	 * The other limits (MaxFiles, MaxRecursion, ...) are not sizes to
	 * compare: say what becomes of the files clamd gives up on.
	 */
	if (l.alert_exceeds_max)
		fprintf(out,
			"clamd.conf %s: AlertExceedsMax yes: a file clamd "
			"gives up on at any of its limits (MaxFiles, "
			"MaxRecursion, MaxEmbeddedPE, MaxScanTime, ...) is "
			"answered Heuristics.Limits.Exceeded, which "
			"on_limits=%s "
			"decides (not a detection)\n",
			conf, limits_action_name(opts->policy.on_limits));
	else
		fprintf(out,
			"clamd.conf %s: AlertExceedsMax no: clamd answers OK "
			"for what its limits (MaxFiles, MaxRecursion, ...) "
			"made it skip\n",
			conf);
	return warnings;
}

/*
 * clamd's MaxThreads against what clamfs would keep in flight there: more
 * scans than threads wait in clamd's own queue, small files behind big
 * ones (the daemon then holds them back, doc/fleet.md). A clamd that does
 * not answer STATS is only mentioned.
 */
static void check_threads(FILE *out, struct cdp_pool *pool, const char *addr,
			  unsigned int scan_threads, unsigned int conns)
{
	struct cdp_threads t;
	struct cdp_result res;
	char *text = NULL;

	if (cdp_stats(pool, &text, &res) != 0 ||
	    cdp_stats_parse_threads(text, strlen(text), &t) != 0) {
		fprintf(out,
			"clamd %s: STATS gave no thread limit (%s): conns=%u "
			"alone bounds the scans in flight there\n",
			addr, text ? "no THREADS line" : res.text, conns);
		free(text);
		return;
	}
	free(text);
	if (t.max < scan_threads || t.max < conns)
		fprintf(out,
			"clamd %s: warning: MaxThreads %u is below "
			"scan_threads=%u or conns=%u: clamfs keeps at most %u "
			"scans in flight there and the others wait; set "
			"scan_threads and conns= to at most %u, or raise "
			"MaxThreads\n",
			addr, t.max, scan_threads, conns,
			t.max < conns ? t.max : conns, t.max);
	else
		fprintf(out,
			"clamd %s: MaxThreads %u, enough for scan_threads=%u "
			"and conns=%u\n",
			addr, t.max, scan_threads, conns);
}

/* One backend's part of --check: EXIT_OK when it answers. */
static int check_backend(FILE *out, struct cdp_fleet *fleet, size_t i,
			 unsigned int scan_threads)
{
	struct cdp_pool *pool = cdp_fleet_pool(fleet, i);
	const char *addr = cdp_fleet_addr(fleet, i);
	struct cdp_backend_stats st;
	struct cdp_result res;
	struct cdp_version ver;

	if (cdp_ping(pool, &res) != 0) {
		fprintf(out, "clamd %s: not answering: %s: %s\n", addr,
			cdp_errcat_name(res.cat), res.text);
		return EXIT_CLAMD;
	}
	if (cdp_version(pool, &ver, &res) != 0) {
		fprintf(out, "clamd %s: VERSION failed: %s\n", addr, res.text);
		return EXIT_CLAMD;
	}
	if (ver.db_version)
		fprintf(out,
			"clamd %s: ok, ClamAV %s, database version %lu (%s)\n",
			addr, ver.engine, ver.db_version, ver.db_date);
	else
		fprintf(out,
			"clamd %s: ok, ClamAV %s, no database version (custom "
			"signatures only: cache_ttl bounds old verdicts)\n",
			addr, ver.engine);
	if (cdp_fleet_backend_stats(fleet, i, &st) == 0)
		check_threads(out, pool, addr, scan_threads, st.max_conns);
	return EXIT_OK;
}

/*
 * Who can connect to a UNIX clamd, by its socket's mode: whoever can, can
 * stop it (SHUTDOWN), and then every open fails, or is served unscanned
 * where on_error=allow. clamfs runs as root and connects whatever the mode.
 * A warning only, like the limits: the status stays clamd's answer.
 */
static void check_socket_access(FILE *out, const char *addr)
{
	const char *path = clamdconf_unix_path(addr);
	struct passwd *pw;
	struct group *gr;
	char owner[32], group[32];
	struct stat st;

	if (!path || stat(path, &st) == -1 || !S_ISSOCK(st.st_mode))
		return;
	pw = getpwuid(st.st_uid);
	gr = getgrgid(st.st_gid);
	if (pw)
		snprintf(owner, sizeof(owner), "%s", pw->pw_name);
	else
		snprintf(owner, sizeof(owner), "uid %u", (unsigned)st.st_uid);
	if (gr)
		snprintf(group, sizeof(group), "%s", gr->gr_name);
	else
		snprintf(group, sizeof(group), "gid %u", (unsigned)st.st_gid);
	switch (clamdconf_socket_access(st.st_mode)) {
	case CLAMD_SOCKET_ANYONE:
		fprintf(out,
			"clamd %s: warning: the socket is writable by every "
			"local user (mode %04o): any of them can stop clamd "
			"(SHUTDOWN), and then every open fails (or is served "
			"unscanned where on_error=allow); set LocalSocketMode "
			"660 and a LocalSocketGroup in clamd.conf\n",
			addr, (unsigned)(st.st_mode & 07777));
		break;
	case CLAMD_SOCKET_GROUP:
		fprintf(out,
			"clamd %s: socket mode %04o, owner %s, group %s: the "
			"owner and the group's members can connect (and stop "
			"clamd), and root\n",
			addr, (unsigned)(st.st_mode & 07777), owner, group);
		break;
	case CLAMD_SOCKET_OWNER:
		fprintf(out,
			"clamd %s: socket mode %04o, owner %s: only the owner "
			"and root can connect\n",
			addr, (unsigned)(st.st_mode & 07777), owner);
		break;
	}
}

/* The exit status clamd's part of --check earns (exitcode.h): every
 * backend must answer. */
static int check_clamd(FILE *out, const struct clamfs_opts *opts)
{
	struct cdp_fleet *fleet = NULL;
	enum scan_mode mode;
	char err[512];
	int status = EXIT_OK;

	/* the daemon's own rules: what passes here, a mount accepts */
	/* each backend's own conns, for the MaxThreads check */
	if (poolcfg_new(opts, 0, &mode, &fleet, err, sizeof(err)) != 0) {
		fprintf(out, "%s\n", err);
		return EXIT_CONFIG;
	}
	for (size_t i = 0; i < cdp_fleet_size(fleet); i++) {
		if (check_backend(out, fleet, i, opts->scan_threads) != EXIT_OK)
			status = EXIT_CLAMD;
		check_socket_access(out, cdp_fleet_addr(fleet, i));
	}
	if (status == EXIT_OK)
		/* the first backend's clamd.conf stands for the fleet's */
		check_clamd_limits(out, opts, cdp_fleet_addr(fleet, 0),
				   mode == SCAN_MODE_STREAM);
	cdp_fleet_free(fleet);
	return status;
}

/* The first failure decides the status: it is the first line to fix. */
static void first_failure(int *status, int this)
{
	if (*status == EXIT_OK)
		*status = this;
}

int check_cmd_run(const struct clamfs_opts *opts, FILE *out)
{
	int status = EXIT_OK;

	if (opts->config)
		fprintf(out, "config %s: ok\n", opts->config);
	if (opts->backend && !check_dir(out, "backend", opts->backend))
		first_failure(&status, EXIT_MOUNT);
	if (opts->mountpoint && !check_mountpoint(out, opts->mountpoint))
		first_failure(&status, EXIT_MOUNT);
	if (opts->policy.on_infected == INFECTED_QUARANTINE &&
	    opts->quarantine_dir) {
		struct stat st;

		if (stat(opts->quarantine_dir, &st) != 0)
			fprintf(out,
				"quarantine_dir %s: will be created (0700)\n",
				opts->quarantine_dir);
		else if (!check_dir(out, "quarantine_dir",
				    opts->quarantine_dir))
			first_failure(&status, EXIT_CONFIG);
	}
	first_failure(&status, check_clamd(out, opts));
	fprintf(out, "%s\n",
		status == EXIT_OK ? "check passed" : "check FAILED");
	return status;
}
