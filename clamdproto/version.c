// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * VERSION reply parser: "ClamAV <engine>[/<dbversion>/<dbdate>]".  Pure; the
 * short form is what clamd prints when it has only custom signatures, so a
 * missing database version is normal, not an error.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static bool engine_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || c == '_' ||
	       c == '+' || c == '~';
}

/* clamd formats the date with ctime(): "Mon Jan  1 09:00:00 2024". */
static time_t parse_date(const char *s)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a %b %e %H:%M:%S %Y", &tm);
	if (!end || *end != '\0')
		return 0;
	return timegm(&tm);
}

int cdp_version_parse(const char *s, size_t len, struct cdp_version *ver)
{
	static const char prefix[] = "ClamAV ";
	size_t i = sizeof(prefix) - 1, start;
	unsigned long db = 0;

	memset(ver, 0, sizeof(*ver));
	if (len >= CDP_TEXT_MAX || memchr(s, '\0', len))
		return -EPROTO;
	if (len <= i || memcmp(s, prefix, i) != 0)
		return -EPROTO;

	start = i;
	while (i < len && engine_char(s[i]))
		i++;
	if (i == start || i - start >= sizeof(ver->engine))
		return -EPROTO;
	memcpy(ver->engine, s + start, i - start);
	ver->engine[i - start] = '\0';
	if (i == len)
		return 0;

	if (s[i++] != '/')
		goto bad;
	start = i;
	while (i < len && s[i] >= '0' && s[i] <= '9') {
		if (db > (ULONG_MAX - 9) / 10)
			goto bad;
		db = db * 10 + (unsigned long)(s[i] - '0');
		i++;
	}
	if (i == start || i >= len || s[i] != '/')
		goto bad;
	i++;
	if (i == len || len - i >= sizeof(ver->db_date))
		goto bad;
	for (start = i; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			goto bad;
	ver->db_version = db;
	memcpy(ver->db_date, s + start, len - start);
	ver->db_date[len - start] = '\0';
	ver->db_time = parse_date(ver->db_date);
	return 0;
bad:
	memset(ver, 0, sizeof(*ver));
	return -EPROTO;
}
