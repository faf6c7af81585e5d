// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * INI configuration reader: checks each key against its section, then
 * applies it through the command line parser, so a key means exactly the
 * same in the file and with -o.
 */
#include "config.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <string.h>

#include "opts.h"

static const struct {
	const char *key;
	const char *section;
} config_keys[] = {
	{"backend", "fuse"},
	{"mountpoint", "fuse"},
	{"options", "fuse"},
	{"threads", "fuse"},
	{"clone_fd", "fuse"},
	{"passthrough", "fuse"},
	{"attr_timeout", "fuse"},
	{"entry_timeout", "fuse"},
	{"negative_timeout", "fuse"},
	{"no_default_permissions", "fuse"},
	{"clamd", "clamd"},
	{"clamd_connections", "clamd"},
	{"version_check", "clamd"},
	{"clamd_wait", "clamd"},
	{"scan_mode", "scan"},
	{"scan_timeout", "scan"},
	{"scan_threads", "scan"},
	{"max_scan_size", "scan"},
	{"oversize", "scan"},
	{"include", "scan"},
	{"exclude", "scan"},
	{"glob_case", "scan"},
	{"exempt_uid", "scan"},
	{"exempt_gid", "scan"},
	{"scan_on_close", "scan"},
	{"cache_entries", "cache"},
	{"cache_ttl", "cache"},
	{"racy_window", "cache"},
	{"on_infected", "action"},
	{"on_error", "action"},
	{"deny_errno", "action"},
	{"quarantine_dir", "action"},
	{"infected_cmd", "action"},
	{"infected_cmd_rate", "action"},
	{"log_level", "log"},
};

const char *config_section_of(const char *key)
{
	for (size_t i = 0; i < sizeof(config_keys) / sizeof(config_keys[0]);
	     i++)
		if (strcmp(config_keys[i].key, key) == 0)
			return config_keys[i].section;
	return NULL;
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
	const char *want = config_section_of(key);
	char msg[512];

	if (ctx->err_line)
		return 0;
	if (!want)
		return fail(ctx, key, "unknown key");
	if (strcmp(section, want) != 0) {
		snprintf(msg, sizeof(msg), "belongs in section [%s], not [%s]",
			 want, section);
		return fail(ctx, key, msg);
	}
	if (opts_apply(ctx->opts, key, value, msg, sizeof(msg)) != 0)
		return fail(ctx, key, msg);
	return 1;
}

int config_load(const char *path, struct clamfs_opts *opts, char *err,
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
