// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * struct cdp_result helpers and the names of verdicts and error categories.
 * Kept apart so the pure parsers and the I/O code fill results one way.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *cdp_errcat_name(enum cdp_errcat cat)
{
	switch (cat) {
	case CDP_ERR_NONE:
		return "none";
	case CDP_ERR_CONNECT:
		return "connect";
	case CDP_ERR_TIMEOUT:
		return "timeout";
	case CDP_ERR_PROTOCOL:
		return "protocol";
	case CDP_ERR_SIZE_LIMIT:
		return "size-limit";
	case CDP_ERR_CLAMD:
		return "clamd";
	case CDP_ERR_CANCELLED:
		return "cancelled";
	case CDP_ERR_LOCAL:
		return "local";
	}
	return "unknown";
}

const char *cdp_verdict_name(enum cdp_verdict v)
{
	switch (v) {
	case CDP_CLEAN:
		return "clean";
	case CDP_INFECTED:
		return "infected";
	case CDP_ERROR:
		return "error";
	}
	return "unknown";
}

static void res_vset(struct cdp_result *res, enum cdp_verdict v,
		     enum cdp_errcat cat, int err, const char *fmt, va_list ap)
{
	res->verdict = v;
	res->cat = cat;
	res->err = err;
	vsnprintf(res->text, sizeof(res->text), fmt, ap);
}

void cdp_res_set(struct cdp_result *res, enum cdp_verdict v,
		 enum cdp_errcat cat, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	res_vset(res, v, cat, err, fmt, ap);
	va_end(ap);
}

void cdp_res_error(struct cdp_result *res, enum cdp_errcat cat, int err,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	res_vset(res, CDP_ERROR, cat, err, fmt, ap);
	va_end(ap);
}

void cdp_res_io(struct cdp_result *res, int rc, const char *what)
{
	int e = -rc;

	switch (e) {
	case ETIMEDOUT:
		cdp_res_error(res, CDP_ERR_TIMEOUT, e, "%s: deadline passed",
			      what);
		break;
	case ECANCELED:
		cdp_res_error(res, CDP_ERR_CANCELLED, e, "%s: cancelled", what);
		break;
	case ENODATA:
		cdp_res_error(res, CDP_ERR_PROTOCOL, e,
			      "%s: connection closed without a reply", what);
		break;
	case EMSGSIZE:
		cdp_res_error(res, CDP_ERR_PROTOCOL, e,
			      "%s: reply longer than %d bytes", what,
			      CDP_TEXT_MAX - 1);
		break;
	case EPROTO:
		cdp_res_error(res, CDP_ERR_PROTOCOL, e,
			      "%s: connection closed mid-reply", what);
		break;
	default:
		cdp_res_error(res, CDP_ERR_PROTOCOL, e, "%s: %s", what,
			      strerror(e));
		break;
	}
}
