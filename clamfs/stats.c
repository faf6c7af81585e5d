// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Names and text rendering of the gate's counters.
 */
#include "stats.h"

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
	[STAT_QUARANTINED] = "quarantined",
	[STAT_DELETED] = "deleted",
	[STAT_HOOK_RUNS] = "hook_runs",
	[STAT_HOOK_SUPPRESSED] = "hook_suppressed",
	[STAT_CACHE_CLEARS] = "cache_clears",
	[STAT_PASSTHROUGH_OPENS] = "opens_passthrough",
	[STAT_PASSTHROUGH_FAILED] = "passthrough_failed",
	[STAT_READS] = "daemon_reads",
	[STAT_WRITES] = "daemon_writes",
};

const char *stats_name(enum stat_counter c)
{
	return names[c];
}

void stats_error(struct stats *s, enum cdp_errcat cat)
{
	if ((unsigned)cat <= CDP_ERR_LOCAL)
		atomic_fetch_add_explicit(&s->errors[cat], 1,
					  memory_order_relaxed);
}

void stats_set_passthrough(struct stats *s, const char *state)
{
	atomic_store(&s->passthrough, state);
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

size_t stats_render(struct stats *s, const char *extra, char *buf,
		    size_t len)
{
	size_t used = 0;

	for (int i = 0; i < STAT_COUNT; i++)
		used = put(buf, len, used, "%s=%llu\n", names[i],
			   (unsigned long long)stats_get(s, i));
	for (int cat = CDP_ERR_CONNECT; cat <= CDP_ERR_LOCAL; cat++)
		used = put(buf, len, used, "errors_%s=%llu\n",
			   cdp_errcat_name(cat),
			   (unsigned long long)atomic_load(&s->errors[cat]));
	used = put(buf, len, used, "passthrough=%s\n",
		   atomic_load(&s->passthrough) ? atomic_load(&s->passthrough)
						: "off");
	if (extra)
		used = put(buf, len, used, "%s", extra);
	return used;
}
