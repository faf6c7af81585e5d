// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_opt-based parser for the daemon's command line. Values are checked
 * here, not by fuse_opt's sscanf formats, so that a bad value gets a message
 * naming the option and the accepted range.
 */
#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum opt_key {
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_SINGLE,
	KEY_HELP,
	KEY_VERSION,
	KEY_BACKEND,
	KEY_THREADS,
	KEY_CLONE_FD,
	KEY_ATTR_TIMEOUT,
	KEY_ENTRY_TIMEOUT,
	KEY_NEGATIVE_TIMEOUT,
	KEY_NO_DEFAULT_PERMISSIONS,
};

static const struct fuse_opt opt_spec[] = {
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("backend=", KEY_BACKEND),
	FUSE_OPT_KEY("threads=", KEY_THREADS),
	FUSE_OPT_KEY("max_threads=", KEY_THREADS),
	FUSE_OPT_KEY("clone_fd", KEY_CLONE_FD),
	FUSE_OPT_KEY("attr_timeout=", KEY_ATTR_TIMEOUT),
	FUSE_OPT_KEY("entry_timeout=", KEY_ENTRY_TIMEOUT),
	FUSE_OPT_KEY("negative_timeout=", KEY_NEGATIVE_TIMEOUT),
	FUSE_OPT_KEY("no_default_permissions", KEY_NO_DEFAULT_PERMISSIONS),
	FUSE_OPT_END,
};

struct parse_ctx {
	struct clamfs_opts *opts;
	char *nonopt[2];
	int n_nonopt;
	char *err;
	size_t errlen;
	int error; /* first error seen, negative errno */
};

static int parse_fail(struct parse_ctx *ctx, int error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int parse_fail(struct parse_ctx *ctx, int error, const char *fmt, ...)
{
	va_list ap;

	if (ctx->error == 0) {
		ctx->error = error;
		va_start(ap, fmt);
		vsnprintf(ctx->err, ctx->errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const char *opt_value(const char *arg)
{
	const char *eq = strchr(arg, '=');

	return eq ? eq + 1 : "";
}

static int parse_timeout(struct parse_ctx *ctx, const char *arg, double *out)
{
	const char *val = opt_value(arg);
	char *end;
	double d;

	errno = 0;
	d = strtod(val, &end);
	if (*val == '\0' || *end != '\0' || errno || !isfinite(d) || d < 0 ||
	    d > 86400.0)
		return parse_fail(ctx, -EINVAL,
				  "bad value in '%s': want seconds, 0 to 86400",
				  arg);
	*out = d;
	return 0;
}

static int parse_threads(struct parse_ctx *ctx, const char *arg)
{
	const char *val = opt_value(arg);
	unsigned long n;
	char *end;

	errno = 0;
	n = strtoul(val, &end, 10);
	if (*val < '0' || *val > '9' || *end != '\0' || errno || n < 1 ||
	    n > OPTS_MAX_THREADS)
		return parse_fail(ctx, -EINVAL,
				  "bad value in '%s': want 1 to %d", arg,
				  OPTS_MAX_THREADS);
	ctx->opts->threads = (unsigned int)n;
	return 0;
}

static int set_string(struct parse_ctx *ctx, char **dst, const char *val)
{
	char *copy = strdup(val);

	if (!copy)
		return parse_fail(ctx, -ENOMEM, "out of memory");
	free(*dst);
	*dst = copy;
	return 0;
}

/* fuse_opt callback: 1 keeps the argument for libfuse, 0 drops it. */
static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_ctx *ctx = data;
	struct clamfs_opts *opts = ctx->opts;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (ctx->n_nonopt == 2)
			return parse_fail(ctx, -EINVAL,
					  "unexpected argument '%s'", arg);
		if (*arg == '\0')
			return parse_fail(ctx, -EINVAL, "empty path argument");
		ctx->nonopt[ctx->n_nonopt] = strdup(arg);
		if (!ctx->nonopt[ctx->n_nonopt])
			return parse_fail(ctx, -ENOMEM, "out of memory");
		ctx->n_nonopt++;
		return 0;
	case FUSE_OPT_KEY_OPT:
		if (arg[0] == '-' && arg[1] != '\0')
			return parse_fail(ctx, -EINVAL, "unknown option '%s'",
					  arg);
		return 1; /* a mount option: libfuse judges it */
	case KEY_FOREGROUND:
		opts->foreground = true;
		return 0;
	case KEY_DEBUG:
		opts->debug = true;
		opts->foreground = true;
		return 1;
	case KEY_SINGLE:
		opts->singlethread = true;
		return 0;
	case KEY_HELP:
		opts->show_help = true;
		return 0;
	case KEY_VERSION:
		opts->show_version = true;
		return 0;
	case KEY_BACKEND:
		if (*opt_value(arg) == '\0')
			return parse_fail(ctx, -EINVAL, "empty backend= path");
		return set_string(ctx, &opts->backend, opt_value(arg));
	case KEY_THREADS:
		return parse_threads(ctx, arg);
	case KEY_CLONE_FD:
		opts->clone_fd = true;
		return 0;
	case KEY_ATTR_TIMEOUT:
		return parse_timeout(ctx, arg, &opts->attr_timeout);
	case KEY_ENTRY_TIMEOUT:
		return parse_timeout(ctx, arg, &opts->entry_timeout);
	case KEY_NEGATIVE_TIMEOUT:
		return parse_timeout(ctx, arg, &opts->negative_timeout);
	case KEY_NO_DEFAULT_PERMISSIONS:
		opts->default_permissions = false;
		return 0;
	}
	(void)outargs;
	return 1;
}

static void opts_set_defaults(struct clamfs_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->threads = OPTS_DEFAULT_THREADS;
	opts->default_permissions = true;
	/*
	 * The backend may also change behind the mount (Samba, NFS, local
	 * users): a second of attribute caching bounds how long a stale size
	 * or mtime can be seen, and negative entries are off by default.
	 */
	opts->attr_timeout = 1.0;
	opts->entry_timeout = 1.0;
	opts->negative_timeout = 0.0;
}

/* Assigns the positional arguments: [BACKEND] MOUNTPOINT. */
static int assign_paths(struct parse_ctx *ctx)
{
	struct clamfs_opts *opts = ctx->opts;
	int want = opts->backend ? 1 : 2;

	if (opts->show_help || opts->show_version)
		return 0;
	if (ctx->n_nonopt < want) {
		if (ctx->n_nonopt == 0 && !opts->backend)
			return parse_fail(ctx, -EINVAL,
					  "missing backend and mountpoint "
					  "(try --help)");
		return parse_fail(ctx, -EINVAL, "missing mountpoint");
	}
	if (ctx->n_nonopt > want)
		return parse_fail(ctx, -EINVAL,
				  "backend given twice: -o backend=%s and '%s'",
				  opts->backend, ctx->nonopt[0]);
	if (want == 2) {
		opts->backend = ctx->nonopt[0];
		ctx->nonopt[0] = NULL;
	}
	opts->mountpoint = ctx->nonopt[want - 1];
	ctx->nonopt[want - 1] = NULL;
	return 0;
}

int opts_parse(int argc, char *argv[], struct clamfs_opts *opts,
	       struct fuse_args *fuse_args, char *err, size_t errlen)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct parse_ctx ctx = {
		.opts = opts, .err = err, .errlen = errlen};
	int ret;

	opts_set_defaults(opts);
	if (errlen)
		err[0] = '\0';
	if (fuse_opt_parse(&args, &ctx, opt_spec, opt_proc) == -1) {
		if (ctx.error == 0)
			parse_fail(&ctx, -EINVAL, "malformed option list");
		ret = ctx.error;
		goto out_fail;
	}
	ret = assign_paths(&ctx) ? ctx.error : 0;
	if (ret)
		goto out_fail;
	if (opts->default_permissions &&
	    fuse_opt_add_arg(&args, "-odefault_permissions") == -1) {
		parse_fail(&ctx, -ENOMEM, "out of memory");
		ret = -ENOMEM;
		goto out_fail;
	}
	/* paths not moved into opts (with --help) are not needed */
	free(ctx.nonopt[0]);
	free(ctx.nonopt[1]);
	*fuse_args = args;
	return 0;

out_fail:
	free(ctx.nonopt[0]);
	free(ctx.nonopt[1]);
	fuse_opt_free_args(&args);
	opts_free(opts);
	return ret;
}

int opts_add_mount_names(struct fuse_args *fuse_args, const char *backend)
{
	char *mount_opts = NULL;
	int ret = -ENOMEM;
	bool has_fsname = false, has_subtype = false;

	for (int i = 1; i < fuse_args->argc; i++) {
		const char *a = fuse_args->argv[i];

		/* "-ofsname=" or "-o" "fsname=,..." alike: search the text */
		if (strstr(a, "fsname="))
			has_fsname = true;
		if (strstr(a, "subtype="))
			has_subtype = true;
	}
	if (!has_fsname) {
		char *opt = NULL;

		if (asprintf(&opt, "fsname=%s", backend) < 0)
			goto out;
		ret = fuse_opt_add_opt_escaped(&mount_opts, opt);
		free(opt);
		if (ret == -1) {
			ret = -ENOMEM;
			goto out;
		}
	}
	if (!has_subtype &&
	    fuse_opt_add_opt(&mount_opts, "subtype=clamfs") == -1) {
		ret = -ENOMEM;
		goto out;
	}
	ret = 0;
	if (mount_opts && (fuse_opt_add_arg(fuse_args, "-o") == -1 ||
			   fuse_opt_add_arg(fuse_args, mount_opts) == -1))
		ret = -ENOMEM;
out:
	free(mount_opts);
	return ret;
}

void opts_free(struct clamfs_opts *opts)
{
	free(opts->backend);
	free(opts->mountpoint);
	opts->backend = NULL;
	opts->mountpoint = NULL;
}

void opts_print_help(FILE *out, const char *progname)
{
	fprintf(out,
		"usage: %s [options] BACKEND MOUNTPOINT\n"
		"       %s -o backend=BACKEND [options] MOUNTPOINT\n"
		"\n"
		"Mounts BACKEND at MOUNTPOINT (they may be the same directory).\n"
		"\n"
		"clamfs options:\n"
		"    -h, --help              print this help and exit\n"
		"    -V, --version           print versions and exit\n"
		"    -f                      stay in the foreground, log to "
		"stderr\n"
		"    -d, -o debug            log every FUSE request (implies "
		"-f)\n"
		"    -s                      one worker thread\n"
		"    -o backend=DIR          directory to mirror\n"
		"    -o threads=N            max FUSE worker threads (default "
		"%d)\n"
		"    -o clone_fd             one /dev/fuse fd per worker thread\n"
		"    -o attr_timeout=SEC     attribute cache time (default 1)\n"
		"    -o entry_timeout=SEC    name lookup cache time (default 1)\n"
		"    -o negative_timeout=SEC cache time of failed lookups "
		"(default 0)\n"
		"    -o no_default_permissions\n"
		"                            let only the backend check "
		"permissions\n"
		"                            (default: the kernel checks them "
		"too)\n"
		"\n",
		progname, progname, OPTS_DEFAULT_THREADS);
}
