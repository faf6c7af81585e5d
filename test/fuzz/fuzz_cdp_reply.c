// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libFuzzer target for clamdproto's reply handling: the input is a byte
 * stream from a hostile clamd, cut into reads of fuzzer-chosen sizes, framed
 * and parsed as scan, session, VERSION and STATS replies.  Besides memory
 * safety it checks that no verdict is ever read from anything but the end of a
 * line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {NULL, "fd[]", "stream", "/p: x"};

static int ends_with(const char *s, size_t len, const char *suf)
{
	size_t n = strlen(suf);

	return len >= n && memcmp(s + len - n, suf, n) == 0;
}

/* A STATS reply is one framed line of several text lines. */
static void check_stats(const char *line, size_t len)
{
	struct cdp_threads t;

	if (cdp_stats_parse_threads(line, len, &t) == 0) {
		if (t.max == 0 || t.max > 1000000 ||
		    !memmem(line, len, "THREADS:", 8))
			abort();
	} else if (t.max || t.live || t.idle) {
		abort();
	}
}

static void check_line(const char *line, size_t len, const char *name,
		       int session)
{
	struct cdp_result res;
	struct cdp_version ver;
	unsigned id;
	size_t skip = 0;
	int rc;

	if (session && cdp_reply_split_id(line, len, &id, &skip) == 0) {
		if (id == 0 || skip > len)
			abort();
		line += skip;
		len -= skip;
	}
	rc = cdp_reply_parse(line, len, name, &res);
	if (memchr(res.text, '\0', sizeof(res.text)) == NULL)
		abort();
	switch (res.verdict) {
	case CDP_CLEAN:
		if (rc || !ends_with(line, len, ": OK") || res.cat)
			abort();
		break;
	case CDP_INFECTED:
		if (rc || !ends_with(line, len, " FOUND") || !res.text[0] ||
		    strstr(line, res.text) == NULL)
			abort();
		break;
	case CDP_ERROR:
		if (res.cat == CDP_ERR_NONE ||
		    (rc && res.cat != CDP_ERR_PROTOCOL))
			abort();
		break;
	default:
		abort();
	}
	if (cdp_version_parse(line, len, &ver) == 0) {
		if (!ver.engine[0] || strncmp(line, "ClamAV ", 7) != 0)
			abort();
	} else if (ver.engine[0] || ver.db_version) {
		abort();
	}
	check_stats(line, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cdp_rbuf rb;
	size_t max, pos = 0;
	const char *name;
	int session;

	if (size < 2)
		return 0;
	name = names[data[0] & 3];
	session = (data[0] >> 2) & 1;
	/* Small bounds reach the size limit with short inputs. */
	max = (data[0] & 0x80) ? 64 : CDP_TEXT_MAX;
	data++;
	size--;
	if (cdp_rbuf_init(&rb, max + 16))
		return 0;
	while (pos < size) {
		/* Read sizes from the data itself: 1..16 bytes, or the rest. */
		size_t want = (data[pos] & 0x10) ? (data[pos] & 0x0f) + 1
						 : size - pos;
		size_t space, n;
		char *dst = cdp_rbuf_space(&rb, &space);
		const char *line;
		size_t len;
		int rc;

		n = want < size - pos ? want : size - pos;
		if (n > space)
			n = space;
		if (n == 0)
			break;
		memcpy(dst, data + pos, n);
		cdp_rbuf_added(&rb, n);
		pos += n;
		while ((rc = cdp_rbuf_take(&rb, max, &line, &len)) == 1) {
			if (len >= max || line[len] != '\0')
				abort();
			check_line(line, len, name, session);
		}
		if (rc < 0)
			break; /* oversized: the connection would be dropped */
	}
	{
		size_t len;
		const char *rest = cdp_rbuf_rest(&rb, &len);

		if (rest && rest[len] != '\0')
			abort();
	}
	cdp_rbuf_free(&rb);
	return 0;
}
