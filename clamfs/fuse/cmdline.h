/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Command line of the clamfs daemon: splits argv into clamfs's own options
 * and the arguments handed on to libfuse (mount options, -d).
 * Pure parsing: no file system access, no mounting. The -o keys, their
 * defaults and limits are rows of the option table (optable.h).
 */
#ifndef CLAMFS_CMDLINE_H
#define CLAMFS_CMDLINE_H

#include <stddef.h>
#include <stdio.h>

#define FUSE_USE_VERSION 314
#include <fuse_opt.h>

#include "opts.h"

/*
 * Parses argv. On success returns 0, fills *opts (strings owned by opts,
 * release with opts_free) and *fuse_args with what libfuse must see:
 * argv[0], the remaining -o options, and the defaults clamfs adds (fsname,
 * subtype, default_permissions). On a usage error returns -EINVAL and a
 * one-line reason in err; -ENOMEM on allocation failure.
 * With show_help or show_version set, the paths may be missing.
 */
int cmdline_parse(int argc, char *argv[], struct clamfs_opts *opts,
		  struct fuse_args *fuse_args, char *err, size_t errlen);

/*
 * Adds fsname=BACKEND (escaped) and subtype=clamfs to the libfuse arguments
 * unless the user gave them. Returns 0 or -ENOMEM.
 */
int cmdline_add_mount_names(struct fuse_args *fuse_args, const char *backend);

/* Prints clamfs's own options, one per line with a description. */
void cmdline_print_help(FILE *out, const char *progname);

#endif
