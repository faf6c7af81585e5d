// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The Prometheus table and renderer (prom.c) against what stats.c really
 * emits: every key has a row (a key added without one fails here), the
 * table keeps the naming rules, one exposition of two mounts has each
 * family once with a series per mount, labels are escaped, the histogram
 * is cumulative in seconds, and what the table does not know is left out.
 * Every series can be aggregated: no free text in a label, a start time
 * instead of an uptime, per-backend sums and counts instead of means.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prom.h"
#include "stats.h"

/* What the daemon's dbwatch_describe() prints once clamd answered. */
#define CLAMD_LINES                                                            \
	"clamd_up=1\nclamd_engine=1.4.6\nclamd_db_version=27000\n"             \
	"clamd_db_date=Mon Jan  1 00:00:00 2024\n"

/* Two backends as cdp_fleet_backend_stats() fills them. */
static const struct cdp_backend_stats two_backends[] = {
	{.addr = "tcp://127.0.0.1:3310",
	 .healthy = true,
	 .weight = 2,
	 .max_conns = 8,
	 .threads = 4,
	 .inflight = 1,
	 .scans = 40,
	 .errors = 1,
	 .last_ms = 3,
	 .avg_ms = 12,
	 .max_ms = 1500,
	 .timed = 39,
	 .total_us = 468250},
	/* a UNIX socket path may hold what a label value must escape */
	{.addr = "/run/cl\"am\\d\n.sock",
	 .weight = 1,
	 .scans = 2,
	 .errors = 2,
	 .ejections = 1},
};

static char *render_with(struct stats *s, const struct stats_sample *x)
{
	size_t need = stats_render(s, x, NULL, 0);
	char *buf = malloc(need + 1);

	assert_non_null(buf);
	assert_int_equal(stats_render(s, x, buf, need + 1), need);
	assert_int_equal(strlen(buf), need);
	return buf;
}

static char *render_stats(struct stats *s, const char *clamd)
{
	struct stats_sample x = {
		.inodes = 3, .uptime_seconds = 5, .clamd = clamd};
	size_t need = stats_render(s, &x, NULL, 0);
	char *buf = malloc(need + 1);

	assert_non_null(buf);
	assert_int_equal(stats_render(s, &x, buf, need + 1), need);
	assert_int_equal(strlen(buf), need);
	return buf;
}

static char *render_prom(const struct prom_mount *m, size_t n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int closed;

	assert_non_null(f);
	assert_int_equal(prom_render(m, n, f), 0);
	/* apart: cppcheck takes the macro's f for used after fclose */
	closed = fclose(f);
	assert_int_equal(closed, 0);
	return text;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static bool name_ok(const char *s)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '_'))
			return false;
	return true;
}

static bool ends_with(const char *s, const char *end)
{
	size_t a = strlen(s), b = strlen(end);

	return a >= b && strcmp(s + a - b, end) == 0;
}

static void every_emitted_key_has_a_row(void **state)
{
	static struct stats s;
	char *text, *line, *save = NULL;
	int keys = 0;

	struct stats_sample x = {
		.clamd = CLAMD_LINES, .backends = two_backends, .nbackends = 2};

	stats_observe_scan(&s, 1200);
	static const struct stats_passthrough off = {
		.reason = "kernel", .text = "off (no kernel support)"};

	x.libfuse_version = "3.14.0";
	stats_set_passthrough(&s, &off);
	text = render_with(&s, &x);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *eq = strchr(line, '=');

		assert_non_null(eq);
		if (!prom_find(line, (size_t)(eq - line)))
			fail_msg("stats key without a row in prom.c: %.*s",
				 (int)(eq - line), line);
		keys++;
	}
	assert_true(keys > 50);
	free(text);
	/* and what nobody emits has none */
	assert_null(prom_find("made_up", 7));
	assert_null(prom_find("errors_", 7));
	assert_null(prom_find("scan_duration_le_", 17));
	assert_null(prom_find("backend__scans", 14));
	assert_null(prom_find("backend_0_scan_errors", 21));
	assert_non_null(prom_find("backend_12_errors", 17));
}

/*
 * Per backend: stats lines by index, the address escaped so a path with
 * a newline cannot start a line of its own; series labelled with the
 * address, escaped as a label value; latencies in seconds.
 */
static void backends_labelled_by_address(void **state)
{
	static struct stats s;
	struct stats_sample x = {.backends = two_backends, .nbackends = 2};
	struct prom_mount m;
	char *text, *out;

	text = render_with(&s, &x);
	assert_non_null(strstr(text, "\nbackends=2\n"));
	assert_non_null(strstr(text, "\nbackend_0_addr=tcp://127.0.0.1:3310\n"
				     "backend_0_state=healthy\n"
				     "backend_0_healthy=1\n"
				     "backend_0_weight=2\n"
				     "backend_0_conns=8\n"
				     "backend_0_threads=4\n"
				     "backend_0_inflight=1\n"
				     "backend_0_scans=40\n"
				     "backend_0_errors=1\n"
				     "backend_0_ejections=0\n"
				     "backend_0_latency_last_ms=3\n"
				     "backend_0_latency_avg_ms=12\n"
				     "backend_0_latency_max_ms=1500\n"
				     "backend_0_scan_time_sum_us=468250\n"
				     "backend_0_scan_time_count=39\n"));
	assert_non_null(strstr(text, "\nbackend_1_addr=/run/cl\"am\\\\d\\n"
				     ".sock\nbackend_1_state=ejected\n"));
	m = (struct prom_mount){"/m", text};
	out = render_prom(&m, 1);
	assert_non_null(strstr(out, "# TYPE clamfs_backend_scans_total "
				    "counter\n"));
	assert_non_null(strstr(out, "\nclamfs_backend_scans_total{mountpoint="
				    "\"/m\",backend=\"tcp://127.0.0.1:3310\"}"
				    " 40\n"));
	assert_non_null(strstr(out, "\nclamfs_backend_scans_total{mountpoint="
				    "\"/m\",backend=\"/run/cl\\\"am\\\\d\\n"
				    ".sock\"} 2\n"));
	assert_non_null(strstr(out, "\nclamfs_backend_up{mountpoint=\"/m\","
				    "backend=\"tcp://127.0.0.1:3310\"} 1\n"));
	assert_int_equal(count(out, "\nclamfs_backend_up{"), 2);
	assert_non_null(strstr(out, "\nclamfs_backend_clamd_threads{mountpoint="
				    "\"/m\",backend=\"tcp://127.0.0.1:3310\"}"
				    " 4\n"));
	assert_non_null(strstr(out, "\nclamfs_backend_ejections_total{"
				    "mountpoint=\"/m\",backend=\"/run/cl"));
	/* a summary without quantiles: what adds up over backends */
	assert_non_null(strstr(out, "# TYPE clamfs_backend_scan_duration_"
				    "seconds summary\n"));
	assert_non_null(strstr(out, "\nclamfs_backend_scan_duration_seconds"
				    "_sum{mountpoint=\"/m\",backend=\"tcp://"
				    "127.0.0.1:3310\"} 0.468250\n"));
	assert_non_null(strstr(out, "\nclamfs_backend_scan_duration_seconds"
				    "_count{mountpoint=\"/m\",backend=\"tcp://"
				    "127.0.0.1:3310\"} 39\n"));
	/* means, maxima and last values are for people only */
	assert_null(strstr(out, "clamfs_backend_mean"));
	assert_null(strstr(out, "clamfs_backend_max_scan"));
	assert_null(strstr(out, "clamfs_backend_last_scan"));
	assert_non_null(
		strstr(out, "\nclamfs_backends{mountpoint=\"/m\"} 2\n"));
	/* the address and state lines are labels, no series */
	assert_null(strstr(out, "_addr"));
	assert_null(strstr(out, "_state"));
	free(out);
	free(text);

	/* without its address line a backend's series are left out */
	m = (struct prom_mount){"/m", "backend_0_scans=5\nbackend_1_addr=x\n"
				      "backend_1_scans=6\n"};
	out = render_prom(&m, 1);
	assert_int_equal(count(out, "\nclamfs_backend_scans_total{"), 1);
	assert_non_null(strstr(out, "backend=\"x\"} 6\n"));
	free(out);
}

static void table_follows_the_naming_rules(void **state)
{
	size_t n;
	const struct prom_row *t = prom_table(&n);

	for (size_t i = 0; i < n; i++) {
		const struct prom_row *r = &t[i];

		for (size_t j = 0; j < i; j++)
			if (strcmp(t[j].key, r->key) == 0)
				fail_msg("key twice: %s", r->key);
		if (r->type == PROM_NONE) {
			assert_null(r->family);
			continue;
		}
		if (!name_ok(r->family) ||
		    strncmp(r->family, "clamfs_", 7) != 0)
			fail_msg("bad family name %s", r->family);
		assert_true(r->help && r->help[0]);
		assert_true(ends_with(r->help, "."));
		/* counters end in _total, nothing else does */
		if (ends_with(r->family, "_total") != (r->type == PROM_COUNTER))
			fail_msg("%s: _total iff counter", r->family);
		if (r->type == PROM_INFO)
			assert_true(ends_with(r->family, "_info") && r->label);
		if (r->type == PROM_HISTOGRAM || r->type == PROM_SUMMARY)
			assert_non_null(r->suffix);
		else
			assert_null(r->suffix);
		assert_true(!r->label || (name_ok(r->label) &&
					  strcmp(r->label, "mountpoint") != 0));
		/* le is the histogram's */
		assert_true(!r->label || strcmp(r->label, "le") != 0 ||
			    r->type == PROM_HISTOGRAM);
		/* a family's rows are adjacent and agree */
		for (size_t j = 0; j < i; j++) {
			if (!t[j].family || strcmp(t[j].family, r->family))
				continue;
			if (!t[i - 1].family ||
			    strcmp(t[i - 1].family, r->family) != 0)
				fail_msg("%s: rows not adjacent", r->family);
			assert_int_equal(t[j].type, r->type);
			assert_string_equal(t[j].help, r->help);
		}
	}
}

static void two_mounts_one_exposition(void **state)
{
	static struct stats a, b;
	struct prom_mount m[2];
	char *ta, *tb, *out;

	stats_inc(&a, STAT_OPENS_CHECKED);
	stats_inc(&a, STAT_OPENS_CHECKED);
	stats_error(&a, CDP_ERR_SIZE_LIMIT);
	stats_inc(&b, STAT_OVERSIZE_DENIED);
	ta = render_stats(&a, CLAMD_LINES);
	tb = render_stats(&b, "clamd_up=unknown\n");
	m[0] = (struct prom_mount){"/srv/a", ta};
	m[1] = (struct prom_mount){"/srv/we\"ird\\\nb", tb};
	out = render_prom(m, 2);

	assert_int_equal(count(out, "# HELP clamfs_opens_checked_total "), 1);
	assert_int_equal(
		count(out, "# TYPE clamfs_opens_checked_total counter\n"), 1);
	assert_non_null(strstr(out, "\nclamfs_opens_checked_total{mountpoint="
				    "\"/srv/a\"} 2\n"));
	assert_non_null(strstr(out, "\nclamfs_opens_checked_total{mountpoint="
				    "\"/srv/we\\\"ird\\\\\\nb\"} 0\n"));
	assert_non_null(strstr(out, "clamfs_scan_errors_total{mountpoint="
				    "\"/srv/a\",category=\"size-limit\"} 1\n"));
	assert_non_null(strstr(out, "clamfs_opens_oversize_total{mountpoint="
				    "\"/srv/we\\\"ird\\\\\\nb\",decision="
				    "\"denied\"} 1\n"));
	/* every HELP is followed by its TYPE, every family once */
	for (const char *p = out; (p = strstr(p, "# HELP ")); p++) {
		const char *name = p + 7, *sp = strchr(name, ' ');
		char type[160];

		snprintf(type, sizeof(type), "# TYPE %.*s ", (int)(sp - name),
			 name);
		assert_non_null(strstr(p, type));
		assert_int_equal(count(out, type), 1);
	}
	/* clamd_up=unknown is no number: only mount a has the series */
	assert_int_equal(count(out, "clamfs_clamd_up{"), 1);
	assert_int_equal(count(out, "clamfs_clamd_info{"), 1);
	assert_non_null(strstr(out, "clamfs_clamd_info{mountpoint=\"/srv/a\","
				    "engine=\"1.4.6\",db_date=\"Mon Jan  1 "
				    "00:00:00 2024\"} 1\n"));
	/* the figures meant for people are no series */
	assert_null(strstr(out, "latency"));
	assert_null(strstr(out, "mount=\""));
	free(out);
	free(ta);
	free(tb);
}

/*
 * What changes only with the daemon is said once, as labels of fixed
 * words or a timestamp, so a query can join on it and an alert can
 * compare it: the passthrough state and its reason (the sentence stays
 * for people), the start time (no uptime series that changes every
 * scrape), the versions.
 */
static void info_and_start_time_are_stable_series(void **state)
{
	static struct stats s;
	static const struct stats_passthrough off = {
		.reason = "not-root",
		.text = "off (no CAP_SYS_ADMIN: not run as root)"};
	struct stats_sample x = {.uptime_seconds = 42,
				 .start_time_seconds = 1796380000,
				 .libfuse_version = "3.14.0"};
	struct prom_mount m;
	char *text, *out;

	stats_set_passthrough(&s, &off);
	text = render_with(&s, &x);
	assert_non_null(strstr(text, "\npassthrough=off (no CAP_SYS_ADMIN: "
				     "not run as root)\npassthrough_state=off"
				     "\npassthrough_reason=not-root\n"));
	assert_non_null(strstr(text, "\nstart_time_seconds=1796380000\n"));
	m = (struct prom_mount){"/m", text};
	out = render_prom(&m, 1);
	assert_non_null(strstr(out, "\nclamfs_passthrough_info{mountpoint="
				    "\"/m\",state=\"off\",reason=\"not-root\"}"
				    " 1\n"));
	assert_null(strstr(out, "CAP_SYS_ADMIN"));
	assert_non_null(strstr(out, "\nclamfs_start_time_seconds{mountpoint="
				    "\"/m\"} 1796380000\n"));
	assert_null(strstr(out, "uptime"));
	assert_non_null(strstr(out, "\nclamfs_build_info{mountpoint=\"/m\","
				    "version=\"" CLAMFS_VERSION "\",libfuse="
				    "\"3.14.0\"} 1\n"));
	free(out);
	free(text);

	/* before the kernel's INIT: off, and nobody can tell why yet */
	static struct stats fresh;
	text = render_with(&fresh, &x);
	m = (struct prom_mount){"/m", text};
	out = render_prom(&m, 1);
	assert_non_null(strstr(out, "state=\"off\",reason=\"unknown\"} 1\n"));
	free(out);
	free(text);
}

static void unknown_keys_are_left_out(void **state)
{
	struct prom_mount m = {"/m", "brand_new=7\nopens_checked=3\n"
				     "cache_entries=x\nno equals sign\n"};
	char *out = render_prom(&m, 1);

	assert_null(strstr(out, "brand_new"));
	assert_null(strstr(out, "cache_entries"));
	assert_string_equal(out, "# HELP clamfs_opens_checked_total Opens "
				 "that went through the scan gate.\n"
				 "# TYPE clamfs_opens_checked_total counter\n"
				 "clamfs_opens_checked_total{mountpoint=\"/m\"}"
				 " 3\n");
	free(out);
}

static void histogram_is_cumulative_in_seconds(void **state)
{
	static struct stats s;
	struct prom_mount m;
	char *text, *out;

	assert_int_equal(stats_scan_quantile(&s, 0.5), 0);
	stats_observe_scan(&s, 400);	   /* <= 0.0005 */
	stats_observe_scan(&s, 500);	   /* <= 0.0005: bounds are inclusive */
	stats_observe_scan(&s, 2000);	   /* <= 0.0025 */
	stats_observe_scan(&s, 200000000); /* over the largest bound */
	text = render_stats(&s, NULL);
	assert_non_null(strstr(text, "\nscan_duration_le_0.0005=2\n"));
	assert_non_null(strstr(text, "\nscan_duration_le_0.001=2\n"));
	assert_non_null(strstr(text, "\nscan_duration_le_0.0025=3\n"));
	assert_non_null(strstr(text, "\nscan_duration_le_120=3\n"));
	assert_non_null(strstr(text, "\nscan_duration_le_+Inf=4\n"));
	assert_non_null(strstr(text, "\nscan_duration_count=4\n"));
	assert_non_null(strstr(text, "\nscan_duration_sum_us=200002900\n"));
	assert_non_null(strstr(text, "\nscan_latency_p50_us=500\n"));
	assert_non_null(strstr(text, "\nscan_latency_p99_us=120000000\n"));
	assert_int_equal(stats_scan_quantile(&s, 0.75), 2500);
	for (unsigned int i = 1; i < STATS_SCAN_BUCKETS; i++)
		assert_true(stats_scan_bound_us(i) >
			    stats_scan_bound_us(i - 1));

	m = (struct prom_mount){"/m", text};
	out = render_prom(&m, 1);
	assert_non_null(strstr(out, "# TYPE clamfs_scan_duration_seconds "
				    "histogram\n"));
	assert_non_null(strstr(out, "\nclamfs_scan_duration_seconds_bucket{"
				    "mountpoint=\"/m\",le=\"0.0005\"} 2\n"));
	assert_non_null(strstr(out, "\nclamfs_scan_duration_seconds_bucket{"
				    "mountpoint=\"/m\",le=\"+Inf\"} 4\n"));
	assert_non_null(strstr(out, "\nclamfs_scan_duration_seconds_sum{"
				    "mountpoint=\"/m\"} 200.002900\n"));
	assert_non_null(strstr(out, "\nclamfs_scan_duration_seconds_count{"
				    "mountpoint=\"/m\"} 4\n"));
	assert_int_equal(count(out, "_bucket{"), STATS_SCAN_BUCKETS + 1);
	/* buckets in increasing order, +Inf last, then sum and count */
	assert_true(strstr(out, "le=\"0.0005\"") < strstr(out, "le=\"0.001\""));
	assert_true(strstr(out, "le=\"120\"") < strstr(out, "le=\"+Inf\""));
	assert_true(strstr(out, "le=\"+Inf\"") < strstr(out, "_sum{"));
	free(out);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_emitted_key_has_a_row),
		cmocka_unit_test(table_follows_the_naming_rules),
		cmocka_unit_test(two_mounts_one_exposition),
		cmocka_unit_test(unknown_keys_are_left_out),
		cmocka_unit_test(histogram_is_cumulative_in_seconds),
		cmocka_unit_test(backends_labelled_by_address),
		cmocka_unit_test(info_and_start_time_are_stable_series),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
