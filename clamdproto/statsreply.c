// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * STATS reply parser: the thread figures of clamd's "THREADS:" line.  Pure.
 * Read by keyword, not by offset: clamd 1.4.6 prints
 * "THREADS: live 1  idle 0 max 4 idle-timeout 30", older and newer ones
 * may pad, reorder or add fields.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "internal.h"

/* clamd refuses MaxThreads above this; a bigger number is not clamd's. */
#define THREADS_MAX 1000000u

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The word at s[*i..len) (up to a blank), *i moved past it and the blanks
 * after it; its length. */
static size_t word(const char *s, size_t len, size_t *i, const char **w)
{
	size_t start;

	*w = s + *i;
	for (start = *i; *i < len && !blank(s[*i]); (*i)++)
		;
	start = *i - start;
	while (*i < len && blank(s[*i]))
		(*i)++;
	return start;
}

static int number(const char *w, size_t n, unsigned *out)
{
	unsigned v = 0;

	if (n == 0 || n > 7)
		return -EPROTO;
	for (size_t k = 0; k < n; k++) {
		if (w[k] < '0' || w[k] > '9')
			return -EPROTO;
		v = v * 10 + (unsigned)(w[k] - '0');
	}
	if (v > THREADS_MAX)
		return -EPROTO;
	*out = v;
	return 0;
}

static bool is(const char *w, size_t n, const char *kw)
{
	return n == strlen(kw) && memcmp(w, kw, n) == 0;
}

/* One "THREADS:" line, the prefix removed. */
static int parse_line(const char *s, size_t len, struct cdp_threads *t)
{
	bool have_max = false;
	size_t i = 0;

	while (i < len && blank(s[i]))
		i++;
	while (i < len) {
		const char *key, *val;
		size_t kn = word(s, len, &i, &key), vn;
		unsigned *slot = NULL, v;

		if (i >= len)
			break; /* a key without a value: ignored */
		vn = word(s, len, &i, &val);
		if (is(key, kn, "live"))
			slot = &t->live;
		else if (is(key, kn, "idle"))
			slot = &t->idle;
		else if (is(key, kn, "max"))
			slot = &t->max;
		if (!slot)
			continue; /* idle-timeout and whatever comes later */
		if (number(val, vn, &v) != 0)
			return -EPROTO;
		*slot = v;
		if (slot == &t->max)
			have_max = true;
	}
	return have_max && t->max > 0 ? 0 : -EPROTO;
}

int cdp_stats_parse_threads(const char *s, size_t len, struct cdp_threads *t)
{
	static const char prefix[] = "THREADS:";
	size_t p = sizeof(prefix) - 1, i = 0;

	memset(t, 0, sizeof(*t));
	if (len > CDP_STATS_MAX)
		return -EPROTO;
	while (i < len) {
		const char *nl = memchr(s + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - s) : len;

		/* the first pool's line: clamd has one ("POOLS: 1") */
		if (end - i >= p && memcmp(s + i, prefix, p) == 0) {
			int rc;

			if (memchr(s + i, '\0', end - i))
				return -EPROTO;
			rc = parse_line(s + i + p, end - i - p, t);
			if (rc)
				memset(t, 0, sizeof(*t));
			return rc;
		}
		i = end + 1;
	}
	return -EPROTO;
}
