/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The table of clamfs's configuration keys: one row per key says its
 * name, INI section, type, field, limits, accepted words, default, help
 * text and what a reload does with it. The -o parser (opts.c), the INI
 * reader (inifile.c), the defaults, --help (fuse/cmdline.c) and the
 * reload's sorting of what changed (daemon/reload.c) are all read from
 * it; adding a key is a row here, a paragraph in the man pages and a
 * line in etc/clamfs.ini.
 */
#ifndef CLAMFS_OPTABLE_H
#define CLAMFS_OPTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct clamfs_opts;

enum opt_type {
	OPT_FLAG, /* bool; bare "key", or key=yes|no|true|false|on|off|1|0 */
	OPT_NOT_FLAG,	/* a flag stored inverted (no_default_permissions) */
	OPT_UINT,	/* unsigned int within min..max */
	OPT_ULONG,	/* unsigned long within min..max */
	OPT_SECONDS,	/* double, 0..max seconds */
	OPT_SIZE,	/* uint64_t bytes with an optional K, M, G or T */
	OPT_WORD,	/* one of words, its value stored in an int or enum */
	OPT_BOOL_WORD,	/* one of two words, stored as bool (value 0 or 1) */
	OPT_STRING,	/* a non-empty string */
	OPT_ABS_PATH,	/* a string that is an absolute path */
	OPT_MOUNT_LIST, /* FUSE mount options, appended; empty adds nothing */
	OPT_GLOB,	/* include/exclude: appended to the policy's list */
	OPT_USER,	/* exempt_uid: a user name or number, appended */
	OPT_GROUP,	/* exempt_gid: a group name or number, appended */
	OPT_CONFIG,	/* config=: read before everything else (opts.c) */
	OPT_LINES,	/* clamd=: a non-empty string; repeated in one source
			 * (the file, or the -o options) it adds a line, and
			 * a later source replaces what an earlier one set */
};

/* What a reload (SIGHUP, clamfs --reload) does with a changed value. */
enum opt_reload {
	RELOAD_STARTUP, /* used at start only (clamd_wait, config): ignored */
	RELOAD_REMOUNT, /* named in the log, not applied: needs a remount */
	RELOAD_LIVE,	/* applied in place (policy, log level) */
	RELOAD_POOL,	/* applied with new clamd backends: verdicts dropped */
	RELOAD_FLEET,	/* applied with new connections to the same clamds */
	RELOAD_CACHE,	/* applied with a new (empty) verdict cache */
	RELOAD_HOOK,	/* applied with a new detection reporter */
};

struct opt_word {
	const char *word;
	int value;
};

struct opt_row {
	const char *name;
	const char *alias;   /* another -o name (max_threads), or NULL */
	const char *section; /* INI section; NULL: command line only */
	enum opt_type type;
	size_t offset; /* of the field in struct clamfs_opts */
	unsigned long min, max;
	const struct opt_word *words; /* OPT_WORD, OPT_BOOL_WORD; NULL-ended */
	const char *def;	      /* default as a value; NULL: none */
	const char *metavar;	      /* in --help: -o name=METAVAR */
	const char *help;	      /* one line of --help */
	enum opt_reload reload;
};

/* The rows, in --help order, ending with a row whose name is NULL. */
extern const struct opt_row optable[];

/* The row of an -o name (or alias), or NULL. */
const struct opt_row *optable_find(const char *name);

/*
 * Sets row's field in opts from value (NULL: a flag given bare). arg is
 * how the user wrote it ("key=value"), for messages. 0, or a negative
 * errno with a one-line reason in err ("bad value in 'threads=0': want 1
 * to 1024").
 */
int optable_set(struct clamfs_opts *opts, const struct opt_row *row,
		const char *value, const char *arg, char *err, size_t errlen);

/*
 * Zeroes opts and applies every row's default. 0 or -ENOMEM (opts_free
 * releases what was set).
 */
int optable_defaults(struct clamfs_opts *opts);

/*
 * Appends "name old->new" to buf (comma separated) for every row with the
 * given reload kind whose value differs between o and n. Lists are
 * described by their length. Returns whether any differed.
 */
bool optable_describe(const struct clamfs_opts *o, const struct clamfs_opts *n,
		      enum opt_reload reload, char *buf, size_t len);

/* Whether any row of that reload kind differs between o and n. */
bool optable_differs(const struct clamfs_opts *o, const struct clamfs_opts *n,
		     enum opt_reload reload);

/*
 * Appends the names of the rows of that reload kind that differ. Returns
 * whether any did.
 */
bool optable_name_changes(const struct clamfs_opts *o,
			  const struct clamfs_opts *n, enum opt_reload reload,
			  char *buf, size_t len);

/*
 * Prints "-o name=METAVAR  help (default)" for the rows of an INI section,
 * or with "" for those of the command line only.
 */
void optable_print_help(FILE *out, const char *section);

#endif
