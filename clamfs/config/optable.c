// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The rows of every configuration key and the functions that read them:
 * value checking and storing, defaults, --help lines and the description
 * of what a reload changed. Values are checked here rather than by
 * fuse_opt's sscanf formats, so a bad one gets a message naming the
 * option and the accepted range.
 */
#include "optable.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <pwd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "opts.h"
#include "policy.h"
#include "scanq.h"

#define FIELD(f) offsetof(struct clamfs_opts, f)

static const struct opt_word yes_no[] = {
	{"no", 0}, {"yes", 1}, {"false", 0}, {"true", 1}, {"off", 0},
	{"on", 1}, {"0", 0},   {"1", 1},     {NULL, 0},
};
static const struct opt_word passthrough_words[] = {
	{"auto", 1}, {"off", 0}, {NULL, 0}};
static const struct opt_word deny_allow[] = {
	{"deny", 0}, {"allow", 1}, {NULL, 0}};
static const struct opt_word glob_cases[] = {
	{"sensitive", 0}, {"insensitive", 1}, {NULL, 0}};
static const struct opt_word scan_modes[] = {
	{"fdpass", SCAN_MODE_FDPASS},
	{"stream", SCAN_MODE_STREAM},
	{"path", SCAN_MODE_PATH},
	{NULL, 0},
};
static const struct opt_word infected_actions[] = {
	{"deny", INFECTED_DENY},
	{"log", INFECTED_LOG},
	{"quarantine", INFECTED_QUARANTINE},
	{"delete", INFECTED_DELETE},
	{NULL, 0},
};
static const struct opt_word limits_actions[] = {
	{"deny", LIMITS_DENY},
	{"allow", LIMITS_ALLOW},
	{"infected", LIMITS_INFECTED},
	{NULL, 0},
};
static const struct opt_word deny_errnos[] = {
	{"EACCES", EACCES}, {"EPERM", EPERM}, {NULL, 0}};
static const struct opt_word log_levels[] = {
	{"error", LOG_LEVEL_ERR},     {"warning", LOG_LEVEL_WARN},
	{"notice", LOG_LEVEL_NOTICE}, {"info", LOG_LEVEL_INFO},
	{"debug", LOG_LEVEL_DEBUG},   {NULL, 0},
};

/* clang-format off */
const struct opt_row optable[] = {
	/* general, command line only */
	{.name = "config", .type = OPT_CONFIG, .metavar = "FILE",
	 .help = "read options from an INI file",
	 .reload = RELOAD_STARTUP},
	/* [fuse] */
	{.name = "mountpoint", .section = "fuse", .type = OPT_STRING,
	 .offset = FIELD(mountpoint_opt), .metavar = "DIR",
	 .help = "where to mount (mostly in a file)",
	 .reload = RELOAD_REMOUNT},
	{.name = "options", .section = "fuse", .type = OPT_MOUNT_LIST,
	 .offset = FIELD(mount_options), .metavar = "LIST",
	 .help = "FUSE mount options (mostly in a file)",
	 .reload = RELOAD_REMOUNT},
	{.name = "backend", .section = "fuse", .type = OPT_STRING,
	 .offset = FIELD(backend), .metavar = "DIR",
	 .help = "directory to mirror", .reload = RELOAD_REMOUNT},
	{.name = "threads", .alias = "max_threads", .section = "fuse",
	 .type = OPT_UINT, .offset = FIELD(threads), .min = 1,
	 .max = OPTS_MAX_THREADS, .def = "16", .metavar = "N",
	 .help = "max FUSE worker threads", .reload = RELOAD_REMOUNT},
	{.name = "clone_fd", .section = "fuse", .type = OPT_FLAG,
	 .offset = FIELD(clone_fd), .def = "no",
	 .help = "one /dev/fuse fd per worker thread",
	 .reload = RELOAD_REMOUNT},
	{.name = "passthrough", .section = "fuse", .type = OPT_BOOL_WORD,
	 .offset = FIELD(passthrough), .words = passthrough_words,
	 .def = "auto", .metavar = "auto|off",
	 .help = "kernel passthrough of allowed opens, where kernel and "
		 "libfuse have it",
	 .reload = RELOAD_REMOUNT},
	/*
	 * Off by default: the kernel then trusts its own sizes and times of
	 * regular files, so a backend also written around the mount would
	 * show stale ones (clamfs.8).
	 */
	{.name = "watch_backend", .section = "fuse", .type = OPT_FLAG,
	 .offset = FIELD(watch_backend), .def = "no",
	 .help = "watch the backend for changes made around the mount, so "
		 "that the kernel may cache names, attributes and directory "
		 "contents for an hour (local filesystems, Linux >= 6.16, root)",
	 .reload = RELOAD_REMOUNT},
	{.name = "writeback_cache", .section = "fuse", .type = OPT_FLAG,
	 .offset = FIELD(writeback_cache), .def = "no",
	 .help = "kernel write-back cache where passthrough is off (only "
		 "for backends nobody writes around the mount)",
	 .reload = RELOAD_REMOUNT},
	/*
	 * The backend may also change behind the mount (Samba, NFS, local
	 * users): a second of attribute caching bounds how long a stale size
	 * or mtime can be seen, and negative entries are off by default.
	 */
	{.name = "attr_timeout", .section = "fuse", .type = OPT_SECONDS,
	 .offset = FIELD(attr_timeout), .max = 86400, .def = "1",
	 .metavar = "SEC", .help = "attribute cache time",
	 .reload = RELOAD_REMOUNT},
	{.name = "entry_timeout", .section = "fuse", .type = OPT_SECONDS,
	 .offset = FIELD(entry_timeout), .max = 86400, .def = "1",
	 .metavar = "SEC", .help = "name lookup cache time",
	 .reload = RELOAD_REMOUNT},
	{.name = "negative_timeout", .section = "fuse", .type = OPT_SECONDS,
	 .offset = FIELD(negative_timeout), .max = 86400, .def = "0",
	 .metavar = "SEC", .help = "cache time of failed lookups",
	 .reload = RELOAD_REMOUNT},
	{.name = "no_default_permissions", .section = "fuse",
	 .type = OPT_NOT_FLAG, .offset = FIELD(default_permissions),
	 .def = "no", .help = "only the backend checks permissions",
	 .reload = RELOAD_REMOUNT},
	/* [log] */
	{.name = "log_level", .section = "log", .type = OPT_WORD,
	 .offset = FIELD(log_level), .words = log_levels, .def = "info",
	 .metavar = "LEVEL", .help = "error, warning, info or debug",
	 .reload = RELOAD_LIVE},
	/* [clamd] */
	{.name = "clamd", .section = "clamd", .type = OPT_LINES,
	 .offset = FIELD(clamd), .def = OPTS_DEFAULT_CLAMD, .metavar = "ADDR",
	 .help = "a clamd (repeatable): PATH, tcp:// or tls://HOST:PORT, "
		 "weight=N conns=N",
	 .reload = RELOAD_POOL},
	{.name = "clamd_tls_ca", .section = "clamd", .type = OPT_ABS_PATH,
	 .offset = FIELD(clamd_tls_ca), .metavar = "FILE",
	 .help = "tls://: CA certificate(s) (PEM) the server's must chain to",
	 .reload = RELOAD_POOL},
	{.name = "clamd_tls_name", .section = "clamd", .type = OPT_STRING,
	 .offset = FIELD(clamd_tls_name), .metavar = "NAME",
	 .help = "tls://: name the server's certificate must carry (the "
		 "address's host)",
	 .reload = RELOAD_POOL},
	{.name = "clamd_tls_cert", .section = "clamd", .type = OPT_ABS_PATH,
	 .offset = FIELD(clamd_tls_cert), .metavar = "FILE",
	 .help = "tls://: client certificate chain (PEM) to present",
	 .reload = RELOAD_POOL},
	{.name = "clamd_tls_key", .section = "clamd", .type = OPT_ABS_PATH,
	 .offset = FIELD(clamd_tls_key), .metavar = "FILE",
	 .help = "tls://: private key (PEM) of clamd_tls_cert",
	 .reload = RELOAD_POOL},
	{.name = "clamd_connections", .section = "clamd", .type = OPT_UINT,
	 .offset = FIELD(clamd_connections), .min = 1, .max = 256,
	 .metavar = "N", .help = "connections to clamd (scan_threads)",
	 .reload = RELOAD_FLEET},
	{.name = "clamd_connect_timeout", .section = "clamd",
	 .type = OPT_UINT, .offset = FIELD(clamd_connect_timeout), .min = 1,
	 .max = 60, .def = "5", .metavar = "SEC",
	 .help = "give up on connecting to clamd after this long",
	 .reload = RELOAD_FLEET},
	{.name = "version_check", .section = "clamd", .type = OPT_UINT,
	 .offset = FIELD(version_check), .max = 86400, .def = "60",
	 .metavar = "SEC", .help = "clamd database check interval",
	 .reload = RELOAD_REMOUNT},
	{.name = "clamd_wait", .section = "clamd", .type = OPT_UINT,
	 .offset = FIELD(clamd_wait), .max = 3600, .def = "0",
	 .metavar = "SEC", .help = "wait this long at start for clamd",
	 .reload = RELOAD_STARTUP},
	/* [scan] */
	{.name = "scan_mode", .section = "scan", .type = OPT_WORD,
	 .offset = FIELD(scan_mode), .words = scan_modes, .metavar = "MODE",
	 .help = "fdpass, stream or path (fdpass on a UNIX socket, stream "
		 "over TCP)",
	 .reload = RELOAD_POOL},
	{.name = "scan_timeout", .section = "scan", .type = OPT_UINT,
	 .offset = FIELD(scan_timeout), .min = 1, .max = 3600, .def = "60",
	 .metavar = "SEC", .help = "deadline of one scan",
	 .reload = RELOAD_FLEET},
	{.name = "scan_threads", .section = "scan", .type = OPT_UINT,
	 .offset = FIELD(scan_threads), .min = 1, .max = 256, .def = "8",
	 .metavar = "N", .help = "scans at once", .reload = RELOAD_REMOUNT},
	{.name = "max_scan_size", .section = "scan", .type = OPT_SIZE,
	 .offset = FIELD(policy.max_scan_size), .def = "100M",
	 .metavar = "SIZE", .help = "larger files are not scanned; 0: no limit",
	 .reload = RELOAD_LIVE},
	{.name = "oversize", .section = "scan", .type = OPT_BOOL_WORD,
	 .offset = FIELD(policy.oversize_allow), .words = deny_allow,
	 .def = "allow", .metavar = "allow|deny",
	 .help = "what happens to them", .reload = RELOAD_LIVE},
	{.name = "include", .section = "scan", .type = OPT_GLOB, .min = 1,
	 .metavar = "GLOB", .help = "scan only matching paths (repeatable)",
	 .reload = RELOAD_LIVE},
	{.name = "exclude", .section = "scan", .type = OPT_GLOB, .min = 0,
	 .metavar = "GLOB", .help = "never scan matching paths (repeatable)",
	 .reload = RELOAD_LIVE},
	{.name = "glob_case", .section = "scan", .type = OPT_BOOL_WORD,
	 .offset = FIELD(policy.glob_nocase), .words = glob_cases,
	 .def = "sensitive", .metavar = "sensitive|insensitive",
	 .help = "case of include/exclude (*.EXT rules never heed it)",
	 .reload = RELOAD_LIVE},
	{.name = "exempt_uid", .section = "scan", .type = OPT_USER,
	 .metavar = "USER",
	 .help = "never scan for this user, by name or number (repeatable)",
	 .reload = RELOAD_LIVE},
	{.name = "exempt_gid", .section = "scan", .type = OPT_GROUP,
	 .metavar = "GROUP",
	 .help = "never scan for members of this group, supplementary too "
		 "(repeatable)",
	 .reload = RELOAD_LIVE},
	{.name = "scan_on_close", .section = "scan", .type = OPT_FLAG,
	 .offset = FIELD(scan_on_close), .def = "no",
	 .help = "scan a file when its last writer closes",
	 .reload = RELOAD_LIVE},
	{.name = "scan_ahead", .section = "scan", .type = OPT_FLAG,
	 .offset = FIELD(scan_ahead), .def = "yes",
	 .help = "scan a file written through the mount in the background "
		 "once its last writer closes, for the next reader",
	 .reload = RELOAD_LIVE},
	{.name = "scan_ahead_dirs", .section = "scan", .type = OPT_FLAG,
	 .offset = FIELD(scan_ahead_dirs), .def = "yes",
	 .help = "when an open waits for a scan, scan the other small "
		 "files of its directory in the background",
	 .reload = RELOAD_LIVE},
	/* [cache] */
	{.name = "cache_entries", .section = "cache", .type = OPT_ULONG,
	 .offset = FIELD(cache_entries), .max = 100000000UL, .def = "100000",
	 .metavar = "N", .help = "verdict cache size",
	 .reload = RELOAD_CACHE},
	{.name = "cache_ttl", .section = "cache", .type = OPT_UINT,
	 .offset = FIELD(cache_ttl), .max = 30 * 86400, .def = "3600",
	 .metavar = "SEC", .help = "verdict lifetime; 0: no cache",
	 .reload = RELOAD_CACHE},
	{.name = "verdict_store", .section = "cache", .type = OPT_ABS_PATH,
	 .offset = FIELD(verdict_store), .metavar = "DIR",
	 .help = "keep clean verdicts across restarts in DIR/verdicts.mdb "
		 "(a directory of clamfs's own)",
	 .reload = RELOAD_REMOUNT},
	{.name = "verdict_store_size", .section = "cache", .type = OPT_UINT,
	 .offset = FIELD(verdict_store_size), .min = 1, .max = 65536, .def = "256",
	 .metavar = "MiB",
	 .help = "bound of the verdict store; emptied when full",
	 .reload = RELOAD_REMOUNT},
	{.name = "racy_window", .section = "cache", .type = OPT_UINT,
	 .offset = FIELD(policy.racy_window), .max = 3600, .def = "2",
	 .metavar = "SEC",
	 .help = "no verdict is cached for a file changed this recently",
	 .reload = RELOAD_LIVE},
	{.name = "racy_learn", .section = "cache", .type = OPT_FLAG,
	 .offset = FIELD(policy.racy_learn), .def = "yes",
	 .help = "20 ms instead of racy_window where stamps keep nanoseconds "
		 "on a local filesystem",
	 .reload = RELOAD_LIVE},
	/* [action] */
	{.name = "on_infected", .section = "action", .type = OPT_WORD,
	 .offset = FIELD(policy.on_infected), .words = infected_actions,
	 .def = "deny", .metavar = "ACTION",
	 .help = "deny, log, quarantine or delete", .reload = RELOAD_LIVE},
	{.name = "on_limits", .section = "action", .type = OPT_WORD,
	 .offset = FIELD(policy.on_limits), .words = limits_actions,
	 .def = "deny", .metavar = "deny|allow|infected",
	 .help = "when clamd gave up on a file at one of its scan limits",
	 .reload = RELOAD_LIVE},
	{.name = "on_error", .section = "action", .type = OPT_BOOL_WORD,
	 .offset = FIELD(policy.on_error_allow), .words = deny_allow,
	 .def = "deny", .metavar = "deny|allow",
	 .help = "when a scan fails: EIO, or allow", .reload = RELOAD_LIVE},
	{.name = "deny_errno", .section = "action", .type = OPT_WORD,
	 .offset = FIELD(policy.deny_errno), .words = deny_errnos,
	 .def = "EACCES", .metavar = "EACCES|EPERM",
	 .help = "error of a refused open", .reload = RELOAD_LIVE},
	{.name = "quarantine_dir", .section = "action", .type = OPT_ABS_PATH,
	 .offset = FIELD(quarantine_dir), .metavar = "DIR",
	 .help = "where on_infected=quarantine moves files",
	 .reload = RELOAD_REMOUNT},
	{.name = "infected_cmd", .section = "action", .type = OPT_ABS_PATH,
	 .offset = FIELD(infected_cmd), .metavar = "PATH",
	 .help = "program run on each detection", .reload = RELOAD_HOOK},
	{.name = "infected_cmd_rate", .section = "action", .type = OPT_UINT,
	 .offset = FIELD(infected_cmd_rate), .min = 1, .max = 10000,
	 .def = "10", .metavar = "N", .help = "runs of it per minute at most",
	 .reload = RELOAD_HOOK},
	{.name = NULL},
};
/* clang-format on */

const struct opt_row *optable_find(const char *name)
{
	for (const struct opt_row *r = optable; r->name; r++)
		if (strcmp(r->name, name) == 0 ||
		    (r->alias && strcmp(r->alias, name) == 0))
			return r;
	return NULL;
}

static void *field(struct clamfs_opts *opts, const struct opt_row *row)
{
	return (char *)opts + row->offset;
}

static const void *cfield(const struct clamfs_opts *opts,
			  const struct opt_row *row)
{
	return (const char *)opts + row->offset;
}

/* "a, b or c" from a word list, for messages. */
static void want_words(const struct opt_word *w, char *buf, size_t len)
{
	size_t n = 0, used = 0;

	while (w[n].word)
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		snprintf(buf + used, len - used, "%s%s",
			 i == 0	      ? ""
			 : i == n - 1 ? " or "
				      : ", ",
			 w[i].word);
		used = strlen(buf);
	}
}

static int find_word(const struct opt_word *w, const char *val, int *out)
{
	for (; w->word; w++)
		if (strcmp(w->word, val) == 0) {
			*out = w->value;
			return 0;
		}
	return -1;
}

static const char *word_of(const struct opt_word *w, int value)
{
	for (; w->word; w++)
		if (w->value == value)
			return w->word;
	return "auto"; /* scan_mode not given: chosen by the address */
}

static int bad(char *err, size_t errlen, const char *arg, const char *want)
{
	snprintf(err, errlen, "bad value in '%s': want %s", arg, want);
	return -EINVAL;
}

static int parse_ulong(const char *val, const char *arg, unsigned long min,
		       unsigned long max, unsigned long *out, char *err,
		       size_t errlen)
{
	unsigned long n;
	char *end;

	errno = 0;
	n = strtoul(val, &end, 10);
	if (*val < '0' || *val > '9' || *end != '\0' || errno || n < min ||
	    n > max) {
		snprintf(err, errlen, "bad value in '%s': want %lu to %lu", arg,
			 min, max);
		return -EINVAL;
	}
	*out = n;
	return 0;
}

/*
 * An exempt user or group: a number, or a name looked up now (at mount and
 * at each reload), so an unknown name is a configuration error rather
 * than an exemption that silently never applies.
 */
static int parse_exempt(const char *val, const char *arg, bool user,
			unsigned long *out, char *err, size_t errlen)
{
	struct passwd pw, *pwr = NULL;
	struct group gr, *grr = NULL;
	char buf[4096];
	int ret;

	/* all digits: a number; a name may start with one */
	if (*val && strspn(val, "0123456789") == strlen(val))
		return parse_ulong(val, arg, 0, UINT32_MAX - 1, out, err,
				   errlen);
	if (*val == '\0') {
		snprintf(err, errlen, "empty value in '%s'", arg);
		return -EINVAL;
	}
	if (user)
		ret = getpwnam_r(val, &pw, buf, sizeof(buf), &pwr);
	else
		ret = getgrnam_r(val, &gr, buf, sizeof(buf), &grr);
	if (ret) {
		snprintf(err, errlen, "'%s': cannot look up the %s: %s", arg,
			 user ? "user" : "group", strerror(ret));
		return -ret;
	}
	if (user ? !pwr : !grr) {
		snprintf(err, errlen, "'%s': no such %s", arg,
			 user ? "user" : "group");
		return -EINVAL;
	}
	*out = user ? (unsigned long)pwr->pw_uid : (unsigned long)grr->gr_gid;
	return 0;
}

static int set_string(char **dst, const char *val, char *err, size_t errlen)
{
	char *copy = strdup(val);

	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	free(*dst);
	*dst = copy;
	return 0;
}

/* Appends opt to the comma-separated list *list (libfuse's -o form). */
static int append_opt(char **list, const char *opt)
{
	size_t old = *list ? strlen(*list) : 0, len = strlen(opt);
	char *grown = realloc(*list, old + len + 2);

	if (!grown)
		return -ENOMEM;
	if (old)
		grown[old++] = ',';
	memcpy(grown + old, opt, len + 1);
	*list = grown;
	return 0;
}

static int set_flag(const struct opt_row *row, void *f, const char *val,
		    const char *arg, char *err, size_t errlen)
{
	int v = 1;

	if (val && find_word(yes_no, val, &v))
		return bad(err, errlen, arg, "yes or no");
	*(bool *)f = row->type == OPT_NOT_FLAG ? !v : v;
	return 0;
}

/*
 * Adds val as a line to *dst when this source (opts->layer) set it before,
 * else replaces it: several clamd= lines in the file make one fleet, and
 * -o clamd= on the command line replaces the file's fleet.
 */
static int add_line(struct clamfs_opts *opts, char **dst, const char *val,
		    char *err, size_t errlen)
{
	char *joined;

	if (*val == '\0' || strchr(val, '\n')) {
		snprintf(err, errlen, "empty clamd= address");
		return -EINVAL;
	}
	if (!*dst || opts->lines_layer != opts->layer) {
		opts->lines_layer = opts->layer;
		return set_string(dst, val, err, errlen);
	}
	if (asprintf(&joined, "%s\n%s", *dst, val) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	free(*dst);
	*dst = joined;
	return 0;
}

static int set_list(struct clamfs_opts *opts, const struct opt_row *row,
		    const char *val, const char *arg, char *err, size_t errlen)
{
	struct policy *p = &opts->policy;
	unsigned long id;
	int ret;

	if (row->type == OPT_GLOB) {
		if (*val == '\0') {
			snprintf(err, errlen, "empty pattern in '%s'", arg);
			return -EINVAL;
		}
		ret = policy_add_glob(p, row->min == 1, val);
	} else {
		ret = parse_exempt(val, arg, row->type == OPT_USER, &id, err,
				   errlen);
		if (ret)
			return ret;
		ret = row->type == OPT_USER
			      ? policy_add_exempt_uid(p, (uid_t)id)
			      : policy_add_exempt_gid(p, (gid_t)id);
	}
	if (ret) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int optable_set(struct clamfs_opts *opts, const struct opt_row *row,
		const char *value, const char *arg, char *err, size_t errlen)
{
	const char *val = value ? value : "";
	void *f = field(opts, row);
	char want[128];
	unsigned long n;
	double d;
	char *end;
	int ret, w;

	switch (row->type) {
	case OPT_FLAG:
	case OPT_NOT_FLAG:
		return set_flag(row, f, value, arg, err, errlen);
	case OPT_UINT:
	case OPT_ULONG:
		ret = parse_ulong(val, arg, row->min, row->max, &n, err,
				  errlen);
		if (ret)
			return ret;
		if (row->type == OPT_UINT)
			*(unsigned int *)f = (unsigned int)n;
		else
			*(unsigned long *)f = n;
		return 0;
	case OPT_SECONDS:
		errno = 0;
		d = strtod(val, &end);
		if (*val == '\0' || *end != '\0' || errno || !isfinite(d) ||
		    d < 0 || d > (double)row->max) {
			snprintf(want, sizeof(want), "seconds, 0 to %lu",
				 row->max);
			return bad(err, errlen, arg, want);
		}
		*(double *)f = d;
		return 0;
	case OPT_SIZE:
		if (policy_parse_size(val, f))
			return bad(err, errlen, arg,
				   "bytes with an optional K, M, G or T");
		return 0;
	case OPT_WORD:
	case OPT_BOOL_WORD:
		if (find_word(row->words, val, &w)) {
			want_words(row->words, want, sizeof(want));
			return bad(err, errlen, arg, want);
		}
		if (row->type == OPT_WORD)
			*(int *)f = w;
		else
			*(bool *)f = w != 0;
		return 0;
	case OPT_STRING:
		if (*val == '\0') {
			snprintf(err, errlen, "empty %s= %s", row->name,
				 strcmp(row->name, "clamd") == 0 ? "address"
				 : strcmp(row->name, "clamd_tls_name") == 0
					 ? "name"
					 : "path");
			return -EINVAL;
		}
		return set_string(f, val, err, errlen);
	case OPT_ABS_PATH:
		if (*val != '/')
			return bad(err, errlen, arg, "an absolute path");
		return set_string(f, val, err, errlen);
	case OPT_MOUNT_LIST:
		if (*val && append_opt(f, val) != 0) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		return 0;
	case OPT_GLOB:
	case OPT_USER:
	case OPT_GROUP:
		return set_list(opts, row, val, arg, err, errlen);
	case OPT_CONFIG:
		return 0; /* read before everything else: see cmdline_parse */
	case OPT_LINES:
		return add_line(opts, f, val, err, errlen);
	}
	return -EINVAL;
}

int optable_defaults(struct clamfs_opts *opts)
{
	char arg[256], err[256];
	int ret;

	memset(opts, 0, sizeof(*opts));
	policy_init(&opts->policy);
	opts->scan_mode = -1; /* none given: chosen by the address */
	for (const struct opt_row *r = optable; r->name; r++) {
		if (!r->def)
			continue;
		snprintf(arg, sizeof(arg), "%s=%s", r->name, r->def);
		ret = optable_set(opts, r, r->def, arg, err, sizeof(err));
		if (ret)
			return ret; /* -ENOMEM: the table's own are valid */
	}
	/* what the file or the -o options set replaces a default list */
	opts->layer = 1;
	return 0;
}

/* A list's length and contents, for comparing and describing. */
static size_t list_of(const struct clamfs_opts *o, const struct opt_row *row,
		      const void **items, size_t *size)
{
	const struct policy *p = &o->policy;

	switch (row->type) {
	case OPT_GLOB:
		*items = row->min == 1 ? p->include : p->exclude;
		*size = sizeof(char *);
		return row->min == 1 ? p->n_include : p->n_exclude;
	case OPT_USER:
		*items = p->exempt_uids;
		*size = sizeof(uid_t);
		return p->n_exempt_uids;
	default:
		*items = p->exempt_gids;
		*size = sizeof(gid_t);
		return p->n_exempt_gids;
	}
}

static bool list_differs(const struct clamfs_opts *o,
			 const struct clamfs_opts *n, const struct opt_row *row)
{
	const void *a, *b;
	size_t size, na = list_of(o, row, &a, &size),
		     nb = list_of(n, row, &b, &size);

	if (na != nb)
		return true;
	for (size_t i = 0; i < na; i++) {
		if (row->type == OPT_GLOB
			    ? strcmp(((char *const *)a)[i],
				     ((char *const *)b)[i]) != 0
			    : memcmp((const char *)a + i * size,
				     (const char *)b + i * size, size) != 0)
			return true;
	}
	return false;
}

/* The value as a reload line shows it. */
static const char *format(const struct clamfs_opts *o,
			  const struct opt_row *row, char *buf, size_t len)
{
	const void *f = cfield(o, row);
	const void *items;
	size_t size;

	switch (row->type) {
	case OPT_FLAG:
		return *(const bool *)f ? "yes" : "no";
	case OPT_NOT_FLAG:
		return *(const bool *)f ? "no" : "yes";
	case OPT_UINT:
		snprintf(buf, len, "%u", *(const unsigned int *)f);
		return buf;
	case OPT_ULONG:
		snprintf(buf, len, "%lu", *(const unsigned long *)f);
		return buf;
	case OPT_SECONDS:
		snprintf(buf, len, "%g", *(const double *)f);
		return buf;
	case OPT_SIZE:
		snprintf(buf, len, "%llu",
			 (unsigned long long)*(const uint64_t *)f);
		return buf;
	case OPT_WORD:
		return word_of(row->words, *(const int *)f);
	case OPT_BOOL_WORD:
		return word_of(row->words, *(const bool *)f);
	case OPT_STRING:
	case OPT_ABS_PATH:
	case OPT_MOUNT_LIST:
		return *(char *const *)f ? *(char *const *)f : "none";
	case OPT_GLOB:
	case OPT_USER:
	case OPT_GROUP:
		snprintf(buf, len, "%zu", list_of(o, row, &items, &size));
		return buf;
	case OPT_LINES:
		/* a reload's log line: one backend as it is, a fleet counted */
		if (*(char *const *)f && strchr(*(char *const *)f, '\n')) {
			size_t lines = 1;

			for (const char *c = *(char *const *)f; *c; c++)
				lines += *c == '\n';
			snprintf(buf, len, "%zu backends", lines);
			return buf;
		}
		return *(char *const *)f ? *(char *const *)f : "none";
	case OPT_CONFIG:
		break;
	}
	return "";
}

static bool differs(const struct clamfs_opts *o, const struct clamfs_opts *n,
		    const struct opt_row *row)
{
	char a[64], b[64];

	switch (row->type) {
	case OPT_SECONDS:
		return *(const double *)cfield(o, row) !=
		       *(const double *)cfield(n, row);
	case OPT_GLOB:
	case OPT_USER:
	case OPT_GROUP:
		return list_differs(o, n, row);
	case OPT_CONFIG:
		return false;
	case OPT_LINES: {
		const char *x = *(char *const *)cfield(o, row);
		const char *y = *(char *const *)cfield(n, row);

		return strcmp(x ? x : "", y ? y : "") != 0;
	}
	default:
		return strcmp(format(o, row, a, sizeof(a)),
			      format(n, row, b, sizeof(b))) != 0;
	}
}

static void append(char *buf, size_t len, const char *name, const char *from,
		   const char *to)
{
	size_t used = strlen(buf);

	if (used >= len)
		return;
	if (from)
		snprintf(buf + used, len - used, "%s%s %s->%s",
			 used ? ", " : "", name, from, to);
	else
		snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
			 name);
}

bool optable_describe(const struct clamfs_opts *o, const struct clamfs_opts *n,
		      enum opt_reload reload, char *buf, size_t len)
{
	char a[64], b[64];
	bool any = false;

	for (const struct opt_row *r = optable; r->name; r++) {
		if (r->reload != reload || !differs(o, n, r))
			continue;
		append(buf, len, r->name, format(o, r, a, sizeof(a)),
		       format(n, r, b, sizeof(b)));
		any = true;
	}
	return any;
}

bool optable_differs(const struct clamfs_opts *o, const struct clamfs_opts *n,
		     enum opt_reload reload)
{
	for (const struct opt_row *r = optable; r->name; r++)
		if (r->reload == reload && differs(o, n, r))
			return true;
	return false;
}

bool optable_name_changes(const struct clamfs_opts *o,
			  const struct clamfs_opts *n, enum opt_reload reload,
			  char *buf, size_t len)
{
	bool any = false;

	for (const struct opt_row *r = optable; r->name; r++) {
		if (r->reload != reload || !differs(o, n, r))
			continue;
		append(buf, len, r->name, NULL, NULL);
		any = true;
	}
	return any;
}

/* text from column 28 on, broken at spaces to fit 80 columns */
static void print_wrapped(FILE *out, const char *text)
{
	const int width = 80 - 28;

	while ((int)strlen(text) > width) {
		int cut = width;

		while (cut > 0 && text[cut] != ' ')
			cut--;
		if (cut == 0)
			break;
		fprintf(out, "%.*s\n%28s", cut, text, "");
		text += cut + 1;
	}
	fprintf(out, "%s\n", text);
}

/* Rows of section ("" for those of the command line only). */
void optable_print_help(FILE *out, const char *section)
{
	char left[64], help[256];

	for (const struct opt_row *r = optable; r->name; r++) {
		if (strcmp(r->section ? r->section : "", section) != 0)
			continue;
		if (r->metavar)
			snprintf(left, sizeof(left), "-o %s=%s", r->name,
				 r->metavar);
		else
			snprintf(left, sizeof(left), "-o %s", r->name);
		/* a flag's default is off; the others say theirs */
		if (r->def && r->type != OPT_FLAG && r->type != OPT_NOT_FLAG)
			snprintf(help, sizeof(help), "%s (%s)", r->help,
				 r->def);
		else
			snprintf(help, sizeof(help), "%s", r->help);
		if (strlen(left) < 24)
			fprintf(out, "    %-24s", left);
		else
			fprintf(out, "    %s\n%28s", left, "");
		print_wrapped(out, help);
	}
}
