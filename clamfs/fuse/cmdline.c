// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_opt-based parser for the daemon's command line: the switches, and
 * every -o key of the option table (optable.c), which also checks and
 * stores the values. Loading runs defaults, then the INI file (inifile.c),
 * then the -o options, then the positional paths.
 */
#include "cmdline.h"

#include "inifile.h"
#include "optable.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The switches; every -o key comes from the table (optable.c). */
enum opt_key {
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_SINGLE,
	KEY_HELP,
	KEY_VERSION,
	KEY_CHECK,
	KEY_ROW, /* KEY_ROW + i: optable[i] */
};

static const struct fuse_opt switches[] = {
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("--check", KEY_CHECK),
};

#define N_SWITCHES (sizeof(switches) / sizeof(switches[0]))

struct parse_ctx {
	struct clamfs_opts *opts;
	bool backend_cmdline; /* -o backend= given on the command line */
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

/*
 * The fuse_opt templates of the table: "name=" for every key, the bare
 * "name" too for a flag, and the same for an alias. Their strings are
 * malloc()ed; free with free_spec.
 */
static struct fuse_opt *build_spec(void)
{
	size_t rows = 0, n = 0;
	struct fuse_opt *spec;

	while (optable[rows].name)
		rows++;
	/* up to four templates a row, the switches, the end */
	spec = calloc(N_SWITCHES + 4 * rows + 1, sizeof(*spec));
	if (!spec)
		return NULL;
	memcpy(spec, switches, sizeof(switches));
	n = N_SWITCHES;
	for (size_t i = 0; i < rows; i++) {
		const struct opt_row *r = &optable[i];
		bool flag = r->type == OPT_FLAG || r->type == OPT_NOT_FLAG;
		const char *names[] = {r->name, r->alias};

		for (size_t k = 0; k < 2 && names[k]; k++) {
			char *t;

			if (asprintf(&t, "%s=", names[k]) < 0)
				goto fail;
			spec[n++] = (struct fuse_opt)FUSE_OPT_KEY(
				t, KEY_ROW + (int)i);
			if (!flag)
				continue;
			if (!(t = strdup(names[k])))
				goto fail;
			spec[n++] = (struct fuse_opt)FUSE_OPT_KEY(
				t, KEY_ROW + (int)i);
		}
	}
	return spec; /* calloc ended it with FUSE_OPT_END */
fail:
	for (size_t i = N_SWITCHES; i < n; i++)
		free((char *)spec[i].templ);
	free(spec);
	return NULL;
}

static void free_spec(struct fuse_opt *spec)
{
	if (!spec)
		return;
	for (size_t i = N_SWITCHES; spec[i].templ; i++)
		free((char *)spec[i].templ);
	free(spec);
}

/* fuse_opt callback: 1 keeps the argument for libfuse, 0 drops it. */
static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_ctx *ctx = data;
	struct clamfs_opts *opts = ctx->opts;
	const struct opt_row *row;
	const char *eq;
	int ret;

	(void)outargs;
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
	case KEY_CHECK:
		opts->check = true;
		return 0;
	}
	row = &optable[key - KEY_ROW];
	eq = strchr(arg, '=');
	ret = optable_set(opts, row, eq ? eq + 1 : NULL, arg, ctx->err,
			  ctx->errlen);
	if (ret) {
		if (ctx->error == 0)
			ctx->error = ret;
		return -1;
	}
	if (strcmp(row->name, "backend") == 0)
		ctx->backend_cmdline = true;
	return 0;
}

/*
 * Assigns the positional arguments, which override the configuration file:
 * BACKEND MOUNTPOINT (the form mount.fuse3 uses), or MOUNTPOINT alone when
 * the backend comes from -o or the file, or none when both come from there.
 */
static int assign_paths(struct parse_ctx *ctx)
{
	struct clamfs_opts *opts = ctx->opts;

	if (opts->show_help || opts->show_version)
		return 0;
	if (ctx->n_nonopt == 2 && ctx->backend_cmdline)
		return parse_fail(ctx, -EINVAL,
				  "backend given twice: -o backend=%s and '%s'",
				  opts->backend, ctx->nonopt[0]);
	if (ctx->n_nonopt == 2) {
		free(opts->backend);
		opts->backend = ctx->nonopt[0];
		ctx->nonopt[0] = NULL;
	}
	if (ctx->n_nonopt >= 1) {
		free(opts->mountpoint);
		opts->mountpoint = ctx->nonopt[ctx->n_nonopt - 1];
		ctx->nonopt[ctx->n_nonopt - 1] = NULL;
	} else if (opts->mountpoint_opt) {
		opts->mountpoint = strdup(opts->mountpoint_opt);
		if (!opts->mountpoint)
			return parse_fail(ctx, -ENOMEM, "out of memory");
	}
	if (opts->check)
		return 0; /* --check judges what is there */
	if (!opts->backend && !opts->mountpoint)
		return parse_fail(
			ctx, -EINVAL,
			"missing backend and mountpoint (try --help)");
	if (!opts->mountpoint)
		return parse_fail(ctx, -EINVAL, "missing mountpoint");
	if (!opts->backend)
		return parse_fail(ctx, -EINVAL, "missing backend");
	return 0;
}

/*
 * The value of the last config= among the -o options (a malloc()ed copy,
 * fuse_opt's backslash escapes undone), or NULL.
 */
static char *find_config(int argc, char *argv[])
{
	const char *found = NULL;
	char *copy, *out;

	for (int i = 1; i < argc; i++) {
		const char *o = NULL, *p;

		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			o = argv[++i];
		else if (strncmp(argv[i], "-o", 2) == 0)
			o = argv[i] + 2;
		for (p = o; p && (p = strstr(p, "config=")); p++)
			if (p == o || p[-1] == ',')
				found = p + 7;
	}
	if (!found)
		return NULL;
	out = copy = malloc(strlen(found) + 1);
	if (!copy)
		return NULL;
	for (; *found && *found != ','; found++) {
		if (*found == '\\' && found[1])
			found++;
		*out++ = *found;
	}
	*out = '\0';
	return copy;
}

/*
 * The configuration file named by config= (absolute, so a reload after
 * daemonizing, cwd "/", finds it too), read into opts. 0 when there is
 * none, or inifile_load's error.
 */
static int load_config(int argc, char *argv[], struct clamfs_opts *opts,
		       char *err, size_t errlen)
{
	opts->config = find_config(argc, argv);
	if (opts->config && opts->config[0] != '/') {
		char *abs = realpath(opts->config, NULL);

		if (abs) {
			free(opts->config);
			opts->config = abs;
		}
	}
	return opts->config ? inifile_load(opts->config, opts, err, errlen) : 0;
}

int cmdline_parse(int argc, char *argv[], struct clamfs_opts *opts,
		  struct fuse_args *fuse_args, char *err, size_t errlen)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct parse_ctx ctx = {.opts = opts, .err = err, .errlen = errlen};
	struct fuse_opt *spec = build_spec();
	int ret;

	if (errlen)
		err[0] = '\0';
	ret = optable_defaults(opts);
	if (ret || !spec) {
		parse_fail(&ctx, -ENOMEM, "out of memory");
		ret = -ENOMEM;
		goto out_fail;
	}
	/* defaults < the file < -o options < positional paths */
	ret = load_config(argc, argv, opts, err, errlen);
	if (ret)
		goto out_fail;
	opts->layer = 2;
	if (fuse_opt_parse(&args, &ctx, spec, opt_proc) == -1) {
		if (ctx.error == 0)
			parse_fail(&ctx, -EINVAL, "malformed option list");
		ret = ctx.error;
		goto out_fail;
	}
	ret = assign_paths(&ctx) ? ctx.error : 0;
	if (ret)
		goto out_fail;
	if ((opts->mount_options &&
	     (fuse_opt_add_arg(&args, "-o") == -1 ||
	      fuse_opt_add_arg(&args, opts->mount_options) == -1)) ||
	    (opts->default_permissions &&
	     fuse_opt_add_arg(&args, "-odefault_permissions") == -1)) {
		parse_fail(&ctx, -ENOMEM, "out of memory");
		ret = -ENOMEM;
		goto out_fail;
	}
	if (opts->policy.on_infected == INFECTED_QUARANTINE &&
	    !opts->quarantine_dir) {
		parse_fail(&ctx, -EINVAL,
			   "on_infected=quarantine needs quarantine_dir=");
		ret = -EINVAL;
		goto out_fail;
	}
	/* paths not moved into opts (with --help) are not needed */
	free(ctx.nonopt[0]);
	free(ctx.nonopt[1]);
	free_spec(spec);
	*fuse_args = args;
	return 0;

out_fail:
	free(ctx.nonopt[0]);
	free(ctx.nonopt[1]);
	free_spec(spec);
	fuse_opt_free_args(&args);
	opts_free(opts);
	return ret;
}

int cmdline_add_mount_names(struct fuse_args *fuse_args, const char *backend)
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

void cmdline_print_help(FILE *out, const char *progname)
{
	static const char *const scanning[] = {"clamd", "scan", "cache",
					       "action"};

	fprintf(out,
		"usage: %s [options] BACKEND MOUNTPOINT\n"
		"       %s -o backend=BACKEND [options] MOUNTPOINT\n"
		"\n"
		"Mounts BACKEND at MOUNTPOINT (they may be the same "
		"directory)\n"
		"and asks clamd about every file before it may be read.\n"
		"\n"
		"General options:\n"
		"    -h, --help              print this help and exit\n"
		"    -V, --version           print versions and exit\n"
		"    --check                 check the configuration and "
		"clamd,\n"
		"                            print clamd's version and "
		"limits;\n"
		"                            exit status as in clamfs(8)\n"
		"    --reload MOUNTPOINT|PID re-read the configuration of a "
		"mount\n"
		"                            and wait: 0 applied, 2 rejected\n"
		"    --drop-cache MOUNTPOINT|PID\n"
		"                            forget a mount's cached verdicts\n"
		"    --stats [--prometheus] [--output FILE] MOUNTPOINT...\n"
		"                            print mounts' live statistics\n"
		"    --import-clamfs-xml FILE\n"
		"                            print the INI of a ClamFS XML "
		"file\n"
		"    -f                      stay in the foreground, log to "
		"stderr\n"
		"    -d, -o debug            log every FUSE request (implies "
		"-f)\n"
		"    -s                      one FUSE worker thread\n",
		progname, progname);
	optable_print_help(out, "");
	optable_print_help(out, "log");
	optable_print_help(out, "fuse");
	fprintf(out, "\nScanning options:\n");
	for (size_t i = 0; i < sizeof(scanning) / sizeof(scanning[0]); i++)
		optable_print_help(out, scanning[i]);
	fprintf(out, "\n");
}
