// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The scan reply parser: one reply line in, one verdict out.  Pure and
 * allocation-free so it can be fuzzed.  Verdicts are read from the end of
 * the line because the start echoes a path that anyone may have named.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "internal.h"

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

static bool equals(const char *s, size_t len, const char *lit)
{
	return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

/* Last ": " in s[0..len), or NULL. */
static const char *last_sep(const char *s, size_t len)
{
	while (len >= 2) {
		len--;
		if (s[len - 1] == ':' && s[len] == ' ')
			return s + len - 1;
	}
	return NULL;
}

/* Does the object name clamd echoed match the one we expect? */
static bool name_matches(const char *obj, size_t olen, const char *name)
{
	size_t nlen;

	if (!name)
		return olen > 0;
	nlen = strlen(name);
	if (nlen >= 2 && name[nlen - 2] == '[' && name[nlen - 1] == ']') {
		/* "fd[]": clamd prints its own descriptor number. */
		size_t plen = nlen - 1, i;

		if (olen < plen + 2 || memcmp(obj, name, plen) != 0 ||
		    obj[olen - 1] != ']')
			return false;
		for (i = plen; i < olen - 1; i++)
			if (obj[i] < '0' || obj[i] > '9')
				return false;
		return true;
	}
	return olen == nlen && memcmp(obj, name, nlen) == 0;
}

/*
 * Length of a leading "<name>: " in an error reply, or 0.  Without a @name,
 * only the names clamd gives to descriptors and streams are recognised.
 */
static size_t strip_len(const char *s, size_t len, const char *name)
{
	const char *sep;
	size_t nlen;

	if (name && !(strlen(name) >= 2 && name[strlen(name) - 1] == ']')) {
		nlen = strlen(name);
		if (len > nlen + 2 && memcmp(s, name, nlen) == 0 &&
		    s[nlen] == ':' && s[nlen + 1] == ' ')
			return nlen + 2;
		return 0;
	}
	sep = memchr(s, ':', len);
	if (!sep || (size_t)(sep - s) + 2 >= len || sep[1] != ' ')
		return 0;
	nlen = (size_t)(sep - s);
	if (name ? name_matches(s, nlen, name)
		 : (name_matches(s, nlen, "fd[]") || equals(s, nlen, "stream")))
		return nlen + 2;
	return 0;
}

static void copy_text(struct cdp_result *res, const char *s, size_t len)
{
	if (len >= sizeof(res->text))
		len = sizeof(res->text) - 1;
	memcpy(res->text, s, len);
	res->text[len] = '\0';
}

static int proto_error(struct cdp_result *res, const char *why)
{
	cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO, "%s", why);
	return -EPROTO;
}

/* clamd's replies that carry no object name and no " ERROR" suffix. */
static const char *const bare_errors[] = {
	"UNKNOWN COMMAND",
	"COMMAND UNAVAILABLE",
	"COMMAND READ TIMED OUT",
};

int cdp_reply_parse(const char *s, size_t len, const char *name,
		    struct cdp_result *res)
{
	const char *sep;
	size_t i;

	if (len == 0)
		return proto_error(res, "empty reply");
	if (len >= CDP_TEXT_MAX)
		return proto_error(res, "reply too long");
	if (memchr(s, '\0', len))
		return proto_error(res, "NUL inside reply");

	for (i = 0; i < sizeof(bare_errors) / sizeof(bare_errors[0]); i++) {
		if (equals(s, len, bare_errors[i])) {
			cdp_res_error(res, CDP_ERR_CLAMD, 0, "%s",
				      bare_errors[i]);
			return 0;
		}
	}

	if (ends_with(s, len, " ERROR")) {
		size_t mlen = len - 6;

		if (equals(s, mlen, "INSTREAM size limit exceeded.")) {
			cdp_res_error(res, CDP_ERR_SIZE_LIMIT, 0,
				      "INSTREAM size limit exceeded");
			return 0;
		}
		/* Drop the echoed name only when it is provably ours; clamd's
		 * messages contain ": " themselves ("lstat() failed: ..."). */
		i = strip_len(s, mlen, name);
		s += i;
		mlen -= i;
		res->verdict = CDP_ERROR;
		res->cat = CDP_ERR_CLAMD;
		res->err = 0;
		if (mlen == 0)
			copy_text(res, "ERROR", 5);
		else
			copy_text(res, s, mlen);
		return 0;
	}

	if (ends_with(s, len, " FOUND")) {
		size_t body = len - 6;
		const char *sig;

		sep = last_sep(s, body);
		if (!sep)
			return proto_error(res, "FOUND without a name");
		sig = sep + 2;
		if (sig >= s + body)
			return proto_error(res, "FOUND without a signature");
		if (!name_matches(s, (size_t)(sep - s), name))
			return proto_error(res, "FOUND for another object");
		res->verdict = CDP_INFECTED;
		res->cat = CDP_ERR_NONE;
		res->err = 0;
		copy_text(res, sig, (size_t)(s + body - sig));
		return 0;
	}

	if (ends_with(s, len, ": OK")) {
		if (!name_matches(s, len - 4, name))
			return proto_error(res, "OK for another object");
		res->verdict = CDP_CLEAN;
		res->cat = CDP_ERR_NONE;
		res->err = 0;
		res->text[0] = '\0';
		return 0;
	}

	return proto_error(res, "unparseable reply");
}

int cdp_reply_split_id(const char *s, size_t len, unsigned *idp, size_t *restp)
{
	unsigned long v = 0;
	size_t i = 0;

	if (len < 3 || s[0] < '1' || s[0] > '9')
		return -EPROTO;
	while (i < len && s[i] >= '0' && s[i] <= '9') {
		v = v * 10 + (unsigned long)(s[i] - '0');
		if (v > UINT_MAX)
			return -EPROTO;
		i++;
	}
	if (i + 2 > len || s[i] != ':' || s[i + 1] != ' ')
		return -EPROTO;
	*idp = (unsigned)v;
	*restp = i + 2;
	return 0;
}
