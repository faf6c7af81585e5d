/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's settings, as the command line and the INI file gave them
 * (cmdline.h parses, optable.h says what each key sets and allows).
 */
#ifndef CLAMFS_OPTS_H
#define CLAMFS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "clamdproto.h"
#include "log.h"
#include "policy.h"

#define OPTS_DEFAULT_CLAMD CDP_DEFAULT_ADDR

struct clamfs_opts {
	char *backend;	  /* as given; resolved by the caller */
	char *mountpoint; /* as given */
	bool foreground;
	bool debug;
	bool singlethread;
	bool show_help;
	bool show_version;
	bool check; /* --check: validate, ask clamd, do not mount */
	bool clone_fd;
	bool default_permissions; /* on unless no_default_permissions */
	bool passthrough;	  /* passthrough=auto (default) or off */
	bool writeback_cache;	  /* the kernel's write-back cache, opt-in */
	bool watch_backend;	  /* fuse/watch.h, opt-in */
	unsigned int threads;	  /* cap on FUSE worker threads */
	double attr_timeout;
	double entry_timeout;
	double negative_timeout;

	/* scanning */
	/*
	 * One line per backend: "ADDR [weight=N] [conns=N]", ADDR a UNIX
	 * socket path, tcp:// or tls://host:port (poolcfg.c reads them).
	 */
	char *clamd;
	/* tls:// only: CA file, expected name (NULL: the host), client
	 * certificate and key files (NULL: none) */
	char *clamd_tls_ca;
	char *clamd_tls_name;
	char *clamd_tls_cert;
	char *clamd_tls_key;
	/*
	 * enum scan_mode, or -1: chosen by the address. An int, not the
	 * enum: scanq.h's enum has no "not given".
	 */
	int scan_mode;
	unsigned int scan_timeout;	    /* seconds */
	unsigned int scan_threads;	    /* scanner threads */
	unsigned int clamd_connections;	    /* 0: as many as scan_threads */
	unsigned int clamd_connect_timeout; /* seconds; 0: clamdproto's 5 */
	unsigned long cache_entries;
	unsigned int cache_ttl;	    /* seconds; 0 turns the cache off */
	unsigned int version_check; /* seconds between VERSION; 0: never */
	unsigned int clamd_wait;    /* seconds to wait for clamd at start */
	bool scan_on_close;
	bool scan_ahead;
	bool scan_ahead_dirs;
	char *verdict_store;		 /* directory; NULL: none */
	unsigned int verdict_store_size; /* MiB */
	char *quarantine_dir;
	char *infected_cmd;
	unsigned int infected_cmd_rate; /* runs per minute at most */
	struct policy policy;

	/* operation */
	char *config; /* the configuration file read, if any */
	enum log_level log_level;
	char *mount_options;  /* FUSE mount options from the file */
	char *mountpoint_opt; /* mountpoint= from the file or -o */
	/* which source is being read (0 defaults, 1 file, 2 -o options),
	 * and which one last set the OPT_LINES key (clamd=) */
	unsigned int layer, lines_layer;
};

#define OPTS_DEFAULT_THREADS 16
#define OPTS_MAX_THREADS     1024

/* Frees what opts owns (its strings, lists and policy); opts stays. */
void opts_free(struct clamfs_opts *opts);

#endif
