// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_opt-based parser for the daemon's command line. Values are checked
 * here, not by fuse_opt's sscanf formats, so that a bad value gets a message
 * naming the option and the accepted range.
 */
#include "opts.h"

#include "config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum opt_key {
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_SINGLE,
	KEY_HELP,
	KEY_VERSION,
	KEY_CHECK,
	KEY_BACKEND,
	KEY_THREADS,
	KEY_CLONE_FD,
	KEY_PASSTHROUGH,
	KEY_ATTR_TIMEOUT,
	KEY_ENTRY_TIMEOUT,
	KEY_NEGATIVE_TIMEOUT,
	KEY_NO_DEFAULT_PERMISSIONS,
	KEY_CLAMD,
	KEY_SCAN_MODE,
	KEY_SCAN_TIMEOUT,
	KEY_SCAN_THREADS,
	KEY_CLAMD_CONNECTIONS,
	KEY_CACHE_ENTRIES,
	KEY_CACHE_TTL,
	KEY_RACY_WINDOW,
	KEY_VERSION_CHECK,
	KEY_SCAN_ON_CLOSE,
	KEY_ON_ERROR,
	KEY_ON_INFECTED,
	KEY_DENY_ERRNO,
	KEY_QUARANTINE_DIR,
	KEY_INFECTED_CMD,
	KEY_INFECTED_CMD_RATE,
	KEY_MAX_SCAN_SIZE,
	KEY_OVERSIZE,
	KEY_INCLUDE,
	KEY_EXCLUDE,
	KEY_GLOB_CASE,
	KEY_EXEMPT_UID,
	KEY_EXEMPT_GID,
	KEY_CONFIG,
	KEY_LOG_LEVEL,
	KEY_MOUNT_OPTIONS,
	KEY_MOUNTPOINT,
	KEY_CLAMD_WAIT,
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
	FUSE_OPT_KEY("--check", KEY_CHECK),
	FUSE_OPT_KEY("backend=", KEY_BACKEND),
	FUSE_OPT_KEY("threads=", KEY_THREADS),
	FUSE_OPT_KEY("max_threads=", KEY_THREADS),
	FUSE_OPT_KEY("clone_fd", KEY_CLONE_FD),
	FUSE_OPT_KEY("clone_fd=", KEY_CLONE_FD),
	FUSE_OPT_KEY("passthrough=", KEY_PASSTHROUGH),
	FUSE_OPT_KEY("attr_timeout=", KEY_ATTR_TIMEOUT),
	FUSE_OPT_KEY("entry_timeout=", KEY_ENTRY_TIMEOUT),
	FUSE_OPT_KEY("negative_timeout=", KEY_NEGATIVE_TIMEOUT),
	FUSE_OPT_KEY("no_default_permissions", KEY_NO_DEFAULT_PERMISSIONS),
	FUSE_OPT_KEY("no_default_permissions=", KEY_NO_DEFAULT_PERMISSIONS),
	FUSE_OPT_KEY("clamd=", KEY_CLAMD),
	FUSE_OPT_KEY("scan_mode=", KEY_SCAN_MODE),
	FUSE_OPT_KEY("scan_timeout=", KEY_SCAN_TIMEOUT),
	FUSE_OPT_KEY("scan_threads=", KEY_SCAN_THREADS),
	FUSE_OPT_KEY("clamd_connections=", KEY_CLAMD_CONNECTIONS),
	FUSE_OPT_KEY("cache_entries=", KEY_CACHE_ENTRIES),
	FUSE_OPT_KEY("cache_ttl=", KEY_CACHE_TTL),
	FUSE_OPT_KEY("racy_window=", KEY_RACY_WINDOW),
	FUSE_OPT_KEY("version_check=", KEY_VERSION_CHECK),
	FUSE_OPT_KEY("scan_on_close", KEY_SCAN_ON_CLOSE),
	FUSE_OPT_KEY("scan_on_close=", KEY_SCAN_ON_CLOSE),
	FUSE_OPT_KEY("on_error=", KEY_ON_ERROR),
	FUSE_OPT_KEY("on_infected=", KEY_ON_INFECTED),
	FUSE_OPT_KEY("deny_errno=", KEY_DENY_ERRNO),
	FUSE_OPT_KEY("quarantine_dir=", KEY_QUARANTINE_DIR),
	FUSE_OPT_KEY("infected_cmd=", KEY_INFECTED_CMD),
	FUSE_OPT_KEY("infected_cmd_rate=", KEY_INFECTED_CMD_RATE),
	FUSE_OPT_KEY("max_scan_size=", KEY_MAX_SCAN_SIZE),
	FUSE_OPT_KEY("oversize=", KEY_OVERSIZE),
	FUSE_OPT_KEY("include=", KEY_INCLUDE),
	FUSE_OPT_KEY("exclude=", KEY_EXCLUDE),
	FUSE_OPT_KEY("glob_case=", KEY_GLOB_CASE),
	FUSE_OPT_KEY("exempt_uid=", KEY_EXEMPT_UID),
	FUSE_OPT_KEY("exempt_gid=", KEY_EXEMPT_GID),
	FUSE_OPT_KEY("config=", KEY_CONFIG),
	FUSE_OPT_KEY("log_level=", KEY_LOG_LEVEL),
	FUSE_OPT_KEY("options=", KEY_MOUNT_OPTIONS),
	FUSE_OPT_KEY("mountpoint=", KEY_MOUNTPOINT),
	FUSE_OPT_KEY("clamd_wait=", KEY_CLAMD_WAIT),
	FUSE_OPT_END,
};

struct parse_ctx {
	struct clamfs_opts *opts;
	bool from_config;      /* applying a configuration file line */
	bool backend_cmdline;  /* -o backend= given on the command line */
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

static int parse_ulong(struct parse_ctx *ctx, const char *arg,
		       unsigned long min, unsigned long max, unsigned long *out)
{
	const char *val = opt_value(arg);
	unsigned long n;
	char *end;

	errno = 0;
	n = strtoul(val, &end, 10);
	if (*val < '0' || *val > '9' || *end != '\0' || errno || n < min ||
	    n > max)
		return parse_fail(ctx, -EINVAL,
				  "bad value in '%s': want %lu to %lu", arg,
				  min, max);
	*out = n;
	return 0;
}

static int parse_uint(struct parse_ctx *ctx, const char *arg,
		      unsigned int min, unsigned int max, unsigned int *out)
{
	unsigned long n;

	if (parse_ulong(ctx, arg, min, max, &n))
		return -1;
	*out = (unsigned int)n;
	return 0;
}

/* Picks one of words (NULL-terminated) and returns its index. */
static int parse_choice(struct parse_ctx *ctx, const char *arg,
			const char *const *words, const char *want, int *out)
{
	const char *val = opt_value(arg);

	for (int i = 0; words[i]; i++) {
		if (strcmp(val, words[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	return parse_fail(ctx, -EINVAL, "bad value in '%s': want %s", arg,
			  want);
}

/* A bare flag is true; "flag=yes|no|true|false|on|off|1|0" says which. */
static int parse_flag(struct parse_ctx *ctx, const char *arg, bool *out)
{
	static const char *const words[] = {"no", "yes", "false", "true", "off",
					    "on", "0", "1", NULL};
	int choice;

	if (!strchr(arg, '=')) {
		*out = true;
		return 0;
	}
	if (parse_choice(ctx, arg, words, "yes or no", &choice))
		return -1;
	*out = choice % 2 == 1;
	return 0;
}

/*
 * An exempt user or group: a number, or a name looked up now (at mount and
 * at each reload), so an unknown name is a configuration error rather
 * than an exemption that silently never applies.
 */
static int parse_exempt(struct parse_ctx *ctx, const char *arg, bool user,
			unsigned long *out)
{
	const char *val = opt_value(arg);
	struct passwd pw, *pwr = NULL;
	struct group gr, *grr = NULL;
	char buf[4096];
	int ret;

	/* all digits: a number; a name may start with one */
	if (*val && strspn(val, "0123456789") == strlen(val))
		return parse_ulong(ctx, arg, 0, UINT32_MAX - 1, out);
	if (*val == '\0')
		return parse_fail(ctx, -EINVAL, "empty value in '%s'", arg);
	if (user)
		ret = getpwnam_r(val, &pw, buf, sizeof(buf), &pwr);
	else
		ret = getgrnam_r(val, &gr, buf, sizeof(buf), &grr);
	if (ret)
		return parse_fail(ctx, -ret, "'%s': cannot look up the %s: %s",
				  arg, user ? "user" : "group", strerror(ret));
	if (user ? !pwr : !grr)
		return parse_fail(ctx, -EINVAL, "'%s': no such %s", arg,
				  user ? "user" : "group");
	*out = user ? (unsigned long)pwr->pw_uid : (unsigned long)grr->gr_gid;
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

static int scan_opt_proc(struct parse_ctx *ctx, const char *arg, int key)
{
	static const char *const modes[] = {"fdpass", "stream", "path", NULL};
	static const char *const deny_allow[] = {"deny", "allow", NULL};
	static const char *const errnos[] = {"EACCES", "EPERM", NULL};
	static const char *const glob_cases[] = {"sensitive", "insensitive",
						 NULL};
	static const char *const log_levels[] = {"error", "warning", "info",
						 "debug", NULL};
	struct clamfs_opts *opts = ctx->opts;
	struct policy *p = &opts->policy;
	const char *val = opt_value(arg);
	unsigned long id;
	int choice, ret = 0;

	switch (key) {
	case KEY_CLAMD:
		if (*val == '\0')
			return parse_fail(ctx, -EINVAL, "empty clamd= address");
		return set_string(ctx, &opts->clamd, val);
	case KEY_SCAN_MODE:
		if (parse_choice(ctx, arg, modes, "fdpass, stream or path",
				 &choice))
			return -1;
		opts->scan_mode = choice;
		return 0;
	case KEY_SCAN_TIMEOUT:
		return parse_uint(ctx, arg, 1, 3600, &opts->scan_timeout);
	case KEY_SCAN_THREADS:
		return parse_uint(ctx, arg, 1, 256, &opts->scan_threads);
	case KEY_CLAMD_CONNECTIONS:
		return parse_uint(ctx, arg, 1, 256, &opts->clamd_connections);
	case KEY_CACHE_ENTRIES:
		return parse_ulong(ctx, arg, 0, 100000000UL,
				   &opts->cache_entries);
	case KEY_CACHE_TTL:
		return parse_uint(ctx, arg, 0, 30 * 86400, &opts->cache_ttl);
	case KEY_RACY_WINDOW:
		return parse_uint(ctx, arg, 0, 3600, &p->racy_window);
	case KEY_VERSION_CHECK:
		return parse_uint(ctx, arg, 0, 86400, &opts->version_check);
	case KEY_CLAMD_WAIT:
		return parse_uint(ctx, arg, 0, 3600, &opts->clamd_wait);
	case KEY_SCAN_ON_CLOSE:
		return parse_flag(ctx, arg, &opts->scan_on_close);
	case KEY_ON_ERROR:
		if (parse_choice(ctx, arg, deny_allow, "deny or allow",
				 &choice))
			return -1;
		p->on_error_allow = choice == 1;
		return 0;
	case KEY_ON_INFECTED:
		if (infected_action_parse(val, &p->on_infected))
			return parse_fail(ctx, -EINVAL,
					  "bad value in '%s': want deny, log, "
					  "quarantine or delete",
					  arg);
		return 0;
	case KEY_DENY_ERRNO:
		if (parse_choice(ctx, arg, errnos, "EACCES or EPERM", &choice))
			return -1;
		p->deny_errno = choice == 0 ? EACCES : EPERM;
		return 0;
	case KEY_QUARANTINE_DIR:
		if (*val != '/')
			return parse_fail(ctx, -EINVAL,
					  "bad value in '%s': want an absolute "
					  "path",
					  arg);
		return set_string(ctx, &opts->quarantine_dir, val);
	case KEY_INFECTED_CMD:
		if (*val != '/')
			return parse_fail(ctx, -EINVAL,
					  "bad value in '%s': want an absolute "
					  "path",
					  arg);
		return set_string(ctx, &opts->infected_cmd, val);
	case KEY_INFECTED_CMD_RATE:
		return parse_uint(ctx, arg, 1, 10000,
				  &opts->infected_cmd_rate);
	case KEY_MAX_SCAN_SIZE:
		if (policy_parse_size(val, &p->max_scan_size))
			return parse_fail(ctx, -EINVAL,
					  "bad value in '%s': want bytes with "
					  "an optional K, M, G or T",
					  arg);
		return 0;
	case KEY_OVERSIZE:
		if (parse_choice(ctx, arg, deny_allow, "deny or allow",
				 &choice))
			return -1;
		p->oversize_allow = choice == 1;
		return 0;
	case KEY_GLOB_CASE:
		if (parse_choice(ctx, arg, glob_cases,
				 "sensitive or insensitive", &choice))
			return -1;
		p->glob_nocase = choice == 1;
		return 0;
	case KEY_INCLUDE:
	case KEY_EXCLUDE:
		if (*val == '\0')
			return parse_fail(ctx, -EINVAL, "empty pattern in '%s'",
					  arg);
		ret = policy_add_glob(p, key == KEY_INCLUDE, val);
		break;
	case KEY_LOG_LEVEL:
		if (parse_choice(ctx, arg, log_levels,
				 "error, warning, info or debug", &choice))
			return -1;
		opts->log_level = choice;
		return 0;
	case KEY_MOUNT_OPTIONS:
		if (*val == '\0')
			return 0;
		if (fuse_opt_add_opt(&opts->mount_options, val) == -1)
			ret = -ENOMEM;
		break;
	case KEY_MOUNTPOINT:
		if (*val == '\0')
			return parse_fail(ctx, -EINVAL,
					  "empty mountpoint= path");
		return set_string(ctx, &opts->mountpoint_opt, val);
	case KEY_EXEMPT_UID:
	case KEY_EXEMPT_GID:
		if (parse_exempt(ctx, arg, key == KEY_EXEMPT_UID, &id))
			return -1;
		ret = key == KEY_EXEMPT_UID
			      ? policy_add_exempt_uid(p, (uid_t)id)
			      : policy_add_exempt_gid(p, (gid_t)id);
		break;
	}
	if (ret)
		return parse_fail(ctx, -ENOMEM, "out of memory");
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
	case KEY_CHECK:
		opts->check = true;
		return 0;
	case KEY_BACKEND:
		if (*opt_value(arg) == '\0')
			return parse_fail(ctx, -EINVAL, "empty backend= path");
		if (!ctx->from_config)
			ctx->backend_cmdline = true;
		return set_string(ctx, &opts->backend, opt_value(arg));
	case KEY_THREADS:
		return parse_threads(ctx, arg);
	case KEY_CLONE_FD:
		return parse_flag(ctx, arg, &opts->clone_fd);
	case KEY_PASSTHROUGH: {
		static const char *const modes[] = {"off", "auto", NULL};
		int choice;

		if (parse_choice(ctx, arg, modes, "auto or off", &choice))
			return -1;
		opts->passthrough = choice == 1;
		return 0;
	}
	case KEY_ATTR_TIMEOUT:
		return parse_timeout(ctx, arg, &opts->attr_timeout);
	case KEY_ENTRY_TIMEOUT:
		return parse_timeout(ctx, arg, &opts->entry_timeout);
	case KEY_NEGATIVE_TIMEOUT:
		return parse_timeout(ctx, arg, &opts->negative_timeout);
	case KEY_NO_DEFAULT_PERMISSIONS: {
		bool off;

		if (parse_flag(ctx, arg, &off))
			return -1;
		opts->default_permissions = !off;
		return 0;
	}
	case KEY_CONFIG:
		return 0; /* read before everything else: see opts_parse */
	default:
		return scan_opt_proc(ctx, arg, key);
	}
	(void)outargs;
	return 1;
}

static void opts_set_defaults(struct clamfs_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->threads = OPTS_DEFAULT_THREADS;
	opts->default_permissions = true;
	opts->passthrough = true;
	/*
	 * The backend may also change behind the mount (Samba, NFS, local
	 * users): a second of attribute caching bounds how long a stale size
	 * or mtime can be seen, and negative entries are off by default.
	 */
	opts->attr_timeout = 1.0;
	opts->entry_timeout = 1.0;
	opts->negative_timeout = 0.0;

	opts->scan_mode = -1;
	opts->scan_timeout = 60;
	opts->scan_threads = 8;
	opts->cache_entries = 100000;
	opts->cache_ttl = 3600;
	opts->version_check = 60;
	opts->infected_cmd_rate = 10;
	opts->log_level = 2; /* info */
	policy_init(&opts->policy);
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
		return parse_fail(ctx, -EINVAL,
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

static int apply_kv(struct parse_ctx *ctx, const char *key, const char *value)
{
	char *arg = NULL;
	int ret = -1;

	for (const struct fuse_opt *o = opt_spec; o->templ; o++) {
		size_t n = strlen(key);
		bool with_value = o->templ[strlen(o->templ) - 1] == '=';

		if (strncmp(o->templ, key, n) != 0 ||
		    o->templ[n] != (with_value ? '=' : '\0') ||
		    o->templ[0] == '-' || o->value == KEY_CONFIG)
			continue;
		if (asprintf(&arg, "%s=%s", key, value) < 0)
			return parse_fail(ctx, -ENOMEM, "out of memory");
		ret = opt_proc(ctx, arg, o->value, NULL);
		free(arg);
		return ret;
	}
	return parse_fail(ctx, -EINVAL, "unknown key '%s'", key);
}

int opts_apply(struct clamfs_opts *opts, const char *key, const char *value,
	       char *err, size_t errlen)
{
	struct parse_ctx ctx = {.opts = opts,
				.from_config = true,
				.err = err,
				.errlen = errlen};

	return apply_kv(&ctx, key, value) ? ctx.error : 0;
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
	/* the file comes first so that -o options override it */
	opts->config = find_config(argc, argv);
	/* absolute, so a reload after daemonizing (cwd "/") finds it too */
	if (opts->config && opts->config[0] != '/') {
		char *abs = realpath(opts->config, NULL);

		if (abs) {
			free(opts->config);
			opts->config = abs;
		}
	}
	if (opts->config) {
		ret = config_load(opts->config, opts, err, errlen);
		if (ret)
			goto out_fail;
	}
	if (fuse_opt_parse(&args, &ctx, opt_spec, opt_proc) == -1) {
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
	if (!opts->clamd && !(opts->clamd = strdup(OPTS_DEFAULT_CLAMD))) {
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
	free(opts->clamd);
	free(opts->quarantine_dir);
	free(opts->infected_cmd);
	free(opts->config);
	free(opts->mount_options);
	free(opts->mountpoint_opt);
	opts->config = NULL;
	opts->mount_options = NULL;
	opts->mountpoint_opt = NULL;
	opts->backend = NULL;
	opts->mountpoint = NULL;
	opts->clamd = NULL;
	opts->quarantine_dir = NULL;
	opts->infected_cmd = NULL;
	policy_free(&opts->policy);
}

void opts_print_help(FILE *out, const char *progname)
{
	fprintf(out,
		"usage: %s [options] BACKEND MOUNTPOINT\n"
		"       %s -o backend=BACKEND [options] MOUNTPOINT\n"
		"\n"
		"Mounts BACKEND at MOUNTPOINT (they may be the same directory)\n"
		"and asks clamd about every file before it may be read.\n"
		"\n"
		"General options:\n"
		"    -h, --help              print this help and exit\n"
		"    -V, --version           print versions and exit\n"
		"    --check                 check the configuration and clamd,\n"
		"                            print clamd's version and limits;\n"
		"                            exit status as in clamfs(8)\n"
		"    --reload MOUNTPOINT|PID re-read the configuration of a mount\n"
		"                            and wait: 0 applied, 2 rejected\n"
		"    --drop-cache MOUNTPOINT|PID\n"
		"                            forget a mount's cached verdicts\n"
		"    --stats [--prometheus] [--output FILE] MOUNTPOINT...\n"
		"                            print mounts' live statistics\n"
		"    --import-clamfs-xml FILE\n"
		"                            print the INI of a ClamFS XML file\n"
		"    -o config=FILE          read options from an INI file\n"
		"    -o mountpoint=DIR       where to mount (mostly in a file)\n"
		"    -o options=LIST         FUSE mount options (mostly in a "
		"file)\n"
		"    -o log_level=LEVEL      error, warning, info or debug (info)\n"
		"    -f                      stay in the foreground, log to stderr\n"
		"    -d, -o debug            log every FUSE request (implies -f)\n"
		"    -s                      one FUSE worker thread\n"
		"    -o backend=DIR          directory to mirror\n"
		"    -o threads=N            max FUSE worker threads (%d)\n"
		"    -o clone_fd             one /dev/fuse fd per worker thread\n"
		"    -o passthrough=auto|off kernel passthrough of allowed opens,\n"
		"                            where kernel and libfuse have it (auto)\n"
		"    -o attr_timeout=SEC     attribute cache time (1)\n"
		"    -o entry_timeout=SEC    name lookup cache time (1)\n"
		"    -o negative_timeout=SEC cache time of failed lookups (0)\n"
		"    -o no_default_permissions\n"
		"                            only the backend checks permissions\n"
		"\n"
		"Scanning options:\n"
		"    -o clamd=ADDR           clamd socket path or tcp://HOST:PORT\n"
		"                            (%s)\n"
		"    -o scan_mode=MODE       fdpass, stream or path (fdpass on a\n"
		"                            UNIX socket, stream over TCP)\n"
		"    -o scan_timeout=SEC     deadline of one scan (60)\n"
		"    -o scan_threads=N       scans at once (8)\n"
		"    -o clamd_connections=N  connections to clamd (scan_threads)\n"
		"    -o on_error=deny|allow  when a scan fails: EIO, or allow (deny)\n"
		"    -o on_infected=ACTION   deny, log, quarantine or delete (deny)\n"
		"    -o deny_errno=EACCES|EPERM  error of a refused open (EACCES)\n"
		"    -o quarantine_dir=DIR   where on_infected=quarantine moves files\n"
		"    -o infected_cmd=PATH    program run on each detection\n"
		"    -o infected_cmd_rate=N  runs of it per minute at most (10)\n"
		"    -o max_scan_size=SIZE   larger files are not scanned (100M;\n"
		"                            0: no limit)\n"
		"    -o oversize=allow|deny  what happens to them (allow)\n"
		"    -o include=GLOB         scan only matching paths (repeatable)\n"
		"    -o exclude=GLOB         never scan matching paths (repeatable)\n"
		"    -o glob_case=sensitive|insensitive  case of include/exclude\n"
		"                            (sensitive; *.EXT rules never are)\n"
		"    -o exempt_uid=USER      never scan for this user, by name or\n"
		"                            number (repeatable)\n"
		"    -o exempt_gid=GROUP     never scan for members of this group,\n"
		"                            supplementary too (repeatable)\n"
		"    -o scan_on_close        scan a file when its last writer closes\n"
		"    -o cache_entries=N      verdict cache size (100000)\n"
		"    -o cache_ttl=SEC        verdict lifetime; 0: no cache (3600)\n"
		"    -o racy_window=SEC      no verdict is cached for a file\n"
		"                            changed this recently (2)\n"
		"    -o version_check=SEC    clamd database check interval (60)\n"
		"    -o clamd_wait=SEC       wait this long at start for clamd (0)\n"
		"\n",
		progname, progname, OPTS_DEFAULT_THREADS, OPTS_DEFAULT_CLAMD);
}
