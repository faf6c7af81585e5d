// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The table from stats keys to Prometheus series, and the rendering of one
 * exposition for several mounts with it.
 */
#include "prom.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * clang-format 14 and 19 break braced initializers in macros differently:
 * the table's row makers are left as written.
 */
/* clang-format off */
#define COUNTER(k, f, h)                                                       \
	{                                                                      \
		.key = k, .family = f, .type = PROM_COUNTER, .help = h         \
	}
#define GAUGE(k, f, h)                                                         \
	{                                                                      \
		.key = k, .family = f, .type = PROM_GAUGE, .help = h           \
	}
/* several keys as one counter family, told apart by a label */
#define BY(k, f, h, l, v)                                                      \
	{                                                                      \
		.key = k, .family = f, .type = PROM_COUNTER, .help = h,        \
		.label = l, .value = v                                         \
	}
#define INFO(k, f, h, l)                                                       \
	{                                                                      \
		.key = k, .family = f, .type = PROM_INFO, .help = h,           \
		.label = l                                                     \
	}
/* one series per backend, labelled with its address */
#define PER_BACKEND(k, f, t, h, d)                                             \
	{                                                                      \
		.key = k, .family = f, .type = t, .help = h,                   \
		.label = "backend", .label_key = "backend_*_addr",             \
		.decimals = d                                                  \
	}
#define HUMAN(k)                                                               \
	{                                                                      \
		.key = k, .type = PROM_NONE                                    \
	}
/* clang-format on */

#define H_OVERSIZE                                                             \
	"Opens of files over max_scan_size, by what the oversize policy "      \
	"decided."
#define H_OPEN_ERR "Opens whose scan failed, by what on_error decided."
#define H_ERRORS   "Failed scans by error category."
#define H_SCAN	   "Time clamd took per scan, a retry included."
#define H_CLAMD	   "The clamd engine and signature database date in use."
#define H_PASSTHROUGH                                                          \
	"Whether opens use kernel passthrough (state on or off) and why not "  \
	"(reason: none, option, libfuse, not-root, overlayfs, kernel)."
#define H_BACKEND_SCAN                                                         \
	"Time the backend took per scan attempt not cancelled, a retry "       \
	"counted apart."
#define H_BUILD "The clamfs version serving the mount, and its libfuse."

static const struct prom_row table[] = {
	/* stats.c: the scan gate */
	COUNTER("opens_checked", "clamfs_opens_checked_total",
		"Opens that went through the scan gate."),
	COUNTER("opens_empty", "clamfs_opens_empty_total",
		"Opens of empty files: nothing to scan."),
	COUNTER("opens_cache_hit", "clamfs_opens_cache_hit_total",
		"Opens answered from the verdict cache."),
	COUNTER("opens_scanned", "clamfs_opens_scanned_total",
		"Opens that waited for a scan."),
	COUNTER("infected", "clamfs_infected_total",
		"Detections, at open or when a written file was closed."),
	COUNTER("opens_denied", "clamfs_opens_denied_total",
		"Opens refused for a detection."),
	COUNTER("limits_exceeded", "clamfs_limits_exceeded_total",
		"Files clamd gave up on at one of its scan limits (not "
		"detections; on_limits decides)."),
	COUNTER("opens_redecided", "clamfs_opens_redecided_total",
		"Read-write opens decided again: the file changed between "
		"the decision and the open as asked."),
	COUNTER("caller_groups_read", "clamfs_caller_groups_read_total",
		"Reads of a caller's supplementary groups from /proc (only "
		"where a permission check may need them)."),
	COUNTER("watch_events", "clamfs_watch_events_total",
		"Changes made around the mount that the backend watch told "
		"the kernel of (watch_backend=yes)."),
	COUNTER("watch_overflows", "clamfs_watch_overflows_total",
		"Times the backend watch lost events and had the kernel drop "
		"everything it cached."),
	COUNTER("opens_excluded", "clamfs_opens_excluded_total",
		"Opens let through unscanned by a path or user rule."),
	BY("opens_oversize_allowed", "clamfs_opens_oversize_total", H_OVERSIZE,
	   "decision", "allowed"),
	BY("opens_oversize_denied", "clamfs_opens_oversize_total", H_OVERSIZE,
	   "decision", "denied"),
	BY("opens_error_allowed", "clamfs_opens_scan_error_total", H_OPEN_ERR,
	   "decision", "allowed"),
	BY("opens_error_denied", "clamfs_opens_scan_error_total", H_OPEN_ERR,
	   "decision", "denied"),
	COUNTER("opens_interrupted", "clamfs_opens_interrupted_total",
		"Opens interrupted while they waited for a scan."),
	COUNTER("close_scans", "clamfs_close_scans_total",
		"Scans of files when a write was closed."),
	COUNTER("ahead_scans", "clamfs_ahead_scans_total",
		"Background scans of files written through the mount, asked "
		"for when the last writer closed."),
	COUNTER("ahead_cached", "clamfs_ahead_cached_total",
		"Background scans whose verdict the cache kept for the next "
		"reader."),
	COUNTER("ahead_dirs", "clamfs_ahead_dirs_total",
		"Directories whose files were scanned ahead of a reader that "
		"waited for a scan there."),
	COUNTER("ahead_dir_scans", "clamfs_ahead_dir_scans_total",
		"Background scans of files of directories read ahead."),
	COUNTER("quarantined", "clamfs_quarantined_total",
		"Infected files moved to the quarantine."),
	COUNTER("deleted", "clamfs_deleted_total", "Infected files deleted."),
	COUNTER("hook_runs", "clamfs_hook_runs_total",
		"Runs of the detection hook."),
	COUNTER("hook_suppressed", "clamfs_hook_suppressed_total",
		"Detection hook runs left out by its rate limit."),
	COUNTER("cache_clears", "clamfs_cache_clears_total",
		"Times the verdict cache was dropped (database change, "
		"reload)."),
	COUNTER("opens_passthrough", "clamfs_opens_passthrough_total",
		"Opens whose reads and writes the kernel serves itself."),
	COUNTER("passthrough_failed", "clamfs_passthrough_failed_total",
		"Opens refused kernel passthrough: the daemon serves their "
		"I/O."),
	COUNTER("daemon_reads", "clamfs_daemon_reads_total",
		"READ requests the daemon served."),
	COUNTER("daemon_writes", "clamfs_daemon_writes_total",
		"WRITE requests the daemon served."),
	/* one row per category: a new category needs a row (test_prom) */
	BY("errors_connect", "clamfs_scan_errors_total", H_ERRORS, "category",
	   "connect"),
	BY("errors_timeout", "clamfs_scan_errors_total", H_ERRORS, "category",
	   "timeout"),
	BY("errors_protocol", "clamfs_scan_errors_total", H_ERRORS, "category",
	   "protocol"),
	BY("errors_size-limit", "clamfs_scan_errors_total", H_ERRORS,
	   "category", "size-limit"),
	BY("errors_clamd", "clamfs_scan_errors_total", H_ERRORS, "category",
	   "clamd"),
	BY("errors_cancelled", "clamfs_scan_errors_total", H_ERRORS, "category",
	   "cancelled"),
	BY("errors_local", "clamfs_scan_errors_total", H_ERRORS, "category",
	   "local"),
	/* free text for people; the info series carries it as two words */
	HUMAN("passthrough"),
	INFO("passthrough_state", "clamfs_passthrough_info", H_PASSTHROUGH,
	     "state"),
	INFO("passthrough_reason", "clamfs_passthrough_info", H_PASSTHROUGH,
	     "reason"),
	INFO("writeback_cache", "clamfs_writeback_cache_info",
	     "Whether the kernel's write-back cache is on (writeback_cache=yes "
	     "and no passthrough).",
	     "state"),
	INFO("backend_watch", "clamfs_backend_watch_info",
	     "Whether the backend is watched, so that the kernel caches "
	     "names, attributes and directory contents for long "
	     "(watch_backend=yes).",
	     "state"),
	/* stats.c: the scan duration histogram, cumulative */
	{.key = "scan_duration_le_*",
	 .family = "clamfs_scan_duration_seconds",
	 .type = PROM_HISTOGRAM,
	 .help = H_SCAN,
	 .suffix = "_bucket",
	 .label = "le"},
	{.key = "scan_duration_sum_us",
	 .family = "clamfs_scan_duration_seconds",
	 .type = PROM_HISTOGRAM,
	 .help = H_SCAN,
	 .suffix = "_sum",
	 .decimals = 6},
	{.key = "scan_duration_count",
	 .family = "clamfs_scan_duration_seconds",
	 .type = PROM_HISTOGRAM,
	 .help = H_SCAN,
	 .suffix = "_count"},
	/* for people; Prometheus has histogram_quantile() on the buckets */
	HUMAN("scan_latency_p50_us"),
	HUMAN("scan_latency_p90_us"),
	HUMAN("scan_latency_p99_us"),
	/* the verdict cache */
	COUNTER("cache_hits", "clamfs_cache_hits_total",
		"Verdict cache lookups that found a verdict."),
	COUNTER("cache_misses", "clamfs_cache_misses_total",
		"Verdict cache lookups that found none."),
	COUNTER("cache_evictions", "clamfs_cache_evictions_total",
		"Verdicts dropped from the cache for room."),
	GAUGE("cache_entries", "clamfs_cache_entries",
	      "Verdicts the cache holds."),
	/* the verdict store (verdict_store=DIR) */
	COUNTER("store_hits", "clamfs_store_hits_total",
		"Opens served from a verdict kept across restarts."),
	COUNTER("store_writes", "clamfs_store_writes_total",
		"Clean verdicts written to the verdict store."),
	COUNTER("store_dropped", "clamfs_store_dropped_total",
		"Clean verdicts not kept: the store's write queue was full."),
	COUNTER("store_rebuilds", "clamfs_store_rebuilds_total",
		"Verdict store files refused and started empty."),
	COUNTER("store_write_failures", "clamfs_store_write_failures_total",
		"Verdict store commits that failed."),
	GAUGE("store_entries", "clamfs_store_entries",
	      "Verdicts the store holds."),
	/* the scan queue */
	COUNTER("scans", "clamfs_scans_total", "Scans clamd was asked to do."),
	COUNTER("scans_joined", "clamfs_scans_joined_total",
		"Scan requests that joined a scan of the same file in "
		"flight."),
	COUNTER("scan_retries", "clamfs_scan_retries_total",
		"Immediate retries after a broken clamd connection."),
	COUNTER("scans_cancelled", "clamfs_scans_cancelled_total",
		"Scans cancelled: nobody waited for them any more."),
	GAUGE("scans_queued", "clamfs_scans_queued",
	      "Scans waiting for a scanner thread."),
	COUNTER("scans_expired", "clamfs_scans_expired_total",
		"Scans an open waited for whose deadline passed while they "
		"were queued."),
	COUNTER("scans_rejected", "clamfs_scans_rejected_total",
		"Scan requests refused: the user's queue was full."),
	COUNTER("scans_rejected_waiters", "clamfs_scans_rejected_waiters_total",
		"Scan requests refused: the user had too many opens waiting "
		"for verdicts, joined ones included."),
	COUNTER("scans_background", "clamfs_scans_background_total",
		"Background scans clamd was asked for that nobody had joined "
		"yet."),
	COUNTER("scans_background_dropped",
		"clamfs_scans_background_dropped_total",
		"Background scans dropped: their queue was full, the file "
		"changed before they could start, or they waited past their "
		"deadline."),
	COUNTER("scans_spared", "clamfs_scans_spared_total",
		"Scans not sent to clamd: when a scanner thread took them, "
		"the verdict cache held a verdict for the file as still "
		"stamped, nobody writing it (mostly a scan of the same file "
		"that had just ended)."),
	GAUGE("inodes", "clamfs_inodes",
	      "Files and directories the kernel knows through the mount."),
	GAUGE("inode_fds", "clamfs_inode_fds",
	      "Of those, the ones the daemon holds a descriptor of (the "
	      "others are reopened by file handle when used)."),
	COUNTER("inode_reopens", "clamfs_inode_reopens_total",
		"Files reopened by file handle after their descriptor was "
		"closed to stay within the file limit."),
	/* for people; monitors take the start time (time() - it) */
	HUMAN("uptime_seconds"),
	GAUGE("start_time_seconds", "clamfs_start_time_seconds",
	      "Start time of the mount since the Unix epoch in seconds."),
	INFO("version", "clamfs_build_info", H_BUILD, "version"),
	INFO("libfuse_version", "clamfs_build_info", H_BUILD, "libfuse"),
	/* dbwatch.c: clamd */
	GAUGE("clamd_up", "clamfs_clamd_up",
	      "Whether clamd answered the last version check."),
	INFO("clamd_engine", "clamfs_clamd_info", H_CLAMD, "engine"),
	INFO("clamd_db_date", "clamfs_clamd_info", H_CLAMD, "db_date"),
	GAUGE("clamd_db_version", "clamfs_clamd_db_version",
	      "Version of clamd's signature database (0: unknown)."),
	/* stats.c from cdp_fleet_backend_stats: the clamd backends */
	GAUGE("backends", "clamfs_backends",
	      "clamd backends in the configuration in force."),
	HUMAN("backend_*_addr"),  /* the label of the rows below */
	HUMAN("backend_*_state"), /* backend_*_healthy for Prometheus */
	PER_BACKEND("backend_*_healthy", "clamfs_backend_up", PROM_GAUGE,
		    "Whether the backend takes scans (1) or is ejected (0).",
		    0),
	PER_BACKEND("backend_*_weight", "clamfs_backend_weight", PROM_GAUGE,
		    "The backend's weight: its share of the scans in flight.",
		    0),
	PER_BACKEND("backend_*_conns", "clamfs_backend_connections_max",
		    PROM_GAUGE, "The backend's cap on connections.", 0),
	PER_BACKEND("backend_*_threads", "clamfs_backend_clamd_threads",
		    PROM_GAUGE,
		    "The backend's clamd MaxThreads as its STATS told (0: not "
		    "known): at most that many scans are in flight there.",
		    0),
	PER_BACKEND("backend_*_inflight", "clamfs_backend_scans_in_flight",
		    PROM_GAUGE, "Scan attempts running on the backend now.", 0),
	PER_BACKEND("backend_*_scans", "clamfs_backend_scans_total",
		    PROM_COUNTER,
		    "Scan attempts the backend ended, retries included.", 0),
	PER_BACKEND("backend_*_errors", "clamfs_backend_scan_errors_total",
		    PROM_COUNTER,
		    "Scan attempts on the backend that ended in an error "
		    "(cancelled ones not counted).",
		    0),
	PER_BACKEND("backend_*_ejections", "clamfs_backend_ejections_total",
		    PROM_COUNTER,
		    "Times the backend was ejected from the fleet.", 0),
	{.key = "backend_*_scan_time_sum_us",
	 .family = "clamfs_backend_scan_duration_seconds",
	 .type = PROM_SUMMARY,
	 .help = H_BACKEND_SCAN,
	 .suffix = "_sum",
	 .label = "backend",
	 .label_key = "backend_*_addr",
	 .decimals = 6},
	{.key = "backend_*_scan_time_count",
	 .family = "clamfs_backend_scan_duration_seconds",
	 .type = PROM_SUMMARY,
	 .help = H_BACKEND_SCAN,
	 .suffix = "_count",
	 .label = "backend",
	 .label_key = "backend_*_addr"},
	/*
	 * For people: a mean, a last and a maximum cannot be added up over
	 * backends or mounts; the summary above can (rate(_sum) /
	 * rate(_count)).
	 */
	HUMAN("backend_*_latency_last_ms"),
	HUMAN("backend_*_latency_avg_ms"),
	HUMAN("backend_*_latency_max_ms"),
};

#define NROWS (sizeof(table) / sizeof(table[0]))

const struct prom_row *prom_table(size_t *nrows)
{
	*nrows = NROWS;
	return table;
}

/* Whether key matches row r; *rest is what the row's '*' matched. */
static bool matches(const struct prom_row *r, const char *key, size_t len,
		    const char **rest, size_t *restlen)
{
	const char *star = strchr(r->key, '*');
	size_t n = strlen(r->key), pre, post;

	*rest = NULL;
	*restlen = 0;
	if (!star)
		return len == n && memcmp(key, r->key, n) == 0;
	pre = (size_t)(star - r->key);
	post = n - pre - 1;
	if (len <= pre + post || memcmp(key, r->key, pre) != 0 ||
	    memcmp(key + len - post, star + 1, post) != 0)
		return false;
	/*
	 * Inside a key only a number: else "backend_*_errors" would take
	 * a "backend_0_scan_errors" too.
	 */
	for (size_t i = pre; post && i < len - post; i++)
		if (key[i] < '0' || key[i] > '9')
			return false;
	*rest = key + pre;
	*restlen = len - pre - post;
	return true;
}

const struct prom_row *prom_find(const char *key, size_t len)
{
	const char *rest;
	size_t restlen;

	for (size_t i = 0; i < NROWS; i++)
		if (matches(&table[i], key, len, &rest, &restlen))
			return &table[i];
	return NULL;
}

struct line {
	const char *key, *val;
	size_t klen, vlen;
};

/* The next "key=value" line from *pos on; lines without '=' are skipped. */
static bool next_line(const char **pos, struct line *l)
{
	while (**pos) {
		const char *p = *pos, *nl = strchrnul(p, '\n');
		const char *eq = memchr(p, '=', (size_t)(nl - p));

		*pos = *nl ? nl + 1 : nl;
		if (!eq)
			continue;
		l->key = p;
		l->klen = (size_t)(eq - p);
		l->val = eq + 1;
		l->vlen = (size_t)(nl - eq - 1);
		return true;
	}
	return false;
}

static bool parse_u64(const char *s, size_t len, uint64_t *v)
{
	char buf[24], *end;

	if (len == 0 || len >= sizeof(buf))
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return errno == 0 && *end == '\0';
}

/* A label value: backslash, double quote and newline escaped. */
static void put_label(FILE *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\n') {
			fputs("\\n", out);
			continue;
		}
		if (s[i] == '\\' || s[i] == '"')
			fputc('\\', out);
		fputc(s[i], out);
	}
}

/*
 * A stats value escaped as stats.c escapes an address (backslash and
 * newline, as in C) as a label value: those two escapes are the same in
 * a label, any other backslash is taken as itself.
 */
static void put_label_unescaped(FILE *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\' && i + 1 < len &&
		    (s[i + 1] == '\\' || s[i + 1] == 'n')) {
			fputc('\\', out);
			fputc(s[++i], out);
			continue;
		}
		put_label(out, &s[i], 1);
	}
}

/*
 * The value of the mount's stats key r->label_key with its '*' replaced
 * by the rest matched (rlen bytes at rest): false when it has none.
 */
static bool label_from_key(const struct prom_row *r, const char *stats,
			   const char *rest, size_t rlen, struct line *found)
{
	const char *star = strchr(r->label_key, '*');
	const char *pos = stats;
	char key[128];
	struct line l;
	int n;

	if (!star)
		return false;
	n = snprintf(key, sizeof(key), "%.*s%.*s%s", (int)(star - r->label_key),
		     r->label_key, (int)rlen, rest, star + 1);
	if (n < 0 || (size_t)n >= sizeof(key))
		return false;
	while (next_line(&pos, &l))
		if (l.klen == (size_t)n && memcmp(l.key, key, l.klen) == 0) {
			*found = l;
			return true;
		}
	return false;
}

/* HELP text escapes only backslash and newline. */
static void put_help(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\n')
			fputs("\\n", out);
		else if (*s == '\\')
			fputs("\\\\", out);
		else
			fputc(*s, out);
	}
}

static void put_value(FILE *out, uint64_t v, unsigned int decimals)
{
	uint64_t div = 1;

	for (unsigned int i = 0; i < decimals; i++)
		div *= 10;
	if (decimals == 0)
		fprintf(out, "%" PRIu64, v);
	else
		fprintf(out, "%" PRIu64 ".%0*" PRIu64, v / div, (int)decimals,
			v % div);
}

static void series_start(FILE *out, const struct prom_row *r,
			 const char *mountpoint)
{
	fprintf(out, "%s%s{mountpoint=\"", r->family,
		r->suffix ? r->suffix : "");
	put_label(out, mountpoint, strlen(mountpoint));
	fputc('"', out);
}

/*
 * The info series of one mount: one sample whose labels are the values of
 * the family's keys the mount has. Returns 1, or 0 when it has none.
 */
static size_t info_series(const struct prom_row *rows, size_t nrows,
			  const struct prom_mount *m, FILE *out)
{
	bool any = false;

	for (size_t i = 0; i < nrows; i++) {
		const char *pos = m->stats, *rest;
		struct line l;
		size_t restlen;

		while (next_line(&pos, &l)) {
			if (!matches(&rows[i], l.key, l.klen, &rest, &restlen))
				continue;
			if (!out)
				return 1;
			if (!any)
				series_start(out, &rows[0], m->mountpoint);
			any = true;
			fprintf(out, ",%s=\"", rows[i].label);
			put_label(out, l.val, l.vlen);
			fputc('"', out);
			break;
		}
	}
	if (any)
		fputs("} 1\n", out);
	return any ? 1 : 0;
}

/*
 * Writes the series of one family for one mount, or only counts them when
 * out is NULL. Returns their number.
 */
static size_t family_series(const struct prom_row *rows, size_t nrows,
			    const struct prom_mount *m, FILE *out)
{
	size_t count = 0;

	if (rows[0].type == PROM_INFO)
		return info_series(rows, nrows, m, out);
	for (size_t i = 0; i < nrows; i++) {
		const struct prom_row *r = &rows[i];
		const char *pos = m->stats, *rest;
		struct line l;
		size_t restlen;
		struct line lv = {0};
		uint64_t v;

		while (next_line(&pos, &l)) {
			if (!matches(r, l.key, l.klen, &rest, &restlen) ||
			    !parse_u64(l.val, l.vlen, &v))
				continue;
			if (r->label_key &&
			    !label_from_key(r, m->stats, rest, restlen, &lv))
				continue;
			count++;
			if (!out)
				continue;
			series_start(out, r, m->mountpoint);
			if (r->label) {
				fprintf(out, ",%s=\"", r->label);
				if (r->label_key)
					put_label_unescaped(out, lv.val,
							    lv.vlen);
				else if (r->value)
					put_label(out, r->value,
						  strlen(r->value));
				else
					put_label(out, rest, restlen);
				fputc('"', out);
			}
			fputs("} ", out);
			put_value(out, v, r->decimals);
			fputc('\n', out);
		}
	}
	return count;
}

static const char *type_name(enum prom_type t)
{
	switch (t) {
	case PROM_COUNTER:
		return "counter";
	case PROM_HISTOGRAM:
		return "histogram";
	case PROM_SUMMARY:
		return "summary";
	default:
		return "gauge"; /* an info metric is a gauge in 0.0.4 */
	}
}

int prom_render(const struct prom_mount *mounts, size_t n, FILE *out)
{
	size_t i = 0, end;

	for (; i < NROWS; i = end) {
		const struct prom_row *rows = &table[i];
		size_t count = 0;

		for (end = i + 1;
		     end < NROWS && table[end].family && rows->family &&
		     strcmp(table[end].family, rows->family) == 0;
		     end++)
			;
		if (rows->type == PROM_NONE)
			continue;
		for (size_t m = 0; m < n; m++)
			count += family_series(rows, end - i, &mounts[m], NULL);
		if (count == 0)
			continue;
		fprintf(out, "# HELP %s ", rows->family);
		put_help(out, rows->help);
		fprintf(out, "\n# TYPE %s %s\n", rows->family,
			type_name(rows->type));
		for (size_t m = 0; m < n; m++)
			family_series(rows, end - i, &mounts[m], out);
	}
	return ferror(out) ? -EIO : 0;
}
