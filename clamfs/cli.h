/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's non-mounting commands: --check (configuration and clamd)
 * and --stats (a running mount's counters, also in Prometheus format).
 */
#ifndef CLAMFS_CLI_H
#define CLAMFS_CLI_H

#include <stdio.h>

#include "opts.h"

/*
 * Prints what it checked; returns the exit status (exitcode.h) of the
 * first check that failed, 0 when none did.
 */
int cli_check(const struct clamfs_opts *opts, FILE *out);

/*
 * clamfs --stats [--prometheus] [--output FILE] MOUNTPOINT...: argv after
 * "--stats" (cli_stats.c). Returns the exit status.
 */
int cli_stats(int argc, char *argv[], FILE *out);

#endif
