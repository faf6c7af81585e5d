// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * INI configuration reader: checks each key against its section in the
 * option table, then stores it with the table's own setter, the one -o
 * uses, so a key means exactly the same in the file and with -o.
 */
#include "inifile.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optable.h"

const char *inifile_section_of(const char *key)
{
	const struct opt_row *row = optable_find(key);

	/* an alias (max_threads) is for -o only: files use the name */
	if (!row || strcmp(row->name, key) != 0)
		return NULL;
	return row->section;
}

struct load_ctx {
	const char *path;
	struct clamfs_opts *opts;
	FILE *f;
	int line; /* of the text inih is handling */
	int err_line;
	char *err;
	size_t errlen;
};

static int fail(struct load_ctx *ctx, const char *key, const char *msg);

/*
 * fgets for inih that counts lines (so handler errors know theirs),
 * removes leading blanks (inih would take an indented line for the
 * continuation of the previous value) and names the key of a line that
 * lacks "=" (inih only reports its number).
 */
static char *read_line(char *buf, int size, void *stream)
{
	struct load_ctx *ctx = stream;
	char *s = fgets(buf, size, ctx->f), *start;
	size_t blanks;

	if (!s)
		return NULL;
	ctx->line++;
	blanks = strspn(s, " \t");
	start = s + blanks;
	memmove(s, start, strlen(start) + 1);
	if (*s == '[' && !strchr(s, ']')) {
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)strcspn(s, "\r\n"),
			 s);
		fail(ctx, name, "unclosed section name");
	} else if (*s && !strchr(";#[\r\n", *s) && !strpbrk(s, "=:")) {
		char key[64];

		snprintf(key, sizeof(key), "%.*s", (int)strcspn(s, " \t\r\n"),
			 s);
		fail(ctx, key,
		     "not 'key = value' (a flag takes yes or no: 'key = yes')");
	}
	return s;
}

static int fail(struct load_ctx *ctx, const char *key, const char *msg)
{
	if (ctx->err_line == 0) {
		ctx->err_line = ctx->line;
		snprintf(ctx->err, ctx->errlen, "%s:%d: %s: %s", ctx->path,
			 ctx->line, key, msg);
	}
	return 0;
}

static int on_key(void *user, const char *section, const char *key,
		  const char *value)
{
	struct load_ctx *ctx = user;
	const char *want = inifile_section_of(key);
	char msg[512], *arg = NULL;
	int ret;

	if (ctx->err_line)
		return 0;
	if (!want)
		return fail(ctx, key, "unknown key");
	if (strcmp(section, want) != 0) {
		snprintf(msg, sizeof(msg), "belongs in section [%s], not [%s]",
			 want, section);
		return fail(ctx, key, msg);
	}
	/* messages quote it as -o would be written */
	if (asprintf(&arg, "%s=%s", key, value) < 0)
		return fail(ctx, key, "out of memory");
	ret = optable_set(ctx->opts, optable_find(key), value, arg, msg,
			  sizeof(msg));
	free(arg);
	if (ret)
		return fail(ctx, key, msg);
	return 1;
}

int inifile_load(const char *path, struct clamfs_opts *opts, char *err,
		 size_t errlen)
{
	struct load_ctx ctx = {
		.path = path, .opts = opts, .err = err, .errlen = errlen};
	int ret;

	ctx.f = fopen(path, "re");
	if (!ctx.f) {
		ret = -errno;
		snprintf(err, errlen, "config %s: %s", path, strerror(errno));
		return ret;
	}
	ret = ini_parse_stream(read_line, &ctx, on_key, &ctx);
	fclose(ctx.f);
	if (ctx.err_line)
		return -EINVAL;
	if (ret != 0) {
		/* inih's own complaint: no '=' or an unclosed [section] */
		snprintf(err, errlen, "%s:%d: not 'key = value' or '[section]'",
			 path, ret);
		return -EINVAL;
	}
	return 0;
}
