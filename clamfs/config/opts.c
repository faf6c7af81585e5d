// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The daemon's settings (opts.h): what one set of them owns.
 */
#include "opts.h"

#include <stdlib.h>

void opts_free(struct clamfs_opts *opts)
{
	free(opts->backend);
	free(opts->mountpoint);
	free(opts->clamd);
	free(opts->clamd_tls_ca);
	free(opts->clamd_tls_name);
	free(opts->clamd_tls_cert);
	free(opts->clamd_tls_key);
	free(opts->quarantine_dir);
	free(opts->verdict_store);
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
	opts->clamd_tls_ca = NULL;
	opts->clamd_tls_name = NULL;
	opts->clamd_tls_cert = NULL;
	opts->clamd_tls_key = NULL;
	opts->quarantine_dir = NULL;
	opts->verdict_store = NULL;
	opts->infected_cmd = NULL;
	policy_free(&opts->policy);
}
