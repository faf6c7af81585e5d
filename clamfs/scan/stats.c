// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Names and text rendering of the gate's counters, and the scan duration
 * histogram.
 */
#include "stats.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

static const char *const names[STAT_COUNT] = {
	[STAT_OPENS_CHECKED] = "opens_checked",
	[STAT_EMPTY] = "opens_empty",
	[STAT_CACHE_HITS] = "opens_cache_hit",
	[STAT_SCANS_WAITED] = "opens_scanned",
	[STAT_INFECTED] = "infected",
	[STAT_DENIED] = "opens_denied",
	[STAT_EXCLUDED] = "opens_excluded",
	[STAT_OVERSIZE_ALLOWED] = "opens_oversize_allowed",
	[STAT_OVERSIZE_DENIED] = "opens_oversize_denied",
	[STAT_ERRORS_DENIED] = "opens_error_denied",
	[STAT_ERRORS_ALLOWED] = "opens_error_allowed",
	[STAT_INTERRUPTED] = "opens_interrupted",
	[STAT_CLOSE_SCANS] = "close_scans",
	[STAT_AHEAD_SCANS] = "ahead_scans",
	[STAT_AHEAD_CACHED] = "ahead_cached",
	[STAT_AHEAD_DIRS] = "ahead_dirs",
	[STAT_AHEAD_DIR_SCANS] = "ahead_dir_scans",
	[STAT_QUARANTINED] = "quarantined",
	[STAT_DELETED] = "deleted",
	[STAT_HOOK_RUNS] = "hook_runs",
	[STAT_HOOK_SUPPRESSED] = "hook_suppressed",
	[STAT_CACHE_CLEARS] = "cache_clears",
	[STAT_PASSTHROUGH_OPENS] = "opens_passthrough",
	[STAT_PASSTHROUGH_FAILED] = "passthrough_failed",
	[STAT_READS] = "daemon_reads",
	[STAT_WRITES] = "daemon_writes",
	[STAT_LIMITS] = "limits_exceeded",
	[STAT_REDECIDED] = "opens_redecided",
	[STAT_GROUPS_READ] = "caller_groups_read",
	[STAT_WATCH_EVENTS] = "watch_events",
	[STAT_WATCH_OVERFLOWS] = "watch_overflows",
};

static const uint64_t scan_bounds_us[STATS_SCAN_BUCKETS] = {
	500,	 1000,	   2500,     5000,     10000,	  25000,
	50000,	 100000,   250000,   500000,   1000000,	  2500000,
	5000000, 10000000, 30000000, 60000000, 120000000,
};

void stats_error(struct stats *s, enum cdp_errcat cat)
{
	if ((unsigned)cat <= CDP_ERR_LOCAL)
		atomic_fetch_add_explicit(&s->errors[cat], 1,
					  memory_order_relaxed);
}

void stats_set_backend_watch(struct stats *s, bool on)
{
	atomic_store(&s->backend_watch, on);
}

void stats_set_writeback_cache(struct stats *s, bool on)
{
	atomic_store(&s->writeback_cache, on);
}

void stats_set_passthrough(struct stats *s,
			   const struct stats_passthrough *state)
{
	atomic_store(&s->passthrough, state);
}

uint64_t stats_scan_bound_us(unsigned int i)
{
	return i < STATS_SCAN_BUCKETS ? scan_bounds_us[i] : UINT64_MAX;
}

void stats_observe_scan(struct stats *s, uint64_t usec)
{
	unsigned int b = 0;

	/* a handful of compares: cheaper than the scan by far */
	while (b < STATS_SCAN_BUCKETS && usec > scan_bounds_us[b])
		b++;
	atomic_fetch_add_explicit(&s->scan_le[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->scan_sum_us, usec, memory_order_relaxed);
}

/*
 * The buckets as cumulative counts, one load each: scans ending meanwhile
 * may be in some and not in others, but the counts never decrease and
 * the last one is the count (what Prometheus needs).
 */
static void scan_snapshot(struct stats *s, uint64_t cum[STATS_SCAN_BUCKETS + 1])
{
	uint64_t total = 0;

	for (int i = 0; i <= STATS_SCAN_BUCKETS; i++) {
		total += atomic_load_explicit(&s->scan_le[i],
					      memory_order_relaxed);
		cum[i] = total;
	}
}

static uint64_t quantile(const uint64_t cum[STATS_SCAN_BUCKETS + 1], double q)
{
	uint64_t total = cum[STATS_SCAN_BUCKETS];

	if (total == 0)
		return 0;
	for (int i = 0; i < STATS_SCAN_BUCKETS; i++)
		if ((double)cum[i] >= q * (double)total)
			return scan_bounds_us[i];
	return scan_bounds_us[STATS_SCAN_BUCKETS - 1];
}

uint64_t stats_scan_quantile(struct stats *s, double q)
{
	uint64_t cum[STATS_SCAN_BUCKETS + 1];

	scan_snapshot(s, cum);
	return quantile(cum, q);
}

/* Microseconds as decimal seconds without trailing zeros: "0.0025". */
static void seconds(char *out, size_t len, uint64_t us)
{
	int n = snprintf(out, len, "%" PRIu64 ".%06" PRIu64, us / 1000000,
			 us % 1000000);

	while (n > 0 && (size_t)n < len && out[n - 1] == '0')
		out[--n] = '\0';
	if (n > 0 && (size_t)n < len && out[n - 1] == '.')
		out[--n] = '\0';
}

/* snprintf that keeps counting past the end of buf. */
static size_t put(char *buf, size_t len, size_t used, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(used < len ? buf + used : NULL,
		      used < len ? len - used : 0, fmt, ap);
	va_end(ap);
	return used + (n > 0 ? (size_t)n : 0);
}

/* The address as one line's value: backslash and newline escaped. */
static size_t put_escaped(char *buf, size_t len, size_t used, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			used = put(buf, len, used, "\\\\");
		else if (*s == '\n')
			used = put(buf, len, used, "\\n");
		else
			used = put(buf, len, used, "%c", *s);
	}
	return used;
}

/*
 * Indexed, not keyed by address: an address may hold '=' or anything
 * else a key cannot, and the index is what the fleet's log lines and
 * configuration order share.
 */
static size_t render_backends(const struct stats_sample *x, char *buf,
			      size_t len, size_t used)
{
	used = put(buf, len, used, "backends=%zu\n", x->nbackends);
	for (size_t i = 0; i < x->nbackends; i++) {
		const struct cdp_backend_stats *b = &x->backends[i];

		used = put(buf, len, used, "backend_%zu_addr=", i);
		used = put_escaped(buf, len, used, b->addr ? b->addr : "");
		used = put(
			buf, len, used,
			"\nbackend_%zu_state=%s\nbackend_%zu_healthy=%d"
			"\nbackend_%zu_weight=%u\nbackend_%zu_conns=%u"
			"\nbackend_%zu_threads=%u\nbackend_%zu_inflight=%u\n",
			i, b->healthy ? "healthy" : "ejected", i,
			b->healthy ? 1 : 0, i, b->weight, i, b->max_conns, i,
			b->threads, i, b->inflight);
		used = put(buf, len, used,
			   "backend_%zu_scans=%" PRIu64
			   "\nbackend_%zu_errors=%" PRIu64
			   "\nbackend_%zu_ejections=%" PRIu64
			   "\nbackend_%zu_latency_last_ms=%" PRIu64
			   "\nbackend_%zu_latency_avg_ms=%" PRIu64
			   "\nbackend_%zu_latency_max_ms=%" PRIu64
			   "\nbackend_%zu_scan_time_sum_us=%" PRIu64
			   "\nbackend_%zu_scan_time_count=%" PRIu64 "\n",
			   i, b->scans, i, b->errors, i, b->ejections, i,
			   b->last_ms, i, b->avg_ms, i, b->max_ms, i,
			   b->total_us, i, b->timed);
	}
	return used;
}

static size_t render_passthrough(const struct stats_passthrough *p, char *buf,
				 size_t len, size_t used)
{
	/* not negotiated yet: no INIT came */
	static const struct stats_passthrough unknown = {
		.reason = "unknown", .text = "off (not negotiated yet)"};

	if (!p)
		p = &unknown;
	return put(buf, len, used,
		   "passthrough=%s\npassthrough_state=%s\n"
		   "passthrough_reason=%s\n",
		   p->text, p->on ? "on" : "off", p->reason);
}

static size_t render_writeback_cache(bool on, char *buf, size_t len,
				     size_t used)
{
	return put(buf, len, used, "writeback_cache=%s\n", on ? "on" : "off");
}

static size_t render_sample(const struct stats_sample *x, char *buf, size_t len,
			    size_t used)
{
	const struct vcache_counters *vc = &x->vc;
	const struct scanq_counters *qc = &x->qc;

	used = put(buf, len, used,
		   "cache_hits=%" PRIu64 "\ncache_misses=%" PRIu64
		   "\ncache_evictions=%" PRIu64 "\ncache_entries=%" PRIu64 "\n",
		   vc->hits, vc->misses, vc->evictions, vc->entries);
	used = put(buf, len, used,
		   "store_hits=%" PRIu64 "\nstore_writes=%" PRIu64
		   "\nstore_dropped=%" PRIu64 "\nstore_rebuilds=%" PRIu64
		   "\nstore_write_failures=%" PRIu64 "\nstore_entries=%" PRIu64
		   "\n",
		   x->sc.hits, x->sc.writes, x->sc.dropped, x->sc.rebuilds,
		   x->sc.write_fails, x->sc.entries);
	used = put(buf, len, used,
		   "scans=%" PRIu64 "\nscans_joined=%" PRIu64
		   "\nscan_retries=%" PRIu64 "\nscans_cancelled=%" PRIu64
		   "\nscans_queued=%u\nscans_expired=%" PRIu64
		   "\nscans_rejected=%" PRIu64
		   "\nscans_rejected_waiters=%" PRIu64
		   "\nscans_background=%" PRIu64
		   "\nscans_background_dropped=%" PRIu64
		   "\nscans_spared=%" PRIu64 "\n",
		   qc->scans, qc->joined, qc->retries, qc->cancelled,
		   qc->queued, qc->expired, qc->rejected, qc->rejected_waiters,
		   qc->background, qc->background_dropped, qc->spared);
	used = put(buf, len, used,
		   "inodes=%zu\ninode_fds=%zu\ninode_reopens=%" PRIu64
		   "\nuptime_seconds=%lld\nstart_time_seconds=%lld\n"
		   "version=%s\n",
		   x->inodes, x->inode_fds, x->inode_reopens, x->uptime_seconds,
		   x->start_time_seconds, CLAMFS_VERSION);
	if (x->libfuse_version)
		used = put(buf, len, used, "libfuse_version=%s\n",
			   x->libfuse_version);
	if (x->clamd)
		used = put(buf, len, used, "%s", x->clamd);
	if (x->backends)
		used = render_backends(x, buf, len, used);
	return used;
}

size_t stats_render(struct stats *s, const struct stats_sample *x, char *buf,
		    size_t len)
{
	uint64_t cum[STATS_SCAN_BUCKETS + 1];
	size_t used = 0;
	char le[32];

	for (int i = 0; i < STAT_COUNT; i++)
		used = put(buf, len, used, "%s=%llu\n", names[i],
			   (unsigned long long)stats_get(s, i));
	for (int cat = CDP_ERR_CONNECT; cat <= CDP_ERR_LOCAL; cat++)
		used = put(buf, len, used, "errors_%s=%llu\n",
			   cdp_errcat_name(cat),
			   (unsigned long long)atomic_load(&s->errors[cat]));
	used = render_passthrough(atomic_load(&s->passthrough), buf, len, used);
	used = render_writeback_cache(atomic_load(&s->writeback_cache), buf,
				      len, used);
	used = put(buf, len, used, "backend_watch=%s\n",
		   atomic_load(&s->backend_watch) ? "on" : "off");
	scan_snapshot(s, cum);
	for (int i = 0; i < STATS_SCAN_BUCKETS; i++) {
		seconds(le, sizeof(le), scan_bounds_us[i]);
		used = put(buf, len, used, "scan_duration_le_%s=%" PRIu64 "\n",
			   le, cum[i]);
	}
	used = put(buf, len, used,
		   "scan_duration_le_+Inf=%" PRIu64
		   "\nscan_duration_sum_us=%" PRIu64
		   "\nscan_duration_count=%" PRIu64 "\n",
		   cum[STATS_SCAN_BUCKETS],
		   (uint64_t)atomic_load_explicit(&s->scan_sum_us,
						  memory_order_relaxed),
		   cum[STATS_SCAN_BUCKETS]);
	/* for people: Prometheus computes quantiles from the buckets */
	used = put(buf, len, used,
		   "scan_latency_p50_us=%" PRIu64
		   "\nscan_latency_p90_us=%" PRIu64
		   "\nscan_latency_p99_us=%" PRIu64 "\n",
		   quantile(cum, 0.5), quantile(cum, 0.9), quantile(cum, 0.99));
	if (x)
		used = render_sample(x, buf, len, used);
	return used;
}
