/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Command line of the clamfs daemon: splits argv into clamfs's own options
 * and the arguments handed on to libfuse (mount options, -d).
 * Pure parsing: no file system access, no mounting.
 */
#ifndef CLAMFS_OPTS_H
#define CLAMFS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define FUSE_USE_VERSION 314
#include <fuse_opt.h>

struct clamfs_opts {
	char *backend;    /* as given; resolved by the caller */
	char *mountpoint; /* as given */
	bool foreground;
	bool debug;
	bool singlethread;
	bool show_help;
	bool show_version;
	bool clone_fd;
	bool default_permissions; /* on unless no_default_permissions */
	unsigned int threads;     /* cap on FUSE worker threads */
	double attr_timeout;
	double entry_timeout;
	double negative_timeout;
};

#define OPTS_DEFAULT_THREADS 16
#define OPTS_MAX_THREADS 1024

/*
 * Parses argv. On success returns 0, fills *opts (strings owned by opts,
 * release with opts_free) and *fuse_args with what libfuse must see:
 * argv[0], the remaining -o options, and the defaults clamfs adds (fsname,
 * subtype, default_permissions). On a usage error returns -EINVAL and a
 * one-line reason in err; -ENOMEM on allocation failure.
 * With show_help or show_version set, the paths may be missing.
 */
int opts_parse(int argc, char *argv[], struct clamfs_opts *opts,
	       struct fuse_args *fuse_args, char *err, size_t errlen);

/*
 * Adds fsname=BACKEND (escaped) and subtype=clamfs to the libfuse arguments
 * unless the user gave them. Returns 0 or -ENOMEM.
 */
int opts_add_mount_names(struct fuse_args *fuse_args, const char *backend);

void opts_free(struct clamfs_opts *opts);

/* Prints clamfs's own options, one per line with a description. */
void opts_print_help(FILE *out, const char *progname);

#endif
