/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clamfs --stats: a running mount's counters, as text or in Prometheus
 * format, read from the mount's control attribute.
 */
#ifndef CLAMFS_STATS_CMD_H
#define CLAMFS_STATS_CMD_H

#include <stdio.h>

/*
 * clamfs --stats [--prometheus] [--output FILE] MOUNTPOINT...: argv after
 * "--stats". Returns the exit status (exitcode.h).
 */
int stats_cmd_run(int argc, char *argv[], FILE *out);

#endif
