/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clamfs --stats: a running mount's counters, as text or in Prometheus
 * format, read from the mount's control attribute.
 */
#ifndef CLAMFS_CLI_STATS_H
#define CLAMFS_CLI_STATS_H

#include <stdio.h>

/*
 * clamfs --stats [--prometheus] [--output FILE] MOUNTPOINT...: argv after
 * "--stats". Returns the exit status (exitcode.h).
 */
int cli_stats(int argc, char *argv[], FILE *out);

#endif
