// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * --check and --stats.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "clamdconf.h"
#include "clamdproto.h"
#include "exitcode.h"
#include "scanq.h"

#define STATS_XATTR "trusted.clamfs.stats"

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

/*
 * clamd's own limits against max_scan_size: a file clamfs scans but
 * clamd will not is refused (INSTREAM) or, worse, skipped and answered
 * OK, then cached clean. Warnings only: the administrator may mean it.
 */
static unsigned int
check_clamd_limits(FILE *out, const struct clamfs_opts *opts, bool unix_socket)
{
	uint64_t ours = opts->policy.max_scan_size;
	struct clamd_limits l;
	char conf[4096], a[32], b[32];
	unsigned int bad_line = 0, warnings = 0;
	bool stream;
	int ret;

	ret = clamdconf_find(opts->clamd, conf, sizeof(conf));
	if (ret == -EREMOTE) {
		fprintf(out, "clamd.conf: clamd is on another host; check its "
			     "MaxFileSize, MaxScanSize and StreamMaxLength "
			     "there\n");
		return 0;
	}
	clamdconf_defaults(&l);
	ret = clamdconf_read(conf, &l, &bad_line);
	if (ret) {
		fprintf(out, "clamd.conf %s: %s%s\n", conf,
			ret == -EINVAL ? "bad size on a line, "
				       : "cannot be read: ",
			ret == -EINVAL ? "limits not checked" : strerror(-ret));
		return 0;
	}
	stream = opts->scan_mode == SCAN_MODE_STREAM ||
		 (opts->scan_mode < 0 && !unix_socket);
	size_text(ours, b, sizeof(b));
	if (stream && below(l.stream_max_length, ours)) {
		fprintf(out,
			"clamd.conf %s: warning: StreamMaxLength %s is below "
			"max_scan_size %s: clamd refuses to take files in "
			"between, and their opens fail (on_error=deny) or are "
			"served unscanned (on_error=allow)\n",
			conf, size_text(l.stream_max_length, a, sizeof(a)), b);
		warnings++;
	}
	if (below(l.max_file_size, ours) && !l.alert_exceeds_max) {
		fprintf(out,
			"clamd.conf %s: warning: MaxFileSize %s is below "
			"max_scan_size %s and AlertExceedsMax is no: clamd "
			"skips larger files and answers OK, so they are "
			"served unscanned and cached clean; raise MaxFileSize "
			"or set AlertExceedsMax yes\n",
			conf, size_text(l.max_file_size, a, sizeof(a)), b);
		warnings++;
	}
	if (below(l.max_scan_size, ours) && !l.alert_exceeds_max) {
		fprintf(out,
			"clamd.conf %s: warning: MaxScanSize %s is below "
			"max_scan_size %s and AlertExceedsMax is no: clamd "
			"stops scanning past it and answers OK; raise "
			"MaxScanSize or set AlertExceedsMax yes\n",
			conf, size_text(l.max_scan_size, a, sizeof(a)), b);
		warnings++;
	}
	if (!warnings)
		fprintf(out, "clamd.conf %s: limits ok for max_scan_size %s\n",
			conf, b);
	return warnings;
}

/* The exit status clamd's part of --check earns (exitcode.h). */
static int check_clamd(FILE *out, const struct clamfs_opts *opts)
{
	struct cdp_pool *pool = NULL;
	struct cdp_result res;
	struct cdp_version ver;
	struct cdp_config cfg;
	int status = EXIT_CLAMD;
	int ret;

	cdp_config_init(&cfg);
	cfg.addr = opts->clamd;
	cfg.max_conns = 1;
	ret = cdp_pool_new(&cfg, &pool);
	if (ret) {
		fprintf(out, "clamd %s: bad address\n", opts->clamd);
		return EXIT_CONFIG;
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
		status = EXIT_CONFIG;
		goto out;
	}
	check_clamd_limits(out, opts,
			   cdp_addr_kind(cdp_pool_addr(pool)) == CDP_ADDR_UNIX);
	status = EXIT_OK;
out:
	cdp_pool_free(pool);
	return status;
}

/* The first failure decides the status: it is the first line to fix. */
static void first_failure(int *status, int this)
{
	if (*status == EXIT_OK)
		*status = this;
}

int cli_check(const struct clamfs_opts *opts, FILE *out)
{
	int status = EXIT_OK;

	if (opts->config)
		fprintf(out, "config %s: ok\n", opts->config);
	if (opts->backend && !check_dir(out, "backend", opts->backend))
		first_failure(&status, EXIT_MOUNT);
	if (opts->mountpoint && !check_dir(out, "mountpoint", opts->mountpoint))
		first_failure(&status, EXIT_MOUNT);
	if (opts->policy.on_infected == INFECTED_QUARANTINE &&
	    opts->quarantine_dir) {
		struct stat st;

		if (stat(opts->quarantine_dir, &st) == 0 &&
		    !check_dir(out, "quarantine_dir", opts->quarantine_dir))
			first_failure(&status, EXIT_CONFIG);
		else
			fprintf(out,
				"quarantine_dir %s: will be created (0700)\n",
				opts->quarantine_dir);
	}
	first_failure(&status, check_clamd(out, opts));
	fprintf(out, "%s\n",
		status == EXIT_OK ? "check passed" : "check FAILED");
	return status;
}

static bool is_gauge(const char *name)
{
	static const char *const gauges[] = {"cache_entries",
					     "scans_queued",
					     "inodes",
					     "uptime_seconds",
					     "scan_latency_p50_us",
					     "scan_latency_p90_us",
					     "scan_latency_p99_us",
					     "clamd_up",
					     "clamd_db_version",
					     NULL};

	for (int i = 0; gauges[i]; i++)
		if (strcmp(name, gauges[i]) == 0)
			return true;
	return false;
}

/* Metric names allow [a-zA-Z0-9_]: "size-limit" becomes "size_limit". */
static void metric_name(const char *in, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		char c = in[i];

		out[o++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					   (c >= '0' && c <= '9')
				   ? c
				   : '_';
	}
	out[o] = '\0';
}

static void label_value(const char *in, FILE *out)
{
	for (; *in; in++) {
		if (*in == '\\' || *in == '"')
			fputc('\\', out);
		if (*in == '\n')
			fputs("\\n", out);
		else
			fputc(*in, out);
	}
}

void cli_stats_prometheus(const char *text, const char *mount, FILE *out)
{
	const char *line = text;
	char engine[64] = "unknown", date[128] = "none";

	while (*line) {
		const char *eq = strchr(line, '='), *nl = strchr(line, '\n');
		char name[128], *end;
		unsigned long long v;

		if (!nl)
			nl = line + strlen(line);
		if (!eq || eq > nl)
			goto next;
		metric_name(line, (size_t)(eq - line), name, sizeof(name));
		if (strcmp(name, "clamd_engine") == 0) {
			snprintf(engine, sizeof(engine), "%.*s",
				 (int)(nl - eq - 1), eq + 1);
			goto next;
		}
		if (strcmp(name, "clamd_db_date") == 0) {
			snprintf(date, sizeof(date), "%.*s", (int)(nl - eq - 1),
				 eq + 1);
			goto next;
		}
		errno = 0;
		v = strtoull(eq + 1, &end, 10);
		if (end != nl || errno)
			goto next; /* not a number: not a metric */
		fprintf(out, "# TYPE clamfs_%s %s\nclamfs_%s{mount=\"", name,
			is_gauge(name) ? "gauge" : "counter", name);
		label_value(mount, out);
		fprintf(out, "\"} %llu\n", v);
	next:
		line = *nl ? nl + 1 : nl;
	}
	fprintf(out,
		"# TYPE clamfs_clamd_info gauge\nclamfs_clamd_info{mount=\"");
	label_value(mount, out);
	fprintf(out, "\",engine=\"");
	label_value(engine, out);
	fprintf(out, "\",db_date=\"");
	label_value(date, out);
	fprintf(out, "\"} 1\n");
}

int cli_stats(int argc, char *argv[], FILE *out)
{
	bool prometheus = false;
	const char *mnt = NULL;
	char *buf = NULL;
	ssize_t n;
	int ret = 1;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--prometheus") == 0)
			prometheus = true;
		else if (!mnt)
			mnt = argv[i];
		else
			mnt = NULL, i = argc; /* two mountpoints: usage */
	}
	if (!mnt) {
		fprintf(stderr, "clamfs: usage: clamfs --stats MOUNTPOINT "
				"[--prometheus]\n");
		return 1;
	}
	n = getxattr(mnt, STATS_XATTR, NULL, 0);
	if (n > 0 && (buf = malloc((size_t)n + 1)))
		n = getxattr(mnt, STATS_XATTR, buf, (size_t)n);
	if (n < 0 || !buf) {
		fprintf(stderr, "clamfs: %s: %s\n", mnt,
			errno == ENODATA || errno == ENOTSUP
				? "not a clamfs mount, or not root"
				: strerror(errno));
		goto out;
	}
	buf[n] = '\0';
	if (prometheus)
		cli_stats_prometheus(buf, mnt, out);
	else
		fputs(buf, out);
	ret = 0;
out:
	free(buf);
	return ret;
}
