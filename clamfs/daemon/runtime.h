/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The scanning runtime of a mount: clamd connection pool, scan queue,
 * verdict cache, detection reporter and database watch, built from the
 * options, with what changes them live (reload.h) and the service threads
 * that takes the signals (service.h).
 */
#ifndef CLAMFS_RUNTIME_H
#define CLAMFS_RUNTIME_H

#include "fs.h"
#include "opts.h"

struct runtime;

/*
 * Validates and builds everything that needs no thread (before mounting
 * and daemonizing). opts is the first configuration's and stays the
 * caller's, to free after runtime_free. One-line errors on stderr;
 * returns NULL on failure.
 */
struct runtime *runtime_prepare(struct clamfs_fs *fs, struct clamfs_opts *opts,
				const char *mountpoint);

/*
 * Starts the scanner threads, the database watch and the service threads,
 * after fuse_daemonize (its fork keeps only the calling thread). argv is
 * what SIGHUP re-parses. 0 or negative errno.
 */
int runtime_start(struct runtime *rt, int argc, char *argv[]);

/*
 * Waits up to seconds for clamd to answer PING (boot order: clamd may
 * still be loading its database). Returns 0 once it answers, -ETIMEDOUT
 * after the wait (the mount then goes ahead and fails opens closed), or
 * -EINTR as soon as se was told to exit (SIGTERM, SIGINT).
 */
int runtime_wait_clamd(struct runtime *rt, unsigned int seconds,
		       struct fuse_session *se);

/* Stops every thread and frees all, old generations included. */
void runtime_free(struct runtime *rt);

#endif
